//! Task arrival: per-agent knowledge, evaluator truth, the trusted haystack, the attack's writes.

use super::*;

impl World<'_> {
    /// A task arrives: per-agent knowledge, evaluator truth, the attack's writes.
    pub(super) fn arrive(&mut self, task: u32) {
        let n = self.scn.agents as usize;
        let rounds = self.scn.protocol.rounds as usize;
        let wl = self.workload.clone();
        let t = &wl.tasks()[task as usize];
        let truth = wl.truth(task);
        self.oracle.register_answer(task, truth.gold);
        if let Some(risk) = truth.risk {
            self.oracle.register_risk(task, risk);
        }
        self.recorder.begin_task();
        let priors: Vec<Vec<f64>> = (0..n)
            .map(|a| {
                let mut rng = self.streams.rng(StreamKind::Decision, &[u64::from(task), a as u64, u64::MAX]);
                self.backbone.knowledge(truth, &mut rng)
            })
            .collect();
        // AgentPoison's query activation: once the attack has begun, retrieval queries carry the
        // trigger (spec §6; off in every paper configuration).
        if t.poisoning {
            self.attack_started = true;
        }
        let query_text = match (self.scn.attack.retrieval_trigger(), &self.activation_note) {
            (Some(trigger), _) if self.attack_started => format!("{} {trigger}", t.query),
            (None, Some(note)) => format!("{} {note}", t.query),
            _ => t.query.clone(),
        };
        let query = analyze_query(&query_text, &mut self.lex);
        let query_emb: Arc<[f32]> =
            self.embedder.embed(&query.tokens, Embedder::text_key(&query_text), &self.lex).into();
        let option_tokens: Vec<Vec<Sym>> =
            t.options.iter().map(|o| tokens_of(&o.to_lowercase(), &mut self.lex)).collect();
        let st = TaskState {
            task,
            target: None,
            target_tokens: Arc::from(Vec::new()),
            priors,
            selected: vec![vec![Vec::new(); n]; rounds],
            answers: vec![vec![None; n]; rounds],
            removed: vec![vec![false; n]; rounds],
            unreadable: vec![vec![false; n]; rounds],
            shown: vec![vec![None; n]; rounds],
            shown_hash: if self.sites { vec![vec![[0; 8]; n]; rounds] } else { Vec::new() },
            tokens: vec![vec![0; n]; rounds],
            call_time: vec![vec![0; n]; rounds],
            answered: vec![0; rounds],
            finished_rounds: 0,
            query,
            query_emb,
            option_tokens,
            group_sims: vec![Vec::new(); n + 1],
            intent_sims: Vec::new(),
            store_cache: (0..=n).map(|_| StoreCache::default()).collect(),
            task_items: Vec::new(),
            task_item_sims: Vec::new(),
            key_tokens: HashMap::default(),
            received: vec![None; n],
        };
        // A new query: every cached similarity and verdict is stale.
        self.memo_stamp += 1;
        self.guard.begin_task(self.scn.agents);
        self.cur = Some(st);
        self.preload_history(task);
        let mut st = self.cur.take().expect("task");
        if t.poisoning
            && !self.attacker_ids.is_empty()
            && let Some(strategy) = self.scn.attack.target_strategy()
        {
            // The attacker plans with its own belief about the answer: the lookahead target is
            // the most plausible option it believes wrong; a workload-designated risky action
            // (AppWorld) is taken as is.
            let lead = self.attacker_ids[0] as usize;
            let believed = argmax(&st.priors[lead]);
            let mut rng = self.streams.rng(StreamKind::Attack, &[u64::from(task)]);
            let target = match (strategy, truth.risk) {
                (crate::attack::TargetStrategy::WorkloadRisk, Some(risk)) => risk,
                _ => {
                    let plaus = attacker_plausibility(&st.priors[lead]);
                    crate::attack::choose_target(strategy, &plaus, believed, &mut rng)
                }
            };
            st.target = Some(target);
            st.target_tokens = st.option_tokens[target as usize].clone().into();
            if let crate::attack::AttackConfig::Minja(m) = &self.scn.attack
                && m.activation
            {
                self.activation_note = Some(m.activation_note(t, target));
            }
            self.targets.insert(task, (target, st.target_tokens.clone()));
            self.cur = Some(st);
            let attack = &self.scn.attack;
            let recomputed = self.scn.protocol.provenance == ProvenanceMode::Recomputed;
            let meta = &self.meta;
            let mut feats = |i: &str, e: &str| analyze(i, e, &mut self.lex);
            let mut derive = |item: &mut MemoryItem| {
                if recomputed {
                    meta.derive(item);
                }
            };
            let dedupe_shared = self.scn.protocol.dedupe_shared_poison;
            let mut hooks = crate::attack::PlanHooks { features: &mut feats, derive: &mut derive, dedupe_shared };
            let writes = attack.plan(t, target, &self.attacker_ids, self.scn.agents, &mut hooks);
            self.commit_planned(writes, task, target);
            return;
        }
        self.cur = Some(st);
    }

    /// Commits task `task`'s user-history haystack (LongMemEval) as trusted shared memory that
    /// bypasses every gate, as the reference's preload does (spec §1.1, §5.5). Under
    /// [`HaystackLayout::Reference`] as `preload_haystack_memories` and `make_haystack_entry`
    /// build it: units that overlap the question, sessions in order of their overlap score
    /// (ties: session order), one intent for the task, Q 0.85 + the 0.12 rerank boost, and the
    /// expanded fact key (question and content) as retrieval key.
    pub(super) fn preload_history(&mut self, task: u32) {
        let wl = self.workload.clone();
        let t = &wl.tasks()[task as usize];
        let units = wl.haystack(task);
        let prepared = wl.prepared_haystack(task);
        let WorkloadConfig::LongMemEval(cfg) = &self.scn.workload else {
            return;
        };
        let reference = cfg.layout == HaystackLayout::Reference;
        let terms = QueryTerms::of(&t.question);
        let scores: Vec<f64> = units.iter().map(|h| terms.score(&h.text)).collect();
        let mut order: Vec<usize> = (0..units.len()).collect();
        if reference {
            // Sessions ranked by their overlap (the sum of their rounds'), then each session's
            // positive rounds in round order; units that share nothing are never committed.
            let mut session_score: std::collections::BTreeMap<u32, f64> = std::collections::BTreeMap::new();
            for (h, s) in units.iter().zip(&scores) {
                *session_score.entry(h.session).or_insert(0.0) += s;
            }
            order.retain(|i| scores[*i] > 0.0);
            order.sort_by(|a, b| {
                let (sa, sb) = (session_score[&units[*a].session], session_score[&units[*b].session]);
                sb.total_cmp(&sa)
                    .then(units[*a].session.cmp(&units[*b].session))
                    .then(units[*a].round.cmp(&units[*b].round))
            });
            if cfg.ties == TieOrder::Newest {
                order.reverse();
            }
        }
        let shared_intent: Arc<str> =
            format!("LongMemEval user history round relevant to question: {}", t.question).into();
        // The heading's canonical text (numbers zeroed: standalone digits form no token and
        // match no pattern) is the key its fragment is cached under.
        let canonical = reference.then(|| render::haystack_heading(0, 0));
        // A retrieval key is its question part (the key's heading, the question, a newline and
        // "Original memory value: ") followed by the unit's content. No word runs across that
        // boundary and lower-casing does not change across it, so the key's tokens are the
        // union of the question part's (once per task) and the content's (from its fragment):
        // known here when every word of the question part is already interned.
        let key_head = if reference {
            known_tokens_of(&render::haystack_retrieval_key(&t.question, "").to_lowercase(), &self.lex)
        } else {
            None
        };
        for i in order {
            let h = &units[i];
            let mut key_tokens = None;
            let (intent, experience, features) = match &canonical {
                // The task's intent and the unit's heading are analysed once, the content once
                // per unit, and their features composed.
                Some(canonical) => {
                    let heading = render::haystack_heading(h.session, h.round);
                    let (experience, features, frags) = self.composed_prepared(
                        &shared_intent,
                        &[(&heading, Some(canonical)), (&h.text, None)],
                        prepared[i].as_ref(),
                    );
                    key_tokens = key_head.as_ref().map(|head| crate::text::union_of(head, frags[1].tokens()));
                    (shared_intent.clone(), experience, features)
                }
                None => {
                    let intent = format!("User history, session {} round {}", h.session, h.round);
                    let features = analyze(&intent, &h.text, &mut self.lex);
                    (intent.into(), h.text.clone(), features)
                }
            };
            let tag = Embedder::text_key(&h.text) & 0xff_ffff_ffff;
            let name = render::haystack_name(t, h.session, i, tag);
            debug_assert_eq!(name, format!("lme_haystack_{}_{}_{}_{tag:010x}_shared", t.id, h.session, i));
            let mut item = MemoryItem::new(name, intent, experience, features);
            item.utility_q = if reference || h.query_matching { 0.97 } else { 0.85 };
            item.trust = 0.90;
            item.hazard = 0.0;
            item.taint = Taint::Clean;
            item.source_type = "longmemeval_user_history_seed".into();
            item.memory_type = "historical_conversation_round".into();
            item.origin_task = task;
            item.writer = Writer::User;
            item.allowed_agents = (0..self.scn.agents).collect();
            item.allowed_task_classes = vec![t.class.clone()];
            item.set_parents(vec![t.id.as_str().into()]);
            item.source_agent_trust = 1.0;
            if reference {
                item.retrieval_key = Some(render::haystack_retrieval_key(&t.question, &h.text));
            }
            let id = self.commit_trusted(item);
            if reference {
                self.history_overlap.insert(id, scores[i]);
            }
            if let Some(tokens) = key_tokens {
                self.cur.as_mut().expect("task").key_tokens.insert(id, tokens);
            }
        }
    }
}

fn argmax(xs: &[f64]) -> u8 {
    let mut best = 0;
    for (i, x) in xs.iter().enumerate() {
        if *x > xs[best] {
            best = i;
        }
    }
    best as u8
}

/// How plausible each option looks to the attacker as a mistake: its own belief, with the
/// option it believes correct zeroed.
fn attacker_plausibility(prior: &[f64]) -> Vec<f64> {
    let b = argmax(prior) as usize;
    prior.iter().enumerate().map(|(i, x)| if i == b { f64::NEG_INFINITY } else { *x }).collect()
}
