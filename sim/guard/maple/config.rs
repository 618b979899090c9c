//! MAPLE-Guard's configuration: every weight, increment and threshold of spec §2–§3 as a field,
//! defaulting to the reference harness's value. A scenario may override any subset in RON.

use serde::{Deserialize, Serialize};

/// Which gates run (the paper's ablations, spec §3).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum MapleVariant {
    /// All four gates.
    #[default]
    Full,
    /// Write gate off.
    NoWrite,
    /// Retrieval scoring and read firewall off (baseline score).
    NoRetrieval,
    /// Promotion gate off.
    NoPromotion,
    /// Cross-agent broker off.
    NoCrossAgent,
    /// Only MAPLE retrieval scoring; no write, promotion or broker gate.
    RetrievalOnly,
}

impl MapleVariant {
    /// Whether the write gate runs.
    pub fn write_gate(self) -> bool {
        !matches!(self, MapleVariant::NoWrite | MapleVariant::RetrievalOnly)
    }
    /// Whether the promotion gate runs.
    pub fn promotion_gate(self) -> bool {
        !matches!(self, MapleVariant::NoPromotion | MapleVariant::RetrievalOnly)
    }
    /// Whether MAPLE retrieval scoring and the read firewall run.
    pub fn retrieval_gate(self) -> bool {
        !matches!(self, MapleVariant::NoRetrieval)
    }
    /// Whether the cross-agent broker runs.
    pub fn cross_agent_gate(self) -> bool {
        !matches!(self, MapleVariant::NoCrossAgent | MapleVariant::RetrievalOnly)
    }
    /// Whether the arm receives the whole re-sorted candidate pool under the reference's rule
    /// (spec C5: full and retrieval-only do; the other ablations get the baseline "selected"
    /// set). See [`MapleConfig::ablations_get_full_pool`].
    pub fn full_pool(self) -> bool {
        matches!(self, MapleVariant::Full | MapleVariant::RetrievalOnly)
    }
}

/// Weights of the eight signals in the total risk (must sum to 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RiskWeights {
    pub provenance: f64,
    pub lineage: f64,
    pub self_claim: f64,
    pub instruction: f64,
    pub answer_binding: f64,
    pub trigger: f64,
    pub cluster: f64,
    pub agent_trust: f64,
}

impl Default for RiskWeights {
    fn default() -> Self {
        RiskWeights {
            provenance: 0.24,
            lineage: 0.20,
            self_claim: 0.14,
            instruction: 0.14,
            answer_binding: 0.12,
            trigger: 0.10,
            cluster: 0.04,
            agent_trust: 0.02,
        }
    }
}

impl RiskWeights {
    /// The weights in signal order.
    pub fn as_array(&self) -> [f64; 8] {
        [
            self.provenance,
            self.lineage,
            self.self_claim,
            self.instruction,
            self.answer_binding,
            self.trigger,
            self.cluster,
            self.agent_trust,
        ]
    }
}

/// Increments inside the individual signals (spec §2.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SignalParams {
    /// Provenance: source names a direct, imported, external, tool or environment route.
    pub p_direct_source: f64,
    /// Provenance: source names a query-only, bridge or successful-experience route.
    pub p_bridge_source: f64,
    /// Provenance: external taint.
    pub p_taint_external: f64,
    /// Provenance: unverified taint.
    pub p_taint_unverified: f64,
    /// Provenance: poisoned taint.
    pub p_taint_poisoned: f64,
    /// Provenance: team scope with trust below `p_team_trust_below`.
    pub p_team_low_trust: f64,
    /// Trust threshold of the team-scope bonus (and of the self-claim boost exemption).
    pub p_team_trust_below: f64,
    /// Lineage: per marker.
    pub lineage_per_marker: f64,
    /// Self-claim: per pattern hit.
    pub self_claim_per_hit: f64,
    /// Self-claim: boost unless clean with trust ≥ `p_team_trust_below`.
    pub self_claim_boost: f64,
    /// Instruction-like: per soft hit.
    pub instruction_per_hit: f64,
    /// Answer binding: per pattern hit.
    pub answer_binding_per_hit: f64,
    /// Trigger: query overlap bonus.
    pub trigger_query_overlap: f64,
    /// Trigger: overlap threshold for the bonus.
    pub trigger_overlap_min: f64,
    /// Trigger: bonus when the query says "trigger" and sim is high enough.
    pub trigger_query_word: f64,
    /// Trigger: sim threshold of that bonus.
    pub trigger_query_sim_min: f64,
    /// Cluster dominance: share above which dominance counts.
    pub cluster_share_floor: f64,
}

impl Default for SignalParams {
    fn default() -> Self {
        SignalParams {
            p_direct_source: 0.45,
            p_bridge_source: 0.30,
            p_taint_external: 0.40,
            p_taint_unverified: 0.24,
            p_taint_poisoned: 0.70,
            p_team_low_trust: 0.15,
            p_team_trust_below: 0.70,
            lineage_per_marker: 0.18,
            self_claim_per_hit: 0.14,
            self_claim_boost: 0.18,
            instruction_per_hit: 0.16,
            answer_binding_per_hit: 0.20,
            trigger_query_overlap: 0.25,
            trigger_overlap_min: 0.25,
            trigger_query_word: 0.15,
            trigger_query_sim_min: 0.35,
            cluster_share_floor: 0.5,
        }
    }
}

/// Deltas of `derive_provenance_scores` (spec §2.3), each a (Δtrust, Δrisk) pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct DeriveParams {
    pub base_trust: f64,
    pub base_risk: f64,
    pub post_task_or_benign: (f64, f64),
    pub direct_memory_injection: (f64, f64),
    pub query_only_or_external: (f64, f64),
    pub cross_agent: (f64, f64),
    pub tool_web_environment: (f64, f64),
    pub team_scope_risk: f64,
    pub single_reader_risk: f64,
    pub procedural_type_risk: f64,
    pub taint_unverified: (f64, f64),
    pub taint_poisoned: (f64, f64),
    pub instruction_like: (f64, f64),
    /// Success surplus d: (+min(cap, per·d) trust, −min(cap, per·d) risk).
    pub success_trust_per: f64,
    pub success_trust_cap: f64,
    pub success_risk_per: f64,
    pub success_risk_cap: f64,
    /// Failure surplus d: (−min(cap, per·d) trust, +min(cap, per·d) risk).
    pub failure_per: f64,
    pub failure_cap: f64,
    /// Writer reputation s: trust + clip(slope·(s − 0.5), −cap, cap); risk + bump if s < low.
    pub agent_trust_slope: f64,
    pub agent_trust_cap: f64,
    pub agent_trust_low: f64,
    pub agent_trust_low_risk: f64,
    /// Lifecycle terms: trust −= a·max(p, ℓ); risk += b·R.
    pub lifecycle_trust: f64,
    pub lifecycle_risk: f64,
}

impl Default for DeriveParams {
    fn default() -> Self {
        DeriveParams {
            base_trust: 0.5,
            base_risk: 0.15,
            post_task_or_benign: (0.20, -0.05),
            direct_memory_injection: (-0.35, 0.45),
            query_only_or_external: (-0.25, 0.30),
            cross_agent: (-0.18, 0.22),
            tool_web_environment: (-0.15, 0.25),
            team_scope_risk: 0.10,
            single_reader_risk: -0.03,
            procedural_type_risk: 0.18,
            taint_unverified: (-0.15, 0.18),
            taint_poisoned: (-0.45, 0.45),
            instruction_like: (-0.20, 0.35),
            success_trust_per: 0.03,
            success_trust_cap: 0.15,
            success_risk_per: 0.02,
            success_risk_cap: 0.10,
            failure_per: 0.04,
            failure_cap: 0.20,
            agent_trust_slope: 0.35,
            agent_trust_cap: 0.20,
            agent_trust_low: 0.3,
            agent_trust_low_risk: 0.10,
            lifecycle_trust: 0.25,
            lifecycle_risk: 0.55,
        }
    }
}

/// Write gate thresholds (spec §3.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct WriteGateParams {
    pub claim_provenance_min: f64,
    pub claim_signal_min: f64,
    pub risk_quarantine_min: f64,
    pub risk_quarantine_lineage_min: f64,
    pub hazard_quarantine_min: f64,
    pub trust_quarantine_max: f64,
    pub rewrite_risk_min: f64,
    pub rewrite_q_max: f64,
    pub rewrite_trust_max: f64,
    pub rewrite_hazard_min: f64,
}

impl Default for WriteGateParams {
    fn default() -> Self {
        WriteGateParams {
            claim_provenance_min: 0.45,
            claim_signal_min: 0.25,
            risk_quarantine_min: 0.50,
            risk_quarantine_lineage_min: 0.36,
            hazard_quarantine_min: 0.65,
            trust_quarantine_max: 0.35,
            rewrite_risk_min: 0.38,
            rewrite_q_max: 0.1,
            rewrite_trust_max: 0.25,
            rewrite_hazard_min: 0.5,
        }
    }
}

/// Promotion gate thresholds (spec §3.2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct PromotionGateParams {
    pub risk_max: f64,
    pub claim_provenance_min: f64,
    pub claim_signal_min: f64,
    pub hazard_max: f64,
    pub trust_min: f64,
}

impl Default for PromotionGateParams {
    fn default() -> Self {
        PromotionGateParams {
            risk_max: 0.34,
            claim_provenance_min: 0.45,
            claim_signal_min: 0.25,
            hazard_max: 0.5,
            trust_min: 0.62,
        }
    }
}

/// Retrieval score S(m,q) coefficients and the query-conditioned penalties (spec §2.2, §3.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct ScoreParams {
    /// β on Q.
    pub beta_q: f64,
    /// γ on trust.
    pub gamma_trust: f64,
    /// λ on query-conditioned hazard.
    pub lambda_hazard: f64,
    /// η on query-conditioned taint.
    pub eta_taint: f64,
    /// κ (`rho` in code) on scope violation.
    pub rho_scope: f64,
    /// μ on total query-conditioned risk.
    pub mu_risk: f64,
    /// h_q = h(m,q) + this · R_q.
    pub hazard_risk_share: f64,
    /// T_q = t(m,q) + this · p + …
    pub taint_provenance_share: f64,
    /// … + this · ℓ.
    pub taint_lineage_share: f64,
    pub taint_penalty_external: f64,
    pub taint_penalty_unverified: f64,
    pub taint_penalty_poisoned: f64,
    pub taint_sim_step1: f64,
    pub taint_sim_step2: f64,
    pub taint_sim_bonus: f64,
    pub taint_instruction_bonus: f64,
    pub taint_qctx_bonus: f64,
    pub taint_overlap_bonus: f64,
    pub taint_trusted_relief: f64,
    pub trusted_trust_min: f64,
    pub trusted_hazard_max: f64,
    pub hazard_instruction_base: f64,
    pub hazard_instruction_sim: f64,
    pub hazard_sim_min: f64,
    pub hazard_sim_bonus: f64,
    pub hazard_overlap_bonus: f64,
    pub hazard_qctx_share: f64,
    pub hazard_tool_bonus: f64,
    pub hazard_clean_relief: f64,
    pub hazard_clean_trust_min: f64,
    pub overlap_min: f64,
}

impl Default for ScoreParams {
    fn default() -> Self {
        ScoreParams {
            beta_q: 0.8,
            gamma_trust: 0.5,
            lambda_hazard: 1.0,
            eta_taint: 1.0,
            rho_scope: 2.0,
            mu_risk: 1.15,
            hazard_risk_share: 0.30,
            taint_provenance_share: 0.12,
            taint_lineage_share: 0.10,
            taint_penalty_external: 0.65,
            taint_penalty_unverified: 0.40,
            taint_penalty_poisoned: 0.90,
            taint_sim_step1: 0.45,
            taint_sim_step2: 0.65,
            taint_sim_bonus: 0.10,
            taint_instruction_bonus: 0.10,
            taint_qctx_bonus: 0.10,
            taint_overlap_bonus: 0.05,
            taint_trusted_relief: 0.10,
            trusted_trust_min: 0.75,
            trusted_hazard_max: 0.20,
            hazard_instruction_base: 0.10,
            hazard_instruction_sim: 0.20,
            hazard_sim_min: 0.35,
            hazard_sim_bonus: 0.10,
            hazard_overlap_bonus: 0.10,
            hazard_qctx_share: 0.15,
            hazard_tool_bonus: 0.10,
            hazard_clean_relief: 0.05,
            hazard_clean_trust_min: 0.70,
            overlap_min: 0.25,
        }
    }
}

/// Read firewall thresholds (spec §3.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct FirewallParams {
    pub hazard_min: f64,
    pub hazard_trust_max: f64,
    pub risk_min: f64,
    pub trigger_min: f64,
    pub trigger_trust_below: f64,
    pub binding_min: f64,
    pub binding_claim_min: f64,
    /// The floor on S (configs: −0.50).
    pub min_score: f64,
}

impl Default for FirewallParams {
    fn default() -> Self {
        FirewallParams {
            hazard_min: 0.65,
            hazard_trust_max: 0.5,
            risk_min: 0.48,
            trigger_min: 0.45,
            trigger_trust_below: 0.75,
            binding_min: 0.45,
            binding_claim_min: 0.35,
            min_score: -0.50,
        }
    }
}

/// The whole MAPLE-Guard configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct MapleConfig {
    /// Which gates run.
    pub variant: MapleVariant,
    /// Signal weights.
    pub weights: RiskWeights,
    /// Signal increments.
    pub signals: SignalParams,
    /// Provenance-derived trust and hazard.
    pub derive: DeriveParams,
    /// Write gate.
    pub write_gate: WriteGateParams,
    /// Promotion gate.
    pub promotion_gate: PromotionGateParams,
    /// Retrieval score.
    pub score: ScoreParams,
    /// Read firewall.
    pub firewall: FirewallParams,
    /// Fix the reference quirk that three FORBIDDEN patterns never match after lowercasing.
    pub fix_forbidden_case_quirk: bool,
    /// Fix the reference quirk that the broker checks every memory against class "csqa" (C7).
    pub fix_broker_default_class: bool,
    /// Fix the reference quirk that a writer trust of exactly 0.0 is read as 0.5 (its
    /// `source_agent_trust or 0.5`), in the agent-trust signal and in derive. Reachable once an
    /// agent's reputation falls to 0; it can flip a promotion (reference vector
    /// `C4a_agent_trust_zero_gate_flip`). Off by default, as the reference behaves.
    pub fix_writer_trust_zero_quirk: bool,
    /// Give the gate ablations the whole re-sorted candidate pool, as full MAPLE gets it. The
    /// reference (C5) hands them the baseline "selected" set instead, so an ablation differs
    /// from full MAPLE by its candidate pool as well as by its gate; turn this on to isolate
    /// the gate (then `NoCrossAgent` equals `Full` wherever the broker is inert).
    pub ablations_get_full_pool: bool,
}

impl MapleConfig {
    /// Checks the configuration; returns (field path, what was expected) on the first problem.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let sum: f64 = self.weights.as_array().iter().sum();
        if (sum - 1.0).abs() > 1e-9 {
            return Err(("weights".into(), format!("signal weights that sum to 1 (they sum to {sum})")));
        }
        if self.weights.as_array().iter().any(|w| *w < 0.0 || !w.is_finite()) {
            return Err(("weights".into(), "non-negative finite signal weights".into()));
        }
        Ok(())
    }
}
