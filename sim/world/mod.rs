//! One simulated run of one arm: wires the engine, topology, memory, guard, attack, agents,
//! workload, oracle and metrics, and defines the event enum and its handlers.
//!
//! Lockstep timing reproduces the paper's synchronous rounds: a task arrives, its poison is
//! committed, and each round is (handoffs → every agent retrieves and answers → the message
//! guard reviews) at distinct ticks. Async timing runs the same handlers on the same queue with
//! sampled latencies: an agent starts its next round as soon as its own answer is back, and a
//! handoff lands only when its message and summary calls are done, so a read sees only what was
//! committed before it.

pub mod render;

use crate::agent::Profile;
use crate::agent::{
    Answer, AnswerContext, Backbone, DiscreteChoice, Evidence, MemoryFraming, Peer, Reported, Retention, Role,
};
use crate::attack::PoisonWrite;
use crate::embed::{Embedder, cosine};
use crate::engine::{EventQueue, StreamKind, Streams, Time, TraceEntry, TraceHash};
use crate::guard::maple::{
    FeedbackPolicy, MapleConfig, ProvenanceMode, Reader, StrictChannel, apply_outcome, apply_strict_view,
    derive_provenance,
};
use crate::guard::{Cluster, CommitVerdict, Guard, MessageAction, MessageView};
use crate::memory::{ItemId, MemoryBank, MemoryItem, MemoryTopology, Scope, Status, Taint, Writer};
use crate::metrics::{AgentRound, ArmSummary, FinishContext, Recorder, label_handoff};
use crate::oracle::{Oracle, PoisonOrigin, PoisonRecord};
use crate::scenario::{
    Arm, Attackers, FramingRule, HandoffIntent, Placement, PromotionPolicy, RetrievalMode, Scenario, Timing,
};
use crate::text::{Fragment, composable, compose, experience_fragment, intent_fragment};
use crate::text::{Lexicon, QueryFeatures, Sym, TextFeatures, analyze, analyze_query, tokens_of};
use crate::topology::CommGraph;
use crate::workload::{Task, TaskStream, WorkloadConfig};
use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

/// Events of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A task arrives; the attack commits its payloads.
    TaskArrive {
        /// Task index.
        task: u32,
    },
    /// Lockstep: a round starts (handoffs for rounds > 0).
    RoundStart {
        /// Task index.
        task: u32,
        /// Round (0-based).
        round: u32,
    },
    /// An agent retrieves and calls the LLM.
    AgentCall {
        /// Task index.
        task: u32,
        /// Round.
        round: u32,
        /// Agent.
        agent: u32,
    },
    /// Async: an agent's answer comes back.
    AgentAnswer {
        /// Task index.
        task: u32,
        /// Round.
        round: u32,
        /// Agent.
        agent: u32,
    },
    /// Async: a handoff from `src` lands in `dst`'s store.
    HandoffDeliver {
        /// Task index.
        task: u32,
        /// Round the handoff precedes.
        round: u32,
        /// Sender.
        src: u32,
        /// Receiver.
        dst: u32,
        /// The sender's reported memories.
        report: Vec<ItemId>,
    },
    /// Lockstep: every agent has answered the round.
    RoundEnd {
        /// Task index.
        task: u32,
        /// Round.
        round: u32,
    },
    /// Final vote, outcome updates, outcome memories and promotion.
    TaskFinish {
        /// Task index.
        task: u32,
    },
}

impl Event {
    fn hash_into(&self, h: &mut TraceHash) {
        let (kind, a, b, c, d) = match self {
            Event::TaskArrive { task } => (1, *task, 0, 0, 0),
            Event::RoundStart { task, round } => (2, *task, *round, 0, 0),
            Event::AgentCall { task, round, agent } => (3, *task, *round, *agent, 0),
            Event::AgentAnswer { task, round, agent } => (4, *task, *round, *agent, 0),
            Event::HandoffDeliver { task, round, src, dst, .. } => (5, *task, *round, *src, *dst),
            Event::RoundEnd { task, round } => (6, *task, *round, 0, 0),
            Event::TaskFinish { task } => (7, *task, 0, 0, 0),
        };
        for x in [kind, a, b, c, d] {
            h.u64(u64::from(x));
        }
    }
}

/// What a run leaves behind for invariant checks (tests, audits).
#[derive(Debug)]
pub struct Inspection {
    /// The final memory bank.
    pub bank: MemoryBank,
    /// Every selection: (task, round, reader, item, item status at selection time).
    pub selections: Vec<(u32, u32, u32, ItemId, Status)>,
    /// Simulated times of processed events, in processing order.
    pub times: Vec<u64>,
}

/// The result of one arm.
#[derive(Debug)]
pub struct ArmRun {
    /// Metrics.
    pub summary: ArmSummary,
    /// The per-event trace log, when recording was asked for.
    pub trace: Option<Vec<TraceEntry>>,
}

/// Per-task cached handoff pieces: task index, header fragment, footer text and fragment.
type TaskFragments = (u32, Rc<Fragment>, Rc<str>, Rc<Fragment>);

struct TaskState {
    task: u32,
    target: Option<u8>,
    target_tokens: Vec<Sym>,
    priors: Vec<Vec<f64>>,
    /// [round][agent] selected (item, sim)
    selected: Vec<Vec<Vec<(ItemId, f64)>>>,
    answers: Vec<Vec<Option<Answer>>>,
    removed: Vec<Vec<bool>>,
    /// Per round and agent, whether a guard replaced the output by a text without an answer
    /// letter (an "unknown" slot for the paper's parser, spec §7.1).
    unreadable: Vec<Vec<bool>>,
    /// [round][agent] the output as others see it after message review: its features and
    /// whether a guard appended a warning (None: removed or not rendered).
    shown: Vec<Vec<Option<(TextFeatures, bool)>>>,
    tokens: Vec<Vec<u32>>,
    call_time: Vec<Vec<u64>>,
    answered: Vec<u32>,
    finished_rounds: u32,
    query: QueryFeatures,
    query_emb: Rc<[f32]>,
    option_tokens: Vec<Vec<Sym>>,
    /// Similarity of this task's query to each intent group, per store (private stores by
    /// agent, then the shared store); extended as stores gain groups. Groups are only ever
    /// appended, and the query is fixed for the task, so a cached value stays right.
    group_sims: Vec<Vec<f64>>,
    /// Similarity of this task's query to each distinct intent of the run (by intent row),
    /// shared by every store that holds the intent.
    intent_sims: Vec<Option<f64>>,
    /// Backend candidates per store (same slots), see `World::store_candidates`.
    store_cache: Vec<StoreCache>,
    /// Items written for this task, in commit order (the same-task retrieval scope).
    task_items: Vec<ItemId>,
}

/// A store's backend candidates: (intent similarity, item), in ranking order.
/// Shared without copying between the store cache and each retrieval of the task.
type Candidates = Rc<Vec<(f64, ItemId)>>;

/// One store's cached backend candidates within a task.
struct StoreCache {
    groups: usize,
    items: usize,
    top: Vec<(f64, usize)>,
    cands: Candidates,
    best: Rc<[usize]>,
}

impl Default for StoreCache {
    fn default() -> Self {
        StoreCache {
            groups: usize::MAX,
            items: usize::MAX,
            top: Vec::new(),
            cands: Rc::new(Vec::new()),
            best: Rc::new([]),
        }
    }
}

/// What a cached handoff intent names: an edge (sender, receiver) or a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum HandoffIntentKey {
    Edge(u32, u32),
    Task(u32),
}

/// Buffers a retrieval reuses instead of allocating its intermediate lists anew (a paper run
/// retrieves ~5,000 times).
#[derive(Default)]
struct RetrieveScratch {
    ranked: Vec<(f64, usize, ItemId, bool)>,
    pool: Vec<(ItemId, bool)>,
    blocked: Vec<(ItemId, &'static str, &'static str)>,
    keys: Vec<Option<u8>>,
    top: Vec<(f64, usize, ItemId, f64)>,
}

/// One run of one arm.
pub struct World<'a> {
    scn: &'a Scenario,
    streams: Streams,
    graph: CommGraph,
    is_attacker: Vec<bool>,
    attacker_ids: Vec<u32>,
    guard: Box<dyn Guard>,
    meta: MapleConfig,
    backbone: Box<dyn Backbone>,
    /// How this arm's prompts present retrieved memories.
    framing: MemoryFraming,
    workload: Rc<TaskStream>,
    /// The outcome feedback policy of this arm (the protocol's unless the arm overrides it).
    feedback: FeedbackPolicy,
    /// A poisoning task has arrived (query activation starts then).
    attack_started: bool,
    /// MINJA's background note about the latest poisoning task, when query activation is on.
    activation_note: Option<String>,
    lex: Lexicon,
    embedder: Embedder,
    bank: MemoryBank,
    intent_cache: HashMap<u64, Rc<[f32]>>,
    sentence_bodies: HashMap<Rc<str>, Rc<Fragment>>,
    /// Per item: (stamp, text similarity to the current task's query); valid when the stamp is
    /// the current task's. Item metadata and the query are fixed within a task.
    sim_memo: Vec<(u32, f64)>,
    /// Per item: (stamp, reader, cluster share bits, verdict) of its last read this task, when
    /// the guard is pure.
    verdict_memo: Vec<(u32, u32, u64, usize, crate::guard::ReadVerdict)>,
    /// Per item: (stamp, reader, backend pre-score) for the current task.
    prescore_memo: Vec<(u32, u32, f64)>,
    scratch: RetrieveScratch,
    memo_stamp: u32,
    body_texts: HashMap<(ItemId, render::SentenceKind), Option<Rc<str>>>,
    sentence_intros: HashMap<render::SentenceKind, Rc<Fragment>>,
    intro_texts: HashMap<(render::SentenceKind, u32), Rc<str>>,
    agent_labels: Vec<String>,
    round_labels: Vec<String>,
    intent_fragments: HashMap<String, Rc<Fragment>>,
    part_fragments: HashMap<String, Rc<Fragment>>,
    /// Handoff intents and their fragments, by what they name (see [`HandoffIntentKey`]).
    handoff_intents: HashMap<HandoffIntentKey, (Rc<str>, Rc<Fragment>)>,
    task_frags: Option<TaskFragments>,
    oracle: Oracle,
    recorder: Recorder,
    queue: EventQueue<Event>,
    trace: TraceHash,
    reputation: f64,
    cur: Option<TaskState>,
    /// Each poisoned task's target option and its tokens, by task.
    targets: std::collections::BTreeMap<u32, (u8, Vec<Sym>)>,
    arm_name: String,
    inspection: Option<Inspection>,
}

/// Attacker ids of a scenario on a graph.
pub fn place_attackers(scn: &Scenario, graph: &CommGraph, streams: &Streams) -> Vec<u32> {
    let n = scn.agents;
    let mut ids = match &scn.attackers {
        Attackers::Ids(ids) => ids.clone(),
        Attackers::Count(c) => {
            let c = *c as usize;
            match scn.placement {
                Placement::Random => {
                    let mut r = streams.rng(StreamKind::Placement, &[u64::from(n)]);
                    r.sample_indices(n as usize, c).into_iter().map(|i| i as u32).collect()
                }
                Placement::HighestDegree | Placement::LowestDegree => {
                    let mut v: Vec<u32> = (0..n).collect();
                    let high = scn.placement == Placement::HighestDegree;
                    v.sort_by(|a, b| {
                        let (da, db) = (graph.degree(*a), graph.degree(*b));
                        (if high { db.cmp(&da) } else { da.cmp(&db) }).then(a.cmp(b))
                    });
                    v.truncate(c);
                    v
                }
            }
        }
    };
    ids.sort_unstable();
    ids
}

/// How `guard`'s prompts present memories under `scn`'s [`FramingRule`].
fn memory_framing(scn: &Scenario, guard: &dyn Guard) -> MemoryFraming {
    match scn.protocol.memory_framing {
        FramingRule::Experience => MemoryFraming::Experience,
        FramingRule::Evidence => MemoryFraming::Evidence,
        FramingRule::Reference => {
            let task_loop = matches!(scn.workload, WorkloadConfig::Mmlu(_) | WorkloadConfig::AppWorld(_));
            // MAPLE-Guard, alone or in a stack, is the guard that carries a MAPLE configuration.
            let maple = guard.metadata_config().is_some();
            let strict = scn.protocol.provenance == ProvenanceMode::StrictLedger;
            if task_loop && (maple || strict) { MemoryFraming::Evidence } else { MemoryFraming::Experience }
        }
    }
}

impl<'a> World<'a> {
    /// Sets up a run of `arm` of `scn` with `profile` and master seed `seed`.
    pub fn new(scn: &'a Scenario, profile: &Profile, arm: &Arm, seed: u64, record: bool) -> Self {
        // The baselines' LLM judges run on the agents' backbone (spec §8).
        let guard = crate::guard::with_backbone_judges(&arm.guard, profile);
        let mut w =
            Self::with_guard(scn, profile, &arm.name, crate::guard::build_guard(&guard, scn.agents), seed, record);
        if let Some(f) = arm.feedback {
            w.feedback = f;
        }
        w
    }

    /// Sets up a run with a guard built outside the scenario (a researcher's own [`Guard`]).
    pub fn with_guard(
        scn: &'a Scenario,
        profile: &Profile,
        arm_name: &str,
        guard: Box<dyn Guard>,
        seed: u64,
        record: bool,
    ) -> Self {
        let streams = Streams::new(seed);
        let graph = CommGraph::build(&scn.topology, scn.agents, &streams);
        let attacker_ids = place_attackers(scn, &graph, &streams);
        let mut is_attacker = vec![false; scn.agents as usize];
        attacker_ids.iter().for_each(|a| is_attacker[*a as usize] = true);
        let meta = guard.metadata_config().cloned().unwrap_or_default();
        let class = scn.workload.class();
        let params = profile.workload(class).cloned().unwrap_or_default();
        let backbone: Box<dyn Backbone> = Box::new(DiscreteChoice::new(&profile.name, params));
        let workload = Rc::new(scn.workload.generate(&streams));
        let mut lex = Lexicon::new();
        let mut embedder = Embedder::new(scn.embedding_dim, streams.seed_of(StreamKind::Embedding, &[]));
        for w in workload.vocabulary() {
            let s = lex.intern(w);
            embedder.mark_content(s);
        }
        let benign = u64::from(scn.agents) - attacker_ids.len() as u64;
        let capacity = expected_items(scn, &graph);
        let framing = memory_framing(scn, guard.as_ref());
        World {
            scn,
            streams,
            graph,
            is_attacker,
            attacker_ids,
            guard,
            meta,
            backbone,
            framing,
            workload,
            lex,
            embedder,
            bank: MemoryBank::with_capacity(scn.agents as usize, scn.embedding_dim, capacity),
            intent_cache: HashMap::default(),
            sentence_bodies: HashMap::default(),
            sim_memo: Vec::new(),
            verdict_memo: Vec::new(),
            prescore_memo: Vec::new(),
            scratch: RetrieveScratch::default(),
            memo_stamp: 0,
            body_texts: HashMap::default(),
            sentence_intros: HashMap::default(),
            intro_texts: HashMap::default(),
            agent_labels: (0..scn.agents).map(|a| format!("agent_{a}")).collect(),
            round_labels: (0..=scn.protocol.rounds).map(|r| format!("pre_round_{r}")).collect(),
            intent_fragments: HashMap::default(),
            part_fragments: HashMap::default(),
            handoff_intents: HashMap::default(),
            task_frags: None,
            oracle: Oracle::new(),
            recorder: Recorder::new(scn.protocol.rounds, benign),
            queue: EventQueue::new(),
            trace: TraceHash::new(record),
            reputation: 0.5,
            cur: None,
            targets: std::collections::BTreeMap::new(),
            arm_name: arm_name.to_string(),
            inspection: None,
            feedback: scn.protocol.feedback,
            attack_started: false,
            activation_note: None,
        }
    }

    /// Runs to the end and also returns an [`Inspection`] of every selection and the final bank.
    pub fn run_inspected(mut self) -> (ArmRun, Inspection) {
        self.inspection = Some(Inspection { bank: MemoryBank::new(0, 8), selections: Vec::new(), times: Vec::new() });
        self.run_inner()
    }

    /// Runs to the end and returns the summary.
    pub fn run(self) -> ArmRun {
        self.run_inner().0
    }

    fn run_inner(mut self) -> (ArmRun, Inspection) {
        if !self.workload.tasks().is_empty() {
            self.queue.schedule(Time::ZERO, Event::TaskArrive { task: 0 });
        }
        while let Some(ev) = self.queue.pop() {
            let (time, seq) = (ev.time.0, ev.seq);
            if let Some(i) = self.inspection.as_mut() {
                i.times.push(time);
            }
            ev.event.hash_into(&mut self.trace);
            let label = self.trace.log().is_some().then(|| format!("{:?}", ev.event));
            self.handle(ev.event);
            self.trace.end_event(time, seq, || label.unwrap_or_default());
        }
        let ctx = FinishContext {
            arm: self.arm_name.clone(),
            guard: self.guard.name().to_string(),
            seed: self.streams.master(),
            agents: self.scn.agents,
            attackers: self.attacker_ids.clone(),
            reputation: self.reputation,
            trace_hash: self.trace.value(),
            infa_harness: self.scn.workload.infa_harness(),
            events: self.trace.events(),
            end_time: self.queue.now().0,
        };
        let trace = self.trace.take_log();
        let summary = self.recorder.finish(&self.oracle, &self.bank, ctx);
        let mut inspection = self.inspection.take().unwrap_or(Inspection {
            bank: MemoryBank::new(0, 8),
            selections: Vec::new(),
            times: Vec::new(),
        });
        if !inspection.times.is_empty() {
            inspection.bank = self.bank;
        }
        (ArmRun { summary, trace }, inspection)
    }

    fn now(&self) -> u64 {
        self.queue.now().0
    }

    fn lockstep(&self) -> bool {
        matches!(self.scn.timing, Timing::Lockstep)
    }

    fn handle(&mut self, ev: Event) {
        let rounds = self.scn.protocol.rounds;
        let n = self.scn.agents;
        match ev {
            Event::TaskArrive { task } => {
                self.arrive(task);
                if self.lockstep() {
                    self.queue.schedule_in(1, Event::RoundStart { task, round: 0 });
                } else {
                    for agent in 0..n {
                        self.queue.schedule_in(0, Event::AgentCall { task, round: 0, agent });
                    }
                }
            }
            Event::RoundStart { task, round } => {
                if round > 0 && self.scn.protocol.handoffs {
                    for src in 0..n {
                        let report = self.report_of(src, round - 1);
                        if report.is_empty() {
                            continue;
                        }
                        for &dst in self.graph.out(src).to_vec().iter() {
                            self.handoff(task, round, src, dst, &report);
                        }
                    }
                }
                for agent in 0..n {
                    self.queue.schedule_in(1, Event::AgentCall { task, round, agent });
                }
            }
            Event::AgentCall { task, round, agent } => {
                self.call(agent, round);
                if self.lockstep() {
                    if self.mark_answered(round) {
                        self.queue.schedule_in(1, Event::RoundEnd { task, round });
                    }
                } else {
                    let mut rng = self
                        .streams
                        .rng(StreamKind::Latency, &[u64::from(task), u64::from(round), u64::from(agent), 0]);
                    let Timing::Async { llm, .. } = &self.scn.timing else { unreachable!() };
                    let d = llm.sample(&mut rng);
                    self.queue.schedule_in(d, Event::AgentAnswer { task, round, agent });
                }
            }
            Event::AgentAnswer { task, round, agent } => {
                if round + 1 < rounds {
                    if self.scn.protocol.handoffs {
                        let report = self.report_of(agent, round);
                        if !report.is_empty() {
                            let Timing::Async { llm, message } = self.scn.timing.clone() else { unreachable!() };
                            for &dst in self.graph.out(agent).to_vec().iter() {
                                let mut rng = self.streams.rng(
                                    StreamKind::Latency,
                                    &[u64::from(task), u64::from(round), u64::from(agent), 1 + u64::from(dst)],
                                );
                                let d = message.sample(&mut rng) + llm.sample(&mut rng);
                                let ev = Event::HandoffDeliver {
                                    task,
                                    round: round + 1,
                                    src: agent,
                                    dst,
                                    report: report.clone(),
                                };
                                self.queue.schedule_in(d, ev);
                            }
                        }
                    }
                    self.queue.schedule_in(0, Event::AgentCall { task, round: round + 1, agent });
                }
                if self.mark_answered(round) {
                    self.end_round(round);
                    if round + 1 == rounds {
                        self.queue.schedule_in(0, Event::TaskFinish { task });
                    }
                }
            }
            Event::HandoffDeliver { task, round, src, dst, report } => self.handoff(task, round, src, dst, &report),
            Event::RoundEnd { task, round } => {
                self.end_round(round);
                if round + 1 < rounds {
                    self.queue.schedule_in(1, Event::RoundStart { task, round: round + 1 });
                } else {
                    self.queue.schedule_in(1, Event::TaskFinish { task });
                }
            }
            Event::TaskFinish { task } => {
                self.finish(task);
                if (task as usize) + 1 < self.workload.tasks().len() {
                    self.queue.schedule_in(1, Event::TaskArrive { task: task + 1 });
                }
            }
        }
    }

    fn mark_answered(&mut self, round: u32) -> bool {
        let n = self.scn.agents;
        let st = self.cur.as_mut().expect("task in progress");
        st.answered[round as usize] += 1;
        st.answered[round as usize] == n
    }

    fn task(&self, i: u32) -> &Task {
        &self.workload.tasks()[i as usize]
    }

    fn features(&mut self, intent: &str, experience: &str) -> TextFeatures {
        analyze(intent, experience, &mut self.lex)
    }

    /// A task arrives: per-agent knowledge, evaluator truth, the attack's writes.
    fn arrive(&mut self, task: u32) {
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
        let query_emb: Rc<[f32]> =
            self.embedder.embed(&query.tokens, Embedder::text_key(&query_text), &self.lex).into();
        let option_tokens: Vec<Vec<Sym>> =
            t.options.iter().map(|o| tokens_of(&o.to_lowercase(), &mut self.lex)).collect();
        let st = TaskState {
            task,
            target: None,
            target_tokens: Vec::new(),
            priors,
            selected: vec![vec![Vec::new(); n]; rounds],
            answers: vec![vec![None; n]; rounds],
            removed: vec![vec![false; n]; rounds],
            unreadable: vec![vec![false; n]; rounds],
            shown: vec![vec![None; n]; rounds],
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
            st.target_tokens = st.option_tokens[target as usize].clone();
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
                    derive_provenance(item, meta);
                }
            };
            let dedupe_shared = self.scn.protocol.dedupe_shared_poison;
            let mut hooks = crate::attack::PlanHooks { features: &mut feats, derive: &mut derive, dedupe_shared };
            let writes = attack.plan(t, target, &self.attacker_ids, self.scn.agents, &mut hooks);
            for w in writes {
                self.commit_poison(w, task, target);
            }
            return;
        }
        self.cur = Some(st);
    }

    /// Commits task `task`'s user-history haystack (LongMemEval) as trusted shared memory that
    /// bypasses every gate, as the reference's preload does (spec §1.1, §5.5).
    fn preload_history(&mut self, task: u32) {
        let wl = self.workload.clone();
        let t = &wl.tasks()[task as usize];
        for (i, h) in wl.haystack(task).iter().enumerate() {
            let intent = format!("User history, session {} round {}", h.session, h.round);
            let features = analyze(&intent, &h.text, &mut self.lex);
            let tag = Embedder::text_key(&h.text) & 0xff_ffff_ffff;
            let name = format!("lme_haystack_{}_{}_{}_{tag:010x}_shared", t.id, h.session, i);
            let mut item = MemoryItem::new(name, intent, h.text.clone(), features);
            item.utility_q = if h.query_matching { 0.97 } else { 0.85 };
            item.trust = 0.90;
            item.hazard = 0.0;
            item.taint = Taint::Clean;
            item.source_type = "longmemeval_user_history_seed".into();
            item.memory_type = "historical_conversation_round".into();
            item.origin_task = task;
            item.writer = Writer::User;
            item.allowed_agents = (0..self.scn.agents).collect();
            item.allowed_task_classes = vec![t.class.clone()];
            item.set_parents(vec![t.id.clone()]);
            item.source_agent_trust = 1.0;
            self.commit_trusted(item);
        }
    }

    /// Stores a trusted seed without derive or gates (the reference's preload path).
    fn commit_trusted(&mut self, mut item: MemoryItem) -> ItemId {
        item.scope = Scope::Team;
        item.status = Status::Active;
        item.backend_q = item.utility_q;
        item.backend_snapshot = (item.trust, item.hazard, item.taint);
        item.committed_at = self.queue.now();
        let id = self.store(item, 0);
        self.trace.u64(u64::from(id));
        id
    }

    /// Puts a committed item into the bank (its intent embedded only when the store has no
    /// group for that intent yet) and into the current task's scope if it was written for it.
    fn store(&mut self, item: MemoryItem, owner: u32) -> ItemId {
        let key = Embedder::text_key(&item.intent);
        let (cache, embedder, lex) = (&mut self.intent_cache, &mut self.embedder, &mut self.lex);
        let mut make = |item: &MemoryItem| -> Vec<f32> {
            if let Some(e) = cache.get(&key) {
                return e.to_vec();
            }
            let tokens = tokens_of(&item.intent.to_lowercase(), lex);
            let e: Rc<[f32]> = embedder.embed(&tokens, key, lex).into();
            cache.insert(key, e.clone());
            e.to_vec()
        };
        let origin_task = item.origin_task;
        let id = self.bank.insert(item, owner, key, &mut make);
        if let Some(st) = self.cur.as_mut()
            && st.task == origin_task
        {
            st.task_items.push(id);
        }
        id
    }

    fn commit_poison(&mut self, w: PoisonWrite, task: u32, target: u8) {
        let PoisonWrite { mut item, scope, owner } = w;
        // The plan derived at build and after stealth; strong clamps; the commit derives once
        // more (spec C9).
        self.scn.attack.clamp(&mut item);
        // A planted item's whole text enters the prompt that retrieves it.
        let payload = true;
        let tokens = self.cur.as_ref().map(|s| s.target_tokens.clone()).unwrap_or_default();
        let strict = (StrictChannel::External, Taint::External, Vec::new());
        let record = PoisonRecord {
            origin: PoisonOrigin::Direct,
            attack: self.scn.attack.family(),
            task,
            target_tokens: tokens,
            target,
            written_at: self.now(),
            carries_payload: payload,
        };
        self.commit(item, scope, owner, strict, Some(record));
    }

    /// The commit pipeline: metadata (derive or strict ledger) → guard gates → store.
    fn commit(
        &mut self,
        mut item: MemoryItem,
        requested: Scope,
        owner: u32,
        strict: (StrictChannel, Taint, Vec<String>),
        poison: Option<PoisonRecord>,
    ) -> (ItemId, CommitVerdict) {
        match self.scn.protocol.provenance {
            ProvenanceMode::Recomputed => derive_provenance(&mut item, &self.meta),
            ProvenanceMode::StrictLedger => {
                let readers = match requested {
                    Scope::Team => (0..self.scn.agents).collect(),
                    Scope::Private => vec![owner],
                };
                let (channel, taint, parents) = strict;
                let q = item.utility_q;
                apply_strict_view(&mut item, channel, taint, readers, parents, requested);
                // The ledger keeps attack-set Q out, but trusted seeds keep theirs.
                if channel == StrictChannel::UserHistory {
                    item.utility_q = q;
                }
            }
        }
        item.scope = requested;
        let verdict = self.guard.commit(&mut item, requested);
        if verdict.rewritten {
            item.features = analyze(&item.intent, &item.experience, &mut self.lex);
        }
        item.backend_q = item.utility_q;
        item.backend_snapshot = (item.trust, item.hazard, item.taint);
        item.committed_at = self.queue.now();
        let status = item.status;
        let id = self.store(item, owner);
        if let Some(p) = poison {
            self.oracle.register_poison(id, p);
        }
        self.trace.u64(u64::from(id));
        self.trace.u64(status as u64);
        self.recorder.commit(&self.oracle, id, &verdict, status);
        (id, verdict)
    }

    fn report_of(&self, agent: u32, round: u32) -> Vec<ItemId> {
        let st = self.cur.as_ref().expect("task");
        st.selected[round as usize][agent as usize]
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| self.bank.get(*id).is_active())
            .take(self.scn.protocol.handoff_report_max)
            .collect()
    }

    /// What the strict ledger inherits from memories an agent consumed (spec §3.6): the worst
    /// of their taints (clean < unverified < external < poisoned) and their ids as lineage.
    fn ledger_inputs(&self, consumed: impl Iterator<Item = ItemId>) -> (Taint, Vec<String>) {
        // Only the strict ledger reads the lineage; recomputed provenance would drop it.
        let keep_names = self.scn.protocol.provenance == ProvenanceMode::StrictLedger;
        let mut taint = Taint::Clean;
        let mut names = Vec::new();
        for id in consumed {
            let it = self.bank.get(id);
            taint = taint.max(it.taint);
            if keep_names {
                names.push(it.name.clone());
            }
        }
        (taint, names)
    }

    /// A pre-round handoff from `src` to `dst` (spec §5.2).
    fn handoff(&mut self, task: u32, round: u32, src: u32, dst: u32, report: &[ItemId]) {
        let mut rng =
            self.streams.rng(StreamKind::Summary, &[u64::from(task), u64::from(round), u64::from(src), u64::from(dst)]);
        let retention = {
            let reported: Vec<Reported<'_>> =
                report.iter().map(|id| Reported { features: &self.bank.get(*id).features }).collect();
            self.backbone.summarize(&reported, &mut rng)
        };
        let wl = self.workload.clone();
        let t = &wl.tasks()[task as usize];
        let (intent, experience, features) = self.handoff_text(t, round, src, dst, report, &retention);
        let tag =
            crate::engine::mix64(u64::from(task) << 32 | u64::from(round) << 16 | u64::from(src) << 8 | u64::from(dst));
        let name = render::handoff_name(t, round, src, dst, tag & 0xff_ffff_ffff);
        debug_assert_eq!(
            name,
            format!("round_dialogue_{}_r{}_a{src}_to_a{dst}_{:010x}", t.id, round, tag & 0xff_ffff_ffff)
        );
        let mut item = MemoryItem::new(name, intent, experience, features);
        item.utility_q = 0.35;
        item.trust = 0.55;
        item.hazard = 0.15;
        item.taint = Taint::Unverified;
        item.source_type = "pre_round_memory_handoff".into();
        item.memory_type = "memory_handoff_summary".into();
        item.origin_task = task;
        item.origin_round = round;
        item.writer = Writer::Agent(dst);
        item.allowed_agents = vec![dst];
        item.allowed_task_classes = vec![t.class.to_string()];
        item.set_parents(vec![
            t.id.clone(),
            self.round_labels[round as usize + 1].clone(),
            self.agent_labels[src as usize].clone(),
            self.agent_labels[dst as usize].clone(),
            "memory_handoff".into(),
        ]);
        item.source_agent_trust = self.reputation;
        // Strict ledger: taint propagates from the reported memories, lineage is their ids.
        let (taint, parents) = self.ledger_inputs(report.iter().copied());
        let reported: Vec<(ItemId, bool)> =
            report.iter().zip(&retention).map(|(id, r)| (*id, *r == Retention::Verbatim)).collect();
        // The handoff's own task's target: under async timing a handoff can land after its task
        // has finished and the next one has started.
        let now = self.now();
        let label = label_handoff(
            &self.oracle,
            self.is_attacker[src as usize],
            &reported,
            task,
            self.targets.get(&task).map(|(t, tok)| (*t, tok.as_slice())),
            now,
        );
        self.commit(item, Scope::Private, dst, (StrictChannel::PeerMessage, taint, parents), label);
    }

    /// A handoff summary's intent, experience and features. Texts and their fragments are cached:
    /// the intent per (sender, receiver), each sentence per (reported item, retention, sender),
    /// header and footer per task. The header fragment is analysed with its agent and round
    /// numbers zeroed (standalone digits form no token and match no pattern), so one serves
    /// every handoff of the task.
    fn handoff_text(
        &mut self,
        t: &Task,
        round: u32,
        src: u32,
        dst: u32,
        report: &[ItemId],
        retention: &[Retention],
    ) -> (String, String, TextFeatures) {
        if self.task_frags.as_ref().is_none_or(|f| f.0 != t.index) {
            let header = Rc::new(experience_fragment(&render::handoff_header(t, 0, 0, 0), &mut self.lex));
            let footer_text: Rc<str> = render::handoff_footer(t).into();
            let footer = Rc::new(experience_fragment(&footer_text, &mut self.lex));
            self.task_frags = Some((t.index, header, footer_text, footer));
        }
        let (_, header, footer_text, footer) = self.task_frags.clone().expect("just set");
        let key = match self.scn.protocol.handoff_intent {
            HandoffIntent::SenderReceiver => HandoffIntentKey::Edge(src, dst),
            HandoffIntent::TaskQuestion => HandoffIntentKey::Task(t.index),
        };
        let (intent, intent_frag) = match self.handoff_intents.get(&key) {
            Some(x) => x.clone(),
            None => {
                let text: Rc<str> = match key {
                    HandoffIntentKey::Edge(..) => render::handoff_intent(src, dst).into(),
                    HandoffIntentKey::Task(_) => render::handoff_task_intent(t).into(),
                };
                let f = Rc::new(intent_fragment(&text, &mut self.lex));
                self.handoff_intents.insert(key, (text.clone(), f.clone()));
                (text, f)
            }
        };
        // Up to three sentences, each an intro (sender-specific text, sender-free features) and a
        // body (memory-specific, cached per memory and kind).
        let mut kinds: Vec<(render::SentenceKind, Option<ItemId>)> = report
            .iter()
            .zip(retention)
            .filter_map(|(id, r)| render::sentence_kind(&self.bank.get(*id).features, *r).map(|k| (k, Some(*id))))
            .take(3)
            .collect();
        if kinds.is_empty() {
            kinds.push((render::SentenceKind::Fallback, None));
        }
        let mut experience = render::handoff_header(t, round, src, dst);
        // Header, up to three (intro, body) pairs, footer.
        let mut frags: Vec<Rc<Fragment>> = Vec::with_capacity(8);
        frags.push(header);
        for (kind, id) in kinds {
            let intro = match self.intro_texts.get(&(kind, src)) {
                Some(x) => x.clone(),
                None => {
                    let x: Rc<str> = render::sentence_intro(kind, src).into();
                    self.intro_texts.insert((kind, src), x.clone());
                    x
                }
            };
            let intro_frag = match self.sentence_intros.get(&kind) {
                Some(f) => f.clone(),
                None => {
                    let f = Rc::new(experience_fragment(&render::sentence_intro(kind, 0), &mut self.lex));
                    self.sentence_intros.insert(kind, f.clone());
                    f
                }
            };
            experience.push_str(&intro);
            frags.push(intro_frag);
            // Bodies are cached by their text: the copies of one payload share it.
            let body = id.and_then(|id| match self.body_texts.get(&(id, kind)) {
                Some(t) => t.clone(),
                None => {
                    let t: Option<Rc<str>> = render::sentence_body(&self.bank.get(id).features, kind).map(Into::into);
                    self.body_texts.insert((id, kind), t.clone());
                    t
                }
            });
            if let Some(text) = body {
                let f = match self.sentence_bodies.get(&text) {
                    Some(f) => f.clone(),
                    None => {
                        let f = Rc::new(experience_fragment(&text, &mut self.lex));
                        self.sentence_bodies.insert(text.clone(), f.clone());
                        f
                    }
                };
                experience.push_str(&text);
                frags.push(f);
            }
        }
        experience.push_str(&footer_text);
        frags.push(footer);
        let features = if composable(&frags) {
            compose(&intent_frag, &frags)
        } else {
            analyze(&intent, &experience, &mut self.lex)
        };
        debug_assert_eq!(features, analyze(&intent, &experience, &mut self.lex), "composed handoff features");
        (intent.to_string(), experience, features)
    }

    /// Experience text and features of a memory assembled from parts given as (text, canonical
    /// text): fragments are analysed once per canonical text and composed; debug builds assert
    /// the result equals a whole-text scan.
    fn composed(&mut self, intent: &str, parts: &[(String, String)]) -> (String, TextFeatures) {
        let get = |this: &mut Self, key: &str, is_intent: bool| -> Rc<Fragment> {
            let cache = if is_intent { &mut this.intent_fragments } else { &mut this.part_fragments };
            if let Some(f) = cache.get(key) {
                return f.clone();
            }
            let f = Rc::new(if is_intent {
                intent_fragment(key, &mut this.lex)
            } else {
                experience_fragment(key, &mut this.lex)
            });
            let cache = if is_intent { &mut this.intent_fragments } else { &mut this.part_fragments };
            cache.insert(key.to_string(), f.clone());
            f
        };
        let i = get(self, intent, true);
        let frags: Vec<Rc<Fragment>> = parts.iter().map(|(_, canonical)| get(self, canonical, false)).collect();
        let experience: String = parts.iter().map(|(text, _)| text.as_str()).collect();
        let features =
            if composable(&frags) { compose(&i, &frags) } else { analyze(intent, &experience, &mut self.lex) };
        debug_assert_eq!(features, analyze(intent, &experience, &mut self.lex), "composed features");
        (experience, features)
    }

    /// Cosine of `query` and the text embedding of item `id` (computed on first use).
    fn text_similarity(&mut self, id: ItemId, query: &[f32]) -> f64 {
        if self.bank.text_embedding(id).is_none() {
            let it = self.bank.get(id);
            let e = self.embedder.embed(it.features.tokens.get(), Embedder::text_key(&it.experience), &self.lex);
            self.bank.set_text_embedding(id, e);
        }
        cosine(query, self.bank.text_embedding(id).expect("just set"))
    }

    /// An agent retrieves and answers.
    fn call(&mut self, agent: u32, round: u32) {
        let st = self.cur.as_ref().expect("task");
        let task = st.task;
        let selection = if round > 0 && self.scn.protocol.retrieval == RetrievalMode::Once {
            st.selected[0][agent as usize].clone()
        } else {
            self.retrieve(agent, round)
        };
        let t = self.task(task);
        let poisoning = t.poisoning;
        let st = self.cur.as_ref().expect("task");
        let role = if self.is_attacker[agent as usize] {
            Role::Attacker { target: if poisoning { st.target } else { None } }
        } else {
            Role::Benign
        };
        let peer_msgs: Vec<(TextFeatures, bool)> = if self.scn.protocol.peer_messages && round > 0 {
            self.graph
                .incoming(agent)
                .iter()
                .filter_map(|j| st.shown[round as usize - 1][*j as usize].clone())
                .collect()
        } else {
            Vec::new()
        };
        let st = self.cur.as_ref().expect("task");
        let evidence: Vec<Evidence<'_>> =
            selection.iter().map(|(id, sim)| Evidence { features: &self.bank.get(*id).features, sim: *sim }).collect();
        let peers: Vec<Peer<'_>> = peer_msgs.iter().map(|(f, c)| Peer { features: f, cautioned: *c }).collect();
        let ctx = AnswerContext {
            role,
            option_tokens: &st.option_tokens,
            prior: &st.priors[agent as usize],
            memories: &evidence,
            framing: self.framing,
            peers: &peers,
            open_ended: self.task(task).open_ended,
        };
        let mut rng = self.streams.rng(StreamKind::Decision, &[u64::from(task), u64::from(agent), u64::from(round)]);
        let answer = self.backbone.answer(&ctx, &mut rng);
        let tokens = render::prompt_tokens(self.task(task), &selection, &self.bank, peers.len());
        self.trace.u64(u64::from(answer.choice));
        let now = self.now();
        let st = self.cur.as_mut().expect("task");
        st.answers[round as usize][agent as usize] = Some(answer);
        st.selected[round as usize][agent as usize] = selection;
        st.tokens[round as usize][agent as usize] = tokens;
        st.call_time[round as usize][agent as usize] = now;
    }

    /// The backend's top-k of `cands` by hybrid score, or nothing for a guard that ranks the
    /// whole pool itself (see [`Guard::full_pool`]): it would never be read.
    fn backend_selection(&self, cands: &[(f64, ItemId)], k: usize) -> Rc<[usize]> {
        if self.guard.full_pool() { Rc::new([]) } else { hybrid_top_k(cands, &self.bank, k) }
    }

    /// A store's backend candidates for the current task (spec §3.3 stage 1): similarity per
    /// intent, the top `backend_k` intents expanded to their memories, and the indices of the
    /// `top_k` best by hybrid score 0.5·z_sim + 0.5·z_q. Within a task the query and every Q are
    /// fixed and stores only grow, so the group ranking is reused until the store gains a group
    /// and the candidates until it gains an item; the shared store's candidates thus serve
    /// every agent and round of the task.
    fn store_candidates(&mut self, slot: usize, shared: bool, agent: u32) -> (Candidates, Rc<[usize]>) {
        let proto = &self.scn.protocol;
        let (k, bk) = (proto.top_k, proto.backend_k());
        let topo = self.scn.memory_topology;
        let groups = if shared { self.bank.shared_groups() } else { self.bank.private_groups(agent) };
        let items = if shared { self.bank.shared_store().len() } else { self.bank.private_store(agent).len() };
        let st = self.cur.as_mut().expect("task");
        let cache = &mut st.store_cache[slot];
        let reader_dependent = shared && topo == MemoryTopology::RoleIsolated;
        if cache.groups == groups.len() && cache.items == items && !reader_dependent {
            return (cache.cands.clone(), cache.best.clone());
        }
        if cache.groups != groups.len() {
            let sims = &mut st.group_sims[slot];
            let dim = self.bank.dim().max(1);
            for g in &groups[sims.len()..] {
                let row = g.embedding / dim;
                if st.intent_sims.len() <= row {
                    st.intent_sims.resize(self.bank.intent_count(), None);
                }
                let s = *st.intent_sims[row]
                    .get_or_insert_with(|| cosine(&st.query_emb, self.bank.intent_embedding(g.embedding)));
                sims.push(s);
            }
            // Bounded selection of the best backend_k groups (ties: lower group index first).
            // Groups only grow and their similarities are fixed within a task, so new groups
            // continue the selection where the last one stopped: the same result as a rescan.
            let top = &mut cache.top;
            let from = if cache.groups == usize::MAX { 0 } else { cache.groups };
            if from == 0 {
                top.clear();
            }
            for (g, &s) in sims.iter().enumerate().skip(from) {
                if s < 0.0 || (top.len() == bk && s <= top[bk - 1].0) {
                    continue;
                }
                let at = top.partition_point(|(t, _)| *t >= s);
                top.insert(at, (s, g));
                top.truncate(bk);
            }
            cache.groups = groups.len();
        }
        let mut cands: Vec<(f64, ItemId)> =
            Vec::with_capacity(cache.top.iter().map(|(_, g)| groups[*g].members.len()).sum());
        cands.extend(
            cache
                .top
                .iter()
                .flat_map(|(s, g)| groups[*g].members.iter().map(move |id| (*s, *id)))
                .filter(|(_, id)| !reader_dependent || topo.shared_visible(self.bank.get(*id), agent, self.scn.agents)),
        );
        let best = self.backend_selection(&cands, k);
        let cands = Rc::new(cands);
        let st = self.cur.as_mut().expect("task");
        let cache = &mut st.store_cache[slot];
        cache.items = if reader_dependent { usize::MAX } else { items };
        cache.cands = cands.clone();
        cache.best = best.clone();
        (cands, best)
    }

    /// A store's candidates under the same-task scope (LongMemEval, spec §5.5): only items
    /// written for the current task, the `backend_k` most similar by intent, and the `top_k`
    /// best of those by the backend's hybrid score.
    fn scoped_candidates(&mut self, slot: usize, shared: bool, agent: u32) -> (Candidates, Rc<[usize]>) {
        let proto = &self.scn.protocol;
        let (k, bk) = (proto.top_k, proto.backend_k());
        let topo = self.scn.memory_topology;
        let want = if shared { crate::memory::StoreKind::Shared } else { crate::memory::StoreKind::Private(agent) };
        let st = self.cur.as_ref().expect("task");
        // Within a task the query and every Q are fixed, so the candidates hold until the task
        // gains an item; the shared store's then serve every agent (unless visibility depends
        // on the reader).
        let reader_dependent = shared && topo == MemoryTopology::RoleIsolated;
        let cache = &st.store_cache[slot];
        if !reader_dependent && cache.items == st.task_items.len() {
            return (cache.cands.clone(), cache.best.clone());
        }
        let mut cands: Vec<(f64, ItemId)> = Vec::new();
        for &id in &st.task_items {
            let item = self.bank.get(id);
            if self.bank.location(id) != want || (shared && !topo.shared_visible(item, agent, self.scn.agents)) {
                continue;
            }
            let key = Embedder::text_key(&item.intent);
            let sim = self.intent_cache.get(&key).map_or(0.0, |e| cosine(&st.query_emb, e));
            cands.push((sim, id));
        }
        // Most similar first; ties keep commit order.
        let mut ranked: Vec<(f64, usize, ItemId)> = cands.iter().enumerate().map(|(i, (s, id))| (*s, i, *id)).collect();
        top_k(&mut ranked, bk, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let cands: Vec<(f64, ItemId)> = ranked.into_iter().map(|(s, _, id)| (s, id)).collect();
        let best = self.backend_selection(&cands, k);
        let cands: Candidates = Rc::new(cands);
        let st = self.cur.as_mut().expect("task");
        let cache = &mut st.store_cache[slot];
        cache.items = if reader_dependent { usize::MAX } else { st.task_items.len() };
        cache.cands = cands.clone();
        cache.best = best.clone();
        (cands, best)
    }

    /// Two-stage retrieval (spec §3.3): per-store candidates and the backend's hybrid selection,
    /// the broker for shared items, the guard's scoring and firewall, then top-k.
    fn retrieve(&mut self, agent: u32, round: u32) -> Vec<(ItemId, f64)> {
        let proto = &self.scn.protocol;
        let (k, bk) = (proto.top_k, proto.backend_k());
        let st = self.cur.as_ref().expect("task");
        let task = st.task;
        let wl = self.workload.clone();
        let class = wl.tasks()[task as usize].class.as_str();
        let reader = Reader { agent, task_class: class };
        let topo = self.scn.memory_topology;
        // Each store's candidates are shared with the store cache, not copied.
        let mut pools: [Option<Candidates>; 2] = [None, None];
        let mut selected: Vec<(ItemId, bool)> = Vec::new();
        let full_pool = self.guard.full_pool();
        for (store_idx, shared) in [(0u64, false), (1u64, true)] {
            if shared && topo == MemoryTopology::PrivateOnly {
                continue;
            }
            let slot = if shared { self.scn.agents as usize } else { agent as usize };
            let (cands, best) = if proto.same_task_scope {
                self.scoped_candidates(slot, shared, agent)
            } else {
                self.store_candidates(slot, shared, agent)
            };
            // The backend's own selection (ε-exploration or the hybrid top-k); a full-pool guard
            // ranks the whole pool itself, and the exploration stream is the selection's alone,
            // so skipping both there changes nothing else.
            if !full_pool {
                let mut rng = self
                    .streams
                    .rng(StreamKind::Exploration, &[u64::from(task), u64::from(agent), u64::from(round), store_idx]);
                if rng.bernoulli(proto.epsilon) {
                    selected.extend(rng.sample_indices(cands.len(), k).iter().map(|i| (cands[*i].1, shared)));
                } else {
                    selected.extend(best.iter().map(|i| (cands[*i].1, shared)));
                }
            }
            pools[store_idx as usize] = Some(cands);
        }
        let (pure, stamp) = (self.guard.score_is_pure(), self.memo_stamp);
        let mut pool: Vec<(ItemId, bool)> = if full_pool {
            if self.prescore_memo.len() < self.bank.len() {
                self.prescore_memo.resize(self.bank.len(), (0, 0, 0.0));
            }
            let class_id = self.bank.class_id(class);
            // The best `backend_k` of the whole pool by pre-score, in one bounded pass. Ties keep
            // candidate order (private store first, then shared): the position breaks them.
            let order = |a: &(f64, usize, ItemId, bool), b: &(f64, usize, ItemId, bool)| {
                b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
            };
            let mut ranked = std::mem::take(&mut self.scratch.ranked);
            ranked.clear();
            let mut position = 0usize;
            for (store_idx, cands) in pools.iter().enumerate() {
                let shared = store_idx == 1;
                for &(s, id) in cands.iter().flat_map(|c| c.iter()) {
                    // The pre-score depends on the item, its intent similarity to the task's
                    // query and the reader: memoised per task like the read verdicts.
                    let i = id as usize;
                    let m = self.prescore_memo[i];
                    let p = if pure && m.0 == stamp && m.1 == agent {
                        m.2
                    } else {
                        let input = self.bank.prescore_input(id, agent, class, class_id);
                        let p = self.guard.prescore(input, s);
                        self.prescore_memo[i] = (stamp, agent, p);
                        p
                    };
                    insert_bounded(&mut ranked, bk, (p, position, id, shared), order);
                    position += 1;
                }
            }
            let mut pool = std::mem::take(&mut self.scratch.pool);
            pool.clear();
            pool.extend(ranked.iter().map(|(_, _, id, sh)| (*id, *sh)));
            self.scratch.ranked = ranked;
            pool
        } else {
            selected
        };
        // The cross-agent broker on shared items.
        let mut blocked = std::mem::take(&mut self.scratch.blocked);
        blocked.clear();
        pool.retain(|(id, shared)| {
            if !*shared {
                return true;
            }
            let d = self.guard.broker(self.bank.get(*id), reader, topo);
            if d.action == crate::guard::maple::Action::Block {
                blocked.push((*id, "broker", d.reason));
                false
            } else {
                true
            }
        });
        // Cluster share over every candidate handed to scoring (spec C11).
        let mut keys = std::mem::take(&mut self.scratch.keys);
        keys.clear();
        keys.extend(pool.iter().map(|(id, _)| self.bank.get(*id).features.answer_key));
        let keyed = keys.iter().filter(|k| k.is_some()).count();
        let mut key_counts = [0usize; 5];
        for k in keys.iter().flatten() {
            key_counts[*k as usize] += 1;
        }
        let query_emb = self.cur.as_ref().expect("task").query_emb.clone();
        // The best `top_k` unblocked candidates by score, in one bounded pass; ties keep
        // candidate order (spec C11): the position among unblocked candidates breaks them.
        let order =
            |a: &(f64, usize, ItemId, f64), b: &(f64, usize, ItemId, f64)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let mut top = std::mem::take(&mut self.scratch.top);
        top.clear();
        let mut unblocked = 0usize;
        for (i, (id, _)) in pool.iter().enumerate() {
            let share = match keys[i] {
                Some(key) => key_counts[key as usize] as f64 / keyed.max(1) as f64,
                None => 0.0,
            };
            let cluster = Cluster { share, keyed };
            let i = *id as usize;
            if self.sim_memo.len() <= i {
                self.sim_memo.resize(self.bank.len(), (0, 0.0));
                self.verdict_memo
                    .resize(self.bank.len(), (0, 0, 0, 0, crate::guard::ReadVerdict { score: 0.0, blocked: None }));
            }
            let stamp = self.memo_stamp;
            let sim = if self.sim_memo[i].0 == stamp {
                self.sim_memo[i].1
            } else {
                let s = self.text_similarity(*id, &query_emb);
                self.sim_memo[i] = (stamp, s);
                s
            };
            let pure = self.guard.score_is_pure();
            let m = self.verdict_memo[i];
            let v = if pure && m.0 == stamp && m.1 == agent && m.2 == share.to_bits() && m.3 == keyed {
                m.4
            } else {
                let st = self.cur.as_ref().expect("task");
                let v = self.guard.score(self.bank.get(*id), &st.query, sim, cluster, reader);
                if pure {
                    self.verdict_memo[i] = (stamp, agent, share.to_bits(), keyed, v);
                }
                v
            };
            let floor_block = self.guard.min_score().is_some_and(|m| v.score < m);
            match v.blocked.or(floor_block.then_some("low_score")) {
                Some(reason) => blocked.push((*id, "read", reason)),
                None => {
                    insert_bounded(&mut top, k, (v.score, unblocked, *id, sim), order);
                    unblocked += 1;
                }
            }
        }
        for (id, _) in &pool {
            self.bank.get_mut(*id).retrieved_count += 1;
        }
        if !blocked.is_empty() {
            let seen: Vec<(&MemoryItem, &'static str)> =
                blocked.iter().map(|(id, _, reason)| (self.bank.get(*id), *reason)).collect();
            self.guard.observe_read_blocks(&seen);
        }
        for &(id, stage, reason) in &blocked {
            if stage == "read" {
                self.bank.get_mut(id).blocked_count += 1;
            }
            self.recorder.read_block(&self.oracle, id, stage, reason);
            self.trace.u64(u64::from(id));
        }
        for &(_, _, id, _) in &top {
            self.bank.get_mut(id).selected_count += 1;
            self.trace.u64(u64::from(id));
            if let Some(i) = self.inspection.as_mut() {
                i.selections.push((task, round, agent, id, self.bank.get(id).status));
            }
        }
        let selection = top.iter().map(|&(_, _, id, sim)| (id, sim)).collect();
        // Hand the buffers back for the next retrieval.
        self.scratch.top = top;
        self.scratch.blocked = blocked;
        self.scratch.keys = keys;
        self.scratch.pool = pool;
        selection
    }

    /// Every agent has answered `round`: the message guard reviews, then metrics observe it.
    fn end_round(&mut self, round: u32) {
        let st = self.cur.as_ref().expect("task");
        let task = st.task;
        let wl = self.workload.clone();
        let t = &wl.tasks()[task as usize];
        let n = self.scn.agents;
        let r = round as usize;
        let reviews = self.guard.reviews_messages();
        let round_memories = self.scn.protocol.round_memories;
        let style = self.scn.attack.steer_style();
        let mut stored: Vec<(u32, String)> = Vec::new();
        if reviews || self.scn.protocol.peer_messages || round_memories {
            let lex = &mut self.lex;
            let mut views: Vec<MessageView> = (0..n)
                .filter_map(|a| {
                    st.answers[r][a as usize].map(|ans| {
                        let text = render::output_text(t, &ans, style);
                        let features = analyze("", &text, lex);
                        MessageView { agent: a, text, answer: Some(ans.choice), features }
                    })
                })
                .collect();
            let actions = if reviews {
                let mut rng = self.streams.rng(StreamKind::Guard, &[u64::from(task), u64::from(round)]);
                self.guard.review_messages(round, &mut views, &self.graph, &mut rng)
            } else {
                Vec::new()
            };
            let st = self.cur.as_mut().expect("task");
            let mut cautioned = vec![false; n as usize];
            for a in &actions {
                self.trace.u64(message_action_code(a));
                let hit = match *a {
                    MessageAction::Remove(x)
                    | MessageAction::Replace(x)
                    | MessageAction::Rewrite(x)
                    | MessageAction::AppendGuidance(x) => x,
                    MessageAction::ReplaceWith { agent, .. } => agent,
                };
                self.recorder.message_action(a, !self.is_attacker[hit as usize]);
                match *a {
                    MessageAction::Remove(x) => st.removed[r][x as usize] = true,
                    // A replaced or rewritten output still votes and is scored, with the answer
                    // the reference's `extract_choice` reads from the new text: its last
                    // standalone A–E letter, "A" if none (spec §5.2). Free-text answers have no
                    // such default: the output then carries no answer.
                    MessageAction::Replace(x) | MessageAction::Rewrite(x) => {
                        let text = views.iter().find(|v| v.agent == x).map(|v| v.text.as_str()).unwrap_or("");
                        if t.open_ended {
                            st.removed[r][x as usize] = true;
                        } else {
                            let choice = render::extract_choice(text, t.options.len());
                            st.unreadable[r][x as usize] = !render::has_choice(text, t.options.len());
                            st.answers[r][x as usize] = Some(Answer { choice, steered: false, cites_memory: false });
                        }
                    }
                    MessageAction::AppendGuidance(x) => cautioned[x as usize] = true,
                    MessageAction::ReplaceWith { agent, donor } => {
                        st.answers[r][agent as usize] = st.answers[r][donor as usize].map(|d| Answer {
                            choice: d.choice,
                            steered: false,
                            cites_memory: d.cites_memory,
                        });
                    }
                }
            }
            for v in views {
                let a = v.agent as usize;
                if !st.removed[r][a] {
                    if round_memories {
                        stored.push((v.agent, v.text));
                    }
                    st.shown[r][a] = Some((v.features, cautioned[a]));
                }
            }
        }
        for (agent, text) in stored {
            self.round_memory(task, round, agent, text);
        }
        let st = self.cur.as_mut().expect("task");
        st.finished_rounds = round + 1;
        let obs: Vec<AgentRound> = (0..n)
            .map(|a| AgentRound {
                agent: a,
                benign: !self.is_attacker[a as usize],
                selected: st.selected[round as usize][a as usize].iter().map(|(id, _)| *id).collect(),
                answer: if st.removed[round as usize][a as usize] {
                    None
                } else {
                    st.answers[round as usize][a as usize].map(|x| x.choice)
                },
                unknown: st.removed[round as usize][a as usize] || st.unreadable[round as usize][a as usize],
                prompt_tokens: st.tokens[round as usize][a as usize],
                time: st.call_time[round as usize][a as usize],
            })
            .collect();
        self.recorder.round(&self.oracle, task, round, &obs, &st.option_tokens, t.metric);
    }

    /// Stores `agent`'s reviewed round output as a team memory, with the INFA harness's
    /// metadata (spec §1.1, §5.6): tool-observation relays for ToolAttack, prompt-injection
    /// metadata for outputs that carry an injection cue, benign peer reasoning otherwise.
    fn round_memory(&mut self, task: u32, round: u32, agent: u32, text: String) {
        let wl = self.workload.clone();
        let t = &wl.tasks()[task as usize];
        let attacker = self.is_attacker[agent as usize];
        let cue = render::has_injection_cue(&text);
        // (source, Q, τ, h, taint)
        let (source, q, trust, hazard, taint): (&str, f64, f64, f64, Taint) =
            if matches!(self.scn.attack, crate::attack::AttackConfig::ToolAttack(_)) {
                ("tool_observation_cross_agent", 0.45, 0.28, 0.62, Taint::External)
            } else if self.scn.protocol.reference_attacker_metadata && attacker && t.poisoning {
                ("external_prompt_injection_cross_agent", 0.20, 0.22, 0.72, Taint::External)
            } else if cue {
                ("external_prompt_injection_cross_agent", 0.20, 0.40, 0.58, Taint::External)
            } else {
                ("benign_peer_reasoning", 0.55, 0.78, 0.08, Taint::Clean)
            };
        let hazard = if render::has_hazard_cue(&text) { (hazard + 0.22).min(0.95) } else { hazard };
        let features = analyze(&t.question, &text, &mut self.lex);
        let name = format!("{}_{}_r{round}_a{agent}", self.guard.name(), t.id);
        let mut item = MemoryItem::new(name, t.question.clone(), text, features);
        item.utility_q = q;
        item.trust = trust;
        item.hazard = hazard;
        item.taint = taint;
        item.source_type = source.into();
        item.memory_type = "round_dialogue_memory".into();
        item.origin_task = task;
        item.origin_round = round;
        item.writer = Writer::Agent(agent);
        item.allowed_agents = Vec::new();
        item.allowed_task_classes = vec![t.class.clone()];
        item.set_parents(vec![t.id.clone(), self.agent_labels[agent as usize].clone()]);
        item.source_agent_trust = self.reputation;
        let consumed: Vec<ItemId> = {
            let st = self.cur.as_ref().expect("task");
            st.selected[round as usize][agent as usize].iter().map(|(id, _)| *id).collect()
        };
        let (ltaint, parents) = self.ledger_inputs(consumed.into_iter());
        let record = (attacker && t.poisoning && self.scn.attack.through_messages()).then(|| {
            let st = self.cur.as_ref().expect("task");
            PoisonRecord {
                origin: PoisonOrigin::AttackerMessage,
                attack: self.scn.attack.family(),
                task,
                target_tokens: st.target_tokens.clone(),
                target: st.target.unwrap_or(0),
                written_at: self.now(),
                carries_payload: true,
            }
        });
        self.commit(item, Scope::Team, agent, (StrictChannel::PeerMessage, ltaint, parents), record);
    }

    /// Final vote, outcome updates, outcome memories, promotion (spec §4, §5.3).
    fn finish(&mut self, task: u32) {
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
                        apply_outcome(item, success, proto.feedback, proto.provenance, &proto.outcome, &self.meta);
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
                let (experience, features) = self.composed(&intent, &parts);
                let name = format!("benign_stream_{task}_{}_agent_{a}", t.id);
                let mut item = MemoryItem::new(name, intent, experience, features);
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
                item.set_parents(vec![t.id.clone()]);
                item.source_agent_trust = 0.5;
                let (taint, deps) = self.ledger_inputs(st.selected[last][a as usize].iter().map(|(id, _)| *id));
                self.commit(item, Scope::Private, a, (StrictChannel::AgentOutput, taint, deps), None);
            }
        }
        self.promote(t, &st, final_answer, success);
        self.recorder.end_task(&self.oracle, task, final_answer, t.poisoning, t.metric);
    }

    /// The one candidate answer the trusted user-history rounds selected by benign agents in
    /// round `last` point to, if they point to exactly one.
    fn trusted_evidence(&self, st: &TaskState, last: usize) -> Option<u8> {
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

    fn promote(&mut self, t: &Task, st: &TaskState, final_answer: Option<u8>, success: bool) {
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
            .filter(|a| strict || !self.is_attacker[*a as usize])
            .filter(|_| self.reputation >= promo.min_agent_trust)
            .filter(|a| {
                let sel = &st.selected[last][*a as usize];
                let own_private =
                    sel.iter().any(|(id, _)| self.bank.location(*id) == crate::memory::StoreKind::Private(*a));
                match promo.policy {
                    PromotionPolicy::SuccessOnly => true,
                    PromotionPolicy::RetrievedAny => !sel.is_empty(),
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
            let sel: Vec<String> =
                st.selected[last][a as usize].iter().take(8).map(|(id, _)| self.bank.get(*id).name.clone()).collect();
            let (intent, experience) = render::promotion_text(t, a, ans.choice, final_answer, &sel);
            let features = self.features(&intent, &experience);
            let name = format!("benign_stream_team_{}_agent_{a}", t.id);
            let mut item = MemoryItem::new(name, intent, experience, features);
            let rep = self.reputation;
            item.utility_q = if Some(ans.choice) == final_answer { 0.70 } else { 0.55 };
            item.trust = rep.max(0.55);
            item.hazard = 0.08;
            item.taint = if rep >= 0.5 { Taint::Clean } else { Taint::Unverified };
            item.source_type = format!("benign_shared_promotion_{}", policy_name(promo.policy));
            item.memory_type = "team_promoted_agent_experience".into();
            item.origin_task = t.index;
            item.writer = Writer::Agent(a);
            item.allowed_agents = (0..self.scn.agents).collect();
            item.allowed_task_classes = vec![t.class.to_string()];
            let mut parents = vec![t.id.clone(), format!("agent_{a}"), "benign_shared_promotion".into()];
            parents.extend(sel.iter().cloned());
            item.set_parents(parents);
            item.source_agent_trust = rep;
            let (taint, _) = self.ledger_inputs(st.selected[last][a as usize].iter().map(|(id, _)| *id));
            self.commit(item, Scope::Team, a, (StrictChannel::AgentOutput, taint, sel), None);
        }
    }
}

/// Keeps the `k` first elements under the total order `cmp`, sorted (a partial selection, so
/// ranking hundreds of candidates for three slots stays cheap).
/// Inserts `x` into `best`, kept sorted by `cmp` and at most `k` long. Fed a sequence, it
/// leaves the `k` first of the sequence sorted by `cmp`: when `cmp` is a total order, the same
/// as sorting the whole sequence and truncating.
fn insert_bounded<T>(best: &mut Vec<T>, k: usize, x: T, cmp: impl Fn(&T, &T) -> std::cmp::Ordering) {
    use std::cmp::Ordering::Less;
    if k == 0 || (best.len() == k && cmp(&x, &best[k - 1]) != Less) {
        return;
    }
    // Insertion by swaps, not `Vec::insert`: for a dozen slots the shifts are cheaper inline
    // than a call to `memmove`. `x` lands before the first element not less than it, as
    // `partition_point` would put it.
    best.push(x);
    let mut i = best.len() - 1;
    while i > 0 && cmp(&best[i - 1], &best[i]) != Less {
        best.swap(i - 1, i);
        i -= 1;
    }
    best.truncate(k);
}

fn top_k<T: Copy>(v: &mut Vec<T>, k: usize, cmp: impl Fn(&T, &T) -> std::cmp::Ordering) {
    if v.len() <= k {
        v.sort_by(cmp);
        return;
    }
    if k <= 16 {
        // A bounded insertion pass beats a selection plus sort for the small k of a prompt;
        // `cmp` is a total order (ties are broken by position), so the result is the same.
        let mut best: Vec<T> = Vec::with_capacity(k + 1);
        for x in v.iter() {
            insert_bounded(&mut best, k, *x, &cmp);
        }
        *v = best;
        return;
    }
    v.select_nth_unstable_by(k - 1, &cmp);
    v.truncate(k);
    v.sort_by(cmp);
}

/// A stable code of a message action for the trace hash.
fn message_action_code(a: &MessageAction) -> u64 {
    match *a {
        MessageAction::Replace(x) => 1 << 32 | u64::from(x),
        MessageAction::Rewrite(x) => 2 << 32 | u64::from(x),
        MessageAction::AppendGuidance(x) => 3 << 32 | u64::from(x),
        MessageAction::Remove(x) => 4 << 32 | u64::from(x),
        MessageAction::ReplaceWith { agent, donor } => 5 << 32 | u64::from(donor) << 16 | u64::from(agent),
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

/// A generous estimate of the items a run writes (handoffs on every edge before every round
/// after the first, outcome memories, poison copies, promotions), to size the arena once.
fn expected_items(scn: &Scenario, graph: &CommGraph) -> usize {
    let per_task = graph.edge_count() * scn.protocol.rounds.saturating_sub(1) as usize + scn.agents as usize + 8;
    (scn.workload.tasks() as usize * per_task).min(1 << 22)
}

/// Indices of the `k` best candidates by the backend's hybrid score 0.5·z_sim + 0.5·z_q
/// (ties: candidate order).
fn hybrid_top_k(cands: &[(f64, ItemId)], bank: &MemoryBank, k: usize) -> Rc<[usize]> {
    // Mean and spread of the candidates' Q (summed in candidate order), then one bounded pass
    // over the hybrid scores; ties keep candidate order.
    let n = cands.len().max(1) as f64;
    let m = cands.iter().map(|(_, id)| bank.backend_q(*id)).sum::<f64>() / n;
    let var = cands
        .iter()
        .map(|(_, id)| {
            let q = bank.backend_q(*id);
            (q - m) * (q - m)
        })
        .sum::<f64>()
        / n;
    let sd = if cands.len() <= 1 || var <= 0.0 { 1.0 } else { var.sqrt() };
    let order = |a: &(f64, usize), b: &(f64, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    let mut best: Vec<(f64, usize)> = Vec::with_capacity(k + 1);
    for (i, (s, id)) in cands.iter().enumerate() {
        let q = bank.backend_q(*id);
        let h = 0.5 * (s - 0.18568) / 0.09408 + 0.5 * ((q - m) / sd).clamp(-3.0, 3.0);
        insert_bounded(&mut best, k, (h, i), order);
    }
    best.iter().map(|h| h.1).collect()
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

/// Runs one arm of a scenario with `seed`.
pub fn run_arm(scn: &Scenario, profile: &Profile, arm: &Arm, seed: u64, record: bool) -> ArmRun {
    World::new(scn, profile, arm, seed, record).run()
}
