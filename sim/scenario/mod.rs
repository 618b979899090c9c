//! The scenario schema (RON), its defaults and its validation. A scenario names everything a
//! run depends on; with its seed it reproduces the run bit for bit.

pub mod estimate;

use crate::agent::Profile;
use crate::attack::AttackConfig;
use crate::error::{Error, Result, locate_field, parse_ron, read_file};
use crate::guard::maple::{FeedbackPolicy, OutcomeParams, ProvenanceMode};
pub use crate::guard::spec::GuardSpec;
use crate::memory::MemoryTopology;
use crate::topology::Topology;
use crate::workload::WorkloadConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Who the attackers are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Attackers {
    /// This many attackers, placed by `placement`.
    Count(u32),
    /// Exactly these agents.
    Ids(Vec<u32>),
}

/// Where counted attackers are placed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Placement {
    /// Uniformly at random (Placement stream).
    #[default]
    Random,
    /// At the highest-degree agents (ties: lower id first).
    HighestDegree,
    /// At the lowest-degree agents (ties: lower id first).
    LowestDegree,
}

/// A latency distribution in ticks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Latency {
    /// Always this many ticks.
    Fixed(u64),
    /// Uniform over [lo, hi].
    Uniform(u64, u64),
    /// Log-normal with this median and log-sd.
    LogNormal(f64, f64),
}

impl Latency {
    /// A draw from the distribution.
    pub fn sample(&self, rng: &mut crate::engine::SimRng) -> u64 {
        match *self {
            Latency::Fixed(t) => t,
            Latency::Uniform(lo, hi) => lo + rng.below(hi - lo + 1),
            // Bounded, so that no sum of latencies can overflow the clock.
            Latency::LogNormal(median, sigma) => {
                (median * (sigma * rng.normal()).exp()).round().clamp(0.0, (MAX_LATENCY * 100) as f64) as u64
            }
        }
    }

    fn validate(&self) -> std::result::Result<(), String> {
        let max = MAX_LATENCY;
        match *self {
            Latency::Fixed(t) if t > max => Err(format!("at most {max} ticks, got {t}")),
            Latency::Uniform(lo, hi) if lo > hi || hi > max => {
                Err(format!("0 <= lo <= hi <= {max} ticks, got ({lo}, {hi})"))
            }
            Latency::LogNormal(m, s) if !(m > 0.0 && m <= max as f64 && (0.0..=MAX_LOG_SD).contains(&s)) => {
                Err(format!("a median in (0, {max}] ticks and a log-sd in [0, {MAX_LOG_SD}], got ({m}, {s})"))
            }
            _ => Ok(()),
        }
    }
}

/// The largest latency a scenario may name, in ticks (a million seconds at a tick per ms):
/// time stays far from overflowing however many events a run schedules.
pub const MAX_LATENCY: u64 = 1_000_000_000;
/// The most memories a prompt (or a handoff report) may hold: far above the paper's 3 and 16,
/// low enough that retrieval stays linear in what a store holds.
pub const MAX_TOP_K: usize = 256;
/// The largest log-sd of a log-normal latency.
pub const MAX_LOG_SD: f64 = 10.0;
/// The largest magnitude of any floating-point value of a scenario: a guard against values that
/// overflow the arithmetic they enter (`1e308` weights, thresholds, latencies).
pub const MAX_FLOAT: f64 = 1e9;

/// How simulated time advances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub enum Timing {
    /// The paper's synchronous rounds: every handoff of a round lands before anyone reads.
    #[default]
    Lockstep,
    /// Each LLM call and each message takes a sampled latency; reads see only what is committed.
    Async {
        /// Latency of one LLM call (answers and summaries).
        llm: Latency,
        /// Latency of one message on an edge.
        message: Latency,
    },
}

/// When retrieval happens.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum RetrievalMode {
    /// Every round (the paper launcher).
    #[default]
    EachRound,
    /// Once, before round 0.
    Once,
}

/// Benign promotion policy filters (spec §5.3).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum PromotionPolicy {
    /// Only after a successful task.
    #[default]
    SuccessOnly,
    /// Agents that retrieved anything.
    RetrievedAny,
    /// Agents that retrieved one of their own private memories.
    RetrievedPrivate,
    /// That, and whose answer equals the team answer (no success requirement).
    AcceptedRetrievedPrivate,
}

/// Benign promotion to shared memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Promotion {
    /// Probability that a promotion fires after a task.
    pub rate: f64,
    /// Eligibility policy.
    pub policy: PromotionPolicy,
    /// Promote every eligible agent instead of one.
    pub all_agents: bool,
    /// Minimum reputation to be eligible.
    pub min_agent_trust: f64,
}

impl Default for Promotion {
    fn default() -> Self {
        Promotion { rate: 0.10, policy: PromotionPolicy::SuccessOnly, all_agents: false, min_agent_trust: 0.0 }
    }
}

/// What a handoff memory's intent (its MemRL retrieval key) names.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum HandoffIntent {
    /// The sender and receiver ("Round dialogue propagation from agent s to agent d"): one
    /// intent per edge, unrelated to any task, so a handoff reaches a prompt only when that edge's
    /// group happens to rank among a store's top intents.
    #[default]
    SenderReceiver,
    /// The task's question ("Round dialogue handoff for question: …"), as a memory manager
    /// keying its summaries by the task at hand would: a handoff then ranks high for its own
    /// task's later rounds and for related tasks.
    TaskQuestion,
}

/// Which rendering of retrieved memories an arm's prompts use ([`crate::agent::MemoryFraming`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum FramingRule {
    /// The reference's rule (`render_memory_context`, spec §5.2): memories render as evidence
    /// ("[M i] evidence=…") under MAPLE-Guard (and its ablations) and under the strict ledger,
    /// and as reusable experiences otherwise, the communication baselines included (they run
    /// the No Defense backend); the INFA harness renders through the same function.
    /// LongMemEval's prompts hold user history, which gives every arm the JSON items (taken as
    /// experiences).
    #[default]
    Reference,
    /// Every arm renders memories as reusable experiences.
    Experience,
    /// Every arm renders memories as evidence.
    Evidence,
}

/// The per-task protocol (spec §5.2–§5.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Protocol {
    /// Rounds per task.
    pub rounds: u32,
    /// Retrieval each round or once.
    pub retrieval: RetrievalMode,
    /// Memories per prompt.
    pub top_k: usize,
    /// Candidates per store from the backend (reference: max(4k, k+4)); `None` = that rule.
    pub backend_k: Option<usize>,
    /// ε of the backend's random exploration.
    pub epsilon: f64,
    /// Pre-round memory handoffs along out-edges with receiver summaries.
    pub handoffs: bool,
    /// Most memories a sender reports in one handoff.
    pub handoff_report_max: usize,
    /// The retrieval key (intent) a handoff memory is stored under. The reference does not
    /// record it (spec §1.1 gives only id, route and metadata), and it decides whether a handoff
    /// is ever retrieved: see [`HandoffIntent`].
    pub handoff_intent: HandoffIntent,
    /// How prompts present retrieved memories; it matters as far as the backbone profile's
    /// `evidence_framing` says.
    pub memory_framing: FramingRule,
    /// Benign promotion.
    pub promotion: Promotion,
    /// Attackers do not vote.
    pub exclude_attackers_from_vote: bool,
    /// Agents see incoming neighbours' previous-round outputs (strict / peer communication).
    pub peer_messages: bool,
    /// How metadata is set on commit.
    pub provenance: ProvenanceMode,
    /// Outcome feedback policy.
    pub feedback: FeedbackPolicy,
    /// Outcome update constants.
    pub outcome: OutcomeParams,
    /// Non-attackers write a private self-outcome memory after each task.
    pub outcome_memories: bool,
    /// After every round each agent's (reviewed) output is written as a team memory (the INFA
    /// harness of CSQA / InjecAgent, spec §5.6).
    pub round_memories: bool,
    /// Round memories take the reference's metadata, which it sets from the evaluator's
    /// knowledge of who the attackers are (spec §1.1). Off by default: metadata then follows
    /// only what the text shows, so no guard can learn the attackers through τ and h.
    pub reference_attacker_metadata: bool,
    /// Retrieval sees only memories written for the current task (LongMemEval's task-scope
    /// filter, spec §5.5), so poison cannot cross tasks.
    pub same_task_scope: bool,
    /// One shared poison copy per task (MMLU, AppWorld) rather than one per attacker
    /// (LongMemEval, spec §6).
    pub dedupe_shared_poison: bool,
    /// Which memories reach the gates and the top-k: the reference harness's routing, and the
    /// details its released code leaves open (see [`Routing`]).
    pub routing: Routing,
    /// A bound on every store's size with an eviction policy (issue 20; see
    /// [`crate::memory::Capacity`]). `None`, the default and the paper's, keeps every item
    /// ever written. Needs lockstep timing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::memory::Capacity>,
}

/// Which candidates a guard receives from the memory backend (spec §3.3, C5).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum CandidatePool {
    /// As `memory_backend.MemRLMemoryBackend.retrieve_entries` does, store by store (the
    /// agent's private store, then the shared one): the baselines get the backend's
    /// "selected" set (hybrid top-k or the ε sample); non-strict MAPLE-Guard the store's
    /// candidates re-sorted by the backend MAPLE pre-score, first `backend_k`; strict arms,
    /// retrieval-only MAPLE-Guard, provenance-ACL and PIGuard the candidates in backend (hybrid
    /// score) order, first `backend_k`.
    #[default]
    Reference,
    /// memlink before the fidelity pass: MAPLE-Guard's pool is the union of both stores
    /// re-sorted by the pre-score, best `backend_k` overall; every other arm gets the
    /// "selected" set, under the strict ledger too.
    UnionResorted,
}

/// How the INFA harness's round memories are written (spec §1.1, §5.6).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum RoundMemoryText {
    /// As `infa_memlink_eval.commit_round_memory` writes them: a constant intent per route
    /// ("PI benign peer reasoning memory for same-task collaboration", …), the experience "Task:
    /// … / Agent i response from physical-topology PI run: …", the question as retrieval key,
    /// and writer trust by role (0.78 benign, 0.45 injection cue, 0.20 attacker; 0.35 tool
    /// relays).
    #[default]
    Reference,
    /// memlink before the fidelity pass: the question as intent, the raw output as experience,
    /// the team's reputation as writer trust.
    RawOutput,
}

/// What a strict-ledger memory inherits (spec §3.6; `comparison_runtime.observe_ingress`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum LedgerInputs {
    /// Everything the writer read during the task (every round) plus the labels it received
    /// over routed peer messages and handoffs (each route hands the sender's consumed and
    /// received labels to the receiver); a handoff's dependencies are the reported memories
    /// plus what its receiver received.
    #[default]
    Reference,
    /// memlink before the fidelity pass: the writer's last-round selection only (for a
    /// handoff, the reported memories), and no received labels.
    LastRound,
}

/// The memory backend the harness retrieves through (spec §3.3).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemoryBackend {
    /// The MemRL service: intent groups, `backend_k` intents per store, hybrid score.
    MemRl,
    /// No backend (`--memory-backend none`): every visible memory is a candidate and is scored.
    FlatList,
}

/// Routing switches: where memlink once differed from the reference harness (each defaults to
/// the released code), and the details that code does not determine (each defaults to what the
/// code says, or, where it says nothing, to the choice documented on the field).
/// `memlink validate` names every one that differs from its default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Routing {
    /// The candidate pool a guard receives.
    pub candidate_pool: CandidatePool,
    /// The INFA round memories' text and metadata.
    pub round_memory: RoundMemoryText,
    /// What a strict-ledger memory inherits.
    pub ledger_inputs: LedgerInputs,
    /// The memory backend; `None` = the reference's configs: CSQA runs without one
    /// (`memory_backend` defaults to "none" in `infa_memlink_eval.py` and the CSQA configs do not
    /// set it), every other setting through MemRL.
    pub memory_backend: Option<MemoryBackend>,
    /// Attackers may be promoted under the strict ledger. The released
    /// `maybe_promote_benign_to_shared` skips the evaluator's attackers in every mode (false);
    /// memlink before the fidelity pass let the strict ledger promote them (true).
    pub promote_attackers_in_strict: bool,
    /// A path the released code does not show: a receiver's memory manager rewrites a handoff
    /// as its own output, so under the strict ledger the summary carries no dependency and no
    /// taint (the text, and any poison it retained verbatim, still goes through). Off: the
    /// ledger's propagation, as released.
    pub launder_handoffs: bool,
}

impl Default for Routing {
    fn default() -> Self {
        Routing {
            candidate_pool: CandidatePool::Reference,
            round_memory: RoundMemoryText::Reference,
            ledger_inputs: LedgerInputs::Reference,
            memory_backend: None,
            promote_attackers_in_strict: false,
            launder_handoffs: false,
        }
    }
}

impl Default for Protocol {
    fn default() -> Self {
        Protocol {
            rounds: 3,
            retrieval: RetrievalMode::EachRound,
            top_k: 3,
            backend_k: None,
            epsilon: 0.1,
            handoffs: true,
            handoff_report_max: 5,
            handoff_intent: HandoffIntent::SenderReceiver,
            memory_framing: FramingRule::Reference,
            promotion: Promotion::default(),
            exclude_attackers_from_vote: false,
            peer_messages: false,
            provenance: ProvenanceMode::Recomputed,
            feedback: FeedbackPolicy::Full,
            outcome: OutcomeParams::default(),
            outcome_memories: true,
            round_memories: false,
            reference_attacker_metadata: false,
            same_task_scope: false,
            dedupe_shared_poison: true,
            routing: Routing::default(),
            capacity: None,
        }
    }
}

impl Scenario {
    /// Every routing switch and unrecorded detail with its value, for `memlink validate`; a `*`
    /// marks one that differs from the released code's (the default).
    pub fn switch_summary(&self) -> String {
        let r = &self.protocol.routing;
        let d = Routing::default();
        let mark = |changed: bool| if changed { "*" } else { "" };
        let mut parts = vec![
            format!("candidate_pool {:?}{}", r.candidate_pool, mark(r.candidate_pool != d.candidate_pool)),
            format!("round_memory {:?}{}", r.round_memory, mark(r.round_memory != d.round_memory)),
            format!("ledger_inputs {:?}{}", r.ledger_inputs, mark(r.ledger_inputs != d.ledger_inputs)),
            format!(
                "memory_backend {:?}{}",
                self.memory_backend(),
                if r.memory_backend.is_none() { " (the configs')".to_string() } else { "*".to_string() }
            ),
            format!(
                "promote_attackers_in_strict {}{}",
                r.promote_attackers_in_strict,
                mark(r.promote_attackers_in_strict != d.promote_attackers_in_strict)
            ),
            format!("launder_handoffs {}{}", r.launder_handoffs, mark(r.launder_handoffs)),
            format!("reference_attacker_metadata {}", self.protocol.reference_attacker_metadata),
        ];
        if let crate::workload::WorkloadConfig::LongMemEval(c) = &self.workload {
            let dl = crate::workload::LongMemEvalConfig::default();
            parts.push(format!("haystack {:?}{}", c.layout, mark(c.layout != dl.layout)));
            parts.push(format!("haystack_ties {:?}{}", c.ties, mark(c.ties != dl.ties)));
        }
        if let crate::attack::AttackConfig::MemoryGraft(g) = &self.attack {
            parts.push(format!("graft strong_clamp {}{}", g.strong_clamp, mark(g.strong_clamp)));
        }
        format!("routing: {}", parts.join(", "))
    }

    /// The memory backend the run retrieves through (see [`Routing::memory_backend`]).
    pub fn memory_backend(&self) -> MemoryBackend {
        self.protocol.routing.memory_backend.unwrap_or(match self.workload {
            crate::workload::WorkloadConfig::Csqa(_) => MemoryBackend::FlatList,
            _ => MemoryBackend::MemRl,
        })
    }
}

impl Protocol {
    /// Candidates per store.
    pub fn backend_k(&self) -> usize {
        self.backend_k.unwrap_or((4 * self.top_k).max(self.top_k + 4))
    }
}

/// One arm: a named guard run on the same seed as the others (common random numbers).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arm {
    /// Name in tables.
    pub name: String,
    /// The guard.
    pub guard: GuardSpec,
    /// This arm's outcome feedback policy, overriding the protocol's (MAPLE-Guard's feedback
    /// ablations compare full / no_q / none on one seed, spec §4). In RON `feedback: NoQ`;
    /// the policy named `None` must be written `Some(None)`, since a bare `None` means "no
    /// override".
    #[serde(default)]
    pub feedback: Option<FeedbackPolicy>,
    /// A signed provenance ledger for this arm's memory manager and gates
    /// (`ledger: Some((verify: VerifyRejectUnsigned, keys: PerAgent))`, see `crate::ledger`);
    /// none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<crate::ledger::LedgerConfig>,
}

/// A whole scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name of the scenario (output folder name).
    pub name: String,
    /// Master seed.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Number of agents (≥ 2).
    pub agents: u32,
    /// Attackers.
    pub attackers: Attackers,
    /// Placement of counted attackers.
    #[serde(default)]
    pub placement: Placement,
    /// Communication topology.
    pub topology: Topology,
    /// Memory topology.
    #[serde(default)]
    pub memory_topology: MemoryTopology,
    /// Timing mode.
    #[serde(default)]
    pub timing: Timing,
    /// The workload.
    pub workload: WorkloadConfig,
    /// The attack.
    pub attack: AttackConfig,
    /// Protocol.
    #[serde(default)]
    pub protocol: Protocol,
    /// Backbone profile: a name resolved as `models/<name>.ron`, or a path.
    pub backbone: String,
    /// Embedding dimension of the synthetic embedder.
    #[serde(default = "default_dim")]
    pub embedding_dim: usize,
    /// The synthetic embedder's similarity model (floor, jitter and contrast; see
    /// [`crate::embed`]).
    #[serde(default)]
    pub similarity: crate::embed::SimilarityModel,
    /// Arms to compare.
    pub arms: Vec<Arm>,
    /// Invariants to monitor during every arm's run, by name (see [`crate::eval::monitor::REGISTRY`]
    /// and `memlink check`). Monitors never change a run's results; `memlink run` reports their
    /// violations and writes `invariants.json`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invariants: Vec<String>,
}

fn default_seed() -> u64 {
    42
}
fn default_dim() -> usize {
    64
}

/// A scenario loaded from disk together with its backbone profile.
#[derive(Clone, Debug)]
pub struct LoadedScenario {
    /// The scenario.
    pub scenario: Scenario,
    /// The resolved backbone profile.
    pub profile: Profile,
    /// Where the scenario came from.
    pub path: PathBuf,
}

impl Scenario {
    /// Semantic checks; returns (field, expected) on the first problem.
    pub fn check(&self) -> std::result::Result<(), (String, String)> {
        let bad = |f: &str, e: String| Err((f.to_string(), e));
        if self.agents < 2 {
            return bad("agents", format!("at least 2 agents, got {}", self.agents));
        }
        match &self.attackers {
            Attackers::Count(c) if *c >= self.agents => {
                return bad("attackers", format!("fewer attackers than agents ({}), got {c}", self.agents));
            }
            Attackers::Ids(ids) => {
                if ids.len() as u32 >= self.agents {
                    return bad("attackers", format!("fewer attackers than agents ({})", self.agents));
                }
                if let Some(i) = ids.iter().find(|i| **i >= self.agents) {
                    return bad("attackers", format!("agent ids below {}, got {i}", self.agents));
                }
                let mut s = ids.clone();
                s.sort_unstable();
                s.dedup();
                if s.len() != ids.len() {
                    return bad("attackers", "distinct agent ids".into());
                }
            }
            _ => {}
        }
        if let Err(e) = self.topology.validate(self.agents) {
            return bad("topology", e);
        }
        if let Some(n) = self.invariants.iter().find(|n| crate::eval::monitor::entry(n).is_none()) {
            return bad("invariants", format!("invariant names among {}, got {n:?}", crate::eval::monitor::names()));
        }
        if let Timing::Async { llm, message } = &self.timing {
            llm.validate().or_else(|e| bad("llm", e))?;
            message.validate().or_else(|e| bad("message", e))?;
        }
        let p = &self.protocol;
        if p.rounds == 0 {
            return bad("rounds", "at least 1 round".into());
        }
        if !(1..=MAX_TOP_K).contains(&p.top_k) {
            return bad("top_k", format!("1 to {MAX_TOP_K} memories per prompt, got {}", p.top_k));
        }
        if p.backend_k.is_some_and(|b| !(1..=4 * MAX_TOP_K).contains(&b)) {
            return bad("backend_k", format!("1 to {} candidates per store (or None for max(4k, k+4))", 4 * MAX_TOP_K));
        }
        if p.handoff_report_max > MAX_TOP_K {
            return bad("handoff_report_max", format!("at most {MAX_TOP_K} memories per handoff"));
        }
        if !(0.0..=1.0).contains(&p.epsilon) {
            return bad("epsilon", format!("a probability in [0, 1], got {}", p.epsilon));
        }
        if let Some(c) = &p.capacity {
            c.validate().or_else(|(f, e)| bad(&f, e))?;
            if !matches!(self.timing, Timing::Lockstep) {
                return bad(
                    "capacity",
                    "lockstep timing with a store capacity (under async timing a late handoff can still refer to an \
                     evicted item, so eviction is not supported there yet)"
                        .into(),
                );
            }
        }
        if !(0.0..=1.0).contains(&p.promotion.rate) {
            return bad("rate", format!("a probability in [0, 1], got {}", p.promotion.rate));
        }
        if self.embedding_dim < 8 || self.embedding_dim > 4096 {
            return bad("embedding_dim", format!("a dimension in [8, 4096], got {}", self.embedding_dim));
        }
        self.similarity.validate().or_else(|(f, e)| bad(&f, e))?;
        self.workload.validate().or_else(|(f, e)| bad(&f, e))?;
        self.attack.validate().or_else(|(f, e)| bad(&f, e))?;
        if self.arms.is_empty() {
            return bad("arms", "at least one arm".into());
        }
        for (i, arm) in self.arms.iter().enumerate() {
            arm.guard.validate().or_else(|(f, e)| bad(&f, e))?;
            if self.arms[..i].iter().any(|a| a.name == arm.name) {
                return bad("name", format!("distinct arm names (results are keyed by them), `{}` twice", arm.name));
            }
            if let Some(k) = arm.ledger.as_ref().and_then(|l| l.key.as_ref())
                && k.secret().is_none()
            {
                return bad(
                    "key",
                    format!(
                        "a ledger key (64 hex digits) or a `key_file` (arm `{}`): a key's fingerprint, as a \
                         trace or a stored run keeps it, cannot sign; replay with the scenario file that holds \
                         the key (`--arm FILE`)",
                        arm.name
                    ),
                );
            }
        }
        if let Some((field, v)) = crate::error::oversized_float(self, MAX_FLOAT) {
            return bad(&field, format!("a magnitude of at most {MAX_FLOAT:e}, got {v:e}"));
        }
        Ok(())
    }
}

/// Loads and validates a scenario file and its backbone profile.
pub fn load(path: &Path) -> Result<LoadedScenario> {
    let text = read_file(path)?;
    load_str(&text, path)
}

/// Parses and validates scenario `text` as if read from `path` (errors name `path`; the
/// backbone is resolved relative to it).
pub fn load_str(text: &str, path: &Path) -> Result<LoadedScenario> {
    let kind = crate::files::detect(path, text);
    if kind != crate::files::FileKind::Scenario {
        return Err(Error::Parse {
            path: path.to_path_buf(),
            pos: crate::error::Pos { line: 1, col: 1 },
            message: format!("expected a scenario (this is a {}: {})", kind.name(), kind.how_to_use()),
        });
    }
    let mut scenario: Scenario = parse_ron(path, text).map_err(|e| with_hint(e, text))?;
    let invalid = |field: String, expected: String| Error::Invalid {
        path: path.to_path_buf(),
        pos: locate_field(text, &field),
        field,
        expected,
    };
    read_key_files(&mut scenario.arms, path).map_err(|e| invalid("key_file".into(), e))?;
    check_backbone(path, &scenario.backbone).map_err(|e| invalid("backbone".into(), e))?;
    scenario.check().map_err(|(field, expected)| invalid(field, expected))?;
    check_size(&scenario).map_err(|e| invalid("agents".into(), e))?;
    with_profile(scenario, path).map_err(|e| match e {
        // A backbone that names no readable profile is this file's error, at its `backbone`.
        Error::Io { path: profile, source } => {
            let names = available_profiles(path);
            let available = if names.is_empty() { "none found".to_string() } else { names.join(", ") };
            invalid(
                "backbone".into(),
                format!("a backbone profile (available: {available}): cannot read {} ({source})", profile.display()),
            )
        }
        e => e,
    })
}

/// What a scenario's top-level field takes, for a parse error inside it.
const FIELD_HINTS: &[(&str, &str)] = &[
    ("attackers", "`attackers` takes `Ids([0, 1, 5])` (these agents) or `Count(3)` (placed by `placement`)"),
    ("placement", "`placement` takes `Random`, `HighestDegree` or `LowestDegree`"),
    (
        "topology",
        "`topology` takes `Wheel`, `Star`, `Chain`, `Tree`, `Complete`, `Random(None)`, `Random(Some(p))`, \
         `BarabasiAlbert(m)` or `WattsStrogatz(k, beta)` (positional: `WattsStrogatz(4, 0.1)`)",
    ),
    ("memory_topology", "`memory_topology` takes `PrivateOnly`, `GlobalShared`, `BrokeredShared` or `RoleIsolated`"),
    ("timing", "`timing` takes `Lockstep` or `Async(llm: LogNormal(800.0, 0.5), message: Uniform(5, 50))`"),
    (
        "workload",
        "`workload` takes `Mmlu((…))`, `LongMemEval((…))`, `AppWorld((…))`, `Csqa((…))` or `InjectAgent((…))` \
         (`Mmlu(())` for the defaults)",
    ),
    ("backbone", "`backbone` takes a profile name such as \"qwen3.5-122b-a10b\" or a path ending in .ron"),
    ("arms", "`arms` takes a list of `(name: \"…\", guard: …)`, e.g. `(name: \"MAPLE-Guard\", guard: Maple(()))`"),
];

/// A parse error inside a top-level field that names what the field takes, and a message
/// that reads as what was found (RON's advice to write a number as a raw identifier is for
/// Rust programmers, not for a scenario's reader).
fn with_hint(e: Error, text: &str) -> Error {
    let Error::Parse { path, pos, message } = e else { return e };
    let message = match message.strip_prefix("Found invalid std identifier ") {
        Some(rest) => format!("unexpected {}", rest.split(", try the raw identifier").next().unwrap_or(rest)),
        None => message,
    };
    let field = crate::files::top_level_field_at(text, pos.line, pos.col);
    let hint = field.and_then(|f| FIELD_HINTS.iter().find(|(n, _)| *n == f)).map(|(_, h)| *h);
    let message = match hint {
        Some(h) if !message.contains(h) => format!("{message}: {h}"),
        _ => message,
    };
    Error::Parse { path, pos, message }
}

/// Checks a backbone as a file names it: a profile name (found as `models/<name>.ron`, so no
/// path separator and no leading `.`), or a path ending in `.ron` under the path policy
/// ([`crate::files`]).
pub fn check_backbone(path: &Path, backbone: &str) -> std::result::Result<(), String> {
    if backbone.ends_with(".ron") {
        return crate::files::referenced(path, Path::new(backbone)).map(|_| ());
    }
    if backbone.is_empty() || backbone.starts_with('.') || backbone.contains(['/', '\\']) {
        let names = available_profiles(path);
        let available = if names.is_empty() { "none found".to_string() } else { names.join(", ") };
        return Err(format!(
            "a profile name (a file models/<name>.ron; available: {available}) or a path ending in .ron"
        ));
    }
    Ok(())
}

/// The profile names the `models/` folders from `path`'s folder upwards and in the working
/// directory hold, sorted.
pub fn available_profiles(path: &Path) -> Vec<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut add = |models: &Path| {
        for e in std::fs::read_dir(models).into_iter().flatten().flatten() {
            // A profile's posterior ensemble (`<name>.ensemble.ron`) lives beside it and is not one.
            if let Some(stem) = e.file_name().to_string_lossy().strip_suffix(".ron")
                && !stem.ends_with(".ensemble")
            {
                names.insert(stem.to_string());
            }
        }
    };
    let mut dir = std::path::absolute(path).ok().and_then(|p| p.parent().map(Path::to_path_buf));
    while let Some(d) = dir {
        add(&d.join("models"));
        dir = d.parent().map(Path::to_path_buf);
    }
    // Then the working directory's, as the resolver falls back to.
    add(Path::new("models"));
    names.into_iter().collect()
}

/// Reads each arm's ledger `key_file` (relative to `path`, the file naming it) into its `key`;
/// the error says which file and what was wrong.
pub fn read_key_files(arms: &mut [Arm], path: &Path) -> std::result::Result<(), String> {
    for arm in arms {
        let Some(l) = arm.ledger.as_mut() else { continue };
        let Some(file) = &l.key_file else { continue };
        let p = crate::files::referenced(path, file)?;
        // A key file is a few lines; a larger one is not a key, and is not read.
        let text = crate::error::read_file_limited(&p, 4096).map_err(|e| format!("a readable key file ({e})"))?;
        let key = crate::ledger::LedgerKey::parse(&text).map_err(|e| format!("{e} in key file {}", p.display()))?;
        if l.key.as_ref().is_some_and(|k| !k.same_as(&key)) {
            return Err(format!("either `key` or `key_file`, not two different keys (arm `{}`)", arm.name));
        }
        l.key = Some(key);
    }
    Ok(())
}

/// Refuses, before anything is built, a scenario whose estimated memory exceeds the machine
/// ([`crate::scenario::estimate`]).
pub fn check_size(scenario: &Scenario) -> std::result::Result<(), String> {
    let limit = crate::scenario::estimate::memory_limit()?;
    crate::scenario::estimate::check_fits(scenario, limit).map(|_| ())
}

/// Pairs a checked scenario with its backbone profile, resolved relative to `path`; the
/// profile must have parameters for the scenario's workload.
pub fn with_profile(scenario: Scenario, path: &Path) -> Result<LoadedScenario> {
    let profile_path = resolve_profile(path, &scenario.backbone);
    let profile = crate::agent::load_profile(&profile_path)?;
    if profile.workload(scenario.workload.class()).is_none() {
        return Err(Error::Invalid {
            path: profile_path,
            pos: crate::error::Pos { line: 1, col: 1 },
            field: "workloads".into(),
            expected: format!("parameters for workload `{}`", scenario.workload.class()),
        });
    }
    Ok(LoadedScenario { scenario, profile, path: path.to_path_buf() })
}

/// Resolves a backbone name. A name ending in `.ron` is a path: relative to the scenario's
/// folder when a file is there, else as given (relative to the working directory). Any other
/// name is `models/<name>.ron`, searched from the scenario's folder upwards (so a scenario
/// anywhere in the repository finds the bundled profiles, from whatever working directory),
/// then from the working directory.
pub fn resolve_profile(scenario_path: &Path, backbone: &str) -> PathBuf {
    // The scenario's folder as an absolute path, so that `..` steps work from a bare file name;
    // the result is relative again where the scenario's path was.
    let base = std::path::absolute(scenario_path).ok().and_then(|p| p.parent().map(Path::to_path_buf));
    let relative_to_cwd = |p: PathBuf| if scenario_path.is_absolute() { p } else { relative_to_cwd(p) };
    if backbone.ends_with(".ron") {
        let direct = PathBuf::from(backbone);
        if let Some(b) = &base
            && direct.is_relative()
            && b.join(&direct).exists()
        {
            return relative_to_cwd(b.join(direct));
        }
        return direct;
    }
    let file = format!("{backbone}.ron");
    let mut dir = base;
    while let Some(d) = dir {
        let cand = d.join("models").join(&file);
        if cand.exists() {
            return relative_to_cwd(cand);
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    PathBuf::from("models").join(file)
}

/// `p` relative to the working directory where it lies below it, so that paths in messages
/// and reports do not depend on where the repository is checked out.
fn relative_to_cwd(p: PathBuf) -> PathBuf {
    match std::env::current_dir() {
        Ok(cwd) => p.strip_prefix(&cwd).map(Path::to_path_buf).unwrap_or(p),
        Err(_) => p,
    }
}
