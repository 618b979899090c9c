//! `blocked-never-in-prompt`: an item blocked for a reader is not in the prompt of the retrieval
//! that blocked it, and a risk block keeps it out of that reader's prompts for the rest of the
//! task.
//!
//! The read firewall's `read_firewall_low_score` is a relevance floor, not a risk rule: the
//! score moves between a task's rounds with the candidate pool (the cluster-dominance signal
//! reads the other candidates), so an item under the floor in round 1 may clear it in round 2.
//! Such a block counts for its own retrieval only.

use super::{Breach, Cx, Entry, Invariant, Observation};
use crate::memory::ItemId;
use std::collections::BTreeMap;

pub(super) const ENTRY: Entry = Entry {
    name: "blocked-never-in-prompt",
    about: "an item blocked at read (read gate or broker) for an agent is not in the prompt of the retrieval that blocked it, and after a risk block (any reason but the relevance floor read_firewall_low_score) never appears in that agent's prompt later in the same task",
    truth: false,
    make: || Box::new(BlockedNeverInPrompt::default()),
};

#[derive(Default)]
struct BlockedNeverInPrompt {
    task: u32,
    /// (reader, item) blocked by a risk rule this task, with the round, stage and reason.
    blocked: BTreeMap<(u32, ItemId), (u32, &'static str, &'static str)>,
    /// The latest retrieval (task, round, reader) and what it blocked.
    retrieval: (u32, u32, u32, Vec<ItemId>),
}

/// The read firewall's relevance floor.
const LOW_SCORE: &str = "read_firewall_low_score";

impl Invariant for BlockedNeverInPrompt {
    fn observe(&mut self, obs: &Observation<'_>, _cx: &Cx<'_>) -> Vec<Breach> {
        match *obs {
            Observation::ReadBlocked { task, round, agent, id, stage, reason } => {
                if task != self.task {
                    self.task = task;
                    self.blocked.clear();
                }
                if (self.retrieval.0, self.retrieval.1, self.retrieval.2) != (task, round, agent) {
                    self.retrieval = (task, round, agent, Vec::new());
                }
                self.retrieval.3.push(id);
                if reason != LOW_SCORE {
                    self.blocked.entry((agent, id)).or_insert((round, stage, reason));
                }
                Vec::new()
            }
            Observation::Prompt { task, round, agent, items } => {
                if task != self.task {
                    self.task = task;
                    self.blocked.clear();
                }
                let same = (self.retrieval.0, self.retrieval.1, self.retrieval.2) == (task, round, agent);
                let mut out: Vec<Breach> = items
                    .iter()
                    .filter(|id| same && self.retrieval.3.contains(id))
                    .map(|id| Breach {
                        agent: Some(agent),
                        item: Some(*id),
                        detail: format!("in the prompt of the round-{round} retrieval that blocked it"),
                    })
                    .collect();
                out.extend(items.iter().filter(|id| !(same && self.retrieval.3.contains(id))).filter_map(|id| {
                        let (r, stage, reason) = self.blocked.get(&(agent, *id))?;
                        Some(Breach {
                            agent: Some(agent),
                            item: Some(*id),
                            detail: format!(
                                "in the prompt of round {round} after its {stage} block ({reason}) in round {r} of the same task"
                            ),
                        })
                    }));
                out
            }
            _ => Vec::new(),
        }
    }
}
