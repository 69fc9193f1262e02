//! Packing generated spans into export requests the way an SDK's batch processor would:
//! up to a span budget per request, runs split across requests where the budget falls,
//! each span under a copy of its own resource and scope.

use std::cmp::Reverse;
use std::collections::{HashMap, VecDeque};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::{Synth, SynthRun};

/// All spans of `runs`, in generation order (parents first), in requests of at most
/// `max_spans_per_request` spans (0 counts as 1).
pub fn requests_for(runs: &[SynthRun], max_spans_per_request: usize) -> Vec<ExportTraceServiceRequest> {
    let mut batcher = Batcher::new(max_spans_per_request);
    let mut requests = Vec::new();
    for trace in runs.iter().flat_map(|run| &run.traces) {
        batcher.push(trace.clone(), &mut requests);
    }
    requests.extend(batcher.flush());
    requests
}

/// Like [`requests_for`], but each run's spans (both traces of a retried run mixed
/// together) come in a shuffled order with every child before its parent and the roots
/// last: what a receiver sees when SDKs export spans as they end, or when batches race.
/// `seed` fixes the shuffle.
pub fn requests_for_shuffled(
    runs: &[SynthRun],
    max_spans_per_request: usize,
    seed: u64,
) -> Vec<ExportTraceServiceRequest> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut batcher = Batcher::new(max_spans_per_request);
    let mut requests = Vec::new();
    for run in runs {
        let mut spans: Vec<(usize, &Span)> = run
            .traces
            .iter()
            .enumerate()
            .flat_map(|(t, trace)| trace.scope_spans.iter().flat_map(move |s| &s.spans).map(move |span| (t, span)))
            .collect();
        spans.shuffle(&mut rng);
        // A stable sort keeps the shuffle among spans of equal depth.
        let depths = depths(run);
        spans.sort_by_key(|(_, span)| Reverse(depths[span.span_id.as_slice()]));

        // Consecutive spans of the same trace share one ResourceSpans, as they would in
        // an SDK's batch.
        for group in spans.chunk_by(|a, b| a.0 == b.0) {
            let template = &run.traces[group[0].0];
            let spans = group.iter().map(|(_, span)| (*span).clone()).collect();
            batcher.push(with_spans(template, spans), &mut requests);
        }
    }
    requests.extend(batcher.flush());
    requests
}

/// Distance of every span of the run from its trace's root, keyed by span id.
fn depths(run: &SynthRun) -> HashMap<&[u8], usize> {
    let parents: HashMap<&[u8], &[u8]> = run
        .traces
        .iter()
        .flat_map(|t| &t.scope_spans)
        .flat_map(|s| &s.spans)
        .map(|span| (span.span_id.as_slice(), span.parent_span_id.as_slice()))
        .collect();
    parents
        .keys()
        .map(|&id| {
            let mut depth = 0;
            let mut current = id;
            while let Some(&parent) = parents.get(current).filter(|p| !p.is_empty()) {
                depth += 1;
                current = parent;
            }
            (id, depth)
        })
        .collect()
}

/// `template`'s resource and (first) scope around `spans`.
fn with_spans(template: &ResourceSpans, spans: Vec<Span>) -> ResourceSpans {
    let scope = template.scope_spans.first();
    ResourceSpans {
        resource: template.resource.clone(),
        scope_spans: vec![ScopeSpans {
            scope: scope.and_then(|s| s.scope.clone()),
            spans,
            schema_url: scope.map(|s| s.schema_url.clone()).unwrap_or_default(),
        }],
        schema_url: template.schema_url.clone(),
    }
}

/// Accumulates spans into requests of a fixed span budget.
pub(crate) struct Batcher {
    max: usize,
    current: Vec<ResourceSpans>,
    count: usize,
}

impl Batcher {
    pub(crate) fn new(max_spans_per_request: usize) -> Self {
        Self { max: max_spans_per_request.max(1), current: Vec::new(), count: 0 }
    }

    /// Adds all spans of `trace`, appending every request that fills up to `ready`.
    pub(crate) fn push(&mut self, trace: ResourceSpans, ready: &mut Vec<ExportTraceServiceRequest>) {
        for scope_spans in trace.scope_spans {
            // A new ResourceSpans entry opens for each scope and after each full request.
            let mut open = false;
            for span in scope_spans.spans {
                if !open {
                    self.current.push(ResourceSpans {
                        resource: trace.resource.clone(),
                        scope_spans: vec![ScopeSpans {
                            scope: scope_spans.scope.clone(),
                            spans: Vec::new(),
                            schema_url: scope_spans.schema_url.clone(),
                        }],
                        schema_url: trace.schema_url.clone(),
                    });
                    open = true;
                }
                let entry = self.current.last_mut().expect("an entry is open");
                entry.scope_spans[0].spans.push(span);
                self.count += 1;
                if self.count == self.max {
                    ready.extend(self.flush());
                    open = false;
                }
            }
        }
    }

    /// The partly filled request, if any spans are waiting.
    pub(crate) fn flush(&mut self) -> Option<ExportTraceServiceRequest> {
        (self.count > 0).then(|| {
            self.count = 0;
            ExportTraceServiceRequest { resource_spans: std::mem::take(&mut self.current) }
        })
    }
}

/// Requests made on demand from freshly generated runs, so a long load test holds only
/// the run being packed. Ends after `runs` runs, or never when `runs` is None.
pub(crate) struct RequestStream {
    synth: Synth,
    batcher: Batcher,
    runs_left: Option<usize>,
    ready: VecDeque<ExportTraceServiceRequest>,
    runs_generated: usize,
}

impl RequestStream {
    pub(crate) fn new(synth: Synth, max_spans_per_request: usize, runs: Option<usize>) -> Self {
        Self {
            synth,
            batcher: Batcher::new(max_spans_per_request),
            runs_left: runs,
            ready: VecDeque::new(),
            runs_generated: 0,
        }
    }

    pub(crate) fn runs_generated(&self) -> usize {
        self.runs_generated
    }
}

impl Iterator for RequestStream {
    type Item = ExportTraceServiceRequest;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(request) = self.ready.pop_front() {
                return Some(request);
            }
            if self.runs_left == Some(0) {
                return self.batcher.flush();
            }
            if let Some(left) = self.runs_left.as_mut() {
                *left -= 1;
            }
            let run = self.synth.next_run();
            self.runs_generated += 1;
            let mut ready = Vec::new();
            for trace in run.traces {
                self.batcher.push(trace, &mut ready);
            }
            self.ready.extend(ready);
        }
    }
}
