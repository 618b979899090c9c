//! Composition: several guards applied together (PIGuard + MAPLE-Guard is the paper's study).
//!
//! Writes pass through every guard in order and stop at the first that stops them; a read is
//! blocked if any guard blocks it and is ranked by the first memory guard's score; the broker
//! blocks if any guard's broker does; messages go through every message guard in order, each
//! seeing the previous one's edits. Metadata and the backend pre-score come from the first guard
//! that has them.

use super::MetadataRules;
use super::decision::{Action, Decision, Reader};
use super::{Cluster, CommitVerdict, Guard, GuardStage, MessageAction, MessageView, ReadVerdict};
use crate::engine::SimRng;
use crate::memory::{MemoryItem, MemoryTopology, PrescoreInput, Scope};
use crate::text::QueryFeatures;
use crate::topology::CommGraph;

/// Guards applied together.
pub struct GuardStack {
    name: String,
    guards: Vec<Box<dyn Guard>>,
}

impl GuardStack {
    /// The composition of `guards`, in order.
    pub fn new(name: &str, guards: Vec<Box<dyn Guard>>) -> Self {
        GuardStack { name: name.into(), guards }
    }

    /// Index of the guard whose score ranks reads: a MAPLE-style scorer if present, otherwise
    /// the first memory guard.
    fn ranker_index(&self) -> Option<usize> {
        self.guards
            .iter()
            .position(|g| g.metadata_rules().is_some())
            .or_else(|| self.guards.iter().position(|g| g.stage() == GuardStage::Memory))
    }

    fn ranker(&self) -> Option<&dyn Guard> {
        self.ranker_index().map(|i| self.guards[i].as_ref())
    }
}

impl Guard for GuardStack {
    fn name(&self) -> &str {
        &self.name
    }

    fn stage(&self) -> GuardStage {
        let stages: Vec<GuardStage> = self.guards.iter().map(|g| g.stage()).collect();
        if stages.contains(&GuardStage::Memory) {
            GuardStage::Memory
        } else if stages.contains(&GuardStage::Message) {
            GuardStage::Message
        } else {
            GuardStage::Nothing
        }
    }

    fn metadata_rules(&self) -> Option<&MetadataRules> {
        self.guards.iter().find_map(|g| g.metadata_rules())
    }

    fn frames_memories_as_evidence(&self) -> bool {
        self.guards.iter().any(|g| g.frames_memories_as_evidence())
    }

    fn commit(&self, item: &mut MemoryItem, requested: Scope) -> CommitVerdict {
        let mut verdict = CommitVerdict::allow(requested);
        for g in &self.guards {
            let v = g.commit(item, requested);
            verdict.rewritten |= v.rewritten;
            // Keep the first decision of each gate that stopped or acted; else the last one seen.
            let acted = |d: &Option<Decision>| d.is_some_and(|d| d.action != Action::Allow);
            if v.write.is_some() && !acted(&verdict.write) {
                verdict.write = v.write;
            }
            if v.promotion.is_some() && !acted(&verdict.promotion) {
                verdict.promotion = v.promotion;
            }
            if !item.is_active() {
                break;
            }
        }
        verdict
    }

    fn full_pool(&self) -> bool {
        self.ranker().is_some_and(|g| g.full_pool())
    }

    fn backend_order_pool(&self) -> bool {
        self.ranker().is_some_and(|g| g.backend_order_pool())
    }

    fn prescore(&self, input: PrescoreInput, sim: f64) -> f64 {
        match self.ranker() {
            Some(g) => g.prescore(input, sim),
            None => sim + 0.8 * input.backend_q,
        }
    }

    fn broker(&self, item: &MemoryItem, reader: Reader<'_>, topology: MemoryTopology) -> Decision {
        let mut last = Decision::new(Action::Allow, "no_broker");
        for g in &self.guards {
            let d = g.broker(item, reader, topology);
            if d.action == Action::Block {
                return d;
            }
            last = d;
        }
        last
    }

    fn score_is_pure(&self) -> bool {
        self.guards.iter().all(|g| g.score_is_pure())
    }

    fn score(
        &self,
        item: &MemoryItem,
        query: &QueryFeatures,
        sim: f64,
        cluster: Cluster,
        reader: Reader<'_>,
    ) -> ReadVerdict {
        let ranker = self.ranker_index();
        let ranked = match ranker {
            Some(i) => self.guards[i].score(item, query, sim, cluster, reader),
            None => super::baseline_score(item, sim, 0.8),
        };
        if ranked.blocked.is_some() {
            return ranked;
        }
        let others =
            self.guards.iter().enumerate().filter(|(i, g)| Some(*i) != ranker && g.stage() == GuardStage::Memory);
        for (_, g) in others {
            if let Some(reason) = g.score(item, query, sim, cluster, reader).blocked {
                return ReadVerdict { score: ranked.score, blocked: Some(reason) };
            }
        }
        ranked
    }

    fn min_score(&self) -> Option<f64> {
        self.ranker().and_then(|g| g.min_score())
    }

    fn observe_read_blocks(&mut self, blocked: &[(&MemoryItem, &'static str)]) {
        self.guards.iter_mut().for_each(|g| g.observe_read_blocks(blocked));
    }

    fn begin_task(&mut self, agents: u32) {
        self.guards.iter_mut().for_each(|g| g.begin_task(agents));
    }

    fn reviews_messages(&self) -> bool {
        self.guards.iter().any(|g| g.reviews_messages())
    }

    fn review_messages(
        &mut self,
        round: u32,
        views: &mut [MessageView],
        graph: &CommGraph,
        rng: &mut SimRng,
    ) -> Vec<MessageAction> {
        let mut actions = Vec::new();
        for g in self.guards.iter_mut().filter(|g| g.reviews_messages()) {
            actions.extend(g.review_messages(round, views, graph, rng));
        }
        actions
    }
}
