//! Recording a scenario's arms into traces, and replaying a trace — under the arm it recorded
//! (a reproduction) or under another (a counterfactual: the same agent decisions wherever the
//! call's key still matches, the fallback stand-in wherever it does not).

use super::{Header, Trace, scenario_hash};
use crate::agent::{
    Call, CallKind, CallSite, Divergence, DivergenceReason, Made, Profile, Provenance, Recording, Replay, ReplayLog,
    ReplayMode,
};
use crate::engine::Streams;
use crate::error::{Error, Pos, Result};
use crate::eval::metrics::ArmSummary;
use crate::run::ScenarioResult;
use crate::scenario::{Arm, LoadedScenario, Scenario};
use crate::topology::CommGraph;
use crate::world::{World, place_attackers};
use rayon::prelude::*;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The header of a trace of `arm` of `ls` at `seed` (its call count set when written).
pub fn header(ls: &LoadedScenario, arm: &Arm, seed: u64) -> Header {
    let scn = &ls.scenario;
    let streams = Streams::new(seed);
    let graph = CommGraph::build(&scn.topology, scn.agents, &streams);
    let attackers = place_attackers(scn, &graph, &streams);
    let scenario = serde_json::to_value(scn).expect("serializable");
    let profile = serde_json::to_value(&ls.profile).expect("serializable");
    Header {
        format: super::FORMAT.into(),
        version: super::VERSION,
        memlink: env!("CARGO_PKG_VERSION").into(),
        source: "memlink".into(),
        scenario_hash: scenario_hash(&scenario, &profile),
        seed,
        model: ls.profile.name.clone(),
        arm: arm.name.clone(),
        guard: crate::guard::build_guard(&arm.guard, scn.agents).name().to_string(),
        agents: scn.agents,
        attackers,
        adjacency: (0..scn.agents).map(|a| graph.out(a).to_vec()).collect(),
        tasks: scn.workload.tasks(),
        rounds: scn.protocol.rounds,
        calls: 0,
        scenario: Some(scenario),
        profile: Some(profile),
    }
}

/// Runs `arm` of `ls` at `seed` with its backbone recorded: the summary (the same bytes as an
/// unrecorded run) and the trace.
pub fn record_arm(ls: &LoadedScenario, arm: &Arm, seed: u64) -> (ArmSummary, Trace) {
    let mut log = None;
    let run = World::new(&ls.scenario, &ls.profile, arm, seed, false)
        .with_backbone(|inner| {
            let (r, l) = Recording::new(inner);
            log = Some(l);
            Box::new(r)
        })
        .run();
    let log = log.expect("recording installed");
    let calls = std::mem::take(&mut log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).calls);
    let n = calls.len();
    let mut header = header(ls, arm, seed);
    header.calls = n as u64;
    let trace = Trace {
        path: PathBuf::new(),
        header,
        calls,
        evals: vec![None; n],
        approximate: vec![false; n],
        unparsed: Vec::new(),
    };
    (run.summary, trace)
}

/// Runs every arm of `ls` at `seed` with recording (rayon across arms, results in arm order):
/// the results and one trace per arm.
pub fn record_scenario(ls: &LoadedScenario, seed: u64) -> (ScenarioResult, Vec<Trace>) {
    let runs: Vec<(ArmSummary, Trace)> = ls.scenario.arms.par_iter().map(|arm| record_arm(ls, arm, seed)).collect();
    let (arms, traces): (Vec<ArmSummary>, Vec<Trace>) = runs.into_iter().unzip();
    (crate::run::result_of(ls, seed, arms), traces)
}

/// Where each arm's trace goes when `--record FILE` records a scenario: FILE itself for a
/// scenario of one arm, else FILE with the arm's name (lower-case, non-alphanumerics as `-`)
/// before its extension: `trace.jsonl` → `trace.no-defense.jsonl`, `trace.maple-guard.jsonl`.
pub fn trace_paths(file: &Path, arms: &[Arm]) -> Vec<PathBuf> {
    if arms.len() == 1 {
        return vec![file.to_path_buf()];
    }
    let stem = file.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "trace".into());
    let ext = file.extension().map(|e| e.to_string_lossy().to_string()).unwrap_or_else(|| "jsonl".into());
    arms.iter().map(|a| file.with_file_name(format!("{stem}.{}.{ext}", slug(&a.name)))).collect()
}

/// An arm name as a file-name part.
pub fn slug(name: &str) -> String {
    let mut s = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_matches('-').to_string()
}

/// Which arm a replay runs.
#[derive(Clone, Debug)]
pub enum ArmChoice {
    /// The arm the trace recorded.
    Recorded,
    /// An arm of the trace's scenario, by name.
    Named(String),
    /// The arms of a scenario file whose world (everything but its name, arms and invariants)
    /// is the trace's; for an imported trace, the file gives the world too.
    File(PathBuf),
    /// An arm written inline in RON: `(name: "…", guard: …)`.
    Inline(String),
}

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// The arm(s).
    pub arm: ArmChoice,
    /// The mode (default: strict for the recorded arm, fallback for another).
    pub mode: Option<ReplayMode>,
    /// A profile file for the fallback stand-in (default: the trace's own).
    pub fallback: Option<PathBuf>,
}

/// One metric's share of calls by provenance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Share {
    /// The metrics.
    pub metric: String,
    /// Which calls they read.
    pub reads: String,
    /// How many such calls the replay made.
    pub calls: u64,
    /// Share from the recording with nothing diverged before it in its task and agent.
    pub recorded: f64,
    /// Share from the recording downstream of a divergence (`flag` mode).
    pub downstream: f64,
    /// Share from the fallback (extrapolated).
    pub fallback: f64,
}

/// A divergence as reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DivergenceRow {
    /// Why.
    pub reason: String,
    /// The call.
    pub call: String,
    /// The recorded call at the same coordinates.
    pub recorded: Option<String>,
}

/// What replaying one arm did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArmReplay {
    /// The arm replayed.
    pub arm: String,
    /// The arm the trace recorded.
    pub recorded_arm: String,
    /// The mode.
    pub mode: String,
    /// The fallback profile.
    pub fallback: String,
    /// Calls the replay made.
    pub calls: u64,
    /// Calls the trace holds.
    pub trace_calls: u64,
    /// Recorded answers without a parsable choice (imported traces), never replayed.
    pub unparsed: u64,
    /// Divergences by reason.
    pub divergences: std::collections::BTreeMap<String, u64>,
    /// The first divergences, in order.
    pub first_divergences: Vec<DivergenceRow>,
    /// Per metric, which share of the calls it reads came from the recording.
    pub shares: Vec<Share>,
}

/// The result of a replay.
#[derive(Clone, Debug)]
pub struct ReplayOutcome {
    /// The replayed arms' results (a scenario result, as `memlink run` writes).
    pub result: ScenarioResult,
    /// Per arm, what the replay did.
    pub arms: Vec<ArmReplay>,
}

impl ReplayOutcome {
    /// `replay.json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.arms).expect("serializable") + "\n"
    }

    /// A readable account per arm: calls by provenance per metric, divergences by reason.
    pub fn table(&self) -> String {
        let mut s = String::new();
        for a in &self.arms {
            s.push_str(&format!(
                "\n== replay of `{}` as `{}` ({} mode, fallback {}): {} calls made, {} in the trace\n",
                a.recorded_arm, a.arm, a.mode, a.fallback, a.calls, a.trace_calls
            ));
            s.push_str("metrics                          calls   recorded  downstream  fallback  (reads)\n");
            for x in &a.shares {
                s.push_str(&format!(
                    "  {:<30} {:>6}   {:>6.1}%   {:>7.1}%  {:>6.1}%   {}\n",
                    x.metric,
                    x.calls,
                    100.0 * x.recorded,
                    100.0 * x.downstream,
                    100.0 * x.fallback,
                    x.reads
                ));
            }
            if a.divergences.is_empty() {
                s.push_str("no divergence: every call matched the recording\n");
            } else {
                let parts: Vec<String> = a.divergences.iter().map(|(k, v)| format!("{k} {v}")).collect();
                s.push_str(&format!("divergences: {}\n", parts.join(" · ")));
                for d in a.first_divergences.iter().take(3) {
                    s.push_str(&format!("  {}: {}\n", d.reason, d.call));
                }
            }
            if a.unparsed > 0 {
                s.push_str(&format!("{} recorded answers had no parsable choice and were not replayed\n", a.unparsed));
            }
        }
        s
    }
}

/// A call as one line of a report.
pub fn describe_site(s: &CallSite) -> String {
    let who = match (s.kind, s.src) {
        (CallKind::Summary, Some(src)) => format!("summary by agent {} of agent {src}'s report", s.agent),
        (CallKind::Judge, _) => format!("judge `{}`", s.judge.as_deref().unwrap_or("?")),
        _ => format!("agent {} answer", s.agent),
    };
    let peers = if s.peers.is_empty() || s.kind == CallKind::Judge {
        String::new()
    } else {
        format!(", peers {:?} (messages {})", s.peers, s.messages.as_deref().unwrap_or("-"))
    };
    format!("task {} (`{}`) round {} {who}, memories [{}]{peers}", s.task, s.task_id, s.round, s.memories.join(", "))
}

fn invalid(path: &Path, field: &str, expected: String) -> Error {
    Error::Invalid { path: path.to_path_buf(), pos: Pos { line: 1, col: 1 }, field: field.into(), expected }
}

/// The scenario a trace recorded (its header's embedded scenario and profile, checked against
/// the header's hash), or `None` for an imported trace.
pub fn recorded_scenario(trace: &Trace) -> Result<Option<LoadedScenario>> {
    let h = &trace.header;
    let (Some(s), Some(p)) = (&h.scenario, &h.profile) else { return Ok(None) };
    if scenario_hash(s, p) != h.scenario_hash {
        return Err(invalid(
            &trace.path,
            "scenario_hash",
            "the hash of the embedded scenario and profile (the header was edited or corrupted)".into(),
        ));
    }
    let scenario: Scenario = serde_json::from_value(s.clone())
        .map_err(|e| invalid(&trace.path, "scenario", format!("a memlink scenario: {e}")))?;
    let profile: Profile = serde_json::from_value(p.clone())
        .map_err(|e| invalid(&trace.path, "profile", format!("a backbone profile: {e}")))?;
    // A trace keeps a ledger key's fingerprint, not the key: checked as if no key were given
    // here, and refused where an arm would sign with it (`replay`).
    let mut keyless = scenario.clone();
    for l in keyless.arms.iter_mut().filter_map(|a| a.ledger.as_mut()) {
        if l.key.as_ref().is_some_and(|k| k.secret().is_none()) {
            l.key = None;
        }
    }
    keyless.check().map_err(|(f, e)| invalid(&trace.path, &format!("scenario.{f}"), e))?;
    crate::scenario::check_size(&scenario).map_err(|e| invalid(&trace.path, "scenario.agents", e))?;
    let ls = LoadedScenario { scenario, profile, path: trace.path.clone() };
    // Every field the header states is what its embedded scenario gives: an edited header
    // (attackers, guard, model, graph) is refused, not replayed.
    let Some(arm) = ls.scenario.arms.iter().find(|a| a.name == h.arm) else {
        let names: Vec<&str> = ls.scenario.arms.iter().map(|a| a.name.as_str()).collect();
        return Err(invalid(&trace.path, "arm", format!("an arm of the embedded scenario among {names:?}")));
    };
    let want = header(&ls, arm, h.seed);
    let fields: [(&str, String, String); 8] = [
        ("gen_ai.request.model", want.model.clone(), h.model.clone()),
        ("guard", want.guard.clone(), h.guard.clone()),
        ("agents", want.agents.to_string(), h.agents.to_string()),
        ("attackers", format!("{:?}", want.attackers), format!("{:?}", h.attackers)),
        ("adjacency", format!("{:?}", want.adjacency), format!("{:?}", h.adjacency)),
        ("tasks", want.tasks.to_string(), h.tasks.to_string()),
        ("rounds", want.rounds.to_string(), h.rounds.to_string()),
        ("source", want.source.clone(), h.source.clone()),
    ];
    for (field, want, got) in fields {
        if want != got {
            return Err(invalid(
                &trace.path,
                field,
                format!("the value the embedded scenario gives, {want}; the header says {got} (the header was edited)"),
            ));
        }
    }
    Ok(Some(ls))
}

/// The world of a scenario, for comparing two scenarios up to their arms.
fn world_of(s: &Scenario) -> serde_json::Value {
    let mut w = s.clone();
    w.name = String::new();
    w.arms = Vec::new();
    w.invariants = Vec::new();
    serde_json::to_value(&w).expect("serializable")
}

/// Replays `trace` as `opts` says (see the module docs). A strict replay that diverges is an
/// error naming the first divergent call; every other replay returns the results and, per arm,
/// the provenance shares and divergences.
pub fn replay(trace: &Trace, opts: &ReplayOptions) -> Result<ReplayOutcome> {
    let h = &trace.header;
    let recorded = recorded_scenario(trace)?;
    let (ls, arms): (LoadedScenario, Vec<Arm>) = match &opts.arm {
        ArmChoice::File(path) => {
            let file = crate::scenario::load(path)?;
            if let Some(rec) = &recorded
                && world_of(&rec.scenario) != world_of(&file.scenario)
            {
                let hash = |s: &Scenario| blake3::hash(world_of(s).to_string().as_bytes()).to_hex()[..16].to_string();
                return Err(invalid(
                    path,
                    "arms",
                    format!(
                        "a scenario that differs from the trace's only in its name, arms and invariants: the trace {} was recorded on `{}` (world {}), this file describes `{}` (world {})",
                        trace.path.display(),
                        rec.scenario.name,
                        hash(&rec.scenario),
                        file.scenario.name,
                        hash(&file.scenario)
                    ),
                ));
            }
            // The file's key must be the one the trace's fingerprint stands for.
            if let Some(rec) = &recorded {
                for arm in &file.scenario.arms {
                    let theirs = rec.scenario.arms.iter().find(|a| a.name == arm.name).and_then(|a| a.ledger.as_ref());
                    let (Some(t), Some(mine)) = (theirs.and_then(|l| l.key.as_ref()), arm.ledger.as_ref()) else {
                        continue;
                    };
                    if !mine.key.as_ref().is_some_and(|k| k.same_as(t)) {
                        return Err(invalid(
                            path,
                            "key",
                            format!(
                                "the ledger key the trace was recorded with (arm `{}`, {}); this file's key does not match",
                                arm.name,
                                t.fingerprint()
                            ),
                        ));
                    }
                }
            }
            let arms = file.scenario.arms.clone();
            (recorded.unwrap_or(file), arms)
        }
        other => {
            let Some(ls) = recorded else {
                return Err(invalid(
                    &trace.path,
                    "scenario",
                    "a trace with its scenario embedded; an imported trace replays with --arm <scenario.ron>, whose world it runs".into(),
                ));
            };
            let arm = match other {
                ArmChoice::Recorded | ArmChoice::Named(_) => {
                    let name = if let ArmChoice::Named(n) = other { n.as_str() } else { h.arm.as_str() };
                    ls.scenario.arms.iter().find(|a| a.name == name).cloned().ok_or_else(|| {
                        let names: Vec<&str> = ls.scenario.arms.iter().map(|a| a.name.as_str()).collect();
                        invalid(
                            &trace.path,
                            "arm",
                            format!("an arm of the trace's scenario among {names:?}, got `{name}`"),
                        )
                    })?
                }
                ArmChoice::Inline(text) => crate::error::parse_ron::<Arm>(Path::new("--arm"), text)?,
                ArmChoice::File(_) => unreachable!(),
            };
            if let Some(k) = arm.ledger.as_ref().and_then(|l| l.key.as_ref())
                && k.secret().is_none()
            {
                return Err(invalid(
                    &trace.path,
                    "key",
                    format!(
                        "a ledger key to sign with: the trace keeps only its fingerprint ({}, arm `{}`); replay \
                         with --arm <the scenario file that holds the key>",
                        k.fingerprint(),
                        arm.name
                    ),
                ));
            }
            (ls, vec![arm])
        }
    };
    if ls.scenario.agents != h.agents
        || ls.scenario.protocol.rounds != h.rounds
        || ls.scenario.workload.tasks() != h.tasks
    {
        return Err(invalid(
            &trace.path,
            "agents",
            format!(
                "a scenario of {} agents, {} tasks and {} rounds, as the trace's header; the replayed world has {}, {} and {}",
                h.agents,
                h.tasks,
                h.rounds,
                ls.scenario.agents,
                ls.scenario.workload.tasks(),
                ls.scenario.protocol.rounds
            ),
        ));
    }
    let profile: Profile = match &opts.fallback {
        Some(p) => {
            let path = crate::scenario::resolve_profile(&trace.path, &p.to_string_lossy());
            crate::agent::load_profile(&path)?
        }
        None => ls.profile.clone(),
    };
    if profile.workload(ls.scenario.workload.class()).is_none() {
        return Err(invalid(
            opts.fallback.as_deref().unwrap_or(&trace.path),
            "workloads",
            format!("parameters for workload `{}`", ls.scenario.workload.class()),
        ));
    }
    let calls: Arc<[Call]> = trace.calls.clone().into();
    let runs: Vec<(ArmSummary, ArmReplay, Option<String>)> = arms
        .par_iter()
        .map(|arm| {
            let mode = opts.mode.unwrap_or(if arm.name == h.arm && matches!(opts.arm, ArmChoice::Recorded) {
                ReplayMode::Strict
            } else {
                ReplayMode::Fallback
            });
            let state = Arc::new(Mutex::new(None));
            let run = World::new(&ls.scenario, &profile, arm, h.seed, false)
                .with_backbone(|inner| {
                    let r = Replay::new(calls.clone(), mode, inner);
                    *state.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(r.state());
                    Box::new(r)
                })
                .run();
            let st = state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take().expect("replay installed");
            let log = st.lock().unwrap_or_else(std::sync::PoisonError::into_inner).finish();
            let first =
                (mode == ReplayMode::Strict).then(|| log.divergences.first().map(describe_divergence)).flatten();
            let report = arm_report(trace, arm, mode, &profile, &log, ls.scenario.protocol.rounds);
            (run.summary, report, first)
        })
        .collect();
    if let Some((report, first)) = runs.iter().find_map(|(_, r, f)| f.as_ref().map(|f| (r, f))) {
        return Err(Error::Diverged(format!(
            "strict replay of {} as `{}`: {} divergent calls; the first: {first}",
            trace.path.display(),
            report.arm,
            report.divergences.values().sum::<u64>()
        )));
    }
    let mut summaries = Vec::new();
    let mut reports = Vec::new();
    for (s, r, _) in runs {
        summaries.push(s);
        reports.push(r);
    }
    let mut lsr = ls.clone();
    lsr.profile.name = h.model.clone();
    Ok(ReplayOutcome { result: crate::run::result_of(&lsr, h.seed, summaries), arms: reports })
}

fn describe_divergence(d: &Divergence) -> String {
    let rec = match (&d.recorded, d.reason) {
        (_, DivergenceReason::MissingCall) => " (recorded, never made)".to_string(),
        (Some(r), _) => format!("; recorded: {}", describe_site(r)),
        (None, _) => "; the trace has no call there".into(),
    };
    format!("{}: {}{rec}", d.reason.as_str(), describe_site(&d.site))
}

/// The shares a replay's metrics read, and its divergences.
fn arm_report(
    trace: &Trace,
    arm: &Arm,
    mode: ReplayMode,
    profile: &Profile,
    log: &ReplayLog,
    rounds: u32,
) -> ArmReplay {
    let share = |metric: String, reads: &str, pick: &dyn Fn(&Made) -> bool| {
        let (mut n, mut rec, mut down, mut fb) = (0u64, 0u64, 0u64, 0u64);
        for m in log.calls.iter().filter(|m| pick(m)) {
            n += 1;
            match m.provenance {
                Provenance::Recorded => rec += 1,
                Provenance::Downstream => down += 1,
                Provenance::Fallback => fb += 1,
            }
        }
        let f = |x: u64| if n == 0 { 0.0 } else { x as f64 / n as f64 };
        Share { metric, reads: reads.into(), calls: n, recorded: f(rec), downstream: f(down), fallback: f(fb) }
    };
    let mut shares = Vec::new();
    for k in 1..=rounds {
        shares.push(share(
            format!("mdsr@{k} rda@{k} acc@{k} target-hit@{k}"),
            "benign answers of that round, metric tasks",
            &|s| s.kind == CallKind::Answer && s.round + 1 == k && s.benign && s.metric,
        ));
    }
    shares.push(share("sr".into(), "every agent's last-round answer (the vote)", &|s| {
        s.kind == CallKind::Answer && s.round + 1 == rounds
    }));
    shares.push(share(
        "pmur asr(exp) pmur-a ppr".into(),
        "handoff summaries (what reaches memory and prompts)",
        &|s| s.kind == CallKind::Summary,
    ));
    shares.push(share("message actions".into(), "judge calls", &|s| s.kind == CallKind::Judge));
    shares.push(share("all".into(), "every call", &|_| true));
    let mut divergences = std::collections::BTreeMap::new();
    for d in &log.divergences {
        *divergences.entry(d.reason.as_str().to_string()).or_insert(0u64) += 1;
    }
    let first_divergences = log
        .divergences
        .iter()
        .take(50)
        .map(|d| DivergenceRow {
            reason: d.reason.as_str().into(),
            call: describe_site(&d.site),
            recorded: d.recorded.as_ref().map(describe_site),
        })
        .collect();
    ArmReplay {
        arm: arm.name.clone(),
        recorded_arm: trace.header.arm.clone(),
        mode: mode.as_str().into(),
        fallback: profile.name.clone(),
        calls: log.calls.len() as u64,
        trace_calls: trace.calls.len() as u64,
        unparsed: trace.unparsed.len() as u64,
        divergences,
        first_divergences,
        shares,
    }
}
