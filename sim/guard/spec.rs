//! What a scenario's arm names as its guard ([`GuardSpec`], the RON of `arms: [(guard: …)]`),
//! its validation, and the one place that builds a guard from it ([`build_guard`]).
//!
//! # Adding a guard
//!
//! A guard is one file in `guard/` (the guard, its configuration, and its [`super::Kind`]: name,
//! validation, construction) and one line of the registry below, which makes the `GuardSpec`
//! variant, its validation, its name, its construction and its backbone judge shift. The
//! registry's `#[cfg(test)]` entry (`TestProbe`, `guard/probe.rs`) shows it end to end.

use super::acl::AclConfig;
use super::amem::AMemGuardConfig;
use super::maple::MapleConfig;
use super::message::{GraphGuardConfig, GuardianConfig, JudgeConfig, XposedConfig};
use super::piguard::PiGuardConfig;
use super::{Guard, NoDefense, acl, amem, detector, maple, message, piguard, stack};
use serde::{Deserialize, Serialize};

/// Declares [`GuardSpec`] and everything that dispatches on it from one list of
/// `Variant(Config) = KIND;` lines. `NoDefense` and `Stack` are built in.
macro_rules! guard_registry {
    ($( $(#[doc = $doc:literal])* $(#[cfg($cfg:meta)])? $variant:ident($ty:ty) = $kind:expr; )*) => {
        /// A guard arm of a comparison.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub enum GuardSpec {
            /// No defense.
            NoDefense,
            $( $(#[doc = $doc])* $(#[cfg($cfg)])? $variant($ty), )*
            /// Several guards applied together, in order.
            Stack(Vec<GuardSpec>),
        }

        /// The registered guards' RON variants, in registry order (`NoDefense` first and
        /// `Stack` last).
        pub fn registry() -> Vec<&'static str> {
            #[allow(unused_mut)]
            let mut names = vec!["NoDefense"];
            $( $(#[cfg($cfg)])? names.push(stringify!($variant)); )*
            names.push("Stack");
            names
        }

        impl GuardSpec {
            /// The guard's name in results (a stack's: its guards' names joined by `+`).
            pub fn method_name(&self) -> String {
                match self {
                    GuardSpec::NoDefense => NoDefense.name().to_string(),
                    $( $(#[cfg($cfg)])? GuardSpec::$variant(c) => ($kind.name)(c).to_string(), )*
                    GuardSpec::Stack(gs) => gs.iter().map(GuardSpec::method_name).collect::<Vec<_>>().join("+"),
                }
            }

            /// Checks every configuration in the spec; returns (field, what was expected).
            pub fn validate(&self) -> std::result::Result<(), (String, String)> {
                match self {
                    GuardSpec::NoDefense => Ok(()),
                    $( $(#[cfg($cfg)])? GuardSpec::$variant(c) => ($kind.validate)(c), )*
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
            match spec {
                GuardSpec::NoDefense => Box::new(NoDefense),
                $( $(#[cfg($cfg)])? GuardSpec::$variant(c) => ($kind.build)(c, ($kind.name)(c), agents), )*
                GuardSpec::Stack(specs) => {
                    let guards: Vec<Box<dyn Guard>> = specs.iter().map(|s| build_guard(s, agents)).collect();
                    let name = guards.iter().map(|g| g.name().to_string()).collect::<Vec<_>>().join("+");
                    Box::new(stack::GuardStack::new(&name, guards))
                }
            }
        }

        /// The judge kind ([`crate::agent::JUDGE_KINDS`]) of a guard whose detector is an LLM
        /// call on the agents' backbone, if it is one.
        pub fn judge_kind(spec: &GuardSpec) -> Option<&'static str> {
            match spec {
                $( $(#[cfg($cfg)])? GuardSpec::$variant(_) => $kind.judge.map(|j| j.0), )*
                _ => None,
            }
        }

        /// The LLM judge's detector of `spec`, which a backbone shifts (not in stacks).
        fn judge_detector(spec: &mut GuardSpec) -> Option<&mut detector::DetectorParams> {
            match spec {
                $( $(#[cfg($cfg)])? GuardSpec::$variant(c) => $kind.judge.map(|j| (j.1)(c)), )*
                _ => None,
            }
        }
    };
}

guard_registry! {
    /// MAPLE-Guard with this configuration (`()` = the paper's defaults).
    Maple(Box<MapleConfig>) = maple::KIND;
    /// PIGuard, `Retrieval` or `Lifecycle` (`()` = retrieval with the default classifier).
    PiGuard(PiGuardConfig) = piguard::KIND;
    /// provenance-ACL (pair it with `provenance: StrictLedger`, as the paper's strict controls do).
    ProvenanceAcl(AclConfig) = acl::KIND;
    /// The A-MemGuard proxy.
    AMemGuard(AMemGuardConfig) = amem::KIND;
    /// Challenger: a per-message judge that replaces unsafe outputs.
    Challenger(JudgeConfig) = message::CHALLENGER;
    /// Inspector: a judge over the chat history that rewrites unsafe outputs.
    Inspector(JudgeConfig) = message::INSPECTOR;
    /// AgentSafe: security-level check replacing outputs with a refusal.
    AgentSafe(JudgeConfig) = message::AGENTSAFE;
    /// AgentXposed, `mode: Guide` (default) or `Kick`.
    AgentXposed(XposedConfig) = message::AGENTXPOSED;
    /// G-Safeguard: GNN node flags that prune outputs.
    GSafeguard(GraphGuardConfig) = message::GSAFEGUARD;
    /// INFA-Guard: the GNN adapter, pruning (default) or replacing from a donor.
    InfaGuard(GraphGuardConfig) = message::INFA_GUARD;
    /// GUARDIAN: one removal per round.
    Guardian(GuardianConfig) = message::GUARDIAN;
    /// A test-only guard that shows the registry at work (`guard/probe.rs`).
    #[cfg(test)]
    TestProbe(super::probe::ProbeConfig) = super::probe::KIND;
}

/// `spec` as run by agents of backbone `profile`: each LLM judge's detector (in stacks too)
/// shifted by the profile's [`crate::agent::JudgeShift`] for its kind. Other guards unchanged.
pub fn with_backbone_judges(spec: &GuardSpec, profile: &crate::agent::Profile) -> GuardSpec {
    if profile.judges.is_empty() {
        return spec.clone();
    }
    let mut out = spec.clone();
    if let GuardSpec::Stack(specs) = &mut out {
        *specs = specs.iter().map(|s| with_backbone_judges(s, profile)).collect();
    } else if let Some(j) = judge_kind(spec).and_then(|k| profile.judges.get(k))
        && let Some(d) = judge_detector(&mut out)
    {
        d.bias += j.bias;
        d.dissent += j.dissent;
    }
    out
}
