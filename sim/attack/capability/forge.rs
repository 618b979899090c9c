//! Metadata forgery: the attacker sets chosen metadata fields of what it writes through the
//! direct-memory route to what a benign agent's verified outcome memory carries.
//!
//! Two orders of spec §2 (the provenance step and the caller's fields):
//! - [`ForgeOrder::Rederived`]: the forged fields go into the commit's provenance step, which
//!   derives τ and h from them, as the reference's `derive_provenance_scores` does: it assigns
//!   trust and hazard system-side but reads the route, taint, lineage, scope, counters and
//!   writer trust the caller wrote. This is what the reference harness implements (paper-code
//!   protocol); under its strict comparison protocol the ledger view overwrites the forged
//!   fields by the ingress channel's, and the forgery does nothing.
//! - [`ForgeOrder::Survives`]: a write API that trusts the caller: the forged fields and a
//!   claimed τ (0.9) and h (0.02) survive the provenance step.

use crate::memory::{MemoryItem, Taint, Writer};
use serde::{Deserialize, Serialize};

/// What the registry says.
pub const ABOUT: &str = "metadata forgery on the direct-memory route: source route, writer and its trust, readers, taint, lineage, outcome counters, Q; re-derived by the commit (the reference) or surviving it";

/// A forgeable field.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForgeField {
    /// The source route and memory type (`agent_self_outcome_consolidation`).
    SourceType,
    /// The writer (a benign agent) and its trust (at least 0.9).
    Writer,
    /// The readers: every agent (no single-reader risk).
    Scope,
    /// Taint clean.
    Taint,
    /// Lineage of an honest outcome memory (the task id alone).
    Parents,
    /// At least three successes, no failure.
    Counters,
    /// Utility Q at least 0.9.
    Q,
}

/// Every field.
pub const ALL_FIELDS: [ForgeField; 7] = [
    ForgeField::SourceType,
    ForgeField::Writer,
    ForgeField::Scope,
    ForgeField::Taint,
    ForgeField::Parents,
    ForgeField::Counters,
    ForgeField::Q,
];

/// Whether forged fields go through the provenance step or survive it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForgeOrder {
    /// Re-derived by the commit's provenance step (the reference's derive).
    #[default]
    Rederived,
    /// Kept as written, with a claimed τ and h (a write API that trusts the caller).
    Survives,
}

/// The forgery capability (`Forge((fields: [SourceType, Taint], order: Survives))`; `Forge(())`
/// forges every field, re-derived).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Forgery {
    /// The fields forged.
    pub fields: Vec<ForgeField>,
    /// The order against the provenance step.
    pub order: ForgeOrder,
}

impl Default for Forgery {
    fn default() -> Self {
        Forgery { fields: ALL_FIELDS.to_vec(), order: ForgeOrder::Rederived }
    }
}

/// Trust and hazard a surviving forgery claims.
pub const CLAIMED_TRUST_HAZARD: (f64, f64) = (0.9, 0.02);

impl Forgery {
    /// Sets the forged fields of `item`, a write of task `task_id` by the attacker, claiming
    /// `benign` as its writer, in a team of `agents`.
    pub fn apply(&self, item: &mut MemoryItem, task_id: &str, benign: u32, agents: u32) {
        for f in &self.fields {
            match f {
                ForgeField::SourceType => {
                    item.source_type = "agent_self_outcome_consolidation".into();
                    item.memory_type = "agent_outcome_experience".into();
                }
                ForgeField::Writer => {
                    item.writer = Writer::Agent(benign);
                    item.source_agent_trust = item.source_agent_trust.max(0.9);
                }
                ForgeField::Scope => item.allowed_agents = (0..agents).collect(),
                ForgeField::Taint => item.taint = Taint::Clean,
                ForgeField::Parents => item.set_parents(vec![task_id.into()]),
                ForgeField::Counters => {
                    item.success_count = item.success_count.max(3);
                    item.failure_count = 0;
                }
                ForgeField::Q => item.utility_q = item.utility_q.max(0.9),
            }
        }
    }

    /// After the provenance step: a surviving forgery restores what the caller claimed.
    pub fn after_provenance(&self, item: &mut MemoryItem, claimed: &MemoryItem) {
        if self.order != ForgeOrder::Survives {
            return;
        }
        item.trust = CLAIMED_TRUST_HAZARD.0;
        item.hazard = CLAIMED_TRUST_HAZARD.1;
        for f in &self.fields {
            match f {
                ForgeField::SourceType => {
                    item.source_type = claimed.source_type.clone();
                    item.memory_type = claimed.memory_type.clone();
                }
                ForgeField::Writer => {
                    item.writer = claimed.writer;
                    item.source_agent_trust = claimed.source_agent_trust;
                }
                ForgeField::Scope => item.allowed_agents = claimed.allowed_agents.clone(),
                ForgeField::Taint => item.taint = claimed.taint,
                ForgeField::Parents => item.set_parents(claimed.parents().to_vec()),
                ForgeField::Counters => {
                    item.success_count = claimed.success_count;
                    item.failure_count = claimed.failure_count;
                }
                ForgeField::Q => item.utility_q = claimed.utility_q,
            }
        }
    }
}

impl super::CapabilityKind for Forgery {
    const NAME: &'static str = "Forge";
    const ABOUT: &'static str = ABOUT;
    fn validate(&self) -> Result<(), (String, String)> {
        if self.fields.is_empty() {
            return Err(("fields".to_string(), "at least one field to forge".to_string()));
        }
        Ok(())
    }
}
