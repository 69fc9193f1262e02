//! Watching another process's memory (Linux `/proc/PID/status`) while load runs, so the
//! server-memory benchmark can say how much the receiver grew under it.
//!
//! Two figures, because they answer different questions: the peak of `VmRSS` samples is
//! the high-water mark during this load run; `VmHWM` is the kernel's own peak since the
//! process started (it catches spikes between samples, but also startup).

use std::time::Duration;

use anyhow::Context;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Memory figures of the watched process, in KiB as `/proc` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryPeak {
    pub peak_rss_kib: u64,
    pub hwm_kib: u64,
    pub samples: usize,
}

impl MemoryPeak {
    fn add(&mut self, sample: Sample) {
        self.peak_rss_kib = self.peak_rss_kib.max(sample.rss_kib);
        self.hwm_kib = self.hwm_kib.max(sample.hwm_kib);
        self.samples += 1;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    rss_kib: u64,
    hwm_kib: u64,
}

/// A background task sampling one process until [`Sampler::finish`].
pub(crate) struct Sampler {
    stop: oneshot::Sender<()>,
    task: JoinHandle<MemoryPeak>,
}

impl Sampler {
    /// Fails at once if the process cannot be read, rather than reporting an empty peak
    /// at the end of a long run.
    pub(crate) fn start(pid: u32) -> anyhow::Result<Self> {
        let first = read(pid).with_context(|| format!("reading /proc/{pid}/status"))?;
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut peak = MemoryPeak::default();
            peak.add(first);
            let mut ticks = tokio::time::interval(SAMPLE_EVERY);
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = ticks.tick() => match read(pid) {
                        Ok(sample) => peak.add(sample),
                        // The process exited (or was killed by the test); keep what we saw.
                        Err(_) => break,
                    },
                }
            }
            peak
        });
        Ok(Self { stop, task })
    }

    /// Stops sampling and returns the figures.
    pub(crate) async fn finish(self) -> anyhow::Result<MemoryPeak> {
        // The task may have ended already because the process exited; then nobody listens.
        let _ = self.stop.send(());
        Ok(self.task.await?)
    }
}

fn read(pid: u32) -> anyhow::Result<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_status(&status).context("no VmRSS/VmHWM lines (a kernel thread?)")
}

/// The `VmRSS` and `VmHWM` lines of a `/proc/PID/status` text, e.g. `VmRSS:   12345 kB`.
fn parse_status(status: &str) -> Option<Sample> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some(Sample { rss_kib: field("VmRSS:")?, hwm_kib: field("VmHWM:")? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_two_lines_it_needs() {
        let status = "Name:\tflightdeck\nVmPeak:\t  900000 kB\nVmHWM:\t   81234 kB\nVmRSS:\t   80000 kB\nThreads:\t9\n";
        assert_eq!(parse_status(status), Some(Sample { rss_kib: 80_000, hwm_kib: 81_234 }));
        assert_eq!(parse_status("Name:\tkworker/0:1\n"), None);
    }

    #[tokio::test]
    async fn samples_this_process() {
        let sampler = Sampler::start(std::process::id()).unwrap();
        tokio::time::sleep(SAMPLE_EVERY * 2).await;
        let peak = sampler.finish().await.unwrap();
        assert!(peak.samples >= 2, "{peak:?}");
        assert!(peak.peak_rss_kib > 0 && peak.hwm_kib >= peak.peak_rss_kib, "{peak:?}");
    }

    #[test]
    fn a_missing_process_is_an_error_up_front() {
        // PIDs are below 2^22 on Linux.
        assert!(Sampler::start(u32::MAX).is_err());
    }
}
