//! How metadata is set: the strict operational ledger view (spec §3.6), and the outcome update
//! after each task (spec §4) with its feedback policies.

use super::config::MapleConfig;
use super::risk::derive_provenance;
use crate::memory::{MemoryItem, Scope, Status, Taint};
use serde::{Deserialize, Serialize};

/// How trust and hazard are set on commit.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ProvenanceMode {
    /// Writer values recomputed by `derive_provenance_scores` at every commit and outcome
    /// (the paper-code protocol).
    #[default]
    Recomputed,
    /// Only the operational ledger sets metadata (the strict comparison protocol).
    StrictLedger,
}

/// Ingress channel of a write under the strict ledger.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StrictChannel {
    /// An agent's own output.
    AgentOutput,
    /// A message from a peer.
    PeerMessage,
    /// The user's trusted history.
    UserHistory,
    /// An external write (the default for direct memory writes, so all poison).
    External,
    /// Unknown provenance.
    Unknown,
}

impl StrictChannel {
    /// The channel's name as the ledger writes it into `source_type`.
    pub fn source_type(self) -> &'static str {
        match self {
            StrictChannel::AgentOutput => "agent_output",
            StrictChannel::PeerMessage => "peer_message",
            StrictChannel::UserHistory => "longmemeval_user_history_seed",
            StrictChannel::External => "external",
            StrictChannel::Unknown => "unknown",
        }
    }

    /// The taint the channel itself adds, if any.
    pub fn taint(self) -> Option<Taint> {
        match self {
            StrictChannel::External => Some(Taint::External),
            StrictChannel::Unknown => Some(Taint::Unverified),
            _ => None,
        }
    }
}

/// Replaces an entry's metadata by the strict ledger view (spec §3.6, C8): the writer's values
/// do not survive.
pub fn apply_strict_view(
    item: &mut MemoryItem,
    channel: StrictChannel,
    taint: Taint,
    readers: Vec<u32>,
    parent_ids: Vec<String>,
    requested: Scope,
) {
    item.source_type = channel.source_type().into();
    item.memory_type =
        if channel == StrictChannel::UserHistory { "user_history" } else { "episodic_experience" }.into();
    item.taint = taint;
    item.trust = 0.5;
    item.source_agent_trust = 0.5;
    item.hazard = 0.0;
    item.utility_q = 0.0;
    item.backend_q = 0.0;
    item.success_count = 0;
    item.failure_count = 0;
    item.allowed_agents = readers;
    item.allowed_task_classes = Vec::new();
    item.set_parents(parent_ids.into_iter().map(Into::into).collect());
    item.scope = requested;
    item.status = Status::Active;
}

/// Which outcome feedback is applied (spec §4).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum FeedbackPolicy {
    /// Q, τ/h, counts and reputation all learn.
    #[default]
    Full,
    /// Q frozen; τ/h, counts and reputation learn.
    NoQ,
    /// No updates at all; self-outcome memories carry no gold answer.
    None,
}

/// Constants of the outcome update (spec §4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutcomeParams {
    /// Q ← (1 − α)·Q + α·r on the entry.
    pub q_alpha: f64,
    /// τ step on success.
    pub trust_up: f64,
    /// h step down on success.
    pub hazard_down: f64,
    /// τ step down on failure.
    pub trust_down: f64,
    /// h step up on failure.
    pub hazard_up: f64,
    /// MemRL backend: Q_b ← (1 − α_b)·Q_b + α_b·r, then the entry takes Q_b.
    pub backend_alpha: f64,
    /// Whether the MemRL backend value update runs (policy `full` only).
    pub backend_update: bool,
    /// Whether the backend's in-memory Q cache is refreshed by a value update (spec §4 step 3).
    pub backend_cache: BackendQCache,
    /// Team reputation step after a correct task.
    pub reputation_up: f64,
    /// Team reputation step after a wrong task.
    pub reputation_down: f64,
}

impl Default for OutcomeParams {
    fn default() -> Self {
        OutcomeParams {
            q_alpha: 0.2,
            trust_up: 0.03,
            hazard_down: 0.02,
            trust_down: 0.05,
            hazard_up: 0.05,
            backend_alpha: 0.1,
            backend_update: true,
            backend_cache: BackendQCache::Stale,
            reputation_up: 0.015,
            reputation_down: 0.020,
        }
    }
}

/// What the MemRL backend's in-memory Q cache does when a value update is persisted (spec §4
/// step 3). The reference's single-update call writes the new value to the store and to the
/// entry but does not refresh the cache, "so later retrieval rankings may see stale Q" (spec §4,
/// inferred from the code). [`MemoryItem::backend_q`] is that cache: every ranking (the
/// backend's hybrid top-k, the pre-scores) reads it; the entry's `utility_q` is what the core
/// score S(m, q) reads.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum BackendQCache {
    /// Never refreshed: the cache keeps the value the item was indexed with, and each update
    /// computes Q_b ← (1 − α_b)·Q_b + α_b·r from that cached value (the backend reads its own
    /// in-memory value), so the entry's Q is one step from the indexed value, whichever way the
    /// last outcome went. The reference does not record whether the update reads the cache or
    /// the persisted value; this reading is the one under which the published AppWorld No
    /// Defense rows are reachable at all (see README, "Calibration").
    #[default]
    Stale,
    /// Refreshed on every update: Q_b accumulates and rankings see the current value.
    Refreshed,
}

/// One outcome update of a used memory (spec §4 steps 1–3; C4: called once per selecting agent).
pub fn apply_outcome(
    item: &mut MemoryItem,
    success: bool,
    policy: FeedbackPolicy,
    mode: ProvenanceMode,
    params: &OutcomeParams,
    cfg: &MapleConfig,
) {
    if policy == FeedbackPolicy::None {
        return;
    }
    let r = if success { 1.0 } else { -1.0 };
    if policy == FeedbackPolicy::Full {
        item.utility_q = (1.0 - params.q_alpha) * item.utility_q + params.q_alpha * r;
    }
    if success {
        item.success_count += 1;
        item.trust = (item.trust + params.trust_up).min(1.0);
        item.hazard = (item.hazard - params.hazard_down).max(0.0);
    } else {
        item.failure_count += 1;
        item.trust = (item.trust - params.trust_down).max(0.0);
        item.hazard = (item.hazard + params.hazard_up).min(1.0);
    }
    if mode == ProvenanceMode::Recomputed {
        derive_provenance(item, cfg);
    }
    if policy == FeedbackPolicy::Full && params.backend_update {
        let updated = (1.0 - params.backend_alpha) * item.backend_q + params.backend_alpha * r;
        item.utility_q = updated;
        if params.backend_cache == BackendQCache::Refreshed {
            item.backend_q = updated;
        }
    }
}
