//! `tainted-never-promoted`: no item tainted external or poisoned enters the shared store.

use super::{Breach, Cx, Entry, Invariant, Observation};
use crate::memory::{StoreKind, Taint};

pub(super) const ENTRY: Entry = Entry {
    name: "tainted-never-promoted",
    about: "no item whose taint is external or poisoned is ever committed active to the shared (team) store",
    truth: false,
    make: || Box::new(TaintedNeverPromoted),
};

struct TaintedNeverPromoted;

impl Invariant for TaintedNeverPromoted {
    fn observe(&mut self, obs: &Observation<'_>, cx: &Cx<'_>) -> Vec<Breach> {
        let Observation::Commit { id, route, owner, .. } = *obs else { return Vec::new() };
        let it = cx.bank.get(id);
        if cx.bank.location(id) != StoreKind::Shared || !it.is_active() {
            return Vec::new();
        }
        if matches!(it.taint, Taint::External | Taint::Poisoned) {
            return vec![Breach {
                agent: Some(owner),
                item: Some(id),
                detail: format!(
                    "{route:?} commit of an item tainted {} (source_type {:?}) is active in the shared store",
                    it.taint.as_str(),
                    it.source_type
                ),
            }];
        }
        Vec::new()
    }
}
