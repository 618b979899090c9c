//! Agents and the LLM stand-in. [`Backbone`] is the seam where a recorded-trace replayer and
//! other stand-ins plug in; [`DiscreteChoice`] is the first implementation. A backbone decides
//! only from what the agent sees — its own knowledge, the memories in its prompt and (where the
//! protocol shows them) peers' messages — never from evaluator labels.

mod choice;
mod profile;

pub use choice::{DiscreteChoice, mentioned, stance};
pub use profile::{
    JUDGE_KINDS, JudgeShift, MODEL_FIELDS, ModelParams, Profile, WORKLOAD_FIELDS, WorkloadBlock, WorkloadParams,
    load_profile, load_profile_str,
};

use crate::engine::SimRng;
use crate::text::{Sym, TextFeatures};
use crate::workload::TaskTruth;
use serde::{Deserialize, Serialize};

/// The role an agent plays on a task.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// A benign agent with the benign system prompt.
    Benign,
    /// An attacker steering toward `target` (attacker prompt only on poisoning tasks).
    Attacker {
        /// Target option of this task, if the attack is active.
        target: Option<u8>,
    },
}

/// A memory as it appears in an agent's prompt.
#[derive(Copy, Clone, Debug)]
pub struct Evidence<'a> {
    /// Features of its text.
    pub features: &'a TextFeatures,
    /// How similar it looks to the query: the cosine of the query and the text the prompt
    /// shows (for a memory without a retrieval key, the retriever's own cosine).
    pub sim: f64,
}

/// How the prompt presents retrieved memories (spec §5.2, "Memory rendering").
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemoryFraming {
    /// "Long-term memory from previous successful tasks. Use these reusable experiences to guide
    /// your answer when relevant": the No Defense rendering, which vouches for every memory.
    #[default]
    Experience,
    /// "Retrieved long-term memory from previous tasks: \[Mk\] evidence=… | origin_task=… |
    /// origin_agent=…": MAPLE-Guard's and the strict protocol's rendering, which presents a
    /// memory as evidence with its provenance and vouches for nothing.
    Evidence,
}

/// What an agent sees when it answers.
#[derive(Clone, Copy, Debug)]
pub struct AnswerContext<'a> {
    /// Its role.
    pub role: Role,
    /// Tokens of each option's text.
    pub option_tokens: &'a [Vec<Sym>],
    /// Its own belief logits over the options (its knowledge of the question).
    pub prior: &'a [f64],
    /// Memories in its prompt.
    pub memories: &'a [Evidence<'a>],
    /// How the prompt presents them.
    pub framing: MemoryFraming,
    /// Incoming peers' previous-round outputs, when the protocol shows them.
    pub peers: &'a [Peer<'a>],
    /// The answer is free text: `option_tokens` are the candidate answers the model might give,
    /// and a memory that mentions exactly one of them counts as evidence for it.
    pub open_ended: bool,
}

/// A peer's message as an agent sees it.
#[derive(Copy, Clone, Debug)]
pub struct Peer<'a> {
    /// Features of its text.
    pub features: &'a TextFeatures,
    /// A guard appended a warning about its sender.
    pub cautioned: bool,
}

/// An agent's answer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// Chosen option.
    pub choice: u8,
    /// The answer followed a poisoned pattern on purpose (attackers only).
    pub steered: bool,
    /// The answer rests on a retrieved memory's claim, and the output's reason says so.
    pub cites_memory: bool,
}

/// A reported memory in a handoff.
#[derive(Copy, Clone, Debug)]
pub struct Reported<'a> {
    /// Features of its text.
    pub features: &'a TextFeatures,
}

/// How a receiver's summary treats one reported memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Retention {
    /// The payload's wording is kept (a verbatim excerpt).
    Verbatim,
    /// Only its stance is kept, paraphrased and flagged as unconfirmed.
    Stance,
    /// Left out of the summary.
    Dropped,
}

/// The LLM seam.
pub trait Backbone: Send + Sync {
    /// Profile name.
    fn name(&self) -> &str;

    /// The model's own belief logits over a task's options (its skill on the workload).
    fn knowledge(&self, truth: &TaskTruth, rng: &mut SimRng) -> Vec<f64>;

    /// An agent's answer from what it sees.
    fn answer(&self, ctx: &AnswerContext<'_>, rng: &mut SimRng) -> Answer;

    /// The receiver memory manager's summary decision for each reported memory.
    fn summarize(&self, reported: &[Reported<'_>], rng: &mut SimRng) -> Vec<Retention>;
}
