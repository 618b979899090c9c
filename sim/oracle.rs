//! Evaluator-only truth: which items are poison, what they target, which attack wrote them, and
//! the correct answer of every task. Writing is open to the simulation; every read demands an
//! [`EvaluatorAccess`] token, which only [`crate::metrics`] can create. Guards never receive
//! the oracle, and could not read it if they did.

use crate::memory::ItemId;
use crate::metrics::EvaluatorAccess;
use crate::text::Sym;
use std::collections::BTreeMap;

/// How a poison item came to be.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PoisonOrigin {
    /// Written directly by the attack.
    Direct,
    /// A handoff summary the evaluator labels poison (spec §5.2: from an attacker, or
    /// reporting a known poison item).
    Handoff,
    /// An attacker's round output stored as a team memory (the INFA harness; PMUR counts
    /// memories written by attackers).
    AttackerMessage,
}

/// What the evaluator knows about one poison item.
#[derive(Clone, Debug, PartialEq)]
pub struct PoisonRecord {
    /// Direct or handoff.
    pub origin: PoisonOrigin,
    /// Attack family name.
    pub attack: &'static str,
    /// Task the poison was planted for.
    pub task: u32,
    /// Tokens of the target answer text (mapped onto later tasks' options), shared by every
    /// record of one task's target (a run can hold millions of handoff records).
    pub target_tokens: std::sync::Arc<[Sym]>,
    /// Target option index in the planting task.
    pub target: u8,
    /// Commit time in ticks.
    pub written_at: u64,
    /// The attack's own payload text appears verbatim in this item (prompt exposure).
    pub carries_payload: bool,
}

/// The evaluator's truth of one run.
#[derive(Clone, Debug, Default)]
pub struct Oracle {
    /// Poison records indexed by item id (dense: item ids are arena indices).
    poison: Vec<Option<PoisonRecord>>,
    attempted_direct: u64,
    answers: BTreeMap<u32, u8>,
    risky: BTreeMap<u32, u8>,
}

impl Oracle {
    /// An empty oracle.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that item `id` is poison.
    pub fn register_poison(&mut self, id: ItemId, record: PoisonRecord) {
        if record.origin == PoisonOrigin::Direct {
            self.attempted_direct += 1;
        }
        let i = id as usize;
        if self.poison.len() <= i {
            self.poison.resize(i + 1, None);
        }
        self.poison[i] = Some(record);
    }

    /// Records the correct answer of `task`.
    pub fn register_answer(&mut self, task: u32, gold: u8) {
        self.answers.insert(task, gold);
    }

    /// Records the risky action of `task` (AppWorld's y*).
    pub fn register_risk(&mut self, task: u32, risk: u8) {
        self.risky.insert(task, risk);
    }

    /// The risky action of `task`, if the workload has one.
    pub fn risk(&self, task: u32, _: &EvaluatorAccess) -> Option<u8> {
        self.risky.get(&task).copied()
    }

    /// Whether `id` is poison.
    pub fn is_poison(&self, id: ItemId, _: &EvaluatorAccess) -> bool {
        self.poison.get(id as usize).is_some_and(Option::is_some)
    }

    /// The record of poison item `id`.
    pub fn poison(&self, id: ItemId, _: &EvaluatorAccess) -> Option<&PoisonRecord> {
        self.poison.get(id as usize).and_then(Option::as_ref)
    }

    /// All poison records in id order.
    pub fn all_poison(&self, _: &EvaluatorAccess) -> impl Iterator<Item = (ItemId, &PoisonRecord)> {
        self.poison.iter().enumerate().filter_map(|(i, p)| p.as_ref().map(|p| (i as ItemId, p)))
    }

    /// Number of direct poison writes attempted.
    pub fn attempted_direct(&self, _: &EvaluatorAccess) -> u64 {
        self.attempted_direct
    }

    /// The correct answer of `task`.
    pub fn answer(&self, task: u32, _: &EvaluatorAccess) -> Option<u8> {
        self.answers.get(&task).copied()
    }
}
