//! Dense copies of what a backend pre-score reads of an item, so ranking a large candidate
//! pool touches a few bytes per candidate instead of a whole item and its heap strings.
//!
//! The copies are taken when an item enters the bank. That is sound because everything they
//! copy is final by then: the write gate and the strict ledger set scope and snapshot before
//! the commit stores the item, and nothing rewrites them afterwards. Debug builds check every
//! dense scope verdict against the item's own [`MemoryItem::scope_violation`].

use super::item::{MemoryItem, Taint};

/// What a backend pre-score may read of an item (besides the intent similarity).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrescoreInput {
    /// The backend's Q.
    pub backend_q: f64,
    /// The backend's (trust, hazard, taint) snapshot taken at write time.
    pub snapshot: (f64, f64, Taint),
    /// sv(m, reader, class) of spec §2.2.
    pub scope_violation: bool,
}

impl PrescoreInput {
    /// The input read straight from an item, for callers without a bank.
    pub fn of(item: &MemoryItem, agent: u32, task_class: &str) -> Self {
        PrescoreInput {
            backend_q: item.backend_q,
            snapshot: item.backend_snapshot,
            scope_violation: item.scope_violation(agent, task_class),
        }
    }
}

/// Which readers an item's `allowed_agents` admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AgentRule {
    /// Empty list: every agent.
    Any,
    /// Agents `lo..=hi`, listed in order (one agent, or the whole team).
    Range(u32, u32),
    /// Anything else: ask the item.
    Other,
}

/// Which task classes an item's `allowed_task_classes` admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClassRule {
    /// Empty list: every class.
    Any,
    /// Exactly one class, by its id in the bank's class table.
    One(u32),
    /// Anything else: ask the item.
    Other,
}

/// An item's scope, reduced to two small rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScopeKey {
    agents: AgentRule,
    classes: ClassRule,
}

/// Task classes by id, so a reader's class is compared as an integer.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClassTable {
    ids: rustc_hash::FxHashMap<Box<str>, u32>,
}

impl ClassTable {
    /// The id of `class`, adding it if new.
    fn intern(&mut self, class: &str) -> u32 {
        if let Some(id) = self.ids.get(class) {
            return *id;
        }
        let id = self.ids.len() as u32;
        self.ids.insert(class.into(), id);
        id
    }

    /// The id of `class`, if any item named it.
    pub(crate) fn id(&self, class: &str) -> Option<u32> {
        self.ids.get(class).copied()
    }

    /// The scope key of `item`.
    pub(crate) fn key_of(&mut self, item: &MemoryItem) -> ScopeKey {
        let a = &item.allowed_agents;
        let agents = if a.is_empty() {
            AgentRule::Any
        } else if a.windows(2).all(|w| w[1] == w[0] + 1) {
            AgentRule::Range(a[0], a[a.len() - 1])
        } else {
            AgentRule::Other
        };
        let classes = match item.allowed_task_classes.as_slice() {
            [] => ClassRule::Any,
            [one] => ClassRule::One(self.intern(one)),
            _ => ClassRule::Other,
        };
        ScopeKey { agents, classes }
    }
}

impl ScopeKey {
    /// sv(m, agent, class), or `None` when the key cannot tell and the item must.
    /// `class_id` is the reader's class id (`None`: no item names that class).
    pub(crate) fn violation(self, agent: u32, class_id: Option<u32>) -> Option<bool> {
        let agent_out = match self.agents {
            AgentRule::Any => false,
            AgentRule::Range(lo, hi) => agent < lo || agent > hi,
            AgentRule::Other => return None,
        };
        let class_out = match self.classes {
            ClassRule::Any => false,
            ClassRule::One(c) => class_id != Some(c),
            ClassRule::Other => return None,
        };
        Some(agent_out || class_out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::item::tests::with_readers as item;

    #[test]
    fn dense_scope_agrees_with_the_item() {
        let mut table = ClassTable::default();
        let cases = [
            item(vec![], &[]),
            item(vec![3], &["physics"]),
            item(vec![0, 1, 2, 3], &["physics"]),
            item(vec![2, 5], &["chemistry"]),
            item(vec![1], &["physics", "chemistry"]),
            item(vec![], &["biology"]),
        ];
        let keys: Vec<ScopeKey> = cases.iter().map(|it| table.key_of(it)).collect();
        for (it, key) in cases.iter().zip(&keys) {
            for agent in 0..7 {
                for class in ["physics", "chemistry", "biology", "history"] {
                    let want = it.scope_violation(agent, class);
                    let got = key.violation(agent, table.id(class)).unwrap_or(want);
                    assert_eq!(
                        got, want,
                        "{:?} {:?} agent {agent} class {class}",
                        it.allowed_agents, it.allowed_task_classes
                    );
                }
            }
        }
        assert_eq!(keys[3].violation(0, None), None, "a non-contiguous agent list defers to the item");
        assert_eq!(keys[4].violation(1, None), None, "several classes defer to the item");
    }
}
