//! End of a task: the final vote, outcome updates, outcome memories and promotion (spec §4, §5.3).

use super::*;

impl World<'_> {
    /// Final vote, outcome updates, outcome memories, promotion (spec §4, §5.3).
    pub(super) fn finish(&mut self, task: u32) {
        let mut proto = self.scn.protocol.clone();
        proto.feedback = self.feedback;
        let last = proto.rounds as usize - 1;
        let n = self.scn.agents;
        let wl = self.workload.clone();
        let t = &wl.tasks()[task as usize];
        let truth = wl.truth(task);
        let st = self.cur.take().expect("task");
        let mut votes = vec![0u32; t.options.len()];
        for a in 0..n {
            // Open-ended answers are adjudicated from the non-attackers' consensus (spec §5.5).
            if (proto.exclude_attackers_from_vote || t.open_ended) && self.is_attacker[a as usize] {
                continue;
            }
            if st.removed[last][a as usize] {
                continue;
            }
            if let Some(ans) = st.answers[last][a as usize] {
                votes[ans.choice as usize] += 1;
            }
        }
        let final_answer = if votes.iter().all(|v| *v == 0) {
            None
        } else if t.open_ended {
            // The adjudicator weighs trusted evidence first: a candidate that the user-history
            // rounds the benign agents retrieved point to, if any benign agent gave it; else the
            // normalised-text majority, ties to the shortest answer, then the first.
            let best = *votes.iter().max().expect("options");
            match self.trusted_evidence(&st, last) {
                Some(e) if votes[e as usize] > 0 => Some(e),
                _ => (0..votes.len())
                    .filter(|i| votes[*i] == best)
                    .min_by_key(|i| (t.options[*i].len(), *i))
                    .map(|i| i as u8),
            }
        } else {
            // Ties go to the alphabetically smallest letter.
            let best = *votes.iter().max().expect("options");
            votes.iter().position(|v| *v == best).map(|i| i as u8)
        };
        let success = final_answer == Some(truth.gold);
        self.trace.u64(u64::from(final_answer.unwrap_or(255)));
        // Outcome updates: once per (agent, selected memory) of the last round (spec C4).
        if proto.feedback != FeedbackPolicy::None {
            for a in 0..n as usize {
                for (id, _) in &st.selected[last][a] {
                    let item = self.bank.get_mut(*id);
                    // Trusted user history is not updated by outcomes (spec §5.5).
                    if item.status == Status::Active && item.writer != Writer::User {
                        self.meta.apply_outcome(item, success, proto.feedback, proto.provenance, &proto.outcome);
                        self.bank.sync_backend_q(*id);
                    }
                }
            }
            let step = if success { proto.outcome.reputation_up } else { -proto.outcome.reputation_down };
            self.reputation = (self.reputation + step).clamp(0.0, 1.0);
        }
        if proto.outcome_memories {
            for a in 0..n {
                if self.is_attacker[a as usize] {
                    continue;
                }
                // A removed or replaced output leaves no answer to consolidate.
                if st.removed[last][a as usize] {
                    continue;
                }
                let Some(ans) = st.answers[last][a as usize] else { continue };
                let (intent, parts) = render::outcome_parts(t, a, ans.choice, truth.gold, proto.feedback);
                let parts: Vec<(&str, Option<&str>)> = parts.iter().map(|(t, c)| (t.as_str(), c.as_deref())).collect();
                let (experience, features) = self.composed(&intent, &parts);
                let name = format!("benign_stream_{task}_{}_agent_{a}", t.id);
                let mut item = MemoryItem::new(name, intent.into(), experience, features);
                let correct = ans.choice == truth.gold;
                if proto.feedback == FeedbackPolicy::None {
                    item.source_type = "agent_self_unverified_consolidation".into();
                    item.memory_type = "agent_unverified_experience".into();
                    item.utility_q = 0.0;
                    item.trust = 0.5;
                    item.hazard = 0.15;
                    item.taint = Taint::Unverified;
                } else {
                    item.source_type = "agent_self_outcome_consolidation".into();
                    item.memory_type = "agent_outcome_experience".into();
                    // LongMemEval's open-QA variant differs slightly (spec §1.1).
                    let open = t.open_ended;
                    item.utility_q = if correct {
                        0.65
                    } else if open {
                        -0.20
                    } else {
                        -0.25
                    };
                    item.trust = if correct { 0.78 } else { 0.42 };
                    item.hazard = if correct { if open { 0.04 } else { 0.05 } } else { 0.18 };
                    item.taint = if correct { Taint::Clean } else { Taint::Unverified };
                }
                item.origin_task = task;
                item.origin_round = last as u32;
                item.writer = Writer::Agent(a);
                item.allowed_agents = vec![a];
                item.allowed_task_classes = vec![t.class.to_string()];
                item.set_parents(vec![t.id.as_str().into()]);
                item.source_agent_trust = 0.5;
                let label = self.ledger_label(&st, a, None, last);
                self.commit(WriteRequest::new(
                    item,
                    Scope::Private,
                    a,
                    StrictChannel::AgentOutput,
                    label,
                    Route::Outcome,
                ));
            }
        }
        self.promote(t, &st, final_answer, success);
        self.sleeper_outcome(&st, truth.gold);
        self.recorder.end_task(&self.oracle, task, final_answer, t.poisoning, t.metric);
        drop(st);
        self.release_evicted();
    }

    /// Under a store capacity, releases what the task evicted or rejected (nothing refers to it
    /// once the task has finished, under lockstep timing) and forgets what the world cached
    /// about it.
    fn release_evicted(&mut self) {
        if self.bank.capacity().is_none() {
            return;
        }
        let freed = self.bank.release();
        if freed.is_empty() {
            return;
        }
        let gone: rustc_hash::FxHashSet<ItemId> = freed.into_iter().collect();
        self.shown_embeddings
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|id, _| !gone.contains(id));
        self.history_overlap.retain(|id, _| !gone.contains(id));
        self.texts.body_texts.retain(|(id, _), _| !gone.contains(id));
        self.forget_sleepers(&gone);
    }

    /// The one candidate answer the trusted user-history rounds selected by benign agents in
    /// round `last` point to, if they point to exactly one.
    pub(super) fn trusted_evidence(&self, st: &TaskState, last: usize) -> Option<u8> {
        let mut found: Option<u8> = None;
        for a in (0..self.scn.agents as usize).filter(|a| !self.is_attacker[*a]) {
            for (id, _) in &st.selected[last][a] {
                let it = self.bank.get(*id);
                if it.writer != Writer::User {
                    continue;
                }
                if let Some(c) = crate::agent::mentioned(&it.features, &st.option_tokens) {
                    if found.is_some_and(|f| f != c) {
                        return None;
                    }
                    found = Some(c);
                }
            }
        }
        found
    }

    pub(super) fn promote(&mut self, t: &Task, st: &TaskState, final_answer: Option<u8>, success: bool) {
        let proto = &self.scn.protocol;
        let promo = proto.promotion.clone();
        if self.scn.memory_topology == MemoryTopology::PrivateOnly || promo.rate <= 0.0 {
            return;
        }
        if promo.policy != PromotionPolicy::AcceptedRetrievedPrivate
            && self.feedback != FeedbackPolicy::None
            && !success
        {
            return;
        }
        let last = proto.rounds as usize - 1;
        let mut rng = self.streams.rng(StreamKind::Promotion, &[u64::from(t.index)]);
        if !rng.bernoulli(promo.rate) {
            return;
        }
        let strict = proto.provenance == ProvenanceMode::StrictLedger;
        let eligible: Vec<u32> = (0..self.scn.agents)
            .filter(|a| {
                (strict && self.scn.protocol.routing.promote_attackers_in_strict) || !self.is_attacker[*a as usize]
            })
            .filter(|_| self.reputation >= promo.min_agent_trust)
            .filter(|a| {
                // What the agent retrieved in any round (`agent_retrieved_memory_ids`).
                let mut sel = st.selected.iter().flat_map(|r| r[*a as usize].iter());
                let own_private =
                    sel.clone().any(|(id, _)| self.bank.location(*id) == crate::memory::StoreKind::Private(*a));
                match promo.policy {
                    PromotionPolicy::SuccessOnly => true,
                    PromotionPolicy::RetrievedAny => sel.next().is_some(),
                    PromotionPolicy::RetrievedPrivate => own_private,
                    PromotionPolicy::AcceptedRetrievedPrivate => {
                        own_private && st.answers[last][*a as usize].map(|x| x.choice) == final_answer
                    }
                }
            })
            .collect();
        if eligible.is_empty() {
            return;
        }
        let chosen: Vec<u32> = if promo.all_agents { eligible } else { vec![eligible[rng.index(eligible.len())]] };
        for a in chosen {
            let Some(ans) = st.answers[last][a as usize] else { continue };
            // The ids the agent retrieved in any round of the task, sorted as the reference's
            // `sorted(agent_retrieved_memory_ids(…))` sorts them; the lineage keeps eight.
            let mut retrieved: Vec<String> = st
                .selected
                .iter()
                .flat_map(|r| r[a as usize].iter().map(|(id, _)| self.bank.get(*id).name.clone()))
                .collect();
            retrieved.sort();
            retrieved.dedup();
            self.note_promotion(t.index, &retrieved);
            let sel: Vec<String> = retrieved.iter().take(8).cloned().collect();
            let (intent, experience) = render::promotion_text(t, a, ans.choice, final_answer, &retrieved);
            let features = self.features(&intent, &experience);
            let name = format!("benign_stream_team_{}_agent_{a}", t.id);
            let mut item = MemoryItem::new(name, intent.into(), experience, features);
            let rep = self.reputation;
            item.utility_q = if Some(ans.choice) == final_answer { 0.70 } else { 0.55 };
            item.trust = rep.max(0.55);
            item.hazard = 0.08;
            item.taint = if rep >= 0.5 { Taint::Clean } else { Taint::Unverified };
            item.source_type = format!("benign_shared_promotion_{}", policy_name(promo.policy)).into();
            item.memory_type = "team_promoted_agent_experience".into();
            item.origin_task = t.index;
            item.writer = Writer::Agent(a);
            item.allowed_agents = (0..self.scn.agents).collect();
            item.allowed_task_classes = vec![t.class.to_string()];
            let mut parents: Vec<Arc<str>> =
                vec![t.id.as_str().into(), format!("agent_{a}").into(), "benign_shared_promotion".into()];
            parents.extend(sel.iter().map(|p| p.as_str().into()));
            item.set_parents(parents);
            item.source_agent_trust = rep;
            let mut label = self.ledger_label(st, a, None, last);
            if self.scn.protocol.routing.ledger_inputs == LedgerInputs::LastRound {
                // memlink before the fidelity pass named the promoted selection as lineage.
                label.parents = sel;
            }
            self.commit(WriteRequest::new(item, Scope::Team, a, StrictChannel::AgentOutput, label, Route::Promotion));
        }
    }
}

fn policy_name(p: PromotionPolicy) -> &'static str {
    match p {
        PromotionPolicy::SuccessOnly => "success_only",
        PromotionPolicy::RetrievedAny => "retrieved_any",
        PromotionPolicy::RetrievedPrivate => "retrieved_private",
        PromotionPolicy::AcceptedRetrievedPrivate => "accepted_retrieved_private",
    }
}
