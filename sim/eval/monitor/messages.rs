//! `message-guard-keeps-stores`: reviewing messages changes no store.

use super::{Breach, Cx, Entry, Invariant, Observation};

pub(super) const ENTRY: Entry = Entry {
    name: super::DIGEST_INVARIANT,
    about: "a message guard's review of a round's outputs changes no memory store (no item added, moved, re-scored or rewritten)",
    truth: false,
    make: || Box::new(MessageGuardKeepsStores),
};

struct MessageGuardKeepsStores;

impl Invariant for MessageGuardKeepsStores {
    fn observe(&mut self, obs: &Observation<'_>, _cx: &Cx<'_>) -> Vec<Breach> {
        let Observation::MessageReview { round, before, after, .. } = *obs else { return Vec::new() };
        if before == after {
            return Vec::new();
        }
        vec![Breach {
            agent: None,
            item: None,
            detail: format!("the stores' digest changed across the round-{round} message review"),
        }]
    }
}
