//! PIGuard (spec §8, literature.md §2.6): a prompt-injection text classifier. `Retrieval` screens
//! each retrieved memory (intent and experience); `Lifecycle` also screens every write —
//! promotions and handoff transfers included, since those are writes here.
//!
//! The classifier is a [`DetectorParams`] score whose noise is a fixed function of the text, so
//! one text always gets one verdict, as a trained model's would. Its defaults are first guesses
//! from the literature: about 5% false positives on plain text and about 13% on benign text with
//! two trigger words (NotInject over-defence accuracy 87.3%); near-certain detection of
//! imperative injections ("ignore previous instructions", "do not verify"); a modest response to
//! experience-shaped poison (MINJA bridges, MemoryGraft records), which has no injection surface.

use super::decision::{Action, Decision, Reader};
use super::detector::{DetectorParams, Observed};
use super::{CommitVerdict, Guard, GuardStage, ReadVerdict, baseline_score};
use crate::embed::Embedder;
use crate::memory::{MemoryItem, Scope, Status};
use crate::text::QueryFeatures;
use serde::{Deserialize, Serialize};

/// PIGuard in the guard registry.
pub const KIND: super::Kind<PiGuardConfig> = super::Kind {
    name: |c| match c.mode {
        PiGuardMode::Retrieval => "piguard_retrieval",
        PiGuardMode::Lifecycle => "piguard_lifecycle",
    },
    validate: |c| c.classifier.check(),
    build: |c, name, _| Box::new(PiGuard::new(name, c.clone())),
    judge: None,
};

/// Where PIGuard screens.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PiGuardMode {
    /// Retrieved memories only (`piguard_retrieval`).
    Retrieval,
    /// Writes (including promotions and transfers) and retrievals (`piguard_lifecycle`).
    Lifecycle,
}

/// PIGuard's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PiGuardConfig {
    /// Where it screens.
    pub mode: PiGuardMode,
    /// The classifier (flags when its score is > 0, i.e. injection probability > 0.5). Fields
    /// left out keep PIGuard's defaults, not the generic detector's.
    #[serde(deserialize_with = "classifier_over_defaults")]
    pub classifier: DetectorParams,
    /// β of the undefended read score sim + β·Q it leaves unchanged.
    pub beta_q: f64,
}

impl Default for PiGuardConfig {
    fn default() -> Self {
        PiGuardConfig {
            mode: PiGuardMode::Retrieval,
            classifier: DetectorParams {
                bias: -1.6,
                instruction: 0.25,
                imperative: 3.5,
                self_claim: 0.1,
                answer_binding: 0.15,
                rare_trigger: 3.0,
                dissent: 0.0,
                noise_sd: 1.0,
            },
            beta_q: 0.8,
        }
    }
}

/// A written classifier over PIGuard's default one.
fn classifier_over_defaults<'de, D: serde::Deserializer<'de>>(d: D) -> Result<DetectorParams, D::Error> {
    Ok(super::detector::DetectorOverrides::deserialize(d)?.over(PiGuardConfig::default().classifier))
}

/// PIGuard.
#[derive(Clone, Debug)]
pub struct PiGuard {
    name: String,
    cfg: PiGuardConfig,
}

impl PiGuard {
    /// PIGuard with `cfg`, reported under `name`.
    pub fn new(name: &str, cfg: PiGuardConfig) -> Self {
        PiGuard { name: name.into(), cfg }
    }

    /// The classifier's verdict on an item's text (intent + "\n" + experience).
    pub fn flags(&self, item: &MemoryItem) -> bool {
        let key = Embedder::text_key(&item.intent) ^ Embedder::text_key(&item.experience).rotate_left(17);
        self.cfg.classifier.flags_fixed(&Observed::of(&item.features), key)
    }
}

impl Guard for PiGuard {
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
        if self.cfg.mode == PiGuardMode::Lifecycle && self.flags(item) {
            item.status = Status::Rejected;
            v.write = Some(Decision::new(Action::Reject, "piguard_injection"));
        }
        v
    }

    /// The verdict never depends on the reader (the classifier reads the item's text, the score
    /// its metadata and similarity): one verdict per item and task serves every reader, so the
    /// classifier's text hash runs once per candidate and task instead of once per agent.
    fn score_reader_key(&self, _item: &MemoryItem, _reader: Reader<'_>) -> u64 {
        0
    }

    fn score(
        &self,
        item: &MemoryItem,
        _query: &QueryFeatures,
        sim: f64,
        _cluster: super::Cluster,
        _reader: Reader<'_>,
    ) -> ReadVerdict {
        let mut v = baseline_score(item, sim, self.cfg.beta_q);
        if v.blocked.is_none() && self.flags(item) {
            v.blocked = Some("piguard_injection");
        }
        v
    }
}
