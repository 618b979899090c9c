//! Task streams. Each workload yields tasks with a public view (what agents and guards may
//! see: question, options, class) and a truth (correct answer, difficulty, how plausible each
//! wrong option is) that only the simulation's physics and the evaluator read.

mod appworld;
mod injectagent;
mod longmemeval;
mod mcq;
mod schedule;
mod words;

pub use appworld::{AppWorldConfig, AppWorldWorkload};
pub use injectagent::{InjectAgentConfig, InjectAgentWorkload};
pub use longmemeval::{
    Confusers, HaystackLayout, HistoryRound, LongMemEvalConfig, LongMemEvalWorkload, QueryTerms, TieOrder,
    heuristic_target, query_overlap_score,
};
pub use mcq::{McqConfig, McqWorkload, StreamBuilder};
pub use schedule::{Poisoning, Schedule, poisoning_set};

use crate::engine::Streams;
use crate::text::PreparedFragment;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// How many task streams [`WorkloadConfig::stream`] keeps: a grid's cells share one workload
/// and seed, a sweep over workload parameters moves through a few at a time.
const KEPT_STREAMS: usize = 4;

/// The task streams generated last in this process, most recently used last: (workload, seed,
/// the stream once generated).
type KeptStreams = Vec<(WorkloadConfig, u64, Arc<OnceLock<Arc<TaskStream>>>)>;
static STREAMS: Mutex<KeptStreams> = Mutex::new(Vec::new());

/// A workload as a scenario names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WorkloadConfig {
    /// MMLU-like 4-option questions.
    Mmlu(McqConfig),
    /// AppWorld-like next-action selection (safe / risky / confirm / unrelated).
    AppWorld(AppWorldConfig),
    /// CommonsenseQA-like 5-option questions (the INFA harness's PromptInject setting).
    Csqa(McqConfig),
    /// InjecAgent-like tool tasks whose observation carries an injected instruction.
    InjectAgent(InjectAgentConfig),
    /// LongMemEval-like open-ended questions over a trusted user-history haystack.
    LongMemEval(LongMemEvalConfig),
}

impl WorkloadConfig {
    /// The workload's name: the profile's workload key and the task class.
    pub fn class(&self) -> &'static str {
        match self {
            WorkloadConfig::Mmlu(_) => "mmlu",
            WorkloadConfig::AppWorld(_) => "appworld",
            WorkloadConfig::Csqa(_) => "csqa",
            WorkloadConfig::InjectAgent(_) => "injectagent",
            WorkloadConfig::LongMemEval(_) => "longmemeval",
        }
    }

    /// Whether the paper ran this workload in the INFA-Guard harness (spec §5.6, §7.4), whose
    /// tables report `ASR_by_turn = 1 − accuracy` in the RDA column: CSQA and InjecAgent. The
    /// stream harnesses (MMLU, AppWorld, LongMemEval) report retrieval damage (§7.1–§7.3).
    pub fn infa_harness(&self) -> bool {
        matches!(self, WorkloadConfig::Csqa(_) | WorkloadConfig::InjectAgent(_))
    }

    /// Tasks in the stream.
    pub fn tasks(&self) -> u32 {
        match self {
            WorkloadConfig::Mmlu(c) => c.tasks,
            WorkloadConfig::AppWorld(c) => c.tasks,
            WorkloadConfig::Csqa(c) => c.tasks,
            WorkloadConfig::InjectAgent(c) => c.tasks,
            WorkloadConfig::LongMemEval(c) => c.tasks,
        }
    }

    /// Sets the number of tasks.
    pub fn set_tasks(&mut self, n: u32) {
        match self {
            WorkloadConfig::Mmlu(c) | WorkloadConfig::Csqa(c) => c.tasks = n,
            WorkloadConfig::AppWorld(c) => c.tasks = n,
            WorkloadConfig::InjectAgent(c) => c.tasks = n,
            WorkloadConfig::LongMemEval(c) => c.tasks = n,
        }
    }

    /// Semantic checks: (field, expected).
    pub fn validate(&self) -> Result<(), (String, String)> {
        match self {
            WorkloadConfig::Mmlu(c) => c.validate(),
            WorkloadConfig::AppWorld(c) => c.validate(),
            WorkloadConfig::Csqa(c) => c.validate(),
            WorkloadConfig::InjectAgent(c) => c.validate(),
            WorkloadConfig::LongMemEval(c) => c.validate(),
        }
    }

    /// The task stream at master seed `seed`, shared: a stream depends on the workload and the
    /// seed alone, so every run of this process that asks for the same pair gets the one
    /// generated first (the cells of a grid, the arms of a run), with its shared analyses
    /// ([`TaskStream::prepared_haystack`]). The last `KEPT_STREAMS` (four) pairs are kept.
    pub fn stream(&self, seed: u64) -> Arc<TaskStream> {
        let cell = {
            let mut kept = STREAMS.lock().unwrap_or_else(PoisonError::into_inner);
            match kept.iter().position(|(w, s, _)| *s == seed && w == self) {
                Some(i) => {
                    let entry = kept.remove(i);
                    let cell = entry.2.clone();
                    kept.push(entry);
                    cell
                }
                None => {
                    let cell = Arc::new(OnceLock::new());
                    kept.push((self.clone(), seed, cell.clone()));
                    if kept.len() > KEPT_STREAMS {
                        kept.remove(0);
                    }
                    cell
                }
            }
        };
        // Generated outside the lock: another workload's stream is not kept waiting.
        cell.get_or_init(|| Arc::new(self.generate(&Streams::new(seed)))).clone()
    }

    /// Generates the task stream from the Workload streams of `streams`.
    pub fn generate(&self, streams: &Streams) -> TaskStream {
        match self {
            WorkloadConfig::Mmlu(c) => McqWorkload::generate(c, "mmlu", streams),
            WorkloadConfig::AppWorld(c) => AppWorldWorkload::generate(c, streams),
            WorkloadConfig::Csqa(c) => McqWorkload::generate(c, "csqa", streams),
            WorkloadConfig::InjectAgent(c) => InjectAgentWorkload::generate(c, streams),
            WorkloadConfig::LongMemEval(c) => LongMemEvalWorkload::generate(c, streams),
        }
    }
}

/// A generated stream: public tasks, their truth, and the workload's content words.
#[derive(Clone, Debug)]
pub struct TaskStream {
    pub(crate) tasks: Vec<Task>,
    pub(crate) truths: Vec<TaskTruth>,
    pub(crate) vocabulary: Vec<String>,
    /// Per task, the user-history rounds the harness commits before it (LongMemEval only).
    pub(crate) haystacks: Vec<Vec<HistoryRound>>,
    /// Per task, its haystack's units analysed once for every run ([`Self::prepared_haystack`]).
    prepared: Vec<OnceLock<Box<[Option<PreparedFragment>]>>>,
}

impl TaskStream {
    /// A stream of `tasks` with their truths, content words and haystacks (empty, or one per
    /// task).
    pub(crate) fn new(
        tasks: Vec<Task>,
        truths: Vec<TaskTruth>,
        vocabulary: Vec<String>,
        haystacks: Vec<Vec<HistoryRound>>,
    ) -> Self {
        let prepared = haystacks.iter().map(|_| OnceLock::new()).collect();
        TaskStream { tasks, truths, vocabulary, haystacks, prepared }
    }

    /// The units of task `i`'s haystack analysed without a lexicon ([`PreparedFragment::of`];
    /// `None` for a unit it does not prepare), in haystack order: computed on first use and
    /// shared by every run of this stream.
    pub fn prepared_haystack(&self, i: u32) -> &[Option<PreparedFragment>] {
        match self.prepared.get(i as usize) {
            Some(cell) => cell.get_or_init(|| self.haystack(i).iter().map(|h| PreparedFragment::of(&h.text)).collect()),
            None => &[],
        }
    }

    /// The tasks in stream order.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// The truth of task `i`.
    pub fn truth(&self, i: u32) -> &TaskTruth {
        &self.truths[i as usize]
    }

    /// Every content word of the workload.
    pub fn vocabulary(&self) -> &[String] {
        &self.vocabulary
    }

    /// The user-history rounds of task `i` (empty for workloads without a haystack).
    pub fn haystack(&self, i: u32) -> &[HistoryRound] {
        self.haystacks.get(i as usize).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// The public view of one task.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// Position in the stream.
    pub index: u32,
    /// Reference-style task id.
    pub id: String,
    /// Task class.
    pub class: String,
    /// Question stem.
    pub question: String,
    /// Option texts (A, B, …).
    pub options: Vec<String>,
    /// Cue keywords of the question and options (what the attacker writes into cues).
    pub cues: Vec<String>,
    /// Retrieval query text: stem plus options.
    pub query: String,
    /// Whether the attack is active on this task (poisoning task).
    pub poisoning: bool,
    /// Whether the task counts toward metrics.
    pub metric: bool,
    /// Whether answers are free text (the options are then candidate answer strings, not
    /// lettered choices shown to the agent).
    pub open_ended: bool,
}

/// Evaluator and physics truth of one task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskTruth {
    /// Correct option.
    pub gold: u8,
    /// Difficulty in `[0, 1]` (how often a model fails on its own).
    pub difficulty: f64,
    /// Plausibility of each option as a mistake (0 for the gold option).
    pub plausibility: Vec<f64>,
    /// The option an attacker aims at when the workload designates one (AppWorld's risky
    /// action); attackers learn it from the option texts, the evaluator scores security by it.
    pub risk: Option<u8>,
}

/// Letter of option `i`.
pub fn letter(i: u8) -> char {
    (b'A' + i) as char
}
