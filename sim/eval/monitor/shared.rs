//! `poison-never-shared`: no poison item (evaluator truth) is ever active in the shared store.

use super::{Breach, Cx, Entry, Invariant, Observation};
use crate::memory::StoreKind;

pub(super) const ENTRY: Entry = Entry {
    name: "poison-never-shared",
    about: "no item the evaluator labels poison is ever committed active to the shared (team) store",
    truth: true,
    make: || Box::new(PoisonNeverShared),
};

struct PoisonNeverShared;

impl Invariant for PoisonNeverShared {
    fn observe(&mut self, obs: &Observation<'_>, cx: &Cx<'_>) -> Vec<Breach> {
        let Observation::Commit { id, route, owner, .. } = *obs else { return Vec::new() };
        if cx.bank.location(id) == StoreKind::Shared && cx.bank.get(id).is_active() && cx.truth.is_poison(id) {
            return vec![Breach {
                agent: Some(owner),
                item: Some(id),
                detail: format!("poison item committed by the {route:?} route is active in the shared store"),
            }];
        }
        Vec::new()
    }
}
