//! provenance-ACL (spec §3.6, §8; `rule_baseline.ProvenanceACL`): taint and reader labels
//! propagate with every write, and any write, promotion, retrieval or transfer whose dependency
//! set carries a taint, or that would widen the readers, is denied. Its labels are what the
//! strict ledger computes (run it with `provenance: StrictLedger`, as the paper's strict
//! controls do); under recomputed provenance it reads the writer's taint and ACL instead.

use super::decision::{Action, Decision, Reader};
use super::{CommitVerdict, Guard, GuardStage, ReadVerdict, baseline_score};
use crate::memory::{MemoryItem, MemoryTopology, Scope, Status, Taint};
use crate::text::QueryFeatures;
use serde::{Deserialize, Serialize};

/// The provenance ACL in the guard registry.
pub const KIND: super::Kind<AclConfig> = super::Kind {
    name: |_| "provenance_acl",
    validate: super::always_valid,
    build: |c, name, agents| Box::new(ProvenanceAcl::new(name, c.clone(), agents)),
    judge: None,
};

/// provenance-ACL's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AclConfig {
    /// How many agents a team write must be readable by (the system size; set by the world).
    pub agents: u32,
    /// β of the read score sim + β·Q among allowed items.
    pub beta_q: f64,
}

impl Default for AclConfig {
    fn default() -> Self {
        AclConfig { agents: 0, beta_q: 0.8 }
    }
}

/// provenance-ACL.
#[derive(Clone, Debug)]
pub struct ProvenanceAcl {
    name: String,
    cfg: AclConfig,
}

impl ProvenanceAcl {
    /// The guard for a system of `agents` agents.
    pub fn new(name: &str, mut cfg: AclConfig, agents: u32) -> Self {
        cfg.agents = agents;
        ProvenanceAcl { name: name.into(), cfg }
    }

    fn readable_by(item: &MemoryItem, agent: u32) -> bool {
        item.admits_agent(agent)
    }
}

impl Guard for ProvenanceAcl {
    fn name(&self) -> &str {
        &self.name
    }

    fn stage(&self) -> GuardStage {
        GuardStage::Memory
    }

    fn backend_order_pool(&self) -> bool {
        true
    }

    fn commit(&self, item: &mut MemoryItem, requested: Scope) -> CommitVerdict {
        let mut v = CommitVerdict::allow(requested);
        if item.taint != Taint::Clean {
            item.status = Status::Rejected;
            v.write = Some(Decision::new(Action::Reject, "acl_tainted_dependency"));
            return v;
        }
        v.write = Some(Decision::new(Action::Allow, "acl_clean"));
        if requested == Scope::Team {
            // Recipients (every agent) must be readers already: a promotion may not widen them.
            let widens = !(0..self.cfg.agents).all(|a| Self::readable_by(item, a));
            let d = if widens {
                item.status = Status::Rejected;
                Decision::new(Action::Reject, "acl_widens_readers")
            } else {
                Decision::new(Action::Allow, "acl_readers_cover_team")
            };
            v.promotion = Some(d);
        }
        v
    }

    fn broker(&self, item: &MemoryItem, reader: Reader<'_>, _topology: MemoryTopology) -> Decision {
        if Self::readable_by(item, reader.agent) {
            Decision::new(Action::Allow, "acl_reader")
        } else {
            Decision::new(Action::Block, "acl_not_reader")
        }
    }

    fn score(
        &self,
        item: &MemoryItem,
        _query: &QueryFeatures,
        sim: f64,
        _cluster: super::Cluster,
        reader: Reader<'_>,
    ) -> ReadVerdict {
        let mut v = baseline_score(item, sim, self.cfg.beta_q);
        if v.blocked.is_none() {
            if item.taint != Taint::Clean {
                v.blocked = Some("acl_tainted_dependency");
            } else if !Self::readable_by(item, reader.agent) {
                v.blocked = Some("acl_not_reader");
            }
        }
        v
    }
}
