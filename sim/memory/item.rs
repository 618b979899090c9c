//! One memory item with every field of spec §1 that a gate, the stand-in or a metric reads.

use crate::engine::Time;
use crate::text::TextFeatures;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::Arc;

/// Lineage markers of spec §2.1 signal 2: a marker counts once if it is a substring of the
/// parents, the source route or the memory type.
pub const LINEAGE_MARKERS: [&str; 7] = [
    "memory_handoff",
    "cross_agent",
    "shared_promotion",
    "tool_observation",
    "environment_observation",
    "external_observation",
    "imported_memory",
];

/// Bit i set when `LINEAGE_MARKERS[i]` is a substring of any string of `strings`, compared
/// lower-cased as the reference compares them (it lower-cases the space-joined parent list; no
/// marker holds a space, so no marker can span two parents).
pub fn marker_bits<S: AsRef<str>>(strings: &[S]) -> u8 {
    thread_local! {
        static SEEN: std::cell::RefCell<rustc_hash::FxHashMap<String, u8>> = Default::default();
    }
    let mut bits = 0u8;
    for p in strings.iter().map(AsRef::as_ref).filter(|p| p.contains('_')) {
        // Every marker has an underscore and at least 11 bytes; lower-casing can shorten a
        // non-ASCII string (the Kelvin sign is 3 bytes, its lower case 1), so only an ASCII
        // string is judged by its length.
        if p.is_ascii() && p.len() < 11 {
            continue;
        }
        bits |= SEEN.with(|seen| {
            if let Some(b) = seen.borrow().get(p) {
                return *b;
            }
            let lower = p.to_lowercase();
            let mut b = 0u8;
            for (i, m) in LINEAGE_MARKERS.iter().enumerate() {
                if lower.contains(m) {
                    b |= 1 << i;
                }
            }
            let mut seen = seen.borrow_mut();
            if seen.len() > 1 << 16 {
                seen.clear();
            }
            seen.insert(p.to_string(), b);
            b
        });
    }
    bits
}

/// `a == b` for task-class names, compared in line: they are a few bytes long and compared per
/// retrieval candidate, where the call into the C library's `memcmp` that `==` makes cost 4% of
/// a 10,000-agent run (a perf profile).
fn same_class(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

/// Index of an item in the run's arena.
pub type ItemId = u32;

/// Requested or actual scope of a memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Scope {
    /// `agent_private`: one agent's store.
    Private,
    /// `team`: the shared store.
    Team,
}

/// Provenance taint (spec §1).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Taint {
    /// Trusted origin.
    Clean,
    /// Origin not verified.
    Unverified,
    /// From outside the system (tools, users, imports).
    External,
    /// Marked poisoned by a detector.
    Poisoned,
}

impl Taint {
    /// The reference's string.
    pub fn as_str(self) -> &'static str {
        match self {
            Taint::Clean => "clean",
            Taint::Unverified => "unverified",
            Taint::External => "external",
            Taint::Poisoned => "poisoned",
        }
    }
}

/// Lifecycle status (spec §1).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Status {
    /// Stored and retrievable.
    Active,
    /// Held in the quarantine store, never retrievable.
    Quarantined,
    /// Dropped at the write gate.
    Rejected,
}

/// Who wrote an item.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Writer {
    /// An agent of the system (benign or not: the item does not say).
    Agent(u32),
    /// The user's history (LongMemEval haystack); origin agent −1 in the reference.
    User,
    /// An external channel (tool output, imported note, a query-only write).
    External,
}

/// A memory item. Deliberately carries no evaluator truth: whether it is poison, what it
/// targets and which attack wrote it are recorded only in the oracle.
#[derive(Clone, Debug)]
pub struct MemoryItem {
    /// Arena index.
    pub id: ItemId,
    /// The reference-style memory id string.
    pub name: String,
    /// Short task description; also the retrieval key.
    pub intent: Arc<str>,
    /// The text rendered into prompts.
    pub experience: String,
    /// Features of `intent + "\n" + experience`.
    pub features: TextFeatures,
    /// Utility Q (ρ in the paper) as the entry holds it.
    pub utility_q: f64,
    /// Q in the MemRL backend's in-memory cache: every ranking reads this one (hybrid top-k,
    /// pre-scores). Under the default stale cache it keeps the value the item was indexed with
    /// (see [`crate::guard::maple::BackendQCache`]).
    pub backend_q: f64,
    /// Trust τ, hazard h and taint as the backend captured them when the item was added.
    pub backend_snapshot: (f64, f64, Taint),
    /// Task the item was written in.
    pub origin_task: u32,
    /// Writer of the item.
    pub writer: Writer,
    /// Round the item was written in.
    pub origin_round: u32,
    /// Write path / source route (scanned by substring).
    pub source_type: Cow<'static, str>,
    /// Kind of memory (scanned by substring).
    pub memory_type: Cow<'static, str>,
    /// Private or team.
    pub scope: Scope,
    /// ACL: agents allowed to read (empty = everyone).
    pub allowed_agents: Vec<u32>,
    /// Task classes allowed to read (empty = every class).
    pub allowed_task_classes: Vec<String>,
    /// Provenance trust τ.
    pub trust: f64,
    /// Content hazard h.
    pub hazard: f64,
    /// Taint.
    pub taint: Taint,
    /// Reputation of the writing agent at write time.
    pub source_agent_trust: f64,
    /// Lifecycle status.
    pub status: Status,
    /// Lineage strings (task ids, route markers, parent memory ids); see [`Self::set_parents`].
    parents: Vec<Arc<str>>,
    /// Which [`LINEAGE_MARKERS`] occur in `parents`, one bit per marker (kept in step by
    /// `set_parents`, so the lineage signal never rescans the strings).
    parent_markers: u8,
    /// Times handed to scoring.
    pub retrieved_count: u32,
    /// Times placed into a prompt.
    pub selected_count: u32,
    /// Times blocked by a read firewall.
    pub blocked_count: u32,
    /// Successful outcomes after use.
    pub success_count: u32,
    /// Failed outcomes after use.
    pub failure_count: u32,
    /// When the item was committed (reads before this time do not see it).
    pub committed_at: Time,
    /// The text the core scorer's similarity embeds instead of `intent + "\n" + experience`
    /// (the reference's `retrieval_key`: the question for INFA round memories, the expanded
    /// fact key for LongMemEval's haystack). The backend still groups by intent.
    pub retrieval_key: Option<String>,
    /// The signed ledger's tag over the item's record (`crate::ledger`), when an arm runs one.
    pub tag: Option<Box<LedgerTag>>,
}

/// A signed ledger's tag on an item: a MAC over its record and the nonce it was made with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerTag {
    /// BLAKE3 keyed hash of the record.
    pub mac: [u8; 32],
    /// The write's nonce.
    pub nonce: u64,
}

impl MemoryItem {
    /// A blank item with the given texts; callers fill in metadata before committing.
    pub fn new(name: String, intent: Arc<str>, experience: String, features: TextFeatures) -> Self {
        MemoryItem {
            id: 0,
            name,
            intent,
            experience,
            features,
            utility_q: 0.0,
            backend_q: 0.0,
            backend_snapshot: (0.5, 0.0, Taint::Unverified),
            origin_task: 0,
            writer: Writer::External,
            origin_round: 0,
            source_type: Cow::Borrowed(""),
            memory_type: Cow::Borrowed(""),
            scope: Scope::Private,
            allowed_agents: Vec::new(),
            allowed_task_classes: Vec::new(),
            trust: 0.5,
            hazard: 0.0,
            taint: Taint::Unverified,
            source_agent_trust: 0.5,
            status: Status::Active,
            parents: Vec::new(),
            parent_markers: 0,
            retrieved_count: 0,
            selected_count: 0,
            blocked_count: 0,
            success_count: 0,
            failure_count: 0,
            committed_at: Time::ZERO,
            retrieval_key: None,
            tag: None,
        }
    }

    /// Lineage strings.
    pub fn parents(&self) -> &[Arc<str>] {
        &self.parents
    }

    /// Replaces the lineage strings.
    pub fn set_parents(&mut self, parents: Vec<Arc<str>>) {
        self.parent_markers = marker_bits(&parents);
        self.parents = parents;
    }

    /// Replaces the lineage strings whose [`marker_bits`] the caller already knows (the OR of
    /// each string's bits, cached per label): a handoff writes five parents, and scanning them
    /// again for every handoff cost 2.5% of a 2,000-agent run's instructions (callgrind). Debug
    /// builds check `markers` against a scan.
    pub fn set_parents_with_markers(&mut self, parents: Vec<Arc<str>>, markers: u8) {
        debug_assert_eq!(markers, marker_bits(&parents), "lineage markers of {parents:?}");
        self.parent_markers = markers;
        self.parents = parents;
    }

    /// Which lineage markers occur in the parents (bit i = `LINEAGE_MARKERS[i]`).
    pub fn parent_markers(&self) -> u8 {
        self.parent_markers
    }

    /// Whether `allowed_agents` lets `agent` read the item (an empty list lets everyone).
    ///
    /// Lists are one reader or a whole team in order (0..n: 40 KB at 10,000 agents, read per
    /// candidate by the read gate and the broker), so a binary search finds a member of an
    /// ordered list in log time; a miss (an absent agent, or a list out of order, where the
    /// search proves nothing) is settled by a scan.
    pub fn admits_agent(&self, agent: u32) -> bool {
        let list = &self.allowed_agents;
        list.is_empty() || list.binary_search(&agent).is_ok() || list.contains(&agent)
    }

    /// Scope violation sv(m, agent, class) of spec §2.2.
    pub fn scope_violation(&self, agent: u32, task_class: &str) -> bool {
        !self.admits_agent(agent)
            || (!self.allowed_task_classes.is_empty()
                && !self.allowed_task_classes.iter().any(|c| same_class(c, task_class)))
    }

    /// Whether the item may enter a prompt at all.
    pub fn is_active(&self) -> bool {
        self.status == Status::Active
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A blank item readable by `agents` (empty: everyone) in task classes `classes`.
    pub(crate) fn with_readers(agents: Vec<u32>, classes: &[&str]) -> MemoryItem {
        let mut it = MemoryItem::new("m".into(), "i".into(), "e".into(), TextFeatures::default());
        it.allowed_agents = agents;
        it.allowed_task_classes = classes.iter().map(|c| c.to_string()).collect();
        it
    }

    #[test]
    fn reader_lists_admit_exactly_their_members_in_any_order() {
        let lists: [Vec<u32>; 6] =
            [vec![], vec![4], (0..100).collect(), (0..100).rev().collect(), vec![9, 2, 7, 2, 40], vec![3, 5, 8, 13]];
        for list in lists {
            let it = with_readers(list.clone(), &[]);
            for agent in 0..110 {
                let want = list.is_empty() || list.contains(&agent);
                assert_eq!(it.admits_agent(agent), want, "{list:?} agent {agent}");
                assert_eq!(it.scope_violation(agent, "mmlu"), !want, "{list:?} agent {agent}");
            }
        }
    }

    #[test]
    fn class_names_compare_as_strings() {
        let it = with_readers(vec![], &["mmlu", "longmemeval:q7"]);
        for (class, inside) in
            [("mmlu", true), ("longmemeval:q7", true), ("mmlU", false), ("mml", false), ("mmlu ", false), ("", false)]
        {
            assert_eq!(it.scope_violation(0, class), !inside, "{class:?}");
        }
        assert!(!with_readers(vec![], &[]).scope_violation(0, "anything"), "an empty class list admits every class");
    }
}
