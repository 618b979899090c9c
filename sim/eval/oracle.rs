//! Evaluator-only truth: which items are poison, what they target, which attack wrote them, and
//! the correct answer of every task. Writing is open to the simulation; every read demands an
//! [`EvaluatorAccess`] token, which only the evaluator ([`crate::eval`]: the metrics) can create. Guards never receive
//! the oracle, and could not read it if they did.

use crate::eval::access::EvaluatorAccess;
use crate::memory::ItemId;
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

/// `Oracle::index`'s mark of an item without a poison record.
const NOT_POISON: u32 = u32::MAX;

/// Poison records per chunk of `Oracle::records` (3 MB).
const CHUNK: usize = 1 << 16;

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

/// A poison record as the oracle keeps it: 16 bytes where a [`PoisonRecord`] takes 48. A run
/// of 10,000 agents registers millions of handoff records but few distinct (attack, target,
/// target tokens) triples — one or two per task — so those are kept once, in `Oracle::kinds`,
/// and a record holds the index of its triple, packed with its origin and payload flag.
#[derive(Clone, Copy, Debug, Default)]
struct Stored {
    written_at: u64,
    task: u32,
    /// Bits 0–28: index into `Oracle::kinds`; 29–30: origin; 31: carries the payload.
    packed: u32,
}

/// Bits of [`Stored::packed`] that hold the kind index.
const KIND_BITS: u32 = 29;

/// One distinct (attack, target option, target tokens) of a run's poison records.
type Kind = (&'static str, u8, std::sync::Arc<[Sym]>);

/// The evaluator's truth of one run.
#[derive(Clone, Debug, Default)]
pub struct Oracle {
    /// Where item `id`'s record is in `records` ([`NOT_POISON`] if it has none), dense by item
    /// id (ids are arena indices): four bytes per item ever written, where an inline
    /// `Option<PoisonRecord>` took 48 (a 10,000-agent team writes ~100,000 items per task).
    index: Vec<u32>,
    /// The records, in registration order, in chunks of [`CHUNK`]: a run's millions of
    /// records never move to a doubled buffer (whose old copies stay resident while the
    /// allocator keeps freed pages).
    records: Vec<Vec<Stored>>,
    /// The distinct (attack, target, tokens) of the records, in order of first registration,
    /// and where each is.
    kinds: Vec<Kind>,
    kind_of: rustc_hash::FxHashMap<Kind, u32>,
    /// Number of records.
    count: u32,
    attempted_direct: u64,
    answers: BTreeMap<u32, u8>,
    risky: BTreeMap<u32, u8>,
}

impl Oracle {
    /// An empty oracle.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty oracle with index room for `ids` items written (address space until used).
    pub fn with_capacity(ids: usize) -> Self {
        Oracle { index: Vec::with_capacity(ids), ..Self::default() }
    }

    /// Records that item `id` is poison.
    pub fn register_poison(&mut self, id: ItemId, record: PoisonRecord) {
        if record.origin == PoisonOrigin::Direct {
            self.attempted_direct += 1;
        }
        let stored = self.pack(record);
        let i = id as usize;
        if self.index.len() <= i {
            self.index.resize(i + 1, NOT_POISON);
        }
        match self.index[i] {
            NOT_POISON => {
                // At most one record per id, and ids are u32 below `NOT_POISON`'s index.
                self.index[i] = self.count;
                self.count += 1;
                match self.records.last_mut() {
                    Some(c) if c.len() < CHUNK => c.push(stored),
                    _ => {
                        let mut c = Vec::with_capacity(CHUNK);
                        c.push(stored);
                        self.records.push(c);
                    }
                }
            }
            r => self.records[r as usize / CHUNK][r as usize % CHUNK] = stored,
        }
    }

    /// `record` as stored, its kind registered if new.
    fn pack(&mut self, record: PoisonRecord) -> Stored {
        let PoisonRecord { origin, attack, task, target_tokens, target, written_at, carries_payload } = record;
        let kind: Kind = (attack, target, target_tokens);
        let k = match self.kind_of.get(&kind) {
            Some(k) => *k,
            None => {
                let k = self.kinds.len() as u32;
                assert!(k < 1 << KIND_BITS, "more than 2^29 distinct poison targets in one run");
                self.kinds.push(kind.clone());
                self.kind_of.insert(kind, k);
                k
            }
        };
        let origin = match origin {
            PoisonOrigin::Direct => 0,
            PoisonOrigin::Handoff => 1,
            PoisonOrigin::AttackerMessage => 2,
        };
        Stored { written_at, task, packed: k | origin << KIND_BITS | u32::from(carries_payload) << 31 }
    }

    /// The record stored as `r`.
    fn record(&self, r: u32) -> PoisonRecord {
        let s = self.records[r as usize / CHUNK][r as usize % CHUNK];
        let (attack, target, tokens) = &self.kinds[(s.packed & ((1 << KIND_BITS) - 1)) as usize];
        PoisonRecord {
            origin: match (s.packed >> KIND_BITS) & 3 {
                0 => PoisonOrigin::Direct,
                1 => PoisonOrigin::Handoff,
                _ => PoisonOrigin::AttackerMessage,
            },
            attack,
            task: s.task,
            target_tokens: tokens.clone(),
            target: *target,
            written_at: s.written_at,
            carries_payload: s.packed >> 31 == 1,
        }
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
        self.index.get(id as usize).is_some_and(|r| *r != NOT_POISON)
    }

    /// The record of poison item `id`.
    pub fn poison(&self, id: ItemId, _: &EvaluatorAccess) -> Option<PoisonRecord> {
        match self.index.get(id as usize) {
            Some(&r) if r != NOT_POISON => Some(self.record(r)),
            _ => None,
        }
    }

    /// All poison records in id order.
    pub fn all_poison(&self, _: &EvaluatorAccess) -> impl Iterator<Item = (ItemId, PoisonRecord)> {
        self.index.iter().enumerate().filter(|(_, r)| **r != NOT_POISON).map(|(i, r)| (i as ItemId, self.record(*r)))
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
