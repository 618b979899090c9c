//! Backbone profiles: `models/<backbone>.ron`, parameters per workload.

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

/// Stand-in parameters of one backbone on one workload.
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
}

impl Default for WorkloadParams {
    fn default() -> Self {
        WorkloadParams {
            skill: 2.0,
            difficulty_slope: 3.0,
            knowledge_logit: 3.0,
            confusion_logit: 1.0,
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
        }
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
    /// Parameters per workload class.
    pub workloads: BTreeMap<String, WorkloadParams>,
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
    /// Parameters for workload class `class`.
    pub fn workload(&self, class: &str) -> Option<&WorkloadParams> {
        self.workloads.get(class)
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
    for w in p.workloads.values() {
        w.check().map_err(|(field, expected)| crate::error::Error::Invalid {
            path: path.to_path_buf(),
            pos: crate::error::locate_field(text, &field),
            field,
            expected,
        })?;
    }
    Ok(p)
}
