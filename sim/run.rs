//! Running a scenario: every arm on the same seed, in parallel across arms (each run is single
//! threaded and results are collected in arm order, so the bytes never depend on the thread
//! count), and writing `summary.json` and `rounds.csv`.

use crate::engine::{TraceEntry, first_divergence};
use crate::error::{Error, Result};
use crate::eval::metrics::ArmSummary;
use crate::eval::monitor::{MonitorReport, Monitors, Violation};
use crate::records::ArmResult;
use crate::scenario::LoadedScenario;
use crate::scenario::estimate::{Estimate, MemoryBudget};
use crate::world::{World, run_arm, run_arm_sharing};
use rayon::prelude::*;
use serde::Serialize;
use std::path::Path;

/// Results of all arms of one scenario run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ScenarioResult {
    /// memlink version that produced the results.
    pub memlink: String,
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// Backbone profile.
    pub backbone: String,
    /// Topology label.
    pub topology: String,
    /// Agents.
    pub agents: u32,
    /// Per-arm summaries, in scenario order.
    pub arms: Vec<ArmSummary>,
}

/// Runs every arm of a scenario with `seed` (rayon across arms; arms wait for room in the
/// process's [`MemoryBudget`]).
pub fn run_scenario(ls: &LoadedScenario, seed: u64) -> ScenarioResult {
    run_scenario_within(ls, seed, MemoryBudget::global())
}

/// [`run_scenario`] admitting its arms to `budget` by their estimated memory.
pub fn run_scenario_within(ls: &LoadedScenario, seed: u64, budget: &MemoryBudget) -> ScenarioResult {
    let scn = &ls.scenario;
    // The arms share one task stream (generating LongMemEval's haystacks is a tenth of a run),
    // and so do later runs of the process with the same workload and seed.
    let workload = World::workload_of(scn, seed);
    let bytes = Estimate::of(scn).bytes;
    let arms: Vec<ArmSummary> = scn
        .arms
        .par_iter()
        .map(|arm| budget.run(bytes, || run_arm_sharing(scn, &ls.profile, arm, seed, false, workload.clone()).summary))
        .collect();
    result_of(ls, seed, arms)
}

/// Every arm of `ls` at `seed` as a kept result: from the installed report-record store
/// ([`crate::records`]) where it holds the run, simulated otherwise (the arms simulated share the
/// process's task stream for the workload and seed, generated on the first of them). In arm
/// order, whatever the thread count. With `keep`, each result holds only those per-round
/// metrics ([`ArmResult::project`]).
pub fn arm_results(
    ls: &LoadedScenario,
    seed: u64,
    label: &str,
    keep: Option<&'static [&'static str]>,
) -> Vec<ArmResult> {
    let scn = &ls.scenario;
    let bytes = Estimate::of(scn).bytes;
    let budget = MemoryBudget::global();
    scn.arms
        .par_iter()
        .map(|arm| {
            crate::records::arm_result_kept(scn, &ls.profile, arm, seed, label, keep, || {
                let w = World::workload_of(scn, seed);
                budget.run(bytes, || ArmResult::of(&run_arm_sharing(scn, &ls.profile, arm, seed, false, w).summary))
            })
        })
        .collect()
}

/// The results of `ls` at `seed` from its arms' summaries (in scenario order).
pub fn result_of(ls: &LoadedScenario, seed: u64, arms: Vec<ArmSummary>) -> ScenarioResult {
    let scn = &ls.scenario;
    ScenarioResult {
        memlink: env!("CARGO_PKG_VERSION").into(),
        scenario: scn.name.clone(),
        seed,
        backbone: ls.profile.name.clone(),
        topology: scn.topology.label(),
        agents: scn.agents,
        arms,
    }
}

/// A run with invariant monitors: the results (the same bytes as without monitors) and, per
/// arm in scenario order, what the monitors found.
#[derive(Clone, Debug)]
pub struct MonitoredRun {
    /// The results.
    pub result: ScenarioResult,
    /// (arm, report) per arm.
    pub reports: Vec<(String, MonitorReport)>,
}

impl MonitoredRun {
    /// Every violation, as (arm, violation), arm by arm.
    pub fn violations(&self) -> impl Iterator<Item = (&str, &Violation)> {
        self.reports.iter().flat_map(|(arm, r)| r.violations.iter().map(move |v| (arm.as_str(), v)))
    }

    /// Whether every monitored invariant held in every arm.
    pub fn holds(&self) -> bool {
        self.reports.iter().all(|(_, r)| r.holds())
    }

    /// `invariants.json`: per arm, each invariant's violation count and the kept violations.
    pub fn to_json(&self) -> String {
        let v: Vec<serde_json::Value> = self
            .reports
            .iter()
            .map(|(arm, r)| serde_json::json!({ "arm": arm, "checked": r.checked, "violations": r.violations }))
            .collect();
        serde_json::to_string_pretty(
            &serde_json::json!({ "scenario": self.result.scenario, "seed": self.result.seed, "arms": v }),
        )
        .expect("serializable")
            + "\n"
    }

    /// A readable account: per arm, each invariant held or how often it failed, with the first
    /// violations and where they happened.
    pub fn table(&self) -> String {
        let mut s = String::from("\n== invariants\n");
        for (arm, r) in &self.reports {
            for (name, n) in &r.checked {
                if *n == 0 {
                    s.push_str(&format!("{arm}: {name} holds\n"));
                    continue;
                }
                s.push_str(&format!("{arm}: {name} VIOLATED {n} time{}\n", if *n == 1 { "" } else { "s" }));
                for v in r.violations.iter().filter(|v| &v.invariant == name).take(3) {
                    s.push_str(&format!("  {}\n", describe_violation(v)));
                }
            }
        }
        s
    }
}

/// One violation on a line: where (event, time, trace hash), who, which item and what failed.
pub fn describe_violation(v: &Violation) -> String {
    let agent = v.agent.map_or(String::new(), |a| format!(" agent {a}"));
    let item = v.item.as_ref().map_or(String::new(), |(id, name)| format!(" item {id} ({name})"));
    format!("event {} t={} trace {}{agent}{item}: {}", v.event, v.time, v.trace_hash, v.detail)
}

/// Runs every arm of a scenario with `seed`, monitoring the scenario's invariants and `extra`
/// (names of [`crate::eval::monitor::REGISTRY`]; an unknown one is an error naming it).
pub fn run_monitored(ls: &LoadedScenario, seed: u64, extra: &[String]) -> Result<MonitoredRun> {
    let scn = &ls.scenario;
    let mut names = scn.invariants.clone();
    for n in extra {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    if let Err(n) = Monitors::new(&names) {
        return Err(Error::Invalid {
            path: ls.path.clone(),
            pos: crate::error::Pos { line: 1, col: 1 },
            field: "invariants".into(),
            expected: format!("invariant names among {}, got {n:?}", crate::eval::monitor::names()),
        });
    }
    let bytes = Estimate::of(scn).bytes;
    let runs: Vec<(ArmSummary, MonitorReport)> = scn
        .arms
        .par_iter()
        .map(|arm| {
            let m = Monitors::new(&names).expect("checked above");
            let r = MemoryBudget::global()
                .run(bytes, || World::new(scn, &ls.profile, arm, seed, false).with_monitors(m).run());
            (r.summary, r.monitor.unwrap_or_default())
        })
        .collect();
    let reports = scn.arms.iter().zip(&runs).map(|(a, (_, r))| (a.name.clone(), r.clone())).collect();
    let arms = runs.into_iter().map(|(s, _)| s).collect();
    Ok(MonitoredRun { result: result_of(ls, seed, arms), reports })
}

/// Every arm of a scenario on `seed`, each with a [`crate::eval::spread::SpreadTracer`]: the
/// results (the same bytes as [`run_scenario`]'s) and, per arm, how poison spread.
pub fn run_spread(ls: &LoadedScenario, seed: u64) -> (ScenarioResult, Vec<(String, crate::eval::spread::SpreadTrace)>) {
    let scn = &ls.scenario;
    let bytes = Estimate::of(scn).bytes;
    let runs: Vec<(ArmSummary, crate::eval::spread::SpreadTrace)> = scn
        .arms
        .par_iter()
        .map(|arm| {
            let (tracer, trace) = crate::eval::spread::SpreadTracer::new(scn.agents);
            let m = Monitors::new(&[]).expect("no names").with("spread", Box::new(tracer));
            let r = MemoryBudget::global()
                .run(bytes, || World::new(scn, &ls.profile, arm, seed, false).with_monitors(m).run());
            let t = trace.lock().expect("the run has finished").clone();
            (r.summary, t)
        })
        .collect();
    let spreads = scn.arms.iter().zip(&runs).map(|(a, (_, t))| (a.name.clone(), t.clone())).collect();
    let arms = runs.into_iter().map(|(s, _)| s).collect();
    (result_of(ls, seed, arms), spreads)
}

impl ScenarioResult {
    /// The summary as pretty JSON (stable bytes).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("serializable") + "\n"
    }

    /// One CSV row per arm and round.
    pub fn rounds_csv(&self) -> String {
        let mut s = String::from(
            "arm,guard,round,mdsr_strict,mdsr_half,rda,asr_exposure,pmur_agent,target_hit,accuracy,prompt_tokens_mean\n",
        );
        for a in &self.arms {
            for r in &a.rounds {
                s.push_str(&format!(
                    "{},{},{},{},{},{},{},{},{},{},{}\n",
                    csv_field(&a.arm),
                    a.guard,
                    r.round,
                    r.mdsr_strict,
                    r.mdsr_half,
                    r.rda,
                    r.asr_exposure,
                    r.pmur_agent,
                    r.target_hit,
                    r.accuracy,
                    r.prompt_tokens_mean
                ));
            }
        }
        s
    }

    /// A human-readable per-round table and the gate stops of each arm.
    pub fn table(&self) -> String {
        let mut s = format!(
            "scenario {} · seed {} · {} agents · topology {} · backbone {}\n",
            self.scenario, self.seed, self.agents, self.topology, self.backbone
        );
        for a in &self.arms {
            s.push_str(&format!(
                "\n== {} ({}) · attackers {:?} · {} tasks ({} metric) · SR {:.1}%\n",
                a.arm,
                a.guard,
                a.attackers,
                a.tasks,
                a.metric_tasks,
                100.0 * a.sr
            ));
            s.push_str("round  MDSR(>1/2)  MDSR(>=1/2)   RDA    ASR(exp)  PMUR-A  target-hit  acc    tokens/call\n");
            for r in &a.rounds {
                s.push_str(&format!(
                    "  {:<4} {:>8.1}%  {:>9.1}%  {:>6.1}%  {:>7.1}%  {:>5.1}%  {:>8.1}%  {:>5.1}%  {:>8.0}\n",
                    r.round,
                    100.0 * r.mdsr_strict,
                    100.0 * r.mdsr_half,
                    100.0 * r.rda,
                    100.0 * r.asr_exposure,
                    100.0 * r.pmur_agent,
                    100.0 * r.target_hit,
                    100.0 * r.accuracy,
                    r.prompt_tokens_mean
                ));
            }
            s.push_str(&format!(
                "PMUR {:.1}% · PMWR {:.1}% · PPR {:.1}% · CPR {:.1}% · quarantine {:.1}% · rewrite {:.1}% · read blocks {}\n",
                100.0 * a.pmur,
                100.0 * a.pmwr,
                100.0 * a.ppr,
                100.0 * a.cpr,
                100.0 * a.write_quarantine_rate,
                100.0 * a.write_rewrite_rate,
                a.read_blocks
            ));
            s.push_str(&format!(
                "poison written: {} direct, {} handoffs, {} attacker messages · distinct poison items blocked at read: {}\n",
                a.poison_direct_written, a.poison_handoffs_written, a.poison_messages_written, a.poison_items_read_blocked
            ));
            if let (Some(sec), Some(util)) = (a.security_asr, a.utility_sr) {
                s.push_str(&format!(
                    "security ASR (team takes the risky action) {:.1}% · utility SR (team takes the safe one) {:.1}%\n",
                    100.0 * sec,
                    100.0 * util
                ));
            }
            if !a.message_actions.is_empty() {
                let acts: Vec<String> = a.message_actions.iter().map(|(k, v)| format!("{k} {v}")).collect();
                s.push_str(&format!("message guard actions: {}\n", acts.join(" · ")));
            }
            if a.poison_stops.is_empty() {
                s.push_str("poison stopped by: nothing\n");
            } else {
                s.push_str("poison stopped by:\n");
                for (k, v) in &a.poison_stops {
                    s.push_str(&format!("  {k:<60} {v}\n"));
                }
            }
        }
        s
    }

    /// Writes `summary.json` and `rounds.csv` into `dir` (each through a temporary file, so an
    /// interrupted write never leaves a truncated result).
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_path_buf(), source })?;
        crate::files::write_atomic(&dir.join("summary.json"), self.to_json())?;
        crate::files::write_atomic(&dir.join("rounds.csv"), self.rounds_csv())?;
        crate::files::write_atomic(&dir.join("tidy.csv"), self.tidy())
    }

    /// Every arm's metrics in the tidy long format ([`crate::tidy`]).
    pub fn tidy(&self) -> String {
        let mut s = String::from(crate::tidy::HEADER);
        for a in &self.arms {
            let key = crate::tidy::Key {
                study: "run",
                run: "1",
                setting: &self.scenario,
                backbone: &self.backbone,
                topology: &self.topology,
                seed: self.seed,
                draw: None,
                arm: &a.arm,
            };
            s.push_str(&crate::records::ArmResult::of(a).tidy(&key));
        }
        s
    }
}

/// A CSV field, quoted where it holds a comma, a quote or a line break.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// What `check-determinism` found.
#[derive(Clone, Debug)]
pub struct DeterminismReport {
    /// Trace hash per arm of the reference run.
    pub hashes: Vec<(String, String)>,
    /// Runs compared.
    pub runs: Vec<String>,
}

/// Runs the scenario twice serially and once each in 1- and 2-thread pools; every summary
/// must be byte-identical. On a mismatch, re-runs the differing arm with the event log and
/// names the first divergent event.
pub fn check_determinism(ls: &LoadedScenario, seed: u64) -> Result<DeterminismReport> {
    let reference = run_scenario(ls, seed).to_json();
    let mut runs = vec!["run 1".to_string()];
    let again = run_scenario(ls, seed).to_json();
    runs.push("run 2 (same process)".into());
    compare(ls, seed, &reference, &again, "a second run")?;
    for threads in [1usize, 2] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("thread pool");
        let json = pool.install(|| run_scenario(ls, seed).to_json());
        runs.push(format!("{threads}-thread pool"));
        compare(ls, seed, &reference, &json, &format!("a {threads}-thread pool"))?;
    }
    let r = run_scenario(ls, seed);
    Ok(DeterminismReport { hashes: r.arms.iter().map(|a| (a.arm.clone(), a.trace_hash.clone())).collect(), runs })
}

fn compare(ls: &LoadedScenario, seed: u64, a: &str, b: &str, what: &str) -> Result<()> {
    if a == b {
        return Ok(());
    }
    // Name the first divergent event of the first arm that differs.
    for arm in &ls.scenario.arms {
        let x = run_arm(&ls.scenario, &ls.profile, arm, seed, true).trace.unwrap_or_default();
        let y = run_arm(&ls.scenario, &ls.profile, arm, seed, true).trace.unwrap_or_default();
        if let Some(i) = first_divergence(&x, &y) {
            return Err(Error::Nondeterministic(describe(&arm.name, i, &x, &y)));
        }
    }
    Err(Error::Nondeterministic(format!("summaries differ against {what}, but the event traces agree")))
}

fn describe(arm: &str, i: usize, x: &[TraceEntry], y: &[TraceEntry]) -> String {
    let show = |t: &[TraceEntry]| {
        t.get(i)
            .map(|e| format!("#{} t={} seq={} {} (hash {:016x})", e.index, e.time, e.seq, e.label, e.hash))
            .unwrap_or_else(|| "<end of trace>".into())
    };
    format!("arm `{arm}` diverges at event {i}: {} vs {}", show(x), show(y))
}
