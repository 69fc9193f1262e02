//! `flightdeck demo`: fills the database with realistic agent runs from the load
//! generator's synthesizer, through the same ingest path OTLP exports take, so a newcomer
//! sees a populated console at once.

use ingest::pipeline::prepare;
use loadgen::synth::{requests_for_shuffled, Synth, SynthOptions};
use store::{policies, write, Db};

pub async fn run(db: &Db, settings: &ingest::pipeline::IngestSettings, runs: usize, seed: u64) -> anyhow::Result<()> {
    let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0).max(0) as u64;
    // Spread the runs over the last few hours so lists and charts have a shape.
    let start_ns = now_ns.saturating_sub(runs as u64 * 30 * 1_000_000_000);
    let mut synth =
        Synth::new(SynthOptions { seed, base_time_unix_nano: start_ns, bodies: true, ..SynthOptions::default() });
    let generated: Vec<_> = (0..runs).map(|_| synth.next_run()).collect();
    let policies = policies::list(db).await?;
    let mut stored = 0u64;
    let mut rejected = 0usize;
    // Shuffled within runs, as real exporters deliver them: children before parents.
    for request in requests_for_shuffled(&generated, 500, seed) {
        let prepared = prepare(&request, settings, &policies);
        rejected += prepared.rejected;
        stored += write::commit(db, &prepared.spans, settings.body_policy).await?.stored;
    }
    if rejected > 0 {
        anyhow::bail!("{rejected} demo spans were rejected: the synthesizer and ingest disagree");
    }
    eprintln!("demo: stored {stored} spans in {runs} runs (seed {seed}); open the console to look around");
    Ok(())
}
