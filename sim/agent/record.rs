//! The recording decorator: wraps any [`Backbone`] and logs every call it answers — the
//! [`CallSite`] the world built for it, which occurrence of that site it is, and the decision —
//! without changing a single decision or draw. `crate::study::trace` writes the log as a trace file.

use super::{Answer, AnswerContext, Backbone, CallSite, Reported, Retention, Verdict};
use crate::engine::SimRng;
use crate::workload::TaskTruth;
use rustc_hash::FxHashMap as HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

/// What a backbone call decided.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// An agent's answer: the choice and the flags the metrics read.
    Answer(Answer),
    /// A summary's retention of each reported memory, in report order.
    Summary(Vec<Retention>),
    /// A judge's verdicts on a round's outputs.
    Judge(Vec<Verdict>),
}

/// One call: where it happened, which occurrence of that site in the run (0 for the first; a
/// site repeats only when the protocol makes the same call twice), and what was decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// Where.
    pub site: CallSite,
    /// Occurrences of the same site before this one.
    pub occurrence: u32,
    /// What was decided.
    pub decision: Decision,
}

/// The calls of one run in the order they were made.
#[derive(Clone, Debug, Default)]
pub struct TraceLog {
    /// The calls.
    pub calls: Vec<Call>,
    /// Calls by a hash of their site (their occurrence counts the equal sites among them).
    seen: HashMap<u64, Vec<usize>>,
}

impl TraceLog {
    /// Appends a call, numbering repeated sites.
    pub fn push(&mut self, site: &CallSite, decision: Decision) {
        let mut h = rustc_hash::FxHasher::default();
        site.hash(&mut h);
        let bucket = self.seen.entry(h.finish()).or_default();
        let occurrence = bucket.iter().filter(|i| self.calls[**i].site == *site).count() as u32;
        bucket.push(self.calls.len());
        self.calls.push(Call { site: site.clone(), occurrence, decision });
    }
}

/// A backbone that records every call of the backbone it wraps into a shared [`TraceLog`].
pub struct Recording {
    inner: Box<dyn Backbone>,
    log: Arc<Mutex<TraceLog>>,
}

impl Recording {
    /// Wraps `inner`; the returned log fills as the run goes.
    pub fn new(inner: Box<dyn Backbone>) -> (Recording, Arc<Mutex<TraceLog>>) {
        let log = Arc::new(Mutex::new(TraceLog::default()));
        (Recording { inner, log: log.clone() }, log)
    }

    fn push(&self, site: Option<&CallSite>, decision: Decision) {
        if let Some(site) = site {
            self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(site, decision);
        }
    }
}

impl Backbone for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn knowledge(&self, truth: &TaskTruth, rng: &mut SimRng) -> Vec<f64> {
        self.inner.knowledge(truth, rng)
    }

    fn answer(&self, ctx: &AnswerContext<'_>, rng: &mut SimRng) -> Answer {
        let a = self.inner.answer(ctx, rng);
        self.push(ctx.site, Decision::Answer(a));
        a
    }

    fn summarize(&self, reported: &[Reported<'_>], site: Option<&CallSite>, rng: &mut SimRng) -> Vec<Retention> {
        let r = self.inner.summarize(reported, site, rng);
        self.push(site, Decision::Summary(r.clone()));
        r
    }

    fn wants_sites(&self) -> bool {
        true
    }

    fn judge(&self, site: &CallSite, run: &mut dyn FnMut() -> Vec<Verdict>) -> Vec<Verdict> {
        let v = self.inner.judge(site, run);
        self.push(Some(site), Decision::Judge(v.clone()));
        v
    }
}
