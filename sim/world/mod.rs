//! One simulated run of one arm: wires the engine, topology, memory, guard, attack, agents,
//! workload, oracle and metrics, and defines the event enum and its handlers.
//!
//! Lockstep timing reproduces the paper's synchronous rounds: a task arrives, its poison is
//! committed, and each round is (handoffs → every agent retrieves and answers → the message
//! guard reviews) at distinct ticks. Async timing runs the same handlers on the same queue with
//! sampled latencies: an agent starts its next round as soon as its own answer is back, and a
//! handoff lands only when its message and summary calls are done, so a read sees only what was
//! committed before it.
//!
//! Within a lockstep round the agents' calls read only the round's starting state: they are
//! planned together (on rayon's threads once the team is large, each worker with its own
//! memos) and each plan is applied in its agent's turn, so the bytes are those of calls made
//! one after another for any number of threads (`round.rs`, `retrieve.rs`).

mod arrive;
mod capability;
mod commit;
mod finish;
mod handoff;
pub mod render;
mod retrieve;
mod round;

use crate::agent::Profile;
use crate::agent::{
    Answer, AnswerContext, Backbone, CallKind, CallSite, DiscreteChoice, Evidence, MemoryFraming, Peer, Reported,
    Retention, Role, Verdict,
};
use crate::attack::PoisonWrite;
use crate::embed::{Embedder, cosine};
use crate::engine::{EventQueue, StreamKind, Streams, Time, TraceEntry, TraceHash};
use crate::eval::metrics::{AgentRound, ArmSummary, FinishContext, Recorder, Truth, label_handoff};
use crate::eval::monitor::{At, Cx, MonitorReport, Monitors, Observation, Route};
use crate::eval::oracle::{Oracle, PoisonOrigin, PoisonRecord};
use crate::guard::maple::{FeedbackPolicy, ProvenanceMode, Reader, StrictChannel, apply_strict_view};
use crate::guard::{Cluster, CommitVerdict, Guard, MessageAction, MessageView, MetadataRules};
use crate::memory::{ItemId, MemoryBank, MemoryItem, MemoryTopology, Scope, Status, Taint, Writer, marker_bits};
use crate::scenario::{
    Arm, Attackers, CandidatePool, FramingRule, HandoffIntent, LedgerInputs, MemoryBackend, Placement, PromotionPolicy,
    RetrievalMode, RoundMemoryText, Scenario, Timing,
};
use crate::text::{Fragment, composable, compose, experience_fragment, intent_fragment};
use crate::text::{Lexicon, QueryFeatures, Sym, TextFeatures, analyze, analyze_query, known_tokens_of, tokens_of};
use crate::topology::CommGraph;
use crate::workload::{HaystackLayout, QueryTerms, Task, TaskStream, TieOrder, WorkloadConfig};
use commit::{Label, WriteRequest};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

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
    /// Every memory in a prompt: (task, round, reader, item, the retriever's similarity, the
    /// similarity of the text the prompt shows, which the stand-in reads).
    pub evidence: Vec<(u32, u32, u32, ItemId, f64, f64)>,
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
    /// What the run's invariant monitors found, when it had any ([`World::with_monitors`]).
    pub monitor: Option<MonitorReport>,
}

/// Per-task cached handoff pieces: task index, header fragment, footer text and fragment, the
/// task id as a lineage string, and that string's [`marker_bits`].
type TaskFragments = (u32, Arc<Fragment>, Arc<str>, Arc<Fragment>, Arc<str>, u8);

struct TaskState {
    task: u32,
    target: Option<u8>,
    target_tokens: Arc<[Sym]>,
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
    /// [round][agent] a hash of the shown output's text, when the backbone wants call sites.
    shown_hash: Vec<Vec<[u8; 8]>>,
    tokens: Vec<Vec<u32>>,
    call_time: Vec<Vec<u64>>,
    answered: Vec<u32>,
    finished_rounds: u32,
    query: QueryFeatures,
    query_emb: Arc<[f32]>,
    option_tokens: Vec<Vec<Sym>>,
    /// Similarity of this task's query to each intent group, per store (private stores by
    /// agent, then the shared store); extended as stores gain groups. Groups are only ever
    /// appended, and the query is fixed for the task, so a cached value stays right.
    group_sims: Vec<Vec<f64>>,
    /// Similarity of this task's query to each distinct intent of the run (by intent row),
    /// shared by every store that holds the intent; filled before calls are made
    /// ([`World::fill_intent_sims`]), computed on the spot for rows beyond it.
    intent_sims: Vec<f64>,
    /// Backend candidates per store (same slots), see `World::store_candidates`.
    store_cache: Vec<StoreCache>,
    /// Items written for this task, in commit order (the same-task retrieval scope).
    task_items: Vec<ItemId>,
    /// Per entry of `task_items`, its intent's similarity to the query, when the intent's
    /// embedding was known as the item joined (the value [`World::scoped_candidates`] would
    /// compute: the query is fixed within a task and an intent's embedding never changes).
    task_item_sims: Vec<Option<f64>>,
    /// The token lists of retrieval keys known when their items were committed (a haystack
    /// unit's: its question's and its content's, merged), so a retrieval need not tokenise
    /// the key again.
    key_tokens: HashMap<ItemId, Vec<Sym>>,
    /// Per agent, the strict-ledger labels received over routed messages this task.
    received: Vec<Option<commit::Received>>,
}

/// A store's backend candidates: (intent similarity, item), in ranking order.
/// Shared without copying between the store cache and each retrieval of the task.
type Candidates = Arc<Vec<(f64, ItemId)>>;

/// One store's cached backend candidates within a task.
#[derive(Clone)]
struct StoreCache {
    /// The store's eviction count when the cache was built.
    evictions: u64,
    groups: usize,
    items: usize,
    top: Vec<(f64, usize)>,
    cands: Candidates,
    best: Arc<[usize]>,
}

impl Default for StoreCache {
    fn default() -> Self {
        StoreCache {
            evictions: 0,
            groups: usize::MAX,
            items: usize::MAX,
            top: Vec::new(),
            cands: Arc::new(Vec::new()),
            best: Arc::new([]),
        }
    }
}

/// What a cached handoff intent names: an edge (sender, receiver) or a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum HandoffIntentKey {
    Edge(u32, u32),
    Task(u32),
}

/// One run of one arm.
pub struct World<'a> {
    scn: &'a Scenario,
    streams: Streams,
    graph: CommGraph,
    is_attacker: Vec<bool>,
    attacker_ids: Vec<u32>,
    guard: Box<dyn Guard>,
    /// How τ and h are derived (the guard's rules, or the reference's).
    meta: MetadataRules,
    backbone: Box<dyn Backbone>,
    /// The backbone wants a [`CallSite`] for each call (a recorder or a replayer).
    sites: bool,
    /// How this arm's prompts present retrieved memories.
    framing: MemoryFraming,
    /// Which candidates the guard receives.
    pool: retrieve::Pool,
    workload: Arc<TaskStream>,
    /// The outcome feedback policy of this arm (the protocol's unless the arm overrides it).
    feedback: FeedbackPolicy,
    /// A poisoning task has arrived (query activation starts then).
    attack_started: bool,
    /// MINJA's background note about the latest poisoning task, when query activation is on.
    activation_note: Option<String>,
    lex: Lexicon,
    embedder: Embedder,
    bank: MemoryBank,
    intent_cache: HashMap<u64, Arc<[f32]>>,
    /// Each committed haystack unit's query-overlap score (the rerank's key).
    history_overlap: HashMap<ItemId, f64>,
    /// Embeddings of the shown text of memories that have a retrieval key (filled as calls
    /// are planned, possibly on several threads: each entry is a function of its key).
    shown_embeddings: std::sync::Mutex<HashMap<ItemId, Arc<[f32]>>>,
    /// Embeddings of retrieval keys, by text key (like `shown_embeddings`).
    key_embeddings: std::sync::Mutex<HashMap<u64, Arc<[f32]>>>,
    /// Retrieval workers' buffers and per-task memos; the first serves calls made one at a
    /// time, and a round planned on several threads gives each worker one.
    scratches: Vec<retrieve::RetrieveScratch>,
    /// The calls of the lockstep round in progress, planned from its starting state, by agent
    /// (`None`: make that call when its turn comes); see [`World::plan_round`].
    planned: Vec<Option<round::CallPlan>>,
    /// The (task, round) whose calls `planned` holds.
    planned_for: Option<(u32, u32)>,
    /// Stamp of the current task for the workers' memos.
    memo_stamp: u32,
    /// The lineage labels handoffs carry, and their marker bits.
    labels: handoff::Labels,
    /// Texts and fragments the handoffs and renders reuse.
    texts: handoff::TextMemo,
    task_frags: Option<TaskFragments>,
    oracle: Oracle,
    recorder: Recorder,
    queue: EventQueue<Event>,
    trace: TraceHash,
    reputation: f64,
    cur: Option<TaskState>,
    /// Each poisoned task's target option and its tokens, by task.
    targets: std::collections::BTreeMap<u32, (u8, Arc<[Sym]>)>,
    arm_name: String,
    inspection: Option<Inspection>,
    monitors: Option<Monitors>,
    /// The arm's signed provenance ledger, if it runs one.
    ledger: Option<crate::ledger::Ledger>,
    /// The latest item the memory manager signed (what a replaying attacker copies).
    last_signed: Option<ItemId>,
    /// What the attacker's capabilities keep across tasks.
    capstate: capability::CapState,
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
            // `render_memory_context`: LongMemEval's prompts hold user history, which switches
            // every arm to the JSON items; otherwise MAPLE-Guard's methods and the strict runtime
            // get evidence lines, every other arm reusable experiences (the INFA harness renders
            // through the same function).
            let json = matches!(scn.workload, WorkloadConfig::LongMemEval(_));
            // MAPLE-Guard, alone or in a stack, is the guard whose memories are evidence.
            let maple = guard.frames_memories_as_evidence();
            let strict = scn.protocol.provenance == ProvenanceMode::StrictLedger;
            if !json && (maple || strict) { MemoryFraming::Evidence } else { MemoryFraming::Experience }
        }
    }
}

impl<'a> World<'a> {
    /// Sets up a run of `arm` of `scn` with `profile` and master seed `seed`.
    pub fn new(scn: &'a Scenario, profile: &Profile, arm: &Arm, seed: u64, record: bool) -> Self {
        Self::sharing(scn, profile, arm, seed, record, None)
    }

    /// The task stream of `scn` at master seed `seed`: every arm of a run sees the same one, and
    /// so does every run of the process with the same workload and seed
    /// ([`crate::workload::WorkloadConfig::stream`]).
    pub fn workload_of(scn: &Scenario, seed: u64) -> Arc<TaskStream> {
        scn.workload.stream(seed)
    }

    /// [`Self::new`] with the task stream already generated by [`Self::workload_of`] for the
    /// same scenario and seed (`None`: generate it).
    pub fn sharing(
        scn: &'a Scenario,
        profile: &Profile,
        arm: &Arm,
        seed: u64,
        record: bool,
        workload: Option<Arc<TaskStream>>,
    ) -> Self {
        // The baselines' LLM judges run on the agents' backbone (spec §8).
        let guard = crate::guard::with_backbone_judges(&arm.guard, profile);
        let guard = crate::guard::build_guard(&guard, scn.agents);
        let mut w = Self::build(scn, profile, &arm.name, guard, seed, record, workload);
        if let Some(f) = arm.feedback {
            w.feedback = f;
        }
        w.ledger = arm
            .ledger
            .clone()
            .filter(|c| c.verify != crate::ledger::VerifyMode::None)
            .map(|c| crate::ledger::Ledger::new(c, w.streams.seed_of(StreamKind::Ledger, &[])));
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
        Self::build(scn, profile, arm_name, guard, seed, record, None)
    }

    fn build(
        scn: &'a Scenario,
        profile: &Profile,
        arm_name: &str,
        guard: Box<dyn Guard>,
        seed: u64,
        record: bool,
        workload: Option<Arc<TaskStream>>,
    ) -> Self {
        let streams = Streams::new(seed);
        let graph = CommGraph::build(&scn.topology, scn.agents, &streams);
        let attacker_ids = place_attackers(scn, &graph, &streams);
        let mut is_attacker = vec![false; scn.agents as usize];
        attacker_ids.iter().for_each(|a| is_attacker[*a as usize] = true);
        let meta = guard.metadata_rules().cloned().unwrap_or_default();
        let class = scn.workload.class();
        let params = profile.workload(class).unwrap_or_default();
        let backbone: Box<dyn Backbone> = Box::new(DiscreteChoice::new(&profile.name, params));
        let workload = workload.unwrap_or_else(|| scn.workload.stream(seed));
        let mut lex = Lexicon::new();
        let mut embedder = Embedder::with_model(
            scn.embedding_dim,
            streams.seed_of(StreamKind::Embedding, &[]),
            scn.similarity.clone(),
        );
        for w in workload.vocabulary() {
            let s = lex.intern(w);
            embedder.mark_content(s);
        }
        let benign = u64::from(scn.agents) - attacker_ids.len() as u64;
        let (capacity, ids) = expected_items(scn, &graph);
        let framing = memory_framing(scn, guard.as_ref());
        let pool = retrieve::Pool::of(scn, guard.as_ref());
        let mut bank = MemoryBank::with_capacity(scn.agents as usize, scn.embedding_dim, capacity, ids);
        bank.set_capacity(scn.protocol.capacity);
        World {
            scn,
            streams,
            graph,
            is_attacker,
            attacker_ids,
            guard,
            meta,
            backbone,
            sites: false,
            framing,
            pool,
            workload,
            lex,
            embedder,
            bank,
            intent_cache: HashMap::default(),
            key_embeddings: Default::default(),
            shown_embeddings: Default::default(),
            history_overlap: HashMap::default(),
            scratches: vec![retrieve::RetrieveScratch::default()],
            planned: Vec::new(),
            planned_for: None,
            memo_stamp: 0,
            labels: handoff::Labels::new(scn.agents, scn.protocol.rounds),
            texts: handoff::TextMemo::default(),
            task_frags: None,
            oracle: Oracle::with_capacity(ids),
            recorder: Recorder::new(scn.protocol.rounds, benign),
            queue: EventQueue::new(),
            trace: TraceHash::new(record),
            reputation: 0.5,
            cur: None,
            targets: std::collections::BTreeMap::new(),
            arm_name: arm_name.to_string(),
            inspection: None,
            monitors: None,
            ledger: None,
            last_signed: None,
            capstate: capability::CapState::default(),
            feedback: scn.protocol.feedback,
            attack_started: false,
            activation_note: None,
        }
    }

    /// Replaces the arm's backbone by `wrap` applied to it: a decorator (a recorder) or a
    /// replacement that keeps the stand-in as its fallback (a replayer). The world then builds a
    /// [`CallSite`] for every call if the new backbone asks for them.
    pub fn with_backbone(mut self, wrap: impl FnOnce(Box<dyn Backbone>) -> Box<dyn Backbone>) -> Self {
        let stand_in: Box<dyn Backbone> = Box::new(DiscreteChoice::new("", Default::default()));
        let old = std::mem::replace(&mut self.backbone, stand_in);
        self.backbone = wrap(old);
        self.sites = self.backbone.wants_sites();
        self
    }

    /// Watches the run with invariant monitors ([`crate::eval::monitor`]); their report comes back
    /// in [`ArmRun::monitor`]. Monitors read the run and never change it.
    pub fn with_monitors(mut self, monitors: Monitors) -> Self {
        self.monitors = Some(monitors);
        self
    }

    /// Where the run is now, for a monitor's violation.
    fn at(&self) -> At {
        At { event: self.trace.events(), time: self.queue.now().0, hash: self.trace.value() }
    }

    /// Runs to the end and also returns an [`Inspection`] of every selection and the final bank.
    pub fn run_inspected(mut self) -> (ArmRun, Inspection) {
        self.inspection = Some(Inspection {
            bank: MemoryBank::new(0, 8),
            selections: Vec::new(),
            evidence: Vec::new(),
            times: Vec::new(),
        });
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
        if self.monitors.is_some() {
            let at = self.at();
            observe(&mut self.monitors, &self.bank, &self.oracle, self.scn.agents, at, Observation::RunEnd);
        }
        let monitor = self.monitors.take().map(Monitors::report);
        let trace = self.trace.take_log();
        let capability = self.capability_stats();
        let mut summary = self.recorder.finish(&self.oracle, &self.bank, ctx);
        summary.ledger = self.ledger.take().map(|l| l.stats);
        summary.capability = capability;
        let mut inspection = self.inspection.take().unwrap_or(Inspection {
            bank: MemoryBank::new(0, 8),
            selections: Vec::new(),
            evidence: Vec::new(),
            times: Vec::new(),
        });
        if !inspection.times.is_empty() {
            inspection.bank = self.bank;
        }
        (ArmRun { summary, trace, monitor }, inspection)
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
                if self.lockstep() {
                    self.call_planned(task, agent, round);
                } else {
                    self.call(agent, round);
                }
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
}

/// Hands one observation to the monitors, if the run has any (a function of the fields it
/// reads, so an observation may borrow the rest of the world).
fn observe(
    monitors: &mut Option<Monitors>,
    bank: &MemoryBank,
    oracle: &Oracle,
    agents: u32,
    at: At,
    obs: Observation<'_>,
) {
    if let Some(m) = monitors.as_mut() {
        let cx = Cx { bank, truth: Truth::of(oracle), agents };
        m.observe(&obs, &cx, at);
    }
}

/// A generous estimate of the items a run writes (handoffs on every edge before every round
/// after the first, outcome memories, poison copies, promotions, a LongMemEval task's haystack),
/// to size the arena once: growing it moves every item to freshly faulted pages. Returns the
/// items held at once (the arena's slots) and the items written (the per-id bookkeeping: the
/// bank's places and statuses, the oracle's index).
fn expected_items(scn: &Scenario, graph: &CommGraph) -> (usize, usize) {
    let haystack = match &scn.workload {
        WorkloadConfig::LongMemEval(c) => c.haystack_units as usize,
        _ => 0,
    };
    let per_task =
        graph.edge_count() * scn.protocol.rounds.saturating_sub(1) as usize + scn.agents as usize + 8 + haystack;
    let written = scn.workload.tasks() as usize * per_task;
    // Under a capacity the slots in use stay within the stores' bounds and one task's writes.
    let live = scn.protocol.capacity.map_or(written, |c| {
        let stores = (scn.agents as usize + 1).saturating_mul(c.items);
        stores.saturating_add(c.shared_items.unwrap_or(c.items)).saturating_add(per_task)
    });
    (written.min(live).min(1 << 22), written.min(1 << 28))
}

/// Runs one arm of a scenario with `seed`.
pub fn run_arm(scn: &Scenario, profile: &Profile, arm: &Arm, seed: u64, record: bool) -> ArmRun {
    World::new(scn, profile, arm, seed, record).run()
}

/// [`run_arm`] on a task stream [`World::workload_of`] generated for `scn` and `seed`.
pub fn run_arm_sharing(
    scn: &Scenario,
    profile: &Profile,
    arm: &Arm,
    seed: u64,
    record: bool,
    workload: Arc<TaskStream>,
) -> ArmRun {
    World::sharing(scn, profile, arm, seed, record, Some(workload)).run()
}

// The calls of a lockstep round are planned from `&World` on several threads.
const _: fn() = || {
    fn is_sync<T: Sync>() {}
    is_sync::<World<'static>>();
};
