//! Backbone profiles: `models/<backbone>.ron`. One block of parameters describes the model
//! (how it follows memories, peers, instructions, an attacker's prompt), shared by every workload;
//! each workload block holds only what the workload changes (difficulty, knowledge) and any
//! deviations of model parameters, which calibration penalises (issue 15).

use crate::error::{Result, parse_ron, read_file};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The smallest softmax temperature: below it utilities divided by it overflow.
pub const MIN_TEMPERATURE: f64 = 1e-3;
/// The largest softmax temperature.
pub const MAX_TEMPERATURE: f64 = 1e3;
/// The largest magnitude of a stand-in parameter (logits, weights, gains): far beyond any
/// fitted value, small enough that no sum of them overflows.
pub const MAX_PARAMETER: f64 = 1e4;

/// Stand-in parameters of one backbone on one workload, as the stand-in reads them: the
/// profile's [`ModelParams`] with the workload's [`WorkloadBlock`] (its difficulty and knowledge,
/// and any deviations of model parameters) applied ([`Profile::workload`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkloadParams {
    /// Logit of knowing the answer of a task of difficulty 0.
    pub skill: f64,
    /// How much difficulty (0–1) lowers that logit.
    pub difficulty_slope: f64,
    /// Belief logit on the correct option when the model knows it.
    pub knowledge_logit: f64,
    /// Belief logit per unit of a wrong option's plausibility (confusion).
    pub confusion_logit: f64,
    /// Pull of one retrieved memory arguing for an option.
    pub memory_weight: f64,
    /// Extra pull per self-claim phrase (validated, successful, high-confidence…), up to 3.
    pub self_claim_gain: f64,
    /// Extra pull of instruction-like phrasing (reuse, prioritize, map … to option).
    pub instruction_gain: f64,
    /// Multiplier on a memory that carries the write gate's "unverified note" notice.
    pub rewrite_discount: f64,
    /// Multiplier on a memory whose stance is a bare letter without option text.
    pub bare_letter_discount: f64,
    /// Push away from an answer a memory reports as incorrect.
    pub failure_weight: f64,
    /// Pull of one incoming peer message.
    pub peer_weight: f64,
    /// Softmax temperature.
    pub temperature: f64,
    /// Probability an attacker follows its attacker prompt.
    pub attacker_compliance: f64,
    /// Probability a summary keeps a reported payload's wording verbatim.
    pub summary_verbatim: f64,
    /// Extra verbatim probability when the memory makes self-claims.
    pub summary_claim_gain: f64,
    /// Probability a summary keeps only the stance.
    pub summary_stance: f64,
    /// Smallest memory pull (utility added to an option) at which an answer's reason cites the
    /// memory, as an LLM does when a retrieved note carried the decision.
    pub cite_threshold: f64,
    /// Factor on a peer message's weight when a guard appended a warning about its sender.
    pub peer_caution_discount: f64,
    /// Factor on every retrieved memory's pull when the prompt presents memories as
    /// provenance-tagged evidence rather than as reusable experiences from successful tasks
    /// ([`super::MemoryFraming`]); 1 = the framing makes no difference.
    pub evidence_framing: f64,
    /// Factor on the pull of a memory that names an open-ended question's candidate only in
    /// someone else's words ("my cousin mentioned …", [`crate::text::TextFeatures::reported_speech`]),
    /// beside a statement of the user's own; 1 = the stand-in reads the two alike, as every
    /// committed profile does (docs/calibration.md, "Qwen's LongMemEval gap").
    #[serde(skip_serializing_if = "is_one")]
    pub reported_weight: f64,
}

/// Whether `x` is 1: a parameter added after profiles were committed is left out of their
/// serialised form at its neutral value, so that every record key and hash stays the same.
fn is_one(x: &f64) -> bool {
    *x == 1.0
}

impl Default for WorkloadParams {
    fn default() -> Self {
        ModelParams::default().with(&WorkloadBlock::default())
    }
}

/// The fields of [`WorkloadParams`] a workload owns ([`WorkloadBlock`]): how hard its tasks
/// are for the model and how firmly it knows an answer. Every other field describes the model
/// ([`MODEL_FIELDS`]).
pub const WORKLOAD_FIELDS: [&str; 4] = ["skill", "difficulty_slope", "knowledge_logit", "confusion_logit"];

/// The fields of [`ModelParams`]: how the backbone follows a retrieved memory under each
/// framing, its peers, instruction-like and self-claiming text, and an attacker's prompt, and
/// how it summarises.
pub const MODEL_FIELDS: [&str; 16] = [
    "memory_weight",
    "self_claim_gain",
    "instruction_gain",
    "rewrite_discount",
    "bare_letter_discount",
    "failure_weight",
    "peer_weight",
    "temperature",
    "attacker_compliance",
    "summary_verbatim",
    "summary_claim_gain",
    "summary_stance",
    "cite_threshold",
    "peer_caution_discount",
    "evidence_framing",
    "reported_weight",
];

/// What describes the backbone itself, shared by every workload (issue 15): the fields of
/// [`WorkloadParams`] named in [`MODEL_FIELDS`], with the same meaning. A workload that needs
/// another value carries a deviation ([`WorkloadBlock::deviations`]), which calibration
/// penalises.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelParams {
    /// See [`WorkloadParams::memory_weight`].
    pub memory_weight: f64,
    /// See [`WorkloadParams::self_claim_gain`].
    pub self_claim_gain: f64,
    /// See [`WorkloadParams::instruction_gain`].
    pub instruction_gain: f64,
    /// See [`WorkloadParams::rewrite_discount`].
    pub rewrite_discount: f64,
    /// See [`WorkloadParams::bare_letter_discount`].
    pub bare_letter_discount: f64,
    /// See [`WorkloadParams::failure_weight`].
    pub failure_weight: f64,
    /// See [`WorkloadParams::peer_weight`].
    pub peer_weight: f64,
    /// See [`WorkloadParams::temperature`].
    pub temperature: f64,
    /// See [`WorkloadParams::attacker_compliance`].
    pub attacker_compliance: f64,
    /// See [`WorkloadParams::summary_verbatim`].
    pub summary_verbatim: f64,
    /// See [`WorkloadParams::summary_claim_gain`].
    pub summary_claim_gain: f64,
    /// See [`WorkloadParams::summary_stance`].
    pub summary_stance: f64,
    /// See [`WorkloadParams::cite_threshold`].
    pub cite_threshold: f64,
    /// See [`WorkloadParams::peer_caution_discount`].
    pub peer_caution_discount: f64,
    /// See [`WorkloadParams::evidence_framing`].
    pub evidence_framing: f64,
    /// See [`WorkloadParams::reported_weight`].
    #[serde(skip_serializing_if = "is_one")]
    pub reported_weight: f64,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams {
            memory_weight: 1.0,
            self_claim_gain: 0.3,
            instruction_gain: 0.3,
            rewrite_discount: 0.4,
            bare_letter_discount: 0.5,
            failure_weight: 0.5,
            peer_weight: 0.6,
            temperature: 1.0,
            attacker_compliance: 0.9,
            summary_verbatim: 0.3,
            summary_claim_gain: 0.2,
            summary_stance: 0.4,
            cite_threshold: 0.5,
            peer_caution_discount: 0.3,
            evidence_framing: 1.0,
            reported_weight: 1.0,
        }
    }
}

impl ModelParams {
    /// Field `name` ([`MODEL_FIELDS`]).
    pub fn get(&self, name: &str) -> Option<f64> {
        let mut m = self.clone();
        m.field_mut(name).map(|v| *v)
    }

    /// A mutable reference to field `name` ([`MODEL_FIELDS`]).
    pub fn field_mut(&mut self, name: &str) -> Option<&mut f64> {
        Some(match name {
            "memory_weight" => &mut self.memory_weight,
            "self_claim_gain" => &mut self.self_claim_gain,
            "instruction_gain" => &mut self.instruction_gain,
            "rewrite_discount" => &mut self.rewrite_discount,
            "bare_letter_discount" => &mut self.bare_letter_discount,
            "failure_weight" => &mut self.failure_weight,
            "peer_weight" => &mut self.peer_weight,
            "temperature" => &mut self.temperature,
            "attacker_compliance" => &mut self.attacker_compliance,
            "summary_verbatim" => &mut self.summary_verbatim,
            "summary_claim_gain" => &mut self.summary_claim_gain,
            "summary_stance" => &mut self.summary_stance,
            "cite_threshold" => &mut self.cite_threshold,
            "peer_caution_discount" => &mut self.peer_caution_discount,
            "evidence_framing" => &mut self.evidence_framing,
            "reported_weight" => &mut self.reported_weight,
            _ => return None,
        })
    }

    /// The stand-in's parameters on a workload: these with `w`'s difficulty, knowledge and
    /// deviations (a deviation adds to the model's value; unknown names are ignored here and
    /// refused at load).
    pub fn with(&self, w: &WorkloadBlock) -> WorkloadParams {
        let mut m = self.clone();
        for (name, d) in &w.deviations {
            if let Some(v) = m.field_mut(name) {
                *v += d;
            }
        }
        WorkloadParams {
            skill: w.skill,
            difficulty_slope: w.difficulty_slope,
            knowledge_logit: w.knowledge_logit,
            confusion_logit: w.confusion_logit,
            memory_weight: m.memory_weight,
            self_claim_gain: m.self_claim_gain,
            instruction_gain: m.instruction_gain,
            rewrite_discount: m.rewrite_discount,
            bare_letter_discount: m.bare_letter_discount,
            failure_weight: m.failure_weight,
            peer_weight: m.peer_weight,
            temperature: m.temperature,
            attacker_compliance: m.attacker_compliance,
            summary_verbatim: m.summary_verbatim,
            summary_claim_gain: m.summary_claim_gain,
            summary_stance: m.summary_stance,
            cite_threshold: m.cite_threshold,
            peer_caution_discount: m.peer_caution_discount,
            evidence_framing: m.evidence_framing,
            reported_weight: m.reported_weight,
        }
    }
}

/// What one workload changes for the backbone: how hard its tasks are and how firmly the model
/// knows an answer ([`WORKLOAD_FIELDS`], meaning as in [`WorkloadParams`]), and, where the
/// workload needs it, a deviation from a model parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkloadBlock {
    /// See [`WorkloadParams::skill`].
    pub skill: f64,
    /// See [`WorkloadParams::difficulty_slope`].
    pub difficulty_slope: f64,
    /// See [`WorkloadParams::knowledge_logit`].
    pub knowledge_logit: f64,
    /// See [`WorkloadParams::confusion_logit`].
    pub confusion_logit: f64,
    /// Model parameter ([`MODEL_FIELDS`]) → amount this workload adds to the model's value. A
    /// calibration penalises every fitted deviation (its `prior_sd`), so a workload departs from
    /// the backbone only as far as its rows demand.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub deviations: BTreeMap<String, f64>,
}

impl Default for WorkloadBlock {
    fn default() -> Self {
        WorkloadBlock {
            skill: 2.0,
            difficulty_slope: 3.0,
            knowledge_logit: 3.0,
            confusion_logit: 1.0,
            deviations: BTreeMap::new(),
        }
    }
}

impl WorkloadBlock {
    /// A mutable reference to workload field `name` ([`WORKLOAD_FIELDS`]).
    pub fn field_mut(&mut self, name: &str) -> Option<&mut f64> {
        Some(match name {
            "skill" => &mut self.skill,
            "difficulty_slope" => &mut self.difficulty_slope,
            "knowledge_logit" => &mut self.knowledge_logit,
            "confusion_logit" => &mut self.confusion_logit,
            _ => return None,
        })
    }

    /// Workload field `name` ([`WORKLOAD_FIELDS`]).
    pub fn get(&self, name: &str) -> Option<f64> {
        self.clone().field_mut(name).map(|v| *v)
    }

    /// The deviation of model parameter `name` (0 without one).
    pub fn deviation(&self, name: &str) -> f64 {
        self.deviations.get(name).copied().unwrap_or(0.0)
    }
}

impl WorkloadParams {
    /// Checks every parameter's domain; (field, expected) on the first problem.
    pub fn check(&self) -> std::result::Result<(), (String, String)> {
        let probs = [
            ("attacker_compliance", self.attacker_compliance),
            ("summary_verbatim", self.summary_verbatim),
            ("summary_stance", self.summary_stance),
        ];
        for (f, p) in probs {
            if !(0.0..=1.0).contains(&p) {
                return Err((f.into(), format!("a probability in [0, 1], got {p}")));
            }
        }
        if self.summary_verbatim + self.summary_stance > 1.0 {
            return Err(("summary_stance".into(), "summary_verbatim + summary_stance <= 1".into()));
        }
        if !(MIN_TEMPERATURE..=MAX_TEMPERATURE).contains(&self.temperature) {
            return Err((
                "temperature".into(),
                format!("a temperature in [{MIN_TEMPERATURE}, {MAX_TEMPERATURE}], got {}", self.temperature),
            ));
        }
        if let Some((field, v)) = crate::error::oversized_float(self, MAX_PARAMETER) {
            return Err((field, format!("a finite parameter of magnitude at most {MAX_PARAMETER}, got {v:e}")));
        }
        let nonneg = [
            ("memory_weight", self.memory_weight),
            ("rewrite_discount", self.rewrite_discount),
            ("bare_letter_discount", self.bare_letter_discount),
            ("failure_weight", self.failure_weight),
            ("peer_weight", self.peer_weight),
            ("cite_threshold", self.cite_threshold),
            ("peer_caution_discount", self.peer_caution_discount),
            ("evidence_framing", self.evidence_framing),
            ("reported_weight", self.reported_weight),
        ];
        for (f, v) in nonneg {
            if v < 0.0 || !v.is_finite() {
                return Err((f.into(), format!("a non-negative number, got {v}")));
            }
        }
        Ok(())
    }
}

/// A backbone profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Backbone name.
    pub name: String,
    /// Where the numbers come from (first guess, fitted on …).
    #[serde(default)]
    pub provenance: String,
    /// What describes the backbone whatever the workload: how it follows retrieved memories,
    /// peers, instructions and an attacker's prompt.
    #[serde(default)]
    pub model: ModelParams,
    /// What each workload class changes (difficulty, knowledge, penalised deviations).
    pub workloads: BTreeMap<String, WorkloadBlock>,
    /// How this backbone behaves as the LLM behind a baseline's judge, per guard kind
    /// ([`JUDGE_KINDS`]): the reference's Challenger, Inspector, AgentSafe and AgentXposed ask
    /// the agents' own model whether a message is unsafe, so how readily they flag is the
    /// backbone's as much as the guard's (Table 2: Gemma's Challenger flags far more than
    /// Qwen's). Empty: every judge runs exactly as its arm configures it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub judges: BTreeMap<String, JudgeShift>,
}

/// The guard kinds whose detector is an LLM call on the agents' backbone (spec §8). The graph
/// guards (G-Safeguard, INFA-Guard, GUARDIAN) and PIGuard's classifier are models of their own.
pub const JUDGE_KINDS: [&str; 4] = ["challenger", "inspector", "agentsafe", "agentxposed"];

/// Shifts added to a judge guard's detector when this backbone runs it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JudgeShift {
    /// Added to the detector's bias (its flag rate on an ordinary message).
    pub bias: f64,
    /// Added to the detector's dissent weight (how much disagreeing with the round counts).
    pub dissent: f64,
}

impl JudgeShift {
    /// The shift's field `name` ("bias" or "dissent").
    pub fn get(&self, name: &str) -> Option<f64> {
        match name {
            "bias" => Some(self.bias),
            "dissent" => Some(self.dissent),
            _ => None,
        }
    }

    /// Sets field `name`; false if there is no such field.
    pub fn set(&mut self, name: &str, v: f64) -> bool {
        match name {
            "bias" => self.bias = v,
            "dissent" => self.dissent = v,
            _ => return false,
        }
        true
    }
}

impl Profile {
    /// The stand-in's parameters on workload class `class`: the model's, with the workload's
    /// block applied ([`ModelParams::with`]).
    pub fn workload(&self, class: &str) -> Option<WorkloadParams> {
        self.workloads.get(class).map(|w| self.model.with(w))
    }
}

impl Profile {
    /// Checks every workload's deviations name model parameters and every workload's resolved
    /// parameters are in their domains; (field, expected) on the first problem, the field
    /// prefixed by its workload ("mmlu.memory_weight").
    pub fn check(&self) -> std::result::Result<(), (String, String)> {
        for (class, w) in &self.workloads {
            if let Some(name) = w.deviations.keys().find(|n| !MODEL_FIELDS.contains(&n.as_str())) {
                return Err((
                    format!("{class}.deviations"),
                    format!("deviations of model parameters, one of {MODEL_FIELDS:?}, not `{name}`"),
                ));
            }
            self.model.with(w).check().map_err(|(f, e)| {
                let on = if w.deviations.contains_key(&f) {
                    " (the model's value plus this workload's deviation)"
                } else {
                    ""
                };
                (format!("{class}.{f}"), format!("{e}{on}"))
            })?;
        }
        Ok(())
    }
}

/// Loads and checks a profile.
pub fn load_profile(path: &Path) -> Result<Profile> {
    load_profile_str(&read_file(path)?, path)
}

/// [`load_profile`] of `text` as if read from `path`.
pub fn load_profile_str(text: &str, path: &Path) -> Result<Profile> {
    let p: Profile = parse_ron(path, text)?;
    for (kind, j) in &p.judges {
        let expected = if !JUDGE_KINDS.contains(&kind.as_str()) {
            format!("a judge guard kind, one of {JUDGE_KINDS:?}, not `{kind}`")
        } else if !(j.bias.abs() <= MAX_PARAMETER && j.dissent.abs() <= MAX_PARAMETER) {
            format!("finite shifts for `{kind}`")
        } else {
            continue;
        };
        return Err(crate::error::Error::Invalid {
            path: path.to_path_buf(),
            pos: crate::error::locate_field(text, &format!("\"{kind}\"")),
            field: "judges".into(),
            expected,
        });
    }
    p.check().map_err(|(field, expected)| crate::error::Error::Invalid {
        path: path.to_path_buf(),
        pos: crate::error::locate_field(text, field.rsplit('.').next().unwrap_or(&field)),
        field,
        expected,
    })?;
    Ok(p)
}
