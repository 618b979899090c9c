//! Pre-round memory handoffs (spec §5.2): the receiver's summary of a sender's report, its
//! text composed from cached fragments.

use super::*;

impl World<'_> {
    /// A pre-round handoff from `src` to `dst` (spec §5.2).
    pub(super) fn handoff(&mut self, task: u32, round: u32, src: u32, dst: u32, report: &[ItemId]) {
        let mut rng =
            self.streams.rng(StreamKind::Summary, &[u64::from(task), u64::from(round), u64::from(src), u64::from(dst)]);
        let site = self.sites.then(|| {
            let t = self.task(task);
            CallSite {
                task,
                task_id: t.id.clone(),
                round,
                agent: dst,
                kind: CallKind::Summary,
                src: Some(src),
                memories: report.iter().map(|id| self.bank.get(*id).name.clone()).collect(),
                peers: Vec::new(),
                messages: None,
                judge: None,
                benign: !self.is_attacker[dst as usize],
                metric: t.metric,
            }
        });
        let retention = {
            let reported: Vec<Reported<'_>> =
                report.iter().map(|id| Reported { features: &self.bank.get(*id).features }).collect();
            self.backbone.summarize(&reported, site.as_ref(), &mut rng)
        };
        let wl = self.workload.clone();
        let t = &wl.tasks()[task as usize];
        let (intent, mut experience, mut features) = self.handoff_text(t, round, src, dst, report, &retention);
        // A compromised summarizer adds the payload's claim (`attack::capability`).
        let compromised = if self.capstate_active() {
            let r = self.compromise_summary(task, round, src, dst, &mut experience);
            if r.is_some() {
                features = analyze(&intent, &experience, &mut self.lex);
            }
            r
        } else {
            None
        };
        let tag =
            crate::engine::mix64(u64::from(task) << 32 | u64::from(round) << 16 | u64::from(src) << 8 | u64::from(dst));
        let name = render::handoff_name(t, round, src, dst, tag & 0xff_ffff_ffff);
        debug_assert_eq!(
            name,
            format!("round_dialogue_{}_r{}_a{src}_to_a{dst}_{:010x}", t.id, round, tag & 0xff_ffff_ffff)
        );
        let mut item = self.summary_item(name, intent, experience, features, t, round, dst);
        let (task_id, task_markers) =
            self.task_frags.as_ref().map(|f| (f.4.clone(), f.5)).expect("set by handoff_text");
        // The markers of every parent are known: a handoff's lineage is not rescanned.
        let markers = task_markers
            | self.labels.round_markers[round as usize + 1]
            | self.labels.agent_markers[src as usize]
            | self.labels.agent_markers[dst as usize]
            | self.labels.handoff_markers;
        item.set_parents_with_markers(
            vec![
                task_id,
                self.labels.round_labels[round as usize + 1].clone(),
                self.labels.agent_labels[src as usize].clone(),
                self.labels.agent_labels[dst as usize].clone(),
                self.labels.handoff_label.clone(),
            ],
            markers,
        );
        // Strict ledger: routing the report hands the receiver the sender's labels; the summary
        // depends on the reported memories and on what the receiver received (lineage: the
        // reported ids). A laundering memory manager writes it as its own, dependency-free.
        // Under async timing a handoff can land after its task has finished: the task's
        // routing state is gone, and the summary inherits from its report alone.
        let live = self.cur.as_ref().is_some_and(|st| st.task == task);
        if live {
            self.route_labels(src, dst);
        }
        let label = if self.scn.protocol.routing.launder_handoffs {
            Label::clean()
        } else if live {
            let st = self.cur.as_ref().expect("task");
            self.ledger_label(st, dst, Some(report), round.saturating_sub(1) as usize)
        } else {
            self.report_label(report)
        };
        let reported: Vec<(ItemId, bool)> =
            report.iter().zip(&retention).map(|(id, r)| (*id, *r == Retention::Verbatim)).collect();
        // The handoff's own task's target: under async timing a handoff can land after its task
        // has finished and the next one has started.
        let now = self.now();
        let poison = compromised.or_else(|| {
            label_handoff(
                &self.oracle,
                self.is_attacker[src as usize],
                &reported,
                task,
                self.targets.get(&task).map(|(t, tok)| (*t, tok)),
                now,
            )
        });
        self.commit(
            WriteRequest::new(item, Scope::Private, dst, StrictChannel::PeerMessage, label, Route::Handoff)
                .poison(poison)
                .from(src),
        );
    }

    /// A receiver summary as `dst`'s memory manager writes it on task `t`, round `round`: the
    /// handoff's metadata (Q 0.35, τ 0.55, h 0.15, unverified, readable by `dst`), no lineage.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn summary_item(
        &self,
        name: String,
        intent: Arc<str>,
        experience: String,
        features: TextFeatures,
        t: &Task,
        round: u32,
        dst: u32,
    ) -> MemoryItem {
        let mut item = MemoryItem::new(name, intent, experience, features);
        item.utility_q = 0.35;
        item.trust = 0.55;
        item.hazard = 0.15;
        item.taint = Taint::Unverified;
        item.source_type = "pre_round_memory_handoff".into();
        item.memory_type = "memory_handoff_summary".into();
        item.origin_task = t.index;
        item.origin_round = round;
        item.writer = Writer::Agent(dst);
        item.allowed_agents = vec![dst];
        item.allowed_task_classes = vec![t.class.to_string()];
        item.source_agent_trust = self.reputation;
        item
    }

    /// A handoff summary's intent, experience and features. Texts and their fragments are cached:
    /// the intent per (sender, receiver), each sentence per (reported item, retention, sender),
    /// header and footer per task. The header fragment is analysed with its agent and round
    /// numbers zeroed (standalone digits form no token and match no pattern), so one serves
    /// every handoff of the task.
    pub(super) fn handoff_text(
        &mut self,
        t: &Task,
        round: u32,
        src: u32,
        dst: u32,
        report: &[ItemId],
        retention: &[Retention],
    ) -> (Arc<str>, String, TextFeatures) {
        if self.task_frags.as_ref().is_none_or(|f| f.0 != t.index) {
            let header = Arc::new(experience_fragment(&render::handoff_header(t, 0, 0, 0), &mut self.lex));
            let footer_text: Arc<str> = render::handoff_footer(t).into();
            let footer = Arc::new(experience_fragment(&footer_text, &mut self.lex));
            let markers = marker_bits(&[t.id.as_str()]);
            self.task_frags = Some((t.index, header, footer_text, footer, t.id.as_str().into(), markers));
        }
        let (_, header, footer_text, footer, _, _) = self.task_frags.clone().expect("just set");
        let key = match self.scn.protocol.handoff_intent {
            HandoffIntent::SenderReceiver => HandoffIntentKey::Edge(src, dst),
            HandoffIntent::TaskQuestion => HandoffIntentKey::Task(t.index),
        };
        let (intent, intent_frag) = match self.texts.handoff_intents.get(&key) {
            Some(x) => x.clone(),
            None => {
                let text: Arc<str> = match key {
                    HandoffIntentKey::Edge(..) => render::handoff_intent(src, dst).into(),
                    HandoffIntentKey::Task(_) => render::handoff_task_intent(t).into(),
                };
                let f = Arc::new(intent_fragment(&text, &mut self.lex));
                self.texts.handoff_intents.insert(key, (text.clone(), f.clone()));
                (text, f)
            }
        };
        // Up to three sentences, each an intro (sender-specific text, sender-free features) and a
        // body (memory-specific, cached per memory and kind).
        let mut kinds = [(render::SentenceKind::Fallback, None); 3];
        let mut n_kinds = 0;
        for (id, r) in report.iter().zip(retention) {
            if n_kinds == kinds.len() {
                break;
            }
            if let Some(k) = render::sentence_kind(&self.bank.get(*id).features, *r) {
                kinds[n_kinds] = (k, Some(*id));
                n_kinds += 1;
            }
        }
        // No sentence kept: the fallback sentence alone.
        let n_kinds = n_kinds.max(1);
        // Header, up to three (intro, body) pairs, footer: the pieces are gathered first so that
        // the text is written once into a buffer of its exact length (a stored handoff keeps
        // no slack and is never reallocated while it grows).
        let mut pieces: [Option<Arc<str>>; 6] = Default::default();
        let mut n_pieces = 0;
        let mut frags: Vec<Arc<Fragment>> = Vec::with_capacity(8);
        frags.push(header);
        for &(kind, id) in &kinds[..n_kinds] {
            let intro = match self.texts.intro_texts.get(&(kind, src)) {
                Some(x) => x.clone(),
                None => {
                    let x: Arc<str> = render::sentence_intro(kind, src).into();
                    self.texts.intro_texts.insert((kind, src), x.clone());
                    x
                }
            };
            let intro_frag = match self.texts.sentence_intros.get(&kind) {
                Some(f) => f.clone(),
                None => {
                    let f = Arc::new(experience_fragment(&render::sentence_intro(kind, 0), &mut self.lex));
                    self.texts.sentence_intros.insert(kind, f.clone());
                    f
                }
            };
            pieces[n_pieces] = Some(intro);
            n_pieces += 1;
            frags.push(intro_frag);
            // Bodies are cached by their text: the copies of one payload share it.
            let body = id.and_then(|id| match self.texts.body_texts.get(&(id, kind)) {
                Some(t) => t.clone(),
                None => {
                    let t: Option<Arc<str>> = render::sentence_body(&self.bank.get(id).features, kind).map(Into::into);
                    self.texts.body_texts.insert((id, kind), t.clone());
                    t
                }
            });
            if let Some(text) = body {
                let f = match self.texts.sentence_bodies.get(&text) {
                    Some(f) => f.clone(),
                    None => {
                        let f = Arc::new(experience_fragment(&text, &mut self.lex));
                        self.texts.sentence_bodies.insert(text.clone(), f.clone());
                        f
                    }
                };
                pieces[n_pieces] = Some(text);
                n_pieces += 1;
                frags.push(f);
            }
        }
        let len = render::handoff_header_len(t, round, src, dst)
            + pieces.iter().flatten().map(|p| p.len()).sum::<usize>()
            + footer_text.len();
        let mut experience = String::with_capacity(len);
        render::push_handoff_header(&mut experience, t, round, src, dst);
        for p in pieces.iter().flatten() {
            experience.push_str(p);
        }
        experience.push_str(&footer_text);
        debug_assert_eq!(experience.len(), len, "handoff text length");
        frags.push(footer);
        let mut features = if composable(&frags) {
            compose(&intent_frag, &frags)
        } else {
            analyze(&intent, &experience, &mut self.lex)
        };
        // The header fragment was analysed with its numbers zeroed: an agent or round number of
        // two digits or more makes the real text longer than the fragments add up to.
        features.bytes = intent.len() + 1 + experience.len();
        debug_assert_eq!(features, analyze(&intent, &experience, &mut self.lex), "composed handoff features");
        (intent, experience, features)
    }

    /// Experience text and features of a memory assembled from parts given as (text, canonical
    /// text): fragments are analysed once per canonical text and composed; a part without a
    /// canonical text occurs once (a haystack unit's content) and is analysed without being
    /// cached. Debug builds assert the result equals a whole-text scan.
    pub(super) fn composed(&mut self, intent: &str, parts: &[(&str, Option<&str>)]) -> (String, TextFeatures) {
        let (experience, features, _) = self.composed_fragments(intent, parts);
        (experience, features)
    }

    /// [`Self::composed`], with the fragment of each part.
    pub(super) fn composed_fragments(
        &mut self,
        intent: &str,
        parts: &[(&str, Option<&str>)],
    ) -> (String, TextFeatures, Vec<Arc<Fragment>>) {
        self.composed_prepared(intent, parts, None)
    }

    /// [`Self::composed_fragments`] with the last part's text analysed beforehand (`prepared`,
    /// when given: a haystack unit's content, the same for every run of the stream).
    pub(super) fn composed_prepared(
        &mut self,
        intent: &str,
        parts: &[(&str, Option<&str>)],
        prepared: Option<&crate::text::PreparedFragment>,
    ) -> (String, TextFeatures, Vec<Arc<Fragment>>) {
        let get = |this: &mut Self, key: &str, is_intent: bool| -> Arc<Fragment> {
            let cache = if is_intent { &mut this.texts.intent_fragments } else { &mut this.texts.part_fragments };
            if let Some(f) = cache.get(key) {
                return f.clone();
            }
            let f = Arc::new(if is_intent {
                intent_fragment(key, &mut this.lex)
            } else {
                experience_fragment(key, &mut this.lex)
            });
            let cache = if is_intent { &mut this.texts.intent_fragments } else { &mut this.texts.part_fragments };
            cache.insert(key.to_string(), f.clone());
            f
        };
        let i = get(self, intent, true);
        let last = parts.len().wrapping_sub(1);
        let frags: Vec<Arc<Fragment>> = parts
            .iter()
            .enumerate()
            .map(|(k, (text, canonical))| match (canonical, prepared) {
                (Some(c), _) => get(self, c, false),
                (None, Some(p)) if k == last => {
                    let f = p.bind(&mut self.lex);
                    // Bound, every word of the text is interned: a scan now interns nothing.
                    debug_assert_eq!(f, experience_fragment(text, &mut self.lex), "prepared fragment");
                    Arc::new(f)
                }
                (None, _) => Arc::new(experience_fragment(text, &mut self.lex)),
            })
            .collect();
        let mut experience = String::with_capacity(parts.iter().map(|(text, _)| text.len()).sum());
        parts.iter().for_each(|(text, _)| experience.push_str(text));
        let mut features =
            if composable(&frags) { compose(&i, &frags) } else { analyze(intent, &experience, &mut self.lex) };
        // A part's canonical text may be shorter than the text itself (numbers zeroed).
        features.bytes = intent.len() + 1 + experience.len();
        debug_assert_eq!(features, analyze(intent, &experience, &mut self.lex), "composed features");
        (experience, features, frags)
    }
}

/// The lineage labels a handoff names in its parents (`agent_a`, `pre_round_r`,
/// `memory_handoff`), made once per run, with their [`marker_bits`] so a handoff's lineage
/// markers are known without rescanning its parents.
pub(super) struct Labels {
    pub(super) agent_labels: Vec<Arc<str>>,
    pub(super) round_labels: Vec<Arc<str>>,
    /// The handoff lineage marker, shared by every handoff's parents.
    pub(super) handoff_label: Arc<str>,
    pub(super) agent_markers: Vec<u8>,
    pub(super) round_markers: Vec<u8>,
    pub(super) handoff_markers: u8,
}

impl Labels {
    /// The labels of a run of `agents` agents and `rounds` rounds.
    pub(super) fn new(agents: u32, rounds: u32) -> Self {
        Labels {
            agent_labels: (0..agents).map(|a| format!("agent_{a}").into()).collect(),
            round_labels: (0..=rounds).map(|r| format!("pre_round_{r}").into()).collect(),
            handoff_label: "memory_handoff".into(),
            agent_markers: (0..agents).map(|a| marker_bits(&[format!("agent_{a}")])).collect(),
            round_markers: (0..=rounds).map(|r| marker_bits(&[format!("pre_round_{r}")])).collect(),
            handoff_markers: marker_bits(&["memory_handoff"]),
        }
    }
}

/// Texts and analysed fragments that handoffs, summaries and renders reuse within a run; each
/// entry is a function of its key.
#[derive(Default)]
pub(super) struct TextMemo {
    pub(super) sentence_bodies: HashMap<Arc<str>, Arc<Fragment>>,
    pub(super) body_texts: HashMap<(ItemId, render::SentenceKind), Option<Arc<str>>>,
    pub(super) sentence_intros: HashMap<render::SentenceKind, Arc<Fragment>>,
    pub(super) intro_texts: HashMap<(render::SentenceKind, u32), Arc<str>>,
    pub(super) intent_fragments: HashMap<String, Arc<Fragment>>,
    pub(super) part_fragments: HashMap<String, Arc<Fragment>>,
    /// Handoff intents and their fragments, by what they name (see [`HandoffIntentKey`]).
    pub(super) handoff_intents: HashMap<HandoffIntentKey, (Arc<str>, Arc<Fragment>)>,
}
