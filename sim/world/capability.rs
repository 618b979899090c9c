//! The attacker's what-if capabilities where they need the run (`crate::attack::capability`
//! holds their data and the edits that need nothing else): the shaping of the planned writes
//! (adaptive choice, fragments, sleepers), the routes a write can take besides the direct one
//! (laundering through benign summaries, a compromised summarizer), the forgery and tag of a
//! direct write, and what the run summary reports of them. None of it reads evaluator truth
//! except the sleeper's damage count, which the summary reports beside the metrics.

use super::*;
use crate::attack::capability::{
    AdaptMode, Adaptive, Capability, Laundering, ShapeCx, Sleeper, WORDINGS, accumulation, adaptive, laundering,
    metadata_menu, sleeper, summarizer,
};
use crate::eval::metrics::CapabilityStats;

/// What the capabilities keep across tasks.
#[derive(Clone, Debug, Default)]
pub(super) struct CapState {
    /// The planted sleepers.
    sleepers: Vec<ItemId>,
    /// The task they were planted in.
    planted: Option<u32>,
    /// The black-box attacker's rung on its ladder of variants.
    rung: usize,
    /// The current poisoning task's claim, for a compromised summarizer.
    claim: Option<(u32, String)>,
    /// Damage after activation: (benign answers that read a sleeper and were wrong, benign
    /// answers).
    after: (u64, u64),
    /// What the summary reports.
    pub stats: CapabilityStats,
}

/// One variant of the adaptive attacker's menu.
struct Variant {
    item: MemoryItem,
    label: String,
    persuasion: u32,
    passes: bool,
    risk: f64,
}

impl World<'_> {
    fn caps(&self) -> &[Capability] {
        self.scn.attack.capabilities()
    }

    /// Whether the attacker has any capability (the hot paths skip the rest when not).
    pub(super) fn capstate_active(&self) -> bool {
        !self.caps().is_empty()
    }

    /// Commits the planned poison writes of task `task` (targeting `target`) through the
    /// capabilities the attacker has; with none, each write is committed directly.
    pub(super) fn commit_planned(&mut self, writes: Vec<PoisonWrite>, task: u32, target: u8) {
        if self.caps().is_empty() {
            for w in writes {
                self.commit_poison(w, task, target);
            }
            return;
        }
        let caps = self.caps().to_vec();
        if let Some(w) = writes.first() {
            let f = &w.item.features;
            let t = self.task(task);
            let claim = f
                .claim_sentence
                .as_deref()
                .or(f.claim_phrase.as_deref())
                .map(str::to_string)
                .unwrap_or_else(|| crate::attack::payload::option_phrase(t, target));
            self.capstate.claim = Some((task, claim));
        }
        let mut writes = writes;
        if let Some(a) = adaptive(&caps) {
            writes = writes.into_iter().map(|w| self.adapt(a, w, task, target)).collect();
        }
        if let Some(a) = accumulation(&caps) {
            let wl = self.workload.clone();
            let t = &wl.tasks()[task as usize];
            let mut feats = |i: &str, e: &str| analyze(i, e, &mut self.lex);
            writes = writes.iter().flat_map(|w| a.split(w, t, target, &mut feats)).collect();
            self.capstate.stats.fragments += writes.len() as u64;
        }
        {
            // Every capability's own reshaping step (the identity for those above).
            let wl = self.workload.clone();
            let mut feats = |i: &str, e: &str| analyze(i, e, &mut self.lex);
            let mut cx = ShapeCx {
                task: &wl.tasks()[task as usize],
                target,
                features: &mut feats,
                counts: &mut self.capstate.stats.counts,
            };
            for c in &caps {
                writes = c.shape(writes, &mut cx);
            }
        }
        if let Some(s) = sleeper(&caps) {
            self.sleep(s, writes, task, target);
            return;
        }
        if summarizer(&caps).is_some_and(|s| !s.keep_direct) {
            return;
        }
        let launder = laundering(&caps).cloned();
        let black_box = adaptive(&caps).is_some_and(|a| a.mode == AdaptMode::BlackBox);
        for w in writes {
            let stored = match &launder {
                Some(l) => self.launder(l, w, task, target),
                None => self.commit_poison(w, task, target).1 == Status::Active,
            };
            self.capstate.stats.writes += 1;
            self.capstate.stats.stored += u64::from(stored);
            if black_box && !stored {
                // Blocked: one rung down the ladder.
                self.capstate.rung += 1;
            }
        }
    }

    /// The adaptive attacker's choice for write `w` ([`Adaptive`]).
    fn adapt(&mut self, a: &Adaptive, w: PoisonWrite, task: u32, target: u8) -> PoisonWrite {
        // The black-box attacker knows nothing of the guard: its menu is not scored.
        let variants = self.variants(&w, task, target, a.mode == AdaptMode::WhiteBox);
        let eligible: Vec<&Variant> = variants.iter().filter(|v| v.persuasion >= a.persuasion_floor).collect();
        let chosen = match a.mode {
            AdaptMode::WhiteBox => {
                let best = |vs: &mut dyn Iterator<Item = &&Variant>, by_persuasion: bool| -> Option<usize> {
                    let mut best: Option<&Variant> = None;
                    for v in vs {
                        let better = match best {
                            None => true,
                            Some(b) if by_persuasion => {
                                v.persuasion > b.persuasion || v.persuasion == b.persuasion && v.risk < b.risk
                            }
                            Some(b) => v.risk < b.risk,
                        };
                        if better {
                            best = Some(v);
                        }
                    }
                    best.map(|b| variants.iter().position(|v| std::ptr::eq(v, b)).expect("a variant"))
                };
                best(&mut eligible.iter().filter(|v| v.passes), true).or_else(|| best(&mut eligible.iter(), false))
            }
            AdaptMode::BlackBox => {
                // The ladder: most persuasive first, menu order within a level.
                let mut ladder: Vec<usize> =
                    (0..variants.len()).filter(|i| variants[*i].persuasion >= a.persuasion_floor).collect();
                ladder.sort_by_key(|i| std::cmp::Reverse(variants[*i].persuasion));
                ladder.get(self.capstate.rung.min(ladder.len().saturating_sub(1))).copied()
            }
        };
        let Some(i) = chosen else { return w };
        let v = &variants[i];
        *self.capstate.stats.variants.entry(v.label.clone()).or_default() += 1;
        PoisonWrite { item: v.item.clone(), scope: w.scope, owner: w.owner }
    }

    /// The menu of variants of `w`, each with the attacker's persuasion estimate and, when
    /// `score` (the white-box attacker), scored by its own copy of MAPLE-Guard at the paper's
    /// defaults: whether it passes, its risk, and half the persuasion when the copy rewrites it.
    fn variants(&mut self, w: &PoisonWrite, task: u32, target: u8, score: bool) -> Vec<Variant> {
        let wl = self.workload.clone();
        let t = &wl.tasks()[task as usize];
        let benign = (0..self.scn.agents).find(|x| !self.is_attacker[*x as usize]).unwrap_or(0);
        let st = self.cur.take().expect("task");
        let sim = {
            let key = Embedder::text_key(&w.item.intent);
            let tokens = tokens_of(&w.item.intent.to_lowercase(), &mut self.lex);
            let e = self.embedder.embed(&tokens, key, &self.lex);
            cosine(&st.query_emb, &e)
        };
        let mut out = Vec::new();
        for wording in WORDINGS {
            let (intent, experience) =
                Adaptive::reword(wording, &w.item.intent, &w.item.experience, &w.item.features, t, target);
            let features = analyze(&intent, &experience, &mut self.lex);
            let argues = crate::agent::stance(&features, &st.option_tokens).is_some_and(|(o, _)| o == target);
            let persuasion = Adaptive::persuasion(&features, argues);
            for forgery in metadata_menu(crate::attack::capability::ForgeOrder::Rederived) {
                let mut item = w.item.clone();
                item.intent = intent.as_str().into();
                item.experience.clone_from(&experience);
                item.features = features.clone();
                if !forgery.fields.is_empty() {
                    forgery.apply(&mut item, &t.id, benign, self.scn.agents);
                }
                let label = format!("{wording:?}+{}", forgery_label(&forgery.fields));
                if !score {
                    out.push(Variant { item, label, persuasion, passes: false, risk: 0.0 });
                    continue;
                }
                // The attacker's copy of the published guard at the paper's defaults.
                let reader = Reader { agent: benign, task_class: &t.class };
                let probe = crate::guard::maple::published_copy(&item, w.scope, &st.query, sim, reader);
                let persuasion = if probe.rewritten { persuasion / 2 } else { persuasion };
                let (passes, risk) = (probe.passes, probe.risk);
                out.push(Variant { item, label, persuasion, passes, risk });
            }
        }
        self.cur = Some(st);
        out
    }

    /// Sleepers ([`Sleeper`]): planted dormant on the first poisoning task, edited into this
    /// task's payload once active.
    fn sleep(&mut self, s: &Sleeper, writes: Vec<PoisonWrite>, task: u32, target: u8) {
        let wl = self.workload.clone();
        let t = &wl.tasks()[task as usize];
        let Some(planted) = self.capstate.planted else {
            let dormant = Sleeper::dormant_text(t);
            for mut w in writes {
                w.item.experience.clone_from(&dormant);
                w.item.features = analyze(&w.item.intent, &dormant, &mut self.lex);
                let (id, status) = self.commit_poison(w, task, target);
                let stored = status == Status::Active;
                self.capstate.stats.writes += 1;
                self.capstate.stats.stored += u64::from(stored);
                if stored {
                    self.capstate.sleepers.push(id);
                }
            }
            self.capstate.planted = Some(task);
            self.capstate.stats.planted_task = Some(task);
            return;
        };
        if !s.active(planted, task) || writes.is_empty() {
            return;
        }
        if self.capstate.stats.activated_task.is_none() {
            self.capstate.stats.activated_task = Some(task);
            let live: Vec<&MemoryItem> =
                self.capstate.sleepers.iter().map(|id| self.bank.get(*id)).filter(|it| it.is_active()).collect();
            if !live.is_empty() {
                let n = live.len() as f64;
                self.capstate.stats.q_at_activation = Some(live.iter().map(|it| it.utility_q).sum::<f64>() / n);
                self.capstate.stats.successes_at_activation =
                    Some(live.iter().map(|it| f64::from(it.success_count)).sum::<f64>() / n);
            }
        }
        // Each sleeper takes the payload text of the planned write with its scope (the first
        // write when none matches).
        let sleepers = self.capstate.sleepers.clone();
        for id in sleepers {
            if !self.bank.get(id).is_active() {
                continue;
            }
            let scope = self.bank.get(id).scope;
            let w = writes.iter().find(|w| w.scope == scope).unwrap_or(&writes[0]);
            let intent = self.bank.get(id).intent.clone();
            let features = analyze(&intent, &w.item.experience, &mut self.lex);
            self.bank.edit_text(id, w.item.experience.clone(), features);
            self.texts.body_texts.retain(|(i, _), _| *i != id);
            self.capstate.stats.edits += 1;
            self.trace.u64(u64::from(id));
        }
    }

    /// Drops released sleepers (evicted from a full store: the plant is lost).
    pub(super) fn forget_sleepers(&mut self, gone: &rustc_hash::FxHashSet<ItemId>) {
        self.capstate.sleepers.retain(|id| !gone.contains(id));
    }

    /// Notes a promotion of task `task` whose lineage names `retrieved`: the first one that
    /// names a sleeper gives the time to promotion.
    pub(super) fn note_promotion(&mut self, task: u32, retrieved: &[String]) {
        if let (Some(p), None) = (self.capstate.planted, self.capstate.stats.promoted_after) {
            let named = self.capstate.sleepers.iter().any(|id| retrieved.contains(&self.bank.get(*id).name));
            if named {
                self.capstate.stats.promoted_after = Some(task - p);
            }
        }
    }

    /// A sleeper's share of this task's outcome: benign final answers that read an active
    /// sleeper and were wrong, after activation.
    pub(super) fn sleeper_outcome(&mut self, st: &TaskState, gold: u8) {
        if self.capstate.sleepers.is_empty()
            || self.capstate.stats.activated_task.is_none()
            || !self.task(st.task).metric
        {
            return;
        }
        let last = st.answers.len() - 1;
        for a in (0..self.scn.agents as usize).filter(|a| !self.is_attacker[*a]) {
            let Some(ans) = st.answers[last][a] else { continue };
            self.capstate.after.1 += 1;
            let read = st.selected[last][a].iter().any(|(id, _)| self.capstate.sleepers.contains(id));
            self.capstate.after.0 += u64::from(read && ans.choice != gold);
        }
    }

    /// Laundering ([`Laundering`]): `w` relayed through benign summaries along the topology,
    /// the last committed through the manager's own route. Returns whether it was stored.
    fn launder(&mut self, l: &Laundering, w: PoisonWrite, task: u32, target: u8) -> bool {
        let wl = self.workload.clone();
        let t = &wl.tasks()[task as usize];
        let scope_bit = u64::from(w.scope == Scope::Team);
        let mut rng = self.streams.rng(StreamKind::Capability, &[1, u64::from(task), u64::from(w.owner), scope_bit]);
        let (mut features, mut parents, mut name) = (w.item.features.clone(), w.item.parents().to_vec(), w.item.name);
        let (mut intent, mut experience) = (w.item.intent, w.item.experience);
        let mut chain = vec![w.owner];
        let (mut kept_all, mut verbatim_all) = (true, true);
        for hop in 0..l.hops {
            let src = *chain.last().expect("the attacker");
            // The next relay: the lowest-numbered benign neighbour not yet on the chain, else
            // the lowest-numbered benign agent not on it.
            let on_chain = |a: &u32| chain.contains(a);
            let next = self
                .graph
                .out(src)
                .iter()
                .copied()
                .filter(|a| !self.is_attacker[*a as usize] && !on_chain(a))
                .min()
                .or_else(|| (0..self.scn.agents).find(|a| !self.is_attacker[*a as usize] && !on_chain(a)));
            let Some(dst) = next else { break };
            let retention = self.backbone.summarize(&[Reported { features: &features }], None, &mut rng)[0];
            let Some(kind) = render::sentence_kind(&features, retention) else {
                self.capstate.stats.laundering_lost += 1;
                return false;
            };
            verbatim_all &= kind == render::SentenceKind::Verbatim;
            experience = format!(
                "{}{}{}{}",
                render::handoff_header(t, 0, src, dst),
                render::sentence_intro(kind, src),
                render::sentence_body(&features, kind).unwrap_or_default(),
                render::handoff_footer(t)
            );
            intent = match self.scn.protocol.handoff_intent {
                HandoffIntent::SenderReceiver => render::handoff_intent(src, dst),
                HandoffIntent::TaskQuestion => render::handoff_task_intent(t),
            }
            .into();
            features = analyze(&intent, &experience, &mut self.lex);
            let keep = rng.bernoulli(l.parent_retention);
            kept_all &= keep;
            let fresh: Vec<Arc<str>> = vec![
                t.id.as_str().into(),
                self.labels.round_labels[1].clone(),
                self.labels.agent_labels[src as usize].clone(),
                self.labels.agent_labels[dst as usize].clone(),
                "memory_handoff".into(),
            ];
            parents = Laundering::hop_parents(keep, &parents, &name, fresh);
            let tag = crate::engine::mix64(
                u64::from(task) << 40 | u64::from(w.owner) << 20 | u64::from(hop) << 4 | scope_bit,
            );
            name = render::handoff_name(t, 0, src, dst, tag & 0xff_ffff_ffff);
            chain.push(dst);
        }
        let last = *chain.last().expect("the attacker");
        if last == w.owner {
            // No benign agent to relay through.
            self.capstate.stats.laundering_lost += 1;
            return false;
        }
        let mut item = self.summary_item(name, intent, experience, features, t, 0, last);
        if w.scope == Scope::Team {
            item.allowed_agents = (0..self.scn.agents).collect();
        }
        item.set_parents(parents.clone());
        // The strict ledger follows the lineage the hops kept: external while every hop kept
        // it, a peer message's otherwise.
        let mut label = Label::clean();
        if kept_all {
            label.taint = Taint::External;
            label.parents = parents.iter().map(|p| p.to_string()).collect();
        }
        let tokens = self.cur.as_ref().map(|s| s.target_tokens.clone()).unwrap_or_default();
        let record = self.direct_record(task, target, tokens, verbatim_all);
        let (id, _) = self.commit(
            WriteRequest::new(item, w.scope, last, StrictChannel::PeerMessage, label, Route::Handoff)
                .poison(Some(record)),
        );
        self.capstate.stats.laundered += 1;
        self.bank.get(id).is_active()
    }

    /// A compromised summarizer's edit of the handoff summary `experience` that `dst` stores of
    /// `src`'s report on task `task`: the payload's claim sentence, inserted before the footer.
    /// Returns the poison record the summary then carries.
    pub(super) fn compromise_summary(
        &mut self,
        task: u32,
        round: u32,
        src: u32,
        dst: u32,
        experience: &mut String,
    ) -> Option<PoisonRecord> {
        let s = summarizer(self.caps())?.clone();
        let (claim_task, claim) = self.capstate.claim.clone()?;
        if claim_task != task || self.is_attacker[dst as usize] {
            return None;
        }
        let (target, tokens) = self.targets.get(&task)?.clone();
        let mut rng = self
            .streams
            .rng(StreamKind::Capability, &[2, u64::from(task), u64::from(round), u64::from(src), u64::from(dst)]);
        if !rng.bernoulli(s.share) {
            return None;
        }
        let footer = render::handoff_footer(self.task(task));
        let at = experience.rfind(&footer).unwrap_or(experience.len());
        experience.insert_str(at, &crate::attack::capability::SummarizerCompromise::sentence(src, &claim));
        self.capstate.stats.compromised_summaries += 1;
        Some(self.direct_record(task, target, tokens, true))
    }

    /// The attacker's forgery and ledger tag on one direct write
    /// ([`crate::attack::capability`]): forged metadata, and the tag it carries against a
    /// signed ledger (made with a compromised key, copied from an honest record, garbage, or
    /// none).
    pub(super) fn apply_capabilities(
        &mut self,
        item: &mut MemoryItem,
        scope: Scope,
        owner: u32,
    ) -> Option<(crate::attack::capability::Forgery, MemoryItem)> {
        use crate::attack::capability::{TagAttack, forgery, tag_attack};
        let caps = self.scn.attack.capabilities();
        if caps.is_empty() {
            return None;
        }
        item.scope = scope;
        let mut survive = None;
        if let Some(f) = forgery(caps) {
            // The writer a forgery claims: the lowest-numbered agent that is not an attacker.
            let benign = (0..self.scn.agents).find(|a| !self.is_attacker[*a as usize]).unwrap_or(0);
            let task_id = self.task(item.origin_task).id.clone();
            f.apply(item, &task_id, benign, self.scn.agents);
            survive = Some((f.clone(), item.clone()));
        }
        let Some(ledger) = self.ledger.as_ref() else { return survive };
        // The attacker's nonces never collide with the manager's.
        let nonce = (1 << 63) | (self.bank.len() as u64);
        item.tag = match tag_attack(caps) {
            TagAttack::Unsigned => None,
            TagAttack::Garbage => {
                let g = blake3::hash(&nonce.to_le_bytes());
                Some(Box::new(crate::memory::LedgerTag { mac: *g.as_bytes(), nonce }))
            }
            TagAttack::Replay => self.last_signed.map(|id| {
                let honest = self.bank.get(id);
                item.writer = honest.writer;
                item.source_type = honest.source_type.clone();
                item.memory_type = honest.memory_type.clone();
                item.scope = honest.scope;
                item.allowed_agents = honest.allowed_agents.clone();
                item.set_parents(honest.parents().to_vec());
                item.origin_task = honest.origin_task;
                item.origin_round = honest.origin_round;
                honest.tag.clone().expect("a signed item")
            }),
            TagAttack::OwnKey => {
                let key = ledger.key_for(Writer::Agent(owner));
                Some(Box::new(crate::ledger::Ledger::tag_with(&key, item, nonce)))
            }
            TagAttack::SharedKey => {
                let key = ledger.key_for(item.writer);
                Some(Box::new(crate::ledger::Ledger::tag_with(&key, item, nonce)))
            }
        };
        if let Some((_, claimed)) = survive.as_mut() {
            claimed.clone_from(item);
        }
        survive
    }

    /// What the summary reports of the capabilities (`None` when the attacker has none).
    pub(super) fn capability_stats(&mut self) -> Option<CapabilityStats> {
        if self.caps().is_empty() {
            return None;
        }
        let mut stats = std::mem::take(&mut self.capstate.stats);
        if let (Some(p), Some(a)) = (stats.planted_task, stats.activated_task) {
            stats.dormant_window = Some(a - p);
        }
        if let Some(p) = stats.planted_task {
            // Never promoted: censored at the end of the run.
            stats.promoted = stats.promoted_after.is_some();
            let end = self.workload.tasks().len() as u32;
            stats.promoted_after = Some(stats.promoted_after.unwrap_or(end.saturating_sub(p)));
        }
        let (wrong, slots) = self.capstate.after;
        stats.damage_after_activation = (slots > 0).then(|| wrong as f64 / slots as f64);
        Some(stats)
    }
}

/// A short label of a forged field set.
fn forgery_label(fields: &[crate::attack::capability::ForgeField]) -> String {
    if fields.is_empty() {
        return "honest".into();
    }
    if fields.len() == crate::attack::capability::ALL_FIELDS.len() {
        return "all".into();
    }
    fields.iter().map(|f| format!("{f:?}")).collect::<Vec<_>>().join("+")
}
