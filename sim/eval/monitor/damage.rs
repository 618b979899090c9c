//! `rda-le-pmur-le-1`: RDA ≤ PMUR-A ≤ 1 at every round.

use super::{Breach, Cx, Entry, Invariant, Observation};

pub(super) const ENTRY: Entry = Entry {
    name: "rda-le-pmur-le-1",
    about: "at every round, 0 <= RDA <= PMUR-A <= 1 (damage needs exposure), both finite",
    truth: false,
    make: || Box::new(DamageBounds),
};

struct DamageBounds;

impl Invariant for DamageBounds {
    fn observe(&mut self, obs: &Observation<'_>, _cx: &Cx<'_>) -> Vec<Breach> {
        let Observation::RoundEnd { round, rda, pmur_agent, .. } = *obs else { return Vec::new() };
        let ok = rda.is_finite() && pmur_agent.is_finite() && 0.0 <= rda && rda <= pmur_agent && pmur_agent <= 1.0;
        if ok {
            return Vec::new();
        }
        vec![Breach {
            agent: None,
            item: None,
            detail: format!("round {}: RDA {rda} and PMUR-A {pmur_agent}", round + 1),
        }]
    }
}
