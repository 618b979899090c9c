//! The replaying backbone: answers each call with the decision a trace recorded for the same
//! [`CallSite`] and occurrence, and a call the trace does not hold according to its
//! [`ReplayMode`] (modelled on VCR's record modes): an error (`Strict`), the named fallback
//! backbone's answer, logged as a divergence (`Fallback`), or that and every later call of the
//! same task and agent marked as downstream of a divergence (`Flag`).
//!
//! A replayer draws no randomness of its own: a recorded decision is returned as recorded, and
//! the fallback draws from the same named stream (seeded by the trace's seed and the call's
//! task, round and agent) that the recorded run's backbone drew from. Every other random draw of
//! a run (ε-exploration, promotion, detectors) is keyed by task, round, agent and store, never by
//! arm, so a replay at the trace's seed sees the recording's coin flips.

use super::{Answer, AnswerContext, Backbone, Call, CallKind, CallSite, Decision, Reported, Retention, Verdict};
use crate::engine::SimRng;
use crate::workload::TaskTruth;
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

/// What a replay does with a call the trace does not hold.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReplayMode {
    /// Any such call is an error naming the first divergent call.
    Strict,
    /// The fallback backbone answers it, and the divergence is logged.
    Fallback,
    /// As `Fallback`, and every later call of that task and agent is marked downstream of a
    /// divergence, recorded decision or not.
    Flag,
}

impl ReplayMode {
    /// Parses `strict`, `fallback` or `flag`.
    pub fn parse(s: &str) -> Option<ReplayMode> {
        match s {
            "strict" => Some(ReplayMode::Strict),
            "fallback" => Some(ReplayMode::Fallback),
            "flag" => Some(ReplayMode::Flag),
            _ => None,
        }
    }

    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayMode::Strict => "strict",
            ReplayMode::Fallback => "fallback",
            ReplayMode::Flag => "flag",
        }
    }
}

/// Why a call diverged from the recording.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DivergenceReason {
    /// The trace has the call at the same task, round, agent and kind, with other memories in
    /// the prompt (or another report).
    MemorySetChanged,
    /// Same memories, but other peers' messages (or other outputs under review).
    PeersChanged,
    /// The trace has no call at those coordinates (or one that differs otherwise).
    NewCall,
    /// The trace has a call the replay never made.
    MissingCall,
    /// The recorded decision does not fit the call (a choice beyond the options, a retention
    /// list of another length): the trace belongs to another scenario.
    BadDecision,
}

impl DivergenceReason {
    /// How reports name it.
    pub fn as_str(self) -> &'static str {
        match self {
            DivergenceReason::MemorySetChanged => "memory set changed",
            DivergenceReason::PeersChanged => "peers changed",
            DivergenceReason::NewCall => "new call",
            DivergenceReason::MissingCall => "missing call",
            DivergenceReason::BadDecision => "recorded decision does not fit the call",
        }
    }
}

/// One divergence: the call made (or, for a missing call, the recorded one), why, and the
/// recorded call at the same coordinates if there is one.
#[derive(Clone, Debug, PartialEq)]
pub struct Divergence {
    /// The call (for `MissingCall`, the recorded call that was never made).
    pub site: CallSite,
    /// Why.
    pub reason: DivergenceReason,
    /// The recorded call at the same task, round, agent and kind, if any.
    pub recorded: Option<CallSite>,
}

/// Where a replayed call's decision came from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// The recording, with nothing diverged before it in its task and agent.
    Recorded,
    /// The recording, but downstream of a divergence of its task and agent (`Flag` mode).
    Downstream,
    /// The fallback backbone (or, for a judge call, the arm's own guard).
    Fallback,
}

/// One call a replay made, as its report needs it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Made {
    /// Its kind.
    pub kind: CallKind,
    /// Its round.
    pub round: u32,
    /// The agent is not a configured attacker.
    pub benign: bool,
    /// The task counts in the metrics.
    pub metric: bool,
    /// Where its decision came from.
    pub provenance: Provenance,
}

/// What a replay did: every call with the provenance of its decision, and the divergences.
#[derive(Clone, Debug, Default)]
pub struct ReplayLog {
    /// Every call made, in order, with where its decision came from.
    pub calls: Vec<Made>,
    /// Divergences in the order they happened; recorded calls never made come last.
    pub divergences: Vec<Divergence>,
}

/// Coordinates of a call, without what it saw: (task, round, agent, kind, sender).
type Coarse = (u32, u32, u32, CallKind, Option<u32>);

/// A replay's state, shared with its driver through [`Replay::state`].
pub struct ReplayState {
    recorded: Arc<[Call]>,
    /// (fingerprint of the site, occurrence) → recorded calls with that key (the site is
    /// compared in full before a decision is used).
    exact: HashMap<(u64, u32), Vec<usize>>,
    coarse: HashMap<Coarse, Vec<usize>>,
    used: Vec<bool>,
    /// Calls made so far per site fingerprint: a site's occurrence. (Two sites of one 64-bit
    /// fingerprint would share a count: a spurious divergence, never a wrong decision.)
    seen: HashMap<u64, u32>,
    /// (task, agent) pairs with a divergence; agent `u32::MAX` marks a judge call's whole round.
    tainted: BTreeSet<(u32, u32)>,
    log: ReplayLog,
}

impl ReplayState {
    /// The log, with every recorded call that was never made appended as a `MissingCall`.
    pub fn finish(&mut self) -> ReplayLog {
        let mut log = std::mem::take(&mut self.log);
        for (i, c) in self.recorded.iter().enumerate() {
            if !self.used[i] {
                log.divergences.push(Divergence {
                    site: c.site.clone(),
                    reason: DivergenceReason::MissingCall,
                    recorded: None,
                });
            }
        }
        log
    }
}

fn coarse(s: &CallSite) -> Coarse {
    (s.task, s.round, s.agent, s.kind, s.src)
}

fn fingerprint(s: &CallSite) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    s.hash(&mut h);
    h.finish()
}

fn made(s: &CallSite, provenance: Provenance) -> Made {
    Made { kind: s.kind, round: s.round, benign: s.benign, metric: s.metric, provenance }
}

/// A backbone that replays recorded calls (see the module docs).
pub struct Replay {
    fallback: Box<dyn Backbone>,
    mode: ReplayMode,
    state: Arc<Mutex<ReplayState>>,
}

impl Replay {
    /// Replays `recorded` in `mode`; `fallback` answers what the trace does not hold (and
    /// supplies the agents' own beliefs, which a recording does not hold).
    pub fn new(recorded: Arc<[Call]>, mode: ReplayMode, fallback: Box<dyn Backbone>) -> Replay {
        let mut exact: HashMap<(u64, u32), Vec<usize>> = HashMap::default();
        let mut coarse_ix: HashMap<Coarse, Vec<usize>> = HashMap::default();
        for (i, c) in recorded.iter().enumerate() {
            exact.entry((fingerprint(&c.site), c.occurrence)).or_default().push(i);
            coarse_ix.entry(coarse(&c.site)).or_default().push(i);
        }
        let used = vec![false; recorded.len()];
        let state = ReplayState {
            recorded,
            exact,
            coarse: coarse_ix,
            used,
            seen: HashMap::default(),
            tainted: BTreeSet::new(),
            log: ReplayLog::default(),
        };
        Replay { fallback, mode, state: Arc::new(Mutex::new(state)) }
    }

    /// The shared state; [`ReplayState::finish`] after the run gives the log.
    pub fn state(&self) -> Arc<Mutex<ReplayState>> {
        self.state.clone()
    }

    /// Looks `site` up: the recorded decision if the trace holds it (and it fits), with the
    /// call's provenance; `None` for a divergence, which is logged.
    fn lookup(&self, site: &CallSite, fits: impl Fn(&Decision) -> bool) -> Option<Decision> {
        let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let st = &mut *st;
        let fp = fingerprint(site);
        let n = st.seen.entry(fp).or_insert(0);
        let occurrence = *n;
        *n += 1;
        let recorded = &st.recorded;
        let hit = st.exact.get(&(fp, occurrence)).and_then(|v| {
            v.iter().copied().find(|i| recorded[*i].site == *site && recorded[*i].occurrence == occurrence)
        });
        let found = hit.filter(|i| !st.used[*i]).map(|i| (i, fits(&st.recorded[i].decision)));
        let tainted = st.tainted.contains(&(site.task, site.agent)) || st.tainted.contains(&(site.task, u32::MAX));
        match found {
            Some((i, true)) => {
                st.used[i] = true;
                let p = if tainted && self.mode == ReplayMode::Flag {
                    Provenance::Downstream
                } else {
                    Provenance::Recorded
                };
                st.log.calls.push(made(site, p));
                Some(st.recorded[i].decision.clone())
            }
            _ => {
                // The recorded call at the same coordinates, if one is still unmatched, says why.
                let other = st
                    .coarse
                    .get(&coarse(site))
                    .and_then(|v| v.iter().copied().find(|i| !st.used[*i] && Some(*i) != hit))
                    .or(hit);
                let reason = match (found, other) {
                    (Some((_, false)), _) => DivergenceReason::BadDecision,
                    (_, Some(o)) => {
                        let r = &st.recorded[o].site;
                        if r.memories != site.memories {
                            DivergenceReason::MemorySetChanged
                        } else if r.peers != site.peers || r.messages != site.messages {
                            DivergenceReason::PeersChanged
                        } else {
                            DivergenceReason::NewCall
                        }
                    }
                    (_, None) => DivergenceReason::NewCall,
                };
                // A replaced call is accounted for: its recorded twin is not also "missing".
                if let Some(o) = other
                    && reason != DivergenceReason::NewCall
                {
                    st.used[o] = true;
                }
                let recorded = other.map(|o| st.recorded[o].site.clone());
                st.log.divergences.push(Divergence { site: site.clone(), reason, recorded });
                st.log.calls.push(made(site, Provenance::Fallback));
                if self.mode == ReplayMode::Flag {
                    st.tainted.insert((site.task, site.agent));
                }
                None
            }
        }
    }
}

impl Backbone for Replay {
    fn name(&self) -> &str {
        self.fallback.name()
    }

    fn knowledge(&self, truth: &TaskTruth, rng: &mut SimRng) -> Vec<f64> {
        self.fallback.knowledge(truth, rng)
    }

    fn answer(&self, ctx: &AnswerContext<'_>, rng: &mut SimRng) -> Answer {
        let Some(site) = ctx.site else { return self.fallback.answer(ctx, rng) };
        let options = ctx.option_tokens.len();
        match self.lookup(site, |d| matches!(d, Decision::Answer(a) if (a.choice as usize) < options)) {
            Some(Decision::Answer(a)) => a,
            _ => self.fallback.answer(ctx, rng),
        }
    }

    fn summarize(&self, reported: &[Reported<'_>], site: Option<&CallSite>, rng: &mut SimRng) -> Vec<Retention> {
        let Some(s) = site else { return self.fallback.summarize(reported, site, rng) };
        match self.lookup(s, |d| matches!(d, Decision::Summary(r) if r.len() == reported.len())) {
            Some(Decision::Summary(r)) => r,
            _ => self.fallback.summarize(reported, site, rng),
        }
    }

    fn wants_sites(&self) -> bool {
        true
    }

    fn judge(&self, site: &CallSite, run: &mut dyn FnMut() -> Vec<Verdict>) -> Vec<Verdict> {
        let agents: BTreeSet<u32> = site.peers.iter().copied().collect();
        let fits = |d: &Decision| matches!(d, Decision::Judge(v) if v.iter().all(|x| agents.contains(&x.agent)));
        match self.lookup(site, fits) {
            Some(Decision::Judge(v)) => v,
            _ => run(),
        }
    }
}
