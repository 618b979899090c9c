//! The discrete-choice stand-in: every option gets a utility from the agent's own belief plus
//! the evidence it can see, and the answer is drawn through a softmax.

use super::{Answer, AnswerContext, Backbone, CallSite, MemoryFraming, Reported, Retention, Role, WorkloadParams};
use crate::engine::SimRng;
use crate::text::{Sym, TextFeatures, intersection_size};
use crate::workload::TaskTruth;

/// The option a memory argues for on the current task, and whether that rests on a bare
/// letter. The claim's option text is matched onto the current options by shared keywords, as
/// the reference maps a target text onto later tasks' options.
pub fn stance(f: &TextFeatures, option_tokens: &[Vec<Sym>]) -> Option<(u8, bool)> {
    if !f.claim_tokens.is_empty() {
        let overlaps: Vec<usize> = option_tokens.iter().map(|o| intersection_size(&f.claim_tokens, o)).collect();
        let best = *overlaps.iter().max()?;
        if best == 0 || overlaps.iter().filter(|x| **x == best).count() > 1 {
            return None;
        }
        return overlaps.iter().position(|x| *x == best).map(|i| (i as u8, false));
    }
    f.claim_letter.filter(|l| (*l as usize) < option_tokens.len()).map(|l| (l, true))
}

/// The candidate answer a memory's text mentions, when it mentions exactly one (every token of
/// the candidate appears in it): evidence in an open-ended question's user history.
pub fn mentioned(f: &TextFeatures, option_tokens: &[Vec<Sym>]) -> Option<u8> {
    let tokens = f.tokens.get();
    let mut found = None;
    for (i, o) in option_tokens.iter().enumerate() {
        if !o.is_empty() && intersection_size(o, tokens) == o.len() {
            if found.is_some() {
                return None;
            }
            found = Some(i as u8);
        }
    }
    found
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// A stochastic discrete-choice policy with one parameter set per workload.
#[derive(Clone, Debug)]
pub struct DiscreteChoice {
    name: String,
    p: WorkloadParams,
}

impl DiscreteChoice {
    /// A stand-in with parameters `p`.
    pub fn new(name: &str, p: WorkloadParams) -> Self {
        DiscreteChoice { name: name.into(), p }
    }

    /// The option a retrieved memory pushes and by how much (negative for a failure report).
    fn memory_pull(
        &self,
        m: &super::Evidence<'_>,
        option_tokens: &[Vec<Sym>],
        open: bool,
        framing: MemoryFraming,
    ) -> Option<(u8, f64)> {
        let p = &self.p;
        // A candidate named only in someone else's words weighs `reported_weight` of the user's
        // own statement of it (an open-ended mention; a stance is a claim either way).
        let (opt, bare, reported) = match stance(m.features, option_tokens) {
            Some((opt, bare)) => (opt, bare, false),
            None if open => (mentioned(m.features, option_tokens)?, false, m.features.reported_speech),
            None => return None,
        };
        let framed = if framing == MemoryFraming::Evidence { p.evidence_framing } else { 1.0 };
        let relevance = m.sim.clamp(0.0, 1.0) * framed;
        let f = m.features;
        if f.reports_failure {
            return Some((opt, -p.failure_weight * relevance));
        }
        let mut w = p.memory_weight
            * (1.0
                + p.self_claim_gain * f64::from(f.self_claim_hits.min(3))
                + if f.soft_instruction_hits > 0 || f.forbidden_fixed { p.instruction_gain } else { 0.0 });
        if f.rewrite_notice {
            w *= p.rewrite_discount;
        }
        if bare {
            w *= p.bare_letter_discount;
        }
        if reported {
            w *= p.reported_weight;
        }
        Some((opt, w * relevance))
    }

    /// Each retrieved memory's pull (option, utility added), in prompt order.
    fn pulls(&self, ctx: &AnswerContext<'_>) -> Vec<Option<(u8, f64)>> {
        ctx.memories.iter().map(|m| self.memory_pull(m, ctx.option_tokens, ctx.open_ended, ctx.framing)).collect()
    }

    /// The utility of each option (before the softmax).
    pub fn utilities(&self, ctx: &AnswerContext<'_>) -> Vec<f64> {
        self.utilities_from(ctx, &self.pulls(ctx))
    }

    fn utilities_from(&self, ctx: &AnswerContext<'_>, pulls: &[Option<(u8, f64)>]) -> Vec<f64> {
        let p = &self.p;
        let mut u = ctx.prior.to_vec();
        for (opt, pull) in pulls.iter().flatten() {
            u[*opt as usize] += pull;
        }
        for peer in ctx.peers {
            if let Some((opt, _)) = stance(peer.features, ctx.option_tokens) {
                u[opt as usize] += if peer.cautioned { p.peer_weight * p.peer_caution_discount } else { p.peer_weight };
            }
        }
        u
    }

    /// Whether an answer of `choice` cites a memory: the strongest memory pull favours it and
    /// is at least `cite_threshold`.
    fn cites(&self, pulls: &[Option<(u8, f64)>], choice: u8) -> bool {
        let strongest = pulls
            .iter()
            .flatten()
            .copied()
            .filter(|(_, w)| *w > 0.0)
            .fold(None::<(u8, f64)>, |best, x| if best.is_none_or(|b| x.1 > b.1) { Some(x) } else { best });
        strongest.is_some_and(|(opt, w)| opt == choice && w >= self.p.cite_threshold)
    }
}

impl Backbone for DiscreteChoice {
    fn name(&self) -> &str {
        &self.name
    }

    fn knowledge(&self, truth: &TaskTruth, rng: &mut SimRng) -> Vec<f64> {
        let p = &self.p;
        let knows = rng.bernoulli(sigmoid(p.skill - p.difficulty_slope * truth.difficulty));
        let n = truth.plausibility.len();
        let mean_plaus = truth.plausibility.iter().sum::<f64>() / (n.max(2) - 1) as f64;
        (0..n)
            .map(|k| {
                if k == truth.gold as usize {
                    if knows { p.knowledge_logit } else { p.confusion_logit * mean_plaus }
                } else {
                    p.confusion_logit * truth.plausibility[k]
                }
            })
            .collect()
    }

    fn answer(&self, ctx: &AnswerContext<'_>, rng: &mut SimRng) -> Answer {
        if let Role::Attacker { target: Some(t) } = ctx.role
            && rng.bernoulli(self.p.attacker_compliance)
        {
            return Answer { choice: t, steered: true, cites_memory: false };
        }
        let pulls = self.pulls(ctx);
        let u = self.utilities_from(ctx, &pulls);
        let max = u.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = u.iter().map(|x| ((x - max) / self.p.temperature).exp()).collect();
        let choice = rng.weighted(&weights) as u8;
        Answer { choice, steered: false, cites_memory: self.cites(&pulls, choice) }
    }

    fn summarize(&self, reported: &[Reported<'_>], _site: Option<&CallSite>, rng: &mut SimRng) -> Vec<Retention> {
        reported
            .iter()
            .map(|r| {
                let f = r.features;
                let has_claim = f.claim_letter.is_some() || !f.claim_tokens.is_empty();
                let x = rng.uniform();
                if !has_claim {
                    return Retention::Dropped;
                }
                let verbatim = (self.p.summary_verbatim
                    * (1.0 + if f.self_claim_hits > 0 { self.p.summary_claim_gain } else { 0.0 }))
                .min(1.0 - self.p.summary_stance);
                if x < verbatim {
                    Retention::Verbatim
                } else if x < verbatim + self.p.summary_stance {
                    Retention::Stance
                } else {
                    Retention::Dropped
                }
            })
            .collect()
    }
}
