//! The A-MemGuard proxy the paper ran (`pure_a_memguard_memrl`, spec §8; literature.md §2.4):
//! consensus over the answer keys of a read's candidates plus a lesson store.
//!
//! At read, a candidate is blocked when it resembles a lesson (token overlap ≥ 0.62), when most
//! other keyed candidates disagree with it (conflict ≥ 0.60 and support ≤ 0.40), or when its key
//! dominates the read (cluster share ≥ 0.75) with no other candidate supporting it; surviving
//! candidates lose 0.70 × their lesson similarity. Items blocked for disagreement become lessons.
//! At write it quarantines experiences that report a failure, and at promotion anything that
//! resembles a lesson (≥ 0.70). It therefore fails when the poison is the majority of the
//! candidates (cluster flooding) and succeeds when it is a minority.

use super::decision::{Action, Decision, Reader};
use super::{CommitVerdict, Guard, GuardStage, ReadVerdict, baseline_score};
use crate::memory::{MemoryItem, Scope, Status};
use crate::text::{QueryFeatures, Sym, token_overlap};
use serde::{Deserialize, Serialize};

/// The A-MemGuard proxy in the guard registry.
pub const KIND: super::Kind<AMemGuardConfig> = super::Kind {
    name: |_| "pure_a_memguard_memrl",
    validate: |c| if c.max_lessons == 0 { Err(("max_lessons".into(), "at least 1".into())) } else { Ok(()) },
    build: |c, name, _| Box::new(AMemGuard::new(name, c.clone())),
    judge: None,
};

/// The proxy's thresholds (the reference's values are the defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AMemGuardConfig {
    /// Lesson similarity that blocks a read.
    pub read_lesson_block: f64,
    /// Lesson similarity that quarantines a promotion.
    pub promotion_lesson_block: f64,
    /// Conflict at or above which a weakly supported candidate is blocked …
    pub conflict_block: f64,
    /// … when its support is at most this.
    pub support_max: f64,
    /// Cluster share at or above which an unsupported candidate is blocked.
    pub cluster_block: f64,
    /// Score penalty per unit of lesson similarity.
    pub lesson_penalty: f64,
    /// β of the base score sim + β·Q.
    pub beta_q: f64,
    /// Lessons kept (oldest dropped first).
    pub max_lessons: usize,
}

impl Default for AMemGuardConfig {
    fn default() -> Self {
        AMemGuardConfig {
            read_lesson_block: 0.62,
            promotion_lesson_block: 0.70,
            conflict_block: 0.60,
            support_max: 0.40,
            cluster_block: 0.75,
            lesson_penalty: 0.70,
            beta_q: 0.8,
            max_lessons: 256,
        }
    }
}

/// The A-MemGuard proxy with its lesson store.
#[derive(Clone, Debug)]
pub struct AMemGuard {
    name: String,
    cfg: AMemGuardConfig,
    lessons: std::collections::VecDeque<Vec<Sym>>,
}

impl AMemGuard {
    /// The proxy with `cfg`, reported under `name`.
    pub fn new(name: &str, cfg: AMemGuardConfig) -> Self {
        AMemGuard { name: name.into(), cfg, lessons: Default::default() }
    }

    /// Highest token overlap of `item` with a stored lesson (0 without lessons).
    pub fn lesson_similarity(&self, item: &MemoryItem) -> f64 {
        let tokens = item.features.tokens.get();
        self.lessons.iter().map(|l| token_overlap(l, tokens)).fold(0.0, f64::max)
    }

    /// Lessons stored so far.
    pub fn lessons(&self) -> usize {
        self.lessons.len()
    }
}

impl Guard for AMemGuard {
    fn name(&self) -> &str {
        &self.name
    }

    fn stage(&self) -> GuardStage {
        GuardStage::Memory
    }

    fn commit(&self, item: &mut MemoryItem, requested: Scope) -> CommitVerdict {
        let mut v = CommitVerdict::allow(requested);
        if item.features.reports_failure {
            item.status = Status::Quarantined;
            v.write = Some(Decision::new(Action::Quarantine, "amem_failed_experience"));
            return v;
        }
        if requested == Scope::Team {
            let d = if self.lesson_similarity(item) >= self.cfg.promotion_lesson_block {
                item.status = Status::Quarantined;
                Decision::new(Action::Quarantine, "amem_lesson_match")
            } else {
                Decision::new(Action::Allow, "amem_no_lesson")
            };
            v.promotion = Some(d);
        }
        v
    }

    fn score_is_pure(&self) -> bool {
        // Lessons learnt during a task change later scores.
        false
    }

    fn score(
        &self,
        item: &MemoryItem,
        _query: &QueryFeatures,
        sim: f64,
        cluster: super::Cluster,
        _reader: Reader<'_>,
    ) -> ReadVerdict {
        let mut v = baseline_score(item, sim, self.cfg.beta_q);
        if v.blocked.is_some() {
            return v;
        }
        let c = &self.cfg;
        let lesson = self.lesson_similarity(item);
        v.score -= c.lesson_penalty * lesson;
        let keyed = item.features.answer_key.is_some();
        v.blocked = if lesson >= c.read_lesson_block {
            Some("amem_lesson_match")
        } else if keyed && cluster.conflict() >= c.conflict_block && cluster.support() <= c.support_max {
            Some("amem_consensus_conflict")
        } else if keyed && cluster.share >= c.cluster_block && cluster.support() <= 0.0 {
            // Literally as the proxy states it; with support counted over the other keyed
            // candidates this fires for a keyed candidate that no other candidate corroborates.
            Some("amem_unsupported_cluster")
        } else {
            None
        };
        v
    }

    fn observe_read_blocks(&mut self, blocked: &[(&MemoryItem, &'static str)]) {
        for (item, reason) in blocked {
            if matches!(*reason, "amem_consensus_conflict" | "amem_unsupported_cluster") {
                if self.lessons.len() == self.cfg.max_lessons {
                    self.lessons.pop_front();
                }
                self.lessons.push_back(item.features.tokens.get().to_vec());
            }
        }
    }
}
