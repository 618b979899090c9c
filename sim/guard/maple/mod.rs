//! MAPLE-Guard exactly as the reference harness implements it (spec §2–§4).

mod config;
mod gates;
mod provenance;
mod risk;

pub use crate::guard::decision::{Action, Decision, Reader};
pub use crate::memory::LINEAGE_MARKERS;
use crate::memory::PrescoreInput;
pub use config::*;
pub use gates::{
    ReadScore, apply_rewrite, backend_prescore, baseline_read, broker_decision, prescore_of, promotion_gate,
    read_score, write_gate,
};
pub use provenance::{
    BackendQCache, FeedbackPolicy, OutcomeParams, ProvenanceMode, StrictChannel, apply_outcome, apply_strict_view,
};
pub use risk::{QueryContext, RiskSignals, derive_provenance, lifecycle_risk, writer_trust};

use super::{CommitVerdict, Guard, GuardStage, ReadVerdict};
use crate::memory::{MemoryItem, MemoryTopology, Scope, Status};
use crate::text::QueryFeatures;

/// MAPLE-Guard's four lifecycle gates behind the [`Guard`] seam.
#[derive(Clone, Debug, Default)]
pub struct MapleGuard {
    cfg: MapleConfig,
    rules: crate::guard::MetadataRules,
    name: String,
}

impl MapleGuard {
    /// A guard with configuration `cfg`.
    pub fn new(cfg: MapleConfig) -> Self {
        let name = name_of(&cfg);
        MapleGuard { rules: crate::guard::MetadataRules::of_maple(cfg.clone()), cfg, name: name.into() }
    }

    /// The configuration.
    pub fn config(&self) -> &MapleConfig {
        &self.cfg
    }
}

/// MAPLE-Guard in the guard registry ([`crate::guard::spec::GuardSpec::Maple`]).
pub const KIND: crate::guard::Kind<MapleConfig> = crate::guard::Kind {
    name: name_of,
    validate: MapleConfig::validate,
    build: |cfg, _, _| Box::new(MapleGuard::new(cfg.clone())),
    judge: None,
};

/// The method name of configuration `cfg` in results (the reference's, per variant).
fn name_of(cfg: &MapleConfig) -> &'static str {
    match cfg.variant {
        MapleVariant::Full => "maple_guard",
        MapleVariant::NoWrite => "maple_guard_no_write",
        MapleVariant::NoRetrieval => "maple_guard_no_retrieval",
        MapleVariant::NoPromotion => "maple_guard_no_promotion",
        MapleVariant::NoCrossAgent => "maple_guard_no_cross_agent",
        MapleVariant::RetrievalOnly => "maple_guard_retrieval_only",
    }
}

/// What an attacker's own copy of the published guard, at the paper's defaults, says of a
/// write it is about to make ([`published_copy`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CopyVerdict {
    /// Stored active and not blocked by the read firewall on the probed query.
    pub passes: bool,
    /// The read firewall's total risk.
    pub risk: f64,
    /// The write gate rewrote it.
    pub rewritten: bool,
}

/// The white-box attacker's probe: `item` run through a copy of MAPLE-Guard at the paper's
/// defaults (derive, write and promotion gates, then the read firewall on `query` at
/// similarity `sim` for `reader`). The copy is the attacker's, not the arm's guard.
pub fn published_copy(
    item: &MemoryItem,
    scope: Scope,
    query: &QueryFeatures,
    sim: f64,
    reader: Reader<'_>,
) -> CopyVerdict {
    let cfg = MapleConfig::default();
    let mut probe = item.clone();
    derive_provenance(&mut probe, &cfg);
    probe.scope = scope;
    let verdict = commit_gates(&mut probe, scope, &cfg);
    let stored = probe.status == crate::memory::Status::Active;
    let read = read_score(&probe, query, sim, 0.0, reader, &cfg);
    CopyVerdict {
        passes: stored && read.decision.action != Action::Block,
        risk: read.risk.total,
        rewritten: verdict.rewritten,
    }
}

/// Runs the write gate then the promotion gate on an item whose metadata is final, applying
/// the actions to the item (status, rewrite). Shared by the guard and `memlink explain`.
pub fn commit_gates(item: &mut MemoryItem, requested: Scope, cfg: &MapleConfig) -> CommitVerdict {
    let mut verdict = CommitVerdict::allow(requested);
    let mut write_risk = None;
    let mut lifecycle_risk_cached =
        |item: &MemoryItem, cfg: &MapleConfig| *write_risk.get_or_insert_with(|| lifecycle_risk(item, None, 0.0, cfg));
    if !cfg.variant.write_gate() {
        // The reference still reports a decision: an ablation's, or (retrieval-only, which is
        // not a lifecycle method there) a baseline's.
        verdict.write = Some(Decision::new(Action::Allow, disabled_reason(cfg.variant, "write")));
    } else {
        let r = lifecycle_risk_cached(item, cfg);
        let w = write_gate(item, &r, cfg);
        verdict.write = Some(w);
        match w.action {
            Action::Reject => {
                item.status = Status::Rejected;
                return verdict;
            }
            Action::Quarantine => {
                item.status = Status::Quarantined;
                return verdict;
            }
            Action::Rewrite => {
                apply_rewrite(item, cfg);
                verdict.rewritten = true;
            }
            _ => {}
        }
    }
    if !cfg.variant.promotion_gate() {
        verdict.promotion = Some(Decision::new(Action::Allow, disabled_reason(cfg.variant, "promotion")));
    } else {
        // The write gate's risk still holds unless a rewrite changed the item.
        let r = match (&verdict.write, verdict.rewritten) {
            (Some(_), false) => lifecycle_risk_cached(item, cfg),
            _ => lifecycle_risk(item, None, 0.0, cfg),
        };
        let p = promotion_gate(item, requested, &r, cfg);
        verdict.promotion = Some(p);
        if p.action == Action::Quarantine {
            item.status = Status::Quarantined;
        }
    }
    verdict
}

/// The reference's reason string of a gate that a variant turns off.
fn disabled_reason(variant: MapleVariant, gate: &str) -> &'static str {
    match (variant, gate) {
        (MapleVariant::RetrievalOnly, "write") => "baseline_no_write_firewall",
        (MapleVariant::RetrievalOnly, _) => "baseline_no_promotion_gate",
        (_, "write") => "ablation_no_write_firewall",
        _ => "ablation_no_promotion_gate",
    }
}

impl Guard for MapleGuard {
    fn name(&self) -> &str {
        &self.name
    }

    fn stage(&self) -> GuardStage {
        GuardStage::Memory
    }

    fn metadata_rules(&self) -> Option<&crate::guard::MetadataRules> {
        Some(&self.rules)
    }

    fn frames_memories_as_evidence(&self) -> bool {
        true
    }

    fn commit(&self, item: &mut MemoryItem, requested: Scope) -> CommitVerdict {
        commit_gates(item, requested, &self.cfg)
    }

    fn full_pool(&self) -> bool {
        self.cfg.variant.full_pool()
            || (self.cfg.ablations_get_full_pool && self.cfg.variant != MapleVariant::NoRetrieval)
    }

    fn backend_order_pool(&self) -> bool {
        // `retrieve_entries` tests the strict-comparison method list before MAPLE's own branch.
        self.cfg.variant == MapleVariant::RetrievalOnly
    }

    fn prescore(&self, input: PrescoreInput, sim: f64) -> f64 {
        prescore_of(input, sim, &self.cfg)
    }

    fn broker(&self, item: &MemoryItem, reader: Reader<'_>, topology: MemoryTopology) -> Decision {
        broker_decision(item, reader, topology, &self.cfg)
    }

    fn score_reader_key(&self, item: &MemoryItem, reader: Reader<'_>) -> u64 {
        // `read_score` sees the reader only through the scope check (`baseline_score` not at
        // all); the risk profile, hazard and taint terms are the item's and the query's.
        if !self.cfg.variant.retrieval_gate() {
            return 0;
        }
        u64::from(item.scope_violation(reader.agent, reader.task_class))
    }

    fn score(
        &self,
        item: &MemoryItem,
        query: &QueryFeatures,
        sim: f64,
        cluster: super::Cluster,
        reader: Reader<'_>,
    ) -> ReadVerdict {
        if !self.cfg.variant.retrieval_gate() {
            return super::baseline_score(item, sim, self.cfg.score.beta_q);
        }
        let r = read_score(item, query, sim, cluster.share, reader, &self.cfg);
        ReadVerdict { score: r.score, blocked: (r.decision.action == Action::Block).then_some(r.decision.reason) }
    }

    fn min_score(&self) -> Option<f64> {
        self.cfg.variant.retrieval_gate().then_some(self.cfg.firewall.min_score)
    }
}
