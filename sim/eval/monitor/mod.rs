//! Run-time invariant monitors: named predicates over the event stream of one run.
//!
//! A monitor ([`Invariant`]) watches the [`Observation`]s the world makes at the points where
//! memory changes hands — a commit through the pipeline, a read block, a prompt's memories, a
//! message review, the end of a round, the end of the run — and reports a [`Breach`] whenever
//! its property fails. The [`Monitors`] set stamps each breach with where it happened (the
//! event's index and time, the running trace hash, the agent and the item) as a
//! [`Violation`]. Monitors never act on the run: the world hands them shared references only,
//! draws no randomness for them and mixes nothing of theirs into the trace hash, so a run's
//! bytes are the same with monitors and without (tests/invariants.rs checks it).
//!
//! Monitors that need the evaluator's truth (which items are poison) read it through
//! [`crate::eval::metrics::Truth`], which only the metrics module can mint from the run's oracle —
//! the same token the metrics use. Guard code never holds an oracle, so it cannot build one.
//!
//! Adding an invariant is one file implementing [`Invariant`] and one line in the
//! `invariants!` list below (which declares the module and its [`REGISTRY`] entry); the
//! `#[cfg(test)]` entry, `test-probe`, shows it end to end.
//! Scenarios list the ones to monitor by name (`invariants: ["poison-never-shared"]`);
//! `memlink check` generates scenarios and shrinks a violation to a minimal one.

use crate::eval::metrics::Truth;
use crate::guard::CommitVerdict;
use crate::memory::{ItemId, MemoryBank, Scope};
use serde::{Deserialize, Serialize};

/// The write route of a commit (which protocol step wrote the item).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Route {
    /// A trusted seed stored without gates (the reference's preload).
    Preload,
    /// The attacker's direct-memory write.
    Direct,
    /// A receiver summary of a peer's handoff.
    Handoff,
    /// An INFA-harness round memory (a reviewed output stored for the team).
    RoundMemory,
    /// An agent's end-of-task outcome memory.
    Outcome,
    /// A team promotion at the end of a task.
    Promotion,
}

/// What the world reports to the monitors.
#[derive(Clone, Copy, Debug)]
pub enum Observation<'a> {
    /// Item `id` went through the commit pipeline (or the preload) and is in the bank with its
    /// final status, scope and metadata.
    Commit {
        /// Task index.
        task: u32,
        /// Write route.
        route: Route,
        /// The agent whose store (or on whose behalf the team store) received it.
        owner: u32,
        /// The agent whose output it carries over an edge of the communication graph (a
        /// handoff's sender), if it crossed one.
        from: Option<u32>,
        /// The item.
        id: ItemId,
        /// Scope the writer asked for.
        requested: Scope,
        /// The guard's verdict (None for the preload, which runs no gate).
        verdict: Option<&'a CommitVerdict>,
    },
    /// A retrieval stopped item `id` before the prompt.
    ReadBlocked {
        /// Task index.
        task: u32,
        /// Round.
        round: u32,
        /// Reader.
        agent: u32,
        /// The item.
        id: ItemId,
        /// "read" (the guard's read gate) or "broker" (the memory broker's ACL).
        stage: &'static str,
        /// The rule's reason string.
        reason: &'static str,
    },
    /// The memories of one prompt, in prompt order.
    Prompt {
        /// Task index.
        task: u32,
        /// Round.
        round: u32,
        /// Reader.
        agent: u32,
        /// The items.
        items: &'a [ItemId],
    },
    /// A message guard reviewed one round's outputs: a digest of every store before and after.
    MessageReview {
        /// Task index.
        task: u32,
        /// Round.
        round: u32,
        /// [`bank_digest`] before the review.
        before: u64,
        /// [`bank_digest`] after it.
        after: u64,
    },
    /// A round's metrics are recorded: the cumulative RDA and PMUR-A over metric tasks so far
    /// (the quantities the paper reports at that round).
    RoundEnd {
        /// Task index.
        task: u32,
        /// Round (0-based).
        round: u32,
        /// RDA@round.
        rda: f64,
        /// PMUR-A@round.
        pmur_agent: f64,
    },
    /// The run is over.
    RunEnd,
}

/// What a monitor may read besides the observation.
pub struct Cx<'a> {
    /// The memory bank as it is now.
    pub bank: &'a MemoryBank,
    /// The evaluator's truth.
    pub truth: Truth<'a>,
    /// Agents of the run.
    pub agents: u32,
}

/// One failure of a property, as a monitor reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Breach {
    /// The agent involved, if any.
    pub agent: Option<u32>,
    /// The item involved, if any.
    pub item: Option<ItemId>,
    /// What failed.
    pub detail: String,
}

/// A property over the event stream of one run.
pub trait Invariant: Send + Sync {
    /// Observes one observation; returns every breach it shows.
    fn observe(&mut self, obs: &Observation<'_>, cx: &Cx<'_>) -> Vec<Breach>;
}

/// One registered invariant.
pub struct Entry {
    /// Its name in scenarios and on the command line.
    pub name: &'static str,
    /// The property, in a sentence.
    pub about: &'static str,
    /// Whether it reads the evaluator's truth.
    pub truth: bool,
    /// A fresh monitor.
    pub make: fn() -> Box<dyn Invariant>,
}

/// Declares each invariant's module and [`REGISTRY`], in the order reports list them, from
/// one line per invariant (its file's name); entries after `; test:` exist in test builds only.
macro_rules! invariants {
    ($($m:ident,)* ; test: $($t:ident,)*) => {
        $(mod $m;)*
        $(#[cfg(test)] mod $t;)*
        /// Every invariant memlink ships, in the order reports list them.
        #[cfg(not(test))]
        pub const REGISTRY: &[Entry] = &[$($m::ENTRY,)*];
        /// Every invariant memlink ships, in the order reports list them, then the test-only ones.
        #[cfg(test)]
        pub const REGISTRY: &[Entry] = &[$($m::ENTRY,)* $($t::ENTRY,)*];
    };
}

invariants! {
    promotion,
    shared,
    lineage,
    blocked,
    quarantine,
    accounting,
    damage,
    messages,
    ; test:
    probe,
}

/// The registered invariant named `name`.
pub fn entry(name: &str) -> Option<&'static Entry> {
    REGISTRY.iter().find(|e| e.name == name)
}

/// The names of every registered invariant, comma-separated (for error messages).
pub fn names() -> String {
    REGISTRY.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
}

/// Where a breach happened in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    /// Index of the event being processed (0-based, processing order).
    pub event: u64,
    /// Simulated time.
    pub time: u64,
    /// The running trace hash at that point.
    pub hash: u64,
}

/// One violation of a monitored invariant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    /// The invariant.
    pub invariant: String,
    /// Index of the event during which it happened.
    pub event: u64,
    /// Simulated time.
    pub time: u64,
    /// The trace hash at that point (16 hex digits).
    pub trace_hash: String,
    /// The agent involved, if any.
    pub agent: Option<u32>,
    /// The item involved, if any: its id and its reference-style name.
    pub item: Option<(ItemId, String)>,
    /// What failed.
    pub detail: String,
}

/// The invariant that reads [`Observation::MessageReview`]'s store digests (the world computes
/// them only when it is monitored).
pub const DIGEST_INVARIANT: &str = "message-guard-keeps-stores";

/// At most this many violations of one invariant are kept per run (the count keeps going).
pub const KEEP_PER_INVARIANT: usize = 20;

/// The monitors of one run and what they found.
pub struct Monitors {
    list: Vec<(&'static str, Box<dyn Invariant>)>,
    violations: Vec<Violation>,
    counts: Vec<u64>,
}

/// What a run's monitors found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MonitorReport {
    /// The invariants monitored, with how many times each was violated.
    pub checked: Vec<(String, u64)>,
    /// The first [`KEEP_PER_INVARIANT`] violations of each, in the order they happened.
    pub violations: Vec<Violation>,
}

impl MonitorReport {
    /// Whether every monitored invariant held.
    pub fn holds(&self) -> bool {
        self.checked.iter().all(|(_, n)| *n == 0)
    }
}

impl Monitors {
    /// Monitors for the invariants `names`; an unknown name is returned as the error.
    pub fn new(names: &[String]) -> Result<Self, String> {
        let mut list = Vec::new();
        for n in names {
            let e = entry(n).ok_or_else(|| n.clone())?;
            list.push((e.name, (e.make)()));
        }
        let counts = vec![0; list.len()];
        Ok(Monitors { list, violations: Vec::new(), counts })
    }

    /// Adds an observer of the caller's own under `name`: it sees every observation as the
    /// registered invariants do (a tracer that never breaches, such as
    /// [`crate::eval::spread::SpreadTracer`]).
    pub fn with(mut self, name: &'static str, observer: Box<dyn Invariant>) -> Self {
        self.list.push((name, observer));
        self.counts.push(0);
        self
    }

    /// Whether invariant `name` is among these monitors (the world computes costly
    /// observations, such as the stores' digest around a message review, only for those that
    /// read them).
    pub fn watches(&self, name: &str) -> bool {
        self.list.iter().any(|(n, _)| *n == name)
    }

    /// Feeds one observation to every monitor.
    pub fn observe(&mut self, obs: &Observation<'_>, cx: &Cx<'_>, at: At) {
        for (k, (name, m)) in self.list.iter_mut().enumerate() {
            for b in m.observe(obs, cx) {
                self.counts[k] += 1;
                if self.counts[k] as usize <= KEEP_PER_INVARIANT {
                    self.violations.push(Violation {
                        invariant: name.to_string(),
                        event: at.event,
                        time: at.time,
                        trace_hash: format!("{:016x}", at.hash),
                        agent: b.agent,
                        item: b.item.map(|id| {
                            (id, cx.bank.try_get(id).map_or_else(|| "(released)".to_string(), |it| it.name.clone()))
                        }),
                        detail: b.detail,
                    });
                }
            }
        }
    }

    /// What they found.
    pub fn report(self) -> MonitorReport {
        MonitorReport {
            checked: self.list.iter().zip(&self.counts).map(|((n, _), c)| (n.to_string(), *c)).collect(),
            violations: self.violations,
        }
    }
}

/// A digest of every item's lifecycle state (status, scope, store, Q, trust, hazard, taint):
/// equal digests before and after a step mean the step changed no store.
pub fn bank_digest(bank: &MemoryBank) -> u64 {
    let mut h = crate::engine::TraceHash::new(false);
    h.u64(bank.len() as u64);
    for it in bank.live_items() {
        h.u64(it.status as u64);
        h.u64(it.scope as u64);
        h.f64(it.utility_q);
        h.f64(it.trust);
        h.f64(it.hazard);
        h.u64(it.taint as u64);
        h.bytes(it.experience.as_bytes());
    }
    h.value()
}
