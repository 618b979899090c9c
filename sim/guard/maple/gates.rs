//! The write gate, promotion gate, read score with its firewall, and the cross-agent broker
//! (spec §3.1–§3.4). Every function returns the action together with the rule that fired.

use super::config::{MapleConfig, MapleVariant};
use super::risk::{QueryContext, RiskSignals, clamp01, lifecycle_risk};
use crate::guard::decision::{Action, Decision, Reader};
use crate::memory::{MemoryItem, MemoryTopology, PrescoreInput, Scope, Status, Taint};
use crate::text::{QueryFeatures, REWRITE_PREFIX};
use serde::Serialize;

/// `write_firewall` (spec §3.1) on the total risk without a query. Does not modify the item.
pub fn write_gate(item: &MemoryItem, r: &RiskSignals, cfg: &MapleConfig) -> Decision {
    let g = &cfg.write_gate;
    if item.features.credential {
        return Decision::new(Action::Reject, "forbidden_sensitive_memory");
    }
    if r.provenance >= g.claim_provenance_min
        && (r.answer_binding >= g.claim_signal_min || r.self_claim_success >= g.claim_signal_min)
    {
        return Decision::new(Action::Quarantine, "unverified_provenance_answer_claim");
    }
    if r.total >= g.risk_quarantine_min
        && (r.provenance >= g.claim_provenance_min || r.lineage >= g.risk_quarantine_lineage_min)
    {
        return Decision::new(Action::Quarantine, "memory_lifecycle_high_risk_write");
    }
    if item.hazard >= g.hazard_quarantine_min && item.trust <= g.trust_quarantine_max {
        return Decision::new(Action::Quarantine, "high_risk_low_trust_memory");
    }
    if item.features.instruction_like(cfg.fix_forbidden_case_quirk)
        || (r.total >= g.rewrite_risk_min && (r.answer_binding > 0.0 || r.self_claim_success > 0.0))
    {
        return Decision::new(Action::Rewrite, "lifecycle_risky_memory_rewritten_as_evidence");
    }
    Decision::new(Action::Allow, "low_risk_memory")
}

/// Applies the REWRITE action's changes to an item (spec §3.1 rule 5). The caller recomputes
/// the text features, since the experience gains the rewrite notice.
pub fn apply_rewrite(item: &mut MemoryItem, cfg: &MapleConfig) {
    let g = &cfg.write_gate;
    item.experience = format!("{REWRITE_PREFIX}{}", item.experience);
    item.utility_q = item.utility_q.min(g.rewrite_q_max);
    item.trust = item.trust.min(g.rewrite_trust_max);
    item.hazard = item.hazard.max(g.rewrite_hazard_min);
    if item.taint == Taint::Clean {
        item.taint = Taint::Unverified;
    }
}

/// `promotion_gate` (spec §3.2): only team writes are checked.
pub fn promotion_gate(item: &MemoryItem, requested: Scope, r: &RiskSignals, cfg: &MapleConfig) -> Decision {
    if requested != Scope::Team {
        return Decision::new(Action::Allow, "private_memory_no_team_promotion");
    }
    let g = &cfg.promotion_gate;
    let claim = r.self_claim_success > 0.0 || r.answer_binding > 0.0;
    let unsafe_ = r.total >= g.risk_max
        || (r.provenance >= g.claim_provenance_min
            && (r.answer_binding >= g.claim_signal_min || r.self_claim_success >= g.claim_signal_min))
        || matches!(item.taint, Taint::Poisoned | Taint::External)
        || item.hazard >= g.hazard_max
        || item.trust < g.trust_min
        || (item.taint == Taint::Unverified && claim);
    if unsafe_ {
        Decision::new(Action::Quarantine, "unsafe_lifecycle_team_memory_promotion")
    } else {
        Decision::new(Action::Allow, "verified_team_memory")
    }
}

/// One scored read with every intermediate term (what `explain` prints).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ReadScore {
    /// S(m,q).
    pub score: f64,
    /// Query-conditioned hazard h_q.
    pub h_q: f64,
    /// Query-conditioned taint penalty T_q.
    pub t_q: f64,
    /// Query-conditioned risk signals R_q.
    pub risk: RiskSignals,
    /// Token overlap of query and memory.
    pub overlap: f64,
    /// Query context risk qctx(q) under the configured FORBIDDEN semantics.
    pub qctx: f64,
    /// Scope violation.
    pub scope_violation: bool,
    /// Firewall decision.
    pub decision: Decision,
}

fn base_taint_penalty(t: Taint, cfg: &MapleConfig) -> f64 {
    let s = &cfg.score;
    match t {
        Taint::Clean => 0.0,
        Taint::External => s.taint_penalty_external,
        Taint::Unverified => s.taint_penalty_unverified,
        Taint::Poisoned => s.taint_penalty_poisoned,
    }
}

/// The backend's MAPLE pre-score used to re-sort the candidate pool (spec §3.3 and C5):
/// sim + 0.8·Q + 0.5·τ − h − taint penalty − 2·sv, on the values captured at add time.
pub fn backend_prescore(item: &MemoryItem, sim: f64, reader: Reader<'_>, cfg: &MapleConfig) -> f64 {
    prescore_of(PrescoreInput::of(item, reader.agent, reader.task_class), sim, cfg)
}

/// [`backend_prescore`] from the bank's dense copies of the item.
pub fn prescore_of(input: PrescoreInput, sim: f64, cfg: &MapleConfig) -> f64 {
    let s = &cfg.score;
    let (tau, h, taint) = input.snapshot;
    let sv = if input.scope_violation { 1.0 } else { 0.0 };
    sim + s.beta_q * input.backend_q + s.gamma_trust * tau
        - s.lambda_hazard * h
        - s.eta_taint * base_taint_penalty(taint, cfg)
        - s.rho_scope * sv
}

/// S(m,q) and the read firewall (spec §3.3).
pub fn read_score(
    item: &MemoryItem,
    query: &QueryFeatures,
    sim: f64,
    cluster_share: f64,
    reader: Reader<'_>,
    cfg: &MapleConfig,
) -> ReadScore {
    let s = &cfg.score;
    let fix = cfg.fix_forbidden_case_quirk;
    let r = lifecycle_risk(item, Some(QueryContext { query, sim }), cluster_share, cfg);
    let overlap = query.overlap(item.features.tokens.get());
    let instr = item.features.instruction_like(fix);
    let clean = item.taint == Taint::Clean;
    let qctx = query.qctx(fix);

    let mut h = item.hazard;
    if instr {
        h += s.hazard_instruction_base + s.hazard_instruction_sim * sim.max(0.0);
    }
    if !clean && sim >= s.hazard_sim_min {
        h += s.hazard_sim_bonus;
    }
    if overlap >= s.overlap_min && !clean {
        h += s.hazard_overlap_bonus;
    }
    h += s.hazard_qctx_share * qctx;
    if query.tool_context && item.features.tool_marker {
        h += s.hazard_tool_bonus;
    }
    if clean && item.trust >= s.hazard_clean_trust_min && !instr {
        h -= s.hazard_clean_relief;
    }
    let h_mq = clamp01(h);

    let t_mq = if clean {
        0.0
    } else {
        let mut t = base_taint_penalty(item.taint, cfg);
        if sim >= s.taint_sim_step1 {
            t += s.taint_sim_bonus;
        }
        if sim >= s.taint_sim_step2 {
            t += s.taint_sim_bonus;
        }
        if instr {
            t += s.taint_instruction_bonus;
        }
        if qctx > 0.0 {
            t += s.taint_qctx_bonus;
        }
        if overlap >= s.overlap_min {
            t += s.taint_overlap_bonus;
        }
        if item.trust >= s.trusted_trust_min && item.hazard <= s.trusted_hazard_max {
            t -= s.taint_trusted_relief;
        }
        clamp01(t)
    };

    let h_q = clamp01(h_mq + s.hazard_risk_share * r.total);
    let t_q = clamp01(t_mq + s.taint_provenance_share * r.provenance + s.taint_lineage_share * r.lineage);
    let sv = item.scope_violation(reader.agent, reader.task_class);
    let score = sim + s.beta_q * item.utility_q + s.gamma_trust * item.trust
        - s.lambda_hazard * h_q
        - s.eta_taint * t_q
        - s.rho_scope * if sv { 1.0 } else { 0.0 }
        - s.mu_risk * r.total;

    let fw = &cfg.firewall;
    let decision = if item.status != Status::Active {
        Decision::new(Action::Block, "read_firewall_inactive_memory")
    } else if sv {
        Decision::new(Action::Block, "read_firewall_scope_violation")
    } else if h_q >= fw.hazard_min && item.trust <= fw.hazard_trust_max {
        Decision::new(Action::Block, "read_firewall_high_risk_low_trust")
    } else if r.total >= fw.risk_min {
        Decision::new(Action::Block, "read_firewall_memory_lifecycle_high_risk")
    } else if r.trigger_sensitivity >= fw.trigger_min && item.trust < fw.trigger_trust_below {
        Decision::new(Action::Block, "read_firewall_trigger_sensitive_memory")
    } else if r.answer_binding >= fw.binding_min && r.self_claim_success >= fw.binding_claim_min && !clean {
        Decision::new(Action::Block, "read_firewall_unverified_answer_binding")
    } else if score < fw.min_score {
        Decision::new(Action::Block, "read_firewall_low_score")
    } else {
        Decision::new(Action::Allow, "read_firewall_allowed_as_evidence")
    };
    ReadScore { score, h_q, t_q, risk: r, overlap, qctx, scope_violation: sv, decision }
}

/// A read under the `NoRetrieval` ablation, as the reference scores it for a method without
/// MAPLE retrieval: S = sim + β·Q, the static hazard and taint penalty, no risk profile, and a
/// read firewall that blocks only inactive items ("baseline_no_read_firewall" otherwise).
pub fn baseline_read(
    item: &MemoryItem,
    query: &QueryFeatures,
    sim: f64,
    reader: Reader<'_>,
    cfg: &MapleConfig,
) -> ReadScore {
    let decision = if item.status != Status::Active {
        Decision::new(Action::Block, "read_firewall_inactive_memory")
    } else {
        Decision::new(Action::Allow, "baseline_no_read_firewall")
    };
    ReadScore {
        score: sim + cfg.score.beta_q * item.utility_q,
        h_q: item.hazard,
        t_q: base_taint_penalty(item.taint, cfg),
        risk: RiskSignals::default(),
        overlap: query.overlap(item.features.tokens.get()),
        qctx: query.qctx(cfg.fix_forbidden_case_quirk),
        scope_violation: item.scope_violation(reader.agent, reader.task_class),
        decision,
    }
}

/// `broker_decision` (spec §3.4) for a shared item read by `reader`.
///
/// The rules run in the reference's order: retrieval-only has no broker, then an unbrokered
/// topology reads directly, then the no-cross-agent ablation allows.
pub fn broker_decision(item: &MemoryItem, reader: Reader<'_>, topology: MemoryTopology, cfg: &MapleConfig) -> Decision {
    if cfg.variant == MapleVariant::RetrievalOnly {
        return Decision::new(Action::Allow, "retrieval_only_no_broker_gate");
    }
    if !topology.brokered() {
        return Decision::new(Action::Allow, "direct_shared_memory_access");
    }
    if !cfg.variant.cross_agent_gate() {
        return Decision::new(Action::Allow, "ablation_no_cross_agent_gate");
    }
    // The reference checks every item against the default class "csqa" (C7).
    let class = if cfg.fix_broker_default_class { reader.task_class } else { "csqa" };
    if item.scope_violation(reader.agent, class) {
        return Decision::new(Action::Block, "broker_scope_violation");
    }
    if item.status != Status::Active {
        return Decision::new(Action::Block, "broker_inactive_memory");
    }
    Decision::new(Action::Allow, "broker_allowed_capsule")
}
