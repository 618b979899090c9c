//! The detector primitive the baseline guards share (literature.md §6): a score that is a
//! weighted sum of what the detector can observe in a text, plus noise, compared with zero.
//! TPR and FPR are then functions of one margin, so a sweep can move an attack "below the
//! threshold" by changing its wording rather than by changing a label.
//!
//! A detector sees text features only ([`TextFeatures`]): instruction-like phrasing, self-claims
//! of validation, answer binding, rare trigger strings, and (for message detectors) whether the
//! message dissents from the round's plurality. It never sees whether a text is poison.

use crate::engine::SimRng;
use crate::text::TextFeatures;
use serde::{Deserialize, Serialize};

/// Weights of a detector's score. The score is
/// `bias + Σ wᵢ·signalᵢ + noise_sd·z` with z standard normal; the detector flags when it is > 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DetectorParams {
    /// Score of a text with no signal (sets the false-positive rate).
    pub bias: f64,
    /// Per soft-instruction pattern hit ("reuse", "map … to option", "prioritize"), up to 3.
    pub instruction: f64,
    /// When an imperative injection pattern matches ("ignore previous instructions", "do not
    /// verify", "always answer X"), matched case-insensitively as a classifier would.
    pub imperative: f64,
    /// Per self-claim hit ("validated", "successful", "high-confidence"), up to 3.
    pub self_claim: f64,
    /// Per answer-binding hit beyond the answer line every output has ("option B"), up to 2.
    pub answer_binding: f64,
    /// Times the rare-trigger score (AgentPoison-style token strings) in [0, 1].
    pub rare_trigger: f64,
    /// When the message's answer differs from the round's plurality (message detectors only).
    pub dissent: f64,
    /// Standard deviation of the score noise.
    pub noise_sd: f64,
}

impl Default for DetectorParams {
    fn default() -> Self {
        DetectorParams {
            bias: -2.0,
            instruction: 0.6,
            imperative: 3.0,
            self_claim: 0.3,
            answer_binding: 0.4,
            rare_trigger: 2.5,
            dissent: 0.8,
            noise_sd: 1.0,
        }
    }
}

/// Some fields of a [`DetectorParams`], the rest taken from a guard's own defaults: a guard
/// whose detector defaults differ from [`DetectorParams::default`] (PIGuard's classifier) reads
/// a partial configuration through this, so `classifier: (bias: 0.0)` changes the bias and keeps
/// that guard's weights rather than the generic ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DetectorOverrides {
    #[serde(deserialize_with = "some")]
    bias: Option<f64>,
    #[serde(deserialize_with = "some")]
    instruction: Option<f64>,
    #[serde(deserialize_with = "some")]
    imperative: Option<f64>,
    #[serde(deserialize_with = "some")]
    self_claim: Option<f64>,
    #[serde(deserialize_with = "some")]
    answer_binding: Option<f64>,
    #[serde(deserialize_with = "some")]
    rare_trigger: Option<f64>,
    #[serde(deserialize_with = "some")]
    dissent: Option<f64>,
    #[serde(deserialize_with = "some")]
    noise_sd: Option<f64>,
}

/// A written number, as present (RON writes a plain number, not `Some(x)`).
fn some<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    f64::deserialize(d).map(Some)
}

impl DetectorOverrides {
    /// `base` with the given fields replaced.
    pub fn over(self, base: DetectorParams) -> DetectorParams {
        DetectorParams {
            bias: self.bias.unwrap_or(base.bias),
            instruction: self.instruction.unwrap_or(base.instruction),
            imperative: self.imperative.unwrap_or(base.imperative),
            self_claim: self.self_claim.unwrap_or(base.self_claim),
            answer_binding: self.answer_binding.unwrap_or(base.answer_binding),
            rare_trigger: self.rare_trigger.unwrap_or(base.rare_trigger),
            dissent: self.dissent.unwrap_or(base.dissent),
            noise_sd: self.noise_sd.unwrap_or(base.noise_sd),
        }
    }
}

/// What a detector observes in one text, as numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Observed {
    /// Soft-instruction hits, capped at 3.
    pub instruction: f64,
    /// 1 when an imperative injection pattern matches.
    pub imperative: f64,
    /// Self-claim hits, capped at 3.
    pub self_claim: f64,
    /// Answer-binding hits beyond the first, capped at 2.
    pub answer_binding: f64,
    /// Rare-trigger score.
    pub rare_trigger: f64,
    /// 1 when the text dissents from the plurality.
    pub dissent: f64,
}

impl Observed {
    /// The observable signals of a text (dissent left at 0).
    pub fn of(f: &TextFeatures) -> Self {
        Observed {
            instruction: f64::from(f.soft_instruction_hits.min(3)),
            imperative: if f.forbidden_fixed { 1.0 } else { 0.0 },
            self_claim: f64::from(f.self_claim_hits.min(3)),
            answer_binding: f64::from(f.answer_binding_hits.saturating_sub(1).min(2)),
            rare_trigger: f.rare_trigger.clamp(0.0, 1.0),
            dissent: 0.0,
        }
    }
}

impl DetectorParams {
    /// The noiseless score.
    pub fn margin(&self, o: &Observed) -> f64 {
        self.bias
            + self.instruction * o.instruction
            + self.imperative * o.imperative
            + self.self_claim * o.self_claim
            + self.answer_binding * o.answer_binding
            + self.rare_trigger * o.rare_trigger
            + self.dissent * o.dissent
    }

    /// One stochastic judgement (an LLM judge asked once).
    pub fn flags(&self, o: &Observed, rng: &mut SimRng) -> bool {
        self.margin(o) + self.noise_sd * rng.normal() > 0.0
    }

    /// A fixed classifier's judgement: the noise is a deterministic function of the text key, so
    /// the same text always gets the same verdict, as a trained classifier's would.
    pub fn flags_fixed(&self, o: &Observed, text_key: u64) -> bool {
        self.margin(o) + self.noise_sd * normal_of_key(text_key) > 0.0
    }

    /// The probability that [`DetectorParams::flags`] says yes.
    pub fn flag_probability(&self, o: &Observed) -> f64 {
        let m = self.margin(o);
        if self.noise_sd <= 0.0 {
            return if m > 0.0 { 1.0 } else { 0.0 };
        }
        normal_cdf(m / self.noise_sd)
    }

    /// Checks the parameters are usable; returns (field, what was expected).
    pub fn check(&self) -> std::result::Result<(), (String, String)> {
        let fields = [
            ("bias", self.bias),
            ("instruction", self.instruction),
            ("imperative", self.imperative),
            ("self_claim", self.self_claim),
            ("answer_binding", self.answer_binding),
            ("rare_trigger", self.rare_trigger),
            ("dissent", self.dissent),
            ("noise_sd", self.noise_sd),
        ];
        for (name, v) in fields {
            if !v.is_finite() {
                return Err((name.into(), "a finite number".into()));
            }
        }
        if self.noise_sd < 0.0 {
            return Err(("noise_sd".into(), "a standard deviation ≥ 0".into()));
        }
        Ok(())
    }
}

/// A standard normal deviate determined by `key` (Box–Muller on two hashed uniforms).
fn normal_of_key(key: u64) -> f64 {
    let a = crate::engine::mix64(key ^ 0x5049_4755_4152_4431);
    let b = crate::engine::mix64(a ^ 0x9e37_79b9_7f4a_7c15);
    let u1 = ((a >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let u2 = (b >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Φ(x), by the Abramowitz–Stegun 7.1.26 erf approximation (|error| < 1.5e-7).
pub fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 { 0.5 * (1.0 + erf) } else { 0.5 * (1.0 - erf) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{StreamKind, Streams};

    #[test]
    fn flag_rate_matches_the_normal_cdf() {
        let p = DetectorParams::default();
        let o = Observed { instruction: 2.0, self_claim: 1.0, ..Observed::default() };
        let mut rng = Streams::new(7).rng(StreamKind::Guard, &[1]);
        let n = 20_000;
        let hits = (0..n).filter(|_| p.flags(&o, &mut rng)).count();
        let want = p.flag_probability(&o);
        assert!((hits as f64 / n as f64 - want).abs() < 0.015, "{hits} vs {want}");
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-9);
        assert!((normal_cdf(1.96) - 0.975).abs() < 1e-4);
    }

    #[test]
    fn a_fixed_classifier_is_a_function_of_the_text() {
        let p = DetectorParams::default();
        let o = Observed { instruction: 3.0, ..Observed::default() };
        let first: Vec<bool> = (0..64).map(|k| p.flags_fixed(&o, k)).collect();
        let again: Vec<bool> = (0..64).map(|k| p.flags_fixed(&o, k)).collect();
        assert_eq!(first, again);
        // …and still spreads verdicts over texts with the same features.
        assert!(first.iter().any(|x| *x) && first.iter().any(|x| !*x));
    }

    #[test]
    fn stronger_signals_flag_more_often() {
        let p = DetectorParams::default();
        let plain = Observed::default();
        let loud = Observed { imperative: 1.0, instruction: 3.0, ..Observed::default() };
        assert!(p.flag_probability(&loud) > 0.95);
        assert!(p.flag_probability(&plain) < 0.05);
    }
}
