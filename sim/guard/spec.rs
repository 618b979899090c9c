//! What a scenario's arm names as its guard ([`GuardSpec`], the RON of `arms: [(guard: …)]`),
//! its validation, and the one place that builds a guard from it ([`build_guard`]). Adding a
//! guard is its file in `guard/`, one variant here and one line in [`build_guard`].

use super::acl::AclConfig;
use super::amem::AMemGuardConfig;
use super::maple::MapleConfig;
use super::message::{GraphGuardConfig, GuardianConfig, JudgeConfig, XposedConfig};
use super::piguard::PiGuardConfig;
use super::{Guard, NoDefense, acl, amem, detector, maple, message, piguard, stack};
use serde::{Deserialize, Serialize};

/// A guard arm of a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum GuardSpec {
    /// No defense.
    NoDefense,
    /// MAPLE-Guard with this configuration (`()` = the paper's defaults).
    Maple(Box<MapleConfig>),
    /// PIGuard, `Retrieval` or `Lifecycle` (`()` = retrieval with the default classifier).
    PiGuard(PiGuardConfig),
    /// provenance-ACL (pair it with `provenance: StrictLedger`, as the paper's strict controls do).
    ProvenanceAcl(AclConfig),
    /// The A-MemGuard proxy.
    AMemGuard(AMemGuardConfig),
    /// Challenger: a per-message judge that replaces unsafe outputs.
    Challenger(JudgeConfig),
    /// Inspector: a judge over the chat history that rewrites unsafe outputs.
    Inspector(JudgeConfig),
    /// AgentSafe: security-level check replacing outputs with a refusal.
    AgentSafe(JudgeConfig),
    /// AgentXposed, `mode: Guide` (default) or `Kick`.
    AgentXposed(XposedConfig),
    /// G-Safeguard: GNN node flags that prune outputs.
    GSafeguard(GraphGuardConfig),
    /// INFA-Guard: the GNN adapter, pruning (default) or replacing from a donor.
    InfaGuard(GraphGuardConfig),
    /// GUARDIAN: one removal per round.
    Guardian(GuardianConfig),
    /// Several guards applied together, in order.
    Stack(Vec<GuardSpec>),
}

impl GuardSpec {
    /// The guard's name in results.
    pub fn method_name(&self) -> String {
        build_guard(self, 2).name().to_string()
    }

    /// Checks every configuration in the spec; returns (field, what was expected).
    pub fn validate(&self) -> std::result::Result<(), (String, String)> {
        match self {
            GuardSpec::NoDefense | GuardSpec::ProvenanceAcl(_) => Ok(()),
            GuardSpec::Maple(cfg) => cfg.validate(),
            GuardSpec::PiGuard(c) => c.classifier.check(),
            GuardSpec::AMemGuard(c) => {
                if c.max_lessons == 0 {
                    return Err(("max_lessons".into(), "at least 1".into()));
                }
                Ok(())
            }
            GuardSpec::Challenger(c) | GuardSpec::Inspector(c) | GuardSpec::AgentSafe(c) => c.detector.check(),
            GuardSpec::AgentXposed(c) => {
                if c.step_down < 0.0 || c.step_up < 0.0 {
                    return Err(("step_down".into(), "steps ≥ 0".into()));
                }
                c.detector.check()
            }
            GuardSpec::GSafeguard(c) | GuardSpec::InfaGuard(c) => c.detector.check(),
            GuardSpec::Guardian(c) => c.detector.check(),
            GuardSpec::Stack(gs) => {
                if gs.is_empty() {
                    return Err(("arms".into(), "a Stack of at least one guard".into()));
                }
                gs.iter().try_for_each(|g| g.validate())
            }
        }
    }
}

/// Builds the guard a scenario arm names, for a system of `agents` agents.
pub fn build_guard(spec: &GuardSpec, agents: u32) -> Box<dyn Guard> {
    use GuardSpec as S;
    use message::{GraphAction, MessageGuard, MessageGuardKind as K, XposedMode};
    match spec {
        S::NoDefense => Box::new(NoDefense),
        S::Maple(cfg) => Box::new(maple::MapleGuard::new((**cfg).clone())),
        S::PiGuard(c) => {
            let name = match c.mode {
                piguard::PiGuardMode::Retrieval => "piguard_retrieval",
                piguard::PiGuardMode::Lifecycle => "piguard_lifecycle",
            };
            Box::new(piguard::PiGuard::new(name, c.clone()))
        }
        S::ProvenanceAcl(c) => Box::new(acl::ProvenanceAcl::new("provenance_acl", c.clone(), agents)),
        S::AMemGuard(c) => Box::new(amem::AMemGuard::new("pure_a_memguard_memrl", c.clone())),
        S::Challenger(c) => Box::new(MessageGuard::new("challenger", K::Challenger(c.clone()))),
        S::Inspector(c) => Box::new(MessageGuard::new("inspector", K::Inspector(c.clone()))),
        S::AgentSafe(c) => Box::new(MessageGuard::new("agentsafe", K::AgentSafe(c.clone()))),
        S::AgentXposed(c) => {
            let name = match c.mode {
                XposedMode::Guide => "agentxposed_guide",
                XposedMode::Kick => "agentxposed_kick",
            };
            Box::new(MessageGuard::new(name, K::AgentXposed(c.clone())))
        }
        S::GSafeguard(c) => Box::new(MessageGuard::new("gsafeguard", K::Graph(c.clone()))),
        S::InfaGuard(c) => {
            let name = match c.action {
                GraphAction::Prune => "infa_guard",
                GraphAction::Replace => "infa_guard_replace",
            };
            Box::new(MessageGuard::new(name, K::Graph(c.clone())))
        }
        S::Guardian(c) => Box::new(MessageGuard::new("guardian", K::Guardian(c.clone()))),
        S::Stack(specs) => {
            let guards: Vec<Box<dyn Guard>> = specs.iter().map(|s| build_guard(s, agents)).collect();
            let name = guards.iter().map(|g| g.name().to_string()).collect::<Vec<_>>().join("+");
            Box::new(stack::GuardStack::new(&name, guards))
        }
    }
}

/// The judge kind ([`crate::agent::JUDGE_KINDS`]) of a guard whose detector is an LLM call
/// on the agents' backbone, if it is one.
pub fn judge_kind(spec: &GuardSpec) -> Option<&'static str> {
    use GuardSpec as S;
    match spec {
        S::Challenger(_) => Some("challenger"),
        S::Inspector(_) => Some("inspector"),
        S::AgentSafe(_) => Some("agentsafe"),
        S::AgentXposed(_) => Some("agentxposed"),
        _ => None,
    }
}

/// `spec` as run by agents of backbone `profile`: each LLM judge's detector (in stacks too)
/// shifted by the profile's [`crate::agent::JudgeShift`] for its kind. Other guards unchanged.
pub fn with_backbone_judges(spec: &GuardSpec, profile: &crate::agent::Profile) -> GuardSpec {
    use GuardSpec as S;
    if profile.judges.is_empty() {
        return spec.clone();
    }
    let shift = |d: &mut detector::DetectorParams| {
        if let Some(j) = judge_kind(spec).and_then(|k| profile.judges.get(k)) {
            d.bias += j.bias;
            d.dissent += j.dissent;
        }
    };
    let mut out = spec.clone();
    match &mut out {
        S::Challenger(c) | S::Inspector(c) | S::AgentSafe(c) => shift(&mut c.detector),
        S::AgentXposed(c) => shift(&mut c.detector),
        S::Stack(specs) => *specs = specs.iter().map(|s| with_backbone_judges(s, profile)).collect(),
        _ => {}
    }
    out
}
