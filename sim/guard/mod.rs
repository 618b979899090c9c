//! Guards: what decides which memories are written, promoted, retrieved and reused, and which
//! messages pass. The [`Guard`] trait is the seam; [`maple`] is MAPLE-Guard, [`NoDefense`] the
//! undefended baseline.
//!
//! # The evaluator's truth is unreachable from here
//!
//! Guard methods receive [`MemoryItem`]s, query features and message views. None of these types
//! has a field from which "is poison", the attack's target or the correct answer can be read;
//! that truth lives in [`crate::eval::oracle::Oracle`], whose read methods demand an
//! [`crate::eval::access::EvaluatorAccess`] token that only the evaluator can create. A guard
//! that tries to peek does not compile:
//!
//! ```compile_fail
//! use memlink::memory::MemoryItem;
//! fn peek(item: &MemoryItem) -> bool { item.is_poison }
//! ```
//!
//! ```compile_fail
//! use memlink::eval::oracle::Oracle;
//! fn peek(o: &Oracle) -> bool { o.is_poison(0, &memlink::eval::access::EvaluatorAccess { _private: () }) }
//! ```
//!
//! ```compile_fail
//! use memlink::eval::oracle::Oracle;
//! fn peek(o: &Oracle) -> bool { o.is_poison(0, &memlink::eval::access::EvaluatorAccess::mint()) }
//! ```
//!
//! The paths above are right; only the privilege is missing (this compiles):
//!
//! ```
//! use memlink::eval::{access::EvaluatorAccess, oracle::Oracle};
//! fn peek(o: &Oracle, token: &EvaluatorAccess) -> bool { o.is_poison(0, token) }
//! ```

pub mod acl;
pub mod amem;
pub mod decision;
pub mod detector;
pub mod maple;
pub mod message;
pub mod metadata;
pub mod piguard;
#[cfg(test)]
mod probe;
pub mod spec;
pub mod stack;

pub use spec::{GuardSpec, build_guard, judge_kind, with_backbone_judges};

use crate::engine::SimRng;
use crate::memory::{MemoryItem, MemoryTopology, PrescoreInput, Scope};
use crate::text::{QueryFeatures, TextFeatures};
use crate::topology::CommGraph;
pub use decision::{Action, Decision, Reader};
pub use metadata::MetadataRules;
use serde::Serialize;

/// What the registry ([`spec::GuardSpec`]) knows of one guard kind whose configuration is a
/// `C`: its name in results, the check of its configuration, how to build it and, for a guard
/// that asks the agents' own model, the LLM-judge kind and the detector a backbone shifts. Each
/// guard's file defines its `Kind` beside the guard; `spec.rs` lists it on one registry line.
pub struct Kind<C> {
    /// The guard's name in results for a configuration.
    pub name: fn(&C) -> &'static str,
    /// Checks a configuration: `(field, what was expected)` on the first problem.
    pub validate: fn(&C) -> std::result::Result<(), (String, String)>,
    /// Builds the guard, named `name`, for a system of `agents` agents.
    pub build: fn(&C, &'static str, u32) -> Box<dyn Guard>,
    /// An LLM judge's kind ([`crate::agent::JUDGE_KINDS`]) and its detector, which a backbone
    /// profile's `judges` entry shifts; `None` for guards that are models of their own.
    pub judge: Option<(&'static str, JudgeDetector<C>)>,
}

/// Where in a configuration `C` an LLM judge's detector is.
pub type JudgeDetector<C> = fn(&mut C) -> &mut detector::DetectorParams;

/// A [`Kind`]'s validation for configurations with nothing to check.
pub fn always_valid<C>(_: &C) -> std::result::Result<(), (String, String)> {
    Ok(())
}

/// Where in the lifecycle a guard acts.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub enum GuardStage {
    /// It decides writes, promotions, reads and cross-agent reuse of memories.
    Memory,
    /// It inspects and acts on agents' messages, never touching memory.
    Message,
    /// It does nothing (the undefended baseline).
    Nothing,
}

/// The outcome of committing one item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CommitVerdict {
    /// Scope the writer asked for.
    pub requested: Scope,
    /// Write gate decision, if the gate ran.
    pub write: Option<Decision>,
    /// Promotion gate decision, if the gate ran.
    pub promotion: Option<Decision>,
    /// The experience was rewritten (its text features must be recomputed).
    pub rewritten: bool,
}

impl CommitVerdict {
    /// Nothing checked, nothing changed.
    pub fn allow(requested: Scope) -> Self {
        CommitVerdict { requested, write: None, promotion: None, rewritten: false }
    }

    /// A direct write the signed ledger refused before any guard saw it: the write decision is
    /// `Reject` with the ledger's reason ([`crate::ledger::REJECT_REASON`]).
    pub fn refused(requested: Scope) -> Self {
        CommitVerdict {
            requested,
            write: Some(Decision::new(Action::Reject, crate::ledger::REJECT_REASON)),
            promotion: None,
            rewritten: false,
        }
    }

    /// The gate that stopped the item, if any: ("write" | "promotion", reason).
    pub fn stopped_by(&self) -> Option<(&'static str, &'static str)> {
        let stop = |d: &Option<Decision>| {
            d.filter(|d| matches!(d.action, Action::Reject | Action::Quarantine)).map(|d| d.reason)
        };
        stop(&self.write).map(|r| ("write", r)).or_else(|| stop(&self.promotion).map(|r| ("promotion", r)))
    }
}

/// A scored candidate at read time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadVerdict {
    /// The retrieval score (higher first).
    pub score: f64,
    /// Why it was blocked, if it was.
    pub blocked: Option<&'static str>,
}

/// One agent's output in one round, as a message guard sees it: the text, who said it, the
/// answer its last line states and the text's features; nothing about roles or correctness.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageView {
    /// The speaking agent.
    pub agent: u32,
    /// The full output text.
    pub text: String,
    /// The answer letter the text states ("Final answer: X"), if any.
    pub answer: Option<u8>,
    /// Features of `text` (patterns, claims), as the risk signals read them.
    pub features: TextFeatures,
}

/// What a message guard did to one output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum MessageAction {
    /// Replaced by a fixed refusal or verification sentence.
    Replace(u32),
    /// Rewritten by the guard.
    Rewrite(u32),
    /// Guidance appended.
    AppendGuidance(u32),
    /// Removed from the round.
    Remove(u32),
    /// Replaced by another agent's (the donor's) response.
    ReplaceWith {
        /// The agent whose output was replaced.
        agent: u32,
        /// Whose response took its place.
        donor: u32,
    },
}

/// How many keyed candidates share an item's answer key in one read (spec C11).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cluster {
    /// Share of the keyed candidates whose answer key equals this item's (0 when it has none).
    pub share: f64,
    /// How many candidates of the read have an answer key.
    pub keyed: usize,
}

impl Cluster {
    /// Share of the *other* keyed candidates that agree with this item (A-MemGuard's support).
    pub fn support(&self) -> f64 {
        if self.keyed <= 1 || self.share <= 0.0 {
            return 0.0;
        }
        let same = (self.share * self.keyed as f64).round();
        ((same - 1.0) / (self.keyed as f64 - 1.0)).clamp(0.0, 1.0)
    }

    /// Share of the other keyed candidates that disagree with it (A-MemGuard's conflict).
    pub fn conflict(&self) -> f64 {
        if self.keyed <= 1 || self.share <= 0.0 {
            return 0.0;
        }
        let same = (self.share * self.keyed as f64).round();
        ((self.keyed as f64 - same) / (self.keyed as f64 - 1.0)).clamp(0.0, 1.0)
    }
}

/// The baseline read score of No Defense and the communication baselines: S = sim + β·Q.
pub fn baseline_score(item: &MemoryItem, sim: f64, beta_q: f64) -> ReadVerdict {
    ReadVerdict { score: sim + beta_q * item.utility_q, blocked: (!item.is_active()).then_some("inactive_memory") }
}

/// A guard. Default methods implement "do nothing at this stage", so a guard overrides only
/// the stages it acts on.
pub trait Guard: Send + Sync {
    /// The method name used in results.
    fn name(&self) -> &str;

    /// Where the guard acts.
    fn stage(&self) -> GuardStage;

    /// The rules this guard derives provenance metadata with, when it brings its own (the
    /// world uses the reference's otherwise; see [`MetadataRules`]).
    fn metadata_rules(&self) -> Option<&MetadataRules> {
        None
    }

    /// Whether the reference renders this guard's retrieved memories as evidence lines rather
    /// than reusable experiences (`render_memory_context`: MAPLE-Guard's methods do).
    fn frames_memories_as_evidence(&self) -> bool {
        false
    }

    /// Decides a commit of `item` (metadata already final), applying its actions to the item.
    fn commit(&self, _item: &mut MemoryItem, requested: Scope) -> CommitVerdict {
        CommitVerdict::allow(requested)
    }

    /// Whether the guard receives the whole candidate pool re-sorted by [`Guard::prescore`]
    /// rather than the backend's selection (non-strict MAPLE-Guard, spec C5).
    fn full_pool(&self) -> bool {
        false
    }

    /// Whether the guard receives the backend's candidates in the backend's own (hybrid score)
    /// order, first `backend_k` per store, as the reference hands them to its strict-comparison
    /// methods whatever the mode (`retrieve_entries`: provenance-ACL, retrieval-only MAPLE-Guard,
    /// PIGuard). Under the strict ledger every arm receives them so.
    fn backend_order_pool(&self) -> bool {
        false
    }

    /// Backend pre-score used to order the whole pool (only called when `full_pool`). It sees
    /// only the bank's dense copies of the item (see [`PrescoreInput`]), because it runs on
    /// every candidate of a possibly large pool.
    fn prescore(&self, input: PrescoreInput, sim: f64) -> f64 {
        sim + 0.8 * input.backend_q
    }

    /// Cross-agent broker decision for a shared item.
    fn broker(&self, _item: &MemoryItem, _reader: Reader<'_>, _topology: MemoryTopology) -> Decision {
        Decision::new(Action::Allow, "no_broker")
    }

    /// Whether [`Guard::score`] and [`Guard::prescore`] are pure functions of their arguments,
    /// so the world may reuse a result for the same item, reader (and cluster) within one
    /// task (item metadata does not change between a task's arrival and its outcome update).
    /// Stochastic scorers, and scorers with state that changes within a task, say no.
    fn score_is_pure(&self) -> bool {
        true
    }

    /// What of `reader` [`Guard::score`] depends on for `item`, as a key: two readers of one
    /// task with the same key get the same verdict for the same item, query, similarity and
    /// cluster, so the world may reuse it. The default, the reader's agent, is always safe; a
    /// guard whose score sees the reader only through a coarser property (MAPLE-Guard: whether
    /// the item's scope excludes the reader) returns that property and lets a candidate scored
    /// for one reader be reused for every other reader of the task.
    fn score_reader_key(&self, _item: &MemoryItem, reader: Reader<'_>) -> u64 {
        u64::from(reader.agent)
    }

    /// Scores one candidate for a read.
    fn score(
        &self,
        item: &MemoryItem,
        _query: &QueryFeatures,
        sim: f64,
        _cluster: Cluster,
        _reader: Reader<'_>,
    ) -> ReadVerdict {
        baseline_score(item, sim, 0.8)
    }

    /// The score floor applied after scoring, if any.
    fn min_score(&self) -> Option<f64> {
        None
    }

    /// What a read blocked (items and the guard's reasons), after the read: guards that learn
    /// from their own blocks (A-MemGuard's lessons) update here.
    fn observe_read_blocks(&mut self, _blocked: &[(&MemoryItem, &'static str)]) {}

    /// A new task starts with `agents` agents: per-task state (message histories, removals)
    /// resets.
    fn begin_task(&mut self, _agents: u32) {}

    /// Whether the guard reviews messages (the world then renders and analyses every output).
    fn reviews_messages(&self) -> bool {
        self.stage() == GuardStage::Message
    }

    /// Inspects round `round`'s outputs on the communication graph and acts on them (message
    /// guards only); edits it makes to a view's text or answer are what the rest of the system
    /// sees. Returns what it did, one action per affected agent.
    fn review_messages(
        &mut self,
        _round: u32,
        _views: &mut [MessageView],
        _graph: &CommGraph,
        _rng: &mut SimRng,
    ) -> Vec<MessageAction> {
        Vec::new()
    }
}

/// The undefended baseline: every write allowed, reads ranked by sim + 0.8·Q.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoDefense;

impl Guard for NoDefense {
    fn name(&self) -> &str {
        "no_defense"
    }
    fn stage(&self) -> GuardStage {
        GuardStage::Nothing
    }
}
