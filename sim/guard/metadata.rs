//! The rules by which the protocol recomputes an item's provenance metadata (trust τ and
//! hazard h, the reference's `derive_provenance_scores`) when it is written and after each
//! outcome, whatever the arm's guard.
//!
//! The reference harness applies one formula to every arm: MAPLE-Guard's, with the paper's
//! constants. An arm whose guard brings its own constants (MAPLE-Guard with a configuration of
//! its own, alone or in a stack) derives with those ([`crate::guard::Guard::metadata_rules`]).
//! The world holds a [`MetadataRules`] and calls [`MetadataRules::derive`] and
//! [`MetadataRules::apply_outcome`]; it never sees what is inside.

use super::maple::{FeedbackPolicy, MapleConfig, OutcomeParams, ProvenanceMode, apply_outcome, derive_provenance};
use crate::memory::MemoryItem;

/// How τ and h are derived from an item's observable metadata, and how an outcome updates
/// them. The default is the reference's: the paper's constants.
#[derive(Clone, Debug, Default)]
pub struct MetadataRules {
    cfg: MapleConfig,
}

impl MetadataRules {
    /// The rules of MAPLE-Guard configuration `cfg` (its derive constants and the signals its
    /// lifecycle term reads).
    pub fn of_maple(cfg: MapleConfig) -> Self {
        MetadataRules { cfg }
    }

    /// Recomputes τ and h of `item` from its observable metadata.
    pub fn derive(&self, item: &mut MemoryItem) {
        derive_provenance(item, &self.cfg);
    }

    /// One outcome update of a used memory (its Q, counters, τ and h; τ and h derived again
    /// under [`ProvenanceMode::Recomputed`]).
    pub fn apply_outcome(
        &self,
        item: &mut MemoryItem,
        success: bool,
        policy: FeedbackPolicy,
        mode: ProvenanceMode,
        params: &OutcomeParams,
    ) {
        apply_outcome(item, success, policy, mode, params, &self.cfg);
    }
}
