//! `poison-accounted`: every poison item went through the commit pipeline exactly once and
//! ends in exactly one fate.

use super::{Breach, Cx, Entry, Invariant, Observation};
use crate::memory::{ItemId, Status};
use std::collections::{BTreeMap, BTreeSet};

pub(super) const ENTRY: Entry = Entry {
    name: "poison-accounted",
    about: "every poison item the evaluator knows was committed through the pipeline exactly once, and at the end of the run is exactly one of: rejected, quarantined, rewritten, blocked at read, read, or stored and never read",
    truth: true,
    make: || Box::new(PoisonAccounted::default()),
};

#[derive(Default)]
struct PoisonAccounted {
    /// Poison items committed, with the status the commit left and whether it was rewritten.
    committed: BTreeMap<ItemId, (Status, bool)>,
    blocked: BTreeSet<ItemId>,
    read: BTreeSet<ItemId>,
}

impl Invariant for PoisonAccounted {
    fn observe(&mut self, obs: &Observation<'_>, cx: &Cx<'_>) -> Vec<Breach> {
        match *obs {
            Observation::Commit { id, verdict, owner, .. } => {
                if !cx.truth.is_poison(id) {
                    return Vec::new();
                }
                let rewritten = verdict.is_some_and(|v| v.rewritten);
                if self.committed.insert(id, (cx.bank.get(id).status, rewritten)).is_some() {
                    return vec![Breach {
                        agent: Some(owner),
                        item: Some(id),
                        detail: "poison item committed twice".into(),
                    }];
                }
                Vec::new()
            }
            Observation::ReadBlocked { id, .. } if cx.truth.is_poison(id) => {
                self.blocked.insert(id);
                Vec::new()
            }
            Observation::Prompt { agent, items, .. } => {
                let mut out = Vec::new();
                for &id in items.iter().filter(|&&id| cx.truth.is_poison(id)) {
                    if !self.committed.contains_key(&id) {
                        out.push(Breach {
                            agent: Some(agent),
                            item: Some(id),
                            detail: "poison item in a prompt without a commit".into(),
                        });
                    }
                    self.read.insert(id);
                }
                out
            }
            Observation::RunEnd => {
                let mut out = Vec::new();
                for id in cx.truth.poison_ids() {
                    let Some(&(status, _rewritten)) = self.committed.get(&id) else {
                        out.push(Breach { agent: None, item: Some(id), detail: "poison item never committed".into() });
                        continue;
                    };
                    let stopped = status != Status::Active;
                    if stopped && (self.read.contains(&id) || self.blocked.contains(&id)) {
                        out.push(Breach {
                            agent: None,
                            item: Some(id),
                            detail: format!("poison item stopped at write ({status:?}) was retrieved later"),
                        });
                    }
                    if cx.bank.status(id) != status {
                        out.push(Breach {
                            agent: None,
                            item: Some(id),
                            detail: format!(
                                "poison item committed {status:?} ends the run {:?} without a commit",
                                cx.bank.status(id)
                            ),
                        });
                    }
                }
                out
            }
            _ => Vec::new(),
        }
    }
}
