//! `quarantined-never-read`: no quarantined or rejected item ever enters a prompt.

use super::{Breach, Cx, Entry, Invariant, Observation};
use crate::memory::StoreKind;

pub(super) const ENTRY: Entry = Entry {
    name: "quarantined-never-read",
    about: "no item that is quarantined or was rejected at the write gate ever appears in a prompt",
    truth: false,
    make: || Box::new(QuarantinedNeverRead),
};

struct QuarantinedNeverRead;

impl Invariant for QuarantinedNeverRead {
    fn observe(&mut self, obs: &Observation<'_>, cx: &Cx<'_>) -> Vec<Breach> {
        let Observation::Prompt { round, agent, items, .. } = *obs else { return Vec::new() };
        items
            .iter()
            .filter_map(|&id| {
                let it = cx.bank.get(id);
                let place = cx.bank.location(id);
                (!it.is_active() || matches!(place, StoreKind::Quarantine | StoreKind::Dropped)).then(|| Breach {
                    agent: Some(agent),
                    item: Some(id),
                    detail: format!("in a round-{round} prompt while {:?} (store {place:?})", it.status),
                })
            })
            .collect()
    }
}
