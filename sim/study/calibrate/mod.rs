//! Calibration of the LLM stand-in (issue 4): chosen parameters of one backbone profile are
//! fitted to published numbers by Nelder–Mead over simulated runs with common random numbers
//! (fixed seeds), so the objective is a deterministic function of the parameters and the fit is
//! reproducible from the file. Each target weighs by its reported spread.
//!
//! MAPLE-Guard's attacked numbers are predictions: a calibration that selects an attacked
//! MAPLE-Guard row is refused ([`Error::Invalid`] naming the row), so no such number can enter
//! an objective. Its attack-free utility (Table 6) may, through
//! [`RowFilter::attack_free_guards`] (issue 43): it measures how the team reads the
//! evidence-framed memories the guard renders, with nothing to defend against.

pub mod effects;
pub mod ensemble;
mod fit;
pub mod identify;
mod load;
pub mod loso;
mod nelder_mead;
pub mod pool;
mod report;
mod spec;
mod targets;

pub use fit::Probe;
pub use nelder_mead::{Bounds, Coordinates, Simplex};
pub use report::{DIRECTION_MIN_CHANGE, Direction, report, round_directions};
pub use spec::{CalibrationSpec, FitParameter, Loss, RowFilter};
pub use targets::{Target, read_targets};

use crate::agent::{ModelParams, Profile};
use crate::error::{Error, Pos, Result, locate_field, parse_ron, read_file};
use crate::files::write_atomic;
use crate::scenario::{GuardSpec, LoadedScenario, load, resolve_profile};
use crate::topology::Topology;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A target row resolved against the calibration: which runs it needs.
#[derive(Clone, Debug)]
struct Row {
    target: Target,
    setting: String,
    /// Key of the scenario the row runs: the setting's, or `source/setting` when
    /// `source_settings` replaces it.
    scenario: String,
    topologies: Vec<Topology>,
    mdsr: bool,
    round: usize,
    /// An attack-free row (Table 6): the setting's scenario runs with `attack: None`.
    attack_free: bool,
    /// Part of the objective (else a check, only reported).
    fitted: bool,
}

/// One fitted row in the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowFit {
    /// The target.
    pub source: String,
    /// Backbone of the target.
    pub backbone: String,
    /// Setting.
    pub setting: String,
    /// Method.
    pub guard: String,
    /// Topology label of the target.
    pub topology: String,
    /// Metric.
    pub metric: String,
    /// Target percent.
    pub target: f64,
    /// Weight σ used (percentage points).
    pub sigma: f64,
    /// Simulated percent at the fitted parameters (mean over the fitting seeds).
    pub simulated: f64,
    /// Mean and 95% interval half-width over the interval seeds (normal approximation;
    /// 0 with one seed).
    pub interval: (f64, f64),
    /// Whether the row was in the objective (else a check).
    pub fitted: bool,
}

/// The outcome of a calibration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fit {
    /// Parameters as (workload.name, start, fitted).
    pub parameters: Vec<(String, f64, f64)>,
    /// Objective at the start and at the end.
    pub objective: (f64, f64),
    /// Iterations and evaluations.
    pub iterations: u32,
    /// Evaluations.
    pub evaluations: u32,
    /// Every fitted row, then every check row, at the fitted parameters.
    pub rows: Vec<RowFit>,
    /// The independent searches the fit split into: each one's parameter names.
    pub components: Vec<Vec<String>>,
    /// The pooled model fields (fitted per workload with a prior_sd) and their values: the
    /// centre every deviation is penalised from.
    pub centre: Vec<(String, f64)>,
    /// A pooled fit's stage A: every parameter fitted free, and its objective.
    pub stage_a: Option<(Vec<f64>, f64)>,
    /// A pooled fit's stage B: per parameter, the standard error its workload's rows give its
    /// stage-A value ([`pool::Spread`]; None for parameters that are not pooled).
    pub spreads: Vec<Option<pool::Spread>>,
    /// A pooled fit's stage-C deviations of model fields the spec does not list for a workload
    /// whose rows depend on them ([`fit::Probe`]); their values follow the spec's parameters
    /// in `parameters`.
    pub added: Vec<FitParameter>,
}

/// One pass of searches.
struct Searched {
    x: Vec<f64>,
    objective: (f64, f64),
    iterations: u32,
    evaluations: u32,
}

/// A loaded calibration: spec, profile, resolved rows and scenarios.
pub struct Calibration {
    spec: CalibrationSpec,
    path: PathBuf,
    profile_path: PathBuf,
    profile: Profile,
    /// The `also` profiles by backbone name (held fixed).
    others: BTreeMap<String, Profile>,
    rows: Vec<Row>,
    scenarios: BTreeMap<String, LoadedScenario>,
}

fn topologies_of(label: &str) -> Option<Vec<Topology>> {
    match label {
        "mean(star,chain,tree)" => Some(vec![Topology::Wheel, Topology::Chain, Topology::Tree]),
        "star" => Some(vec![Topology::Wheel]),
        "chain" => Some(vec![Topology::Chain]),
        "tree" => Some(vec![Topology::Tree]),
        // The reference's random graphs: directed, p = 2/7 (spec §11).
        "random" => Some(vec![Topology::Random(Some(2.0 / 7.0))]),
        _ => None,
    }
}

/// Profile parameter `name` on workload `class`: a field of the workload's block, or a model
/// field as the workload sees it (the model's value plus the workload's deviation).
fn get_param(p: &Profile, class: &str, name: &str) -> Option<f64> {
    let w = p.workloads.get(class)?;
    w.get(name).or_else(|| Some(p.model.get(name)? + w.deviation(name)))
}

/// Sets [`get_param`]'s value to `v`: a workload field directly, a model field through the
/// workload's deviation (kept as it is when it already gives `v`, so an unchanged parameter
/// leaves the profile's bytes alone). None for an unknown workload or field.
fn set_param(p: &mut Profile, class: &str, name: &str, v: f64) -> Option<()> {
    let m = p.model.get(name);
    let w = p.workloads.get_mut(class)?;
    if let Some(slot) = w.field_mut(name) {
        *slot = v;
        return Some(());
    }
    let m = m?;
    let old = w.deviation(name);
    let d = if m + old == v { old } else { v - m };
    if d == 0.0 {
        w.deviations.remove(name);
    } else {
        w.deviations.insert(name.to_string(), d);
    }
    Some(())
}

/// Whether `p` fits a model field per workload (rather than a workload field, a judge shift
/// or an arm's number).
fn is_model_param(p: &FitParameter) -> bool {
    p.guard.is_none() && p.judge.is_none() && crate::agent::MODEL_FIELDS.contains(&p.name.as_str())
}

/// The configuration object of a guard spec (the payload of its variant), as JSON.
fn guard_config(spec: &GuardSpec) -> Option<serde_json::Value> {
    let j = serde_json::to_value(spec).ok()?;
    j.as_object()?.values().next().cloned()
}

fn get_guard_param(spec: &GuardSpec, path: &str) -> Option<f64> {
    let mut v = &guard_config(spec)?;
    for key in path.split('.') {
        v = v.get(key)?;
    }
    v.as_f64()
}

fn set_guard_param(spec: &GuardSpec, path: &str, x: f64) -> Option<GuardSpec> {
    let mut j = serde_json::to_value(spec).ok()?;
    let mut v = j.as_object_mut()?.values_mut().next()?;
    for key in path.split('.') {
        v = v.get_mut(key)?;
    }
    *v = serde_json::json!(x);
    serde_json::from_value(j).ok()
}

/// The judge kinds a guard spec runs (a stack may run several).
fn judges_of(spec: &GuardSpec) -> Vec<&'static str> {
    match spec {
        GuardSpec::Stack(specs) => specs.iter().flat_map(judges_of).collect(),
        s => crate::guard::judge_kind(s).into_iter().collect(),
    }
}

fn is_maple(spec: &GuardSpec) -> bool {
    match spec {
        GuardSpec::Maple(_) => true,
        GuardSpec::Stack(gs) => gs.iter().any(is_maple),
        _ => false,
    }
}

/// Separates the calibrations a profile's provenance lists.
const PROVENANCE_SEPARATOR: &str = "; then ";

/// A profile's provenance after a calibration that wrote `entry`: a profile fitted in stages
/// (Tables 2 and 6, then Table 11) lists every stage's calibration in order. Refitting one
/// stage replaces its own entry in place, so rerunning the stages gives the same bytes; any
/// text that is not a calibration's entry (a hand-written note) is dropped.
fn merge_provenance(old: &str, entry: &str) -> String {
    let command = |e: &str| e.split_once(" (").map_or(e, |(c, _)| c).to_string();
    let mut entries: Vec<String> = old
        .split(PROVENANCE_SEPARATOR)
        .filter(|e| e.starts_with("calibrated by `memlink calibrate "))
        .map(str::to_string)
        .collect();
    match entries.iter_mut().find(|e| command(e) == command(entry)) {
        Some(e) => *e = entry.to_string(),
        None => entries.push(entry.to_string()),
    }
    entries.join(PROVENANCE_SEPARATOR)
}

impl Calibration {
    /// The rows the objective uses, as (line in the targets file, setting, guard, metric).
    pub fn rows(&self) -> Vec<(usize, String, String, String)> {
        self.rows
            .iter()
            .filter(|r| r.fitted)
            .map(|r| (r.target.line, r.setting.clone(), r.target.guard.clone(), r.target.metric.clone()))
            .collect()
    }

    /// The check rows (reported, never fitted), as (line, setting, guard, metric).
    pub fn checks(&self) -> Vec<(usize, String, String, String)> {
        self.rows
            .iter()
            .filter(|r| !r.fitted)
            .map(|r| (r.target.line, r.setting.clone(), r.target.guard.clone(), r.target.metric.clone()))
            .collect()
    }

    /// What a parameter acts on: a profile workload's runs, or one arm's.
    fn param_key(p: &FitParameter) -> String {
        match (&p.guard, &p.judge) {
            (Some(arm), _) => format!("arm:{arm}"),
            (None, Some(kind)) => format!("judge:{kind}"),
            (None, None) => format!("workload:{}", p.workload),
        }
    }

    /// Whether row `r`'s runs depend on parameter `p`: a profile parameter of the workload its
    /// setting runs, a judge shift of the fitted profile for the kind of guard its arm runs, or
    /// a parameter of the arm it measures.
    fn depends(&self, r: &Row, p: &FitParameter) -> bool {
        let scenario = &self.scenarios[&r.scenario].scenario;
        match (&p.guard, &p.judge) {
            (Some(arm), _) => &r.target.guard == arm,
            (None, Some(kind)) => {
                r.target.backbone == self.profile.name
                    && scenario
                        .arms
                        .iter()
                        .find(|a| a.name == r.target.guard)
                        .is_some_and(|a| judges_of(&a.guard).contains(&kind.as_str()))
            }
            (None, None) => r.target.backbone == self.profile.name && scenario.workload.class() == p.workload,
        }
    }

    /// The independent searches: parameters linked when one fitted row depends on both (a
    /// union-find over parameters), each with its fitted rows, in order of first parameter.
    /// Parameters of different workloads (or of different arms) never interact, so one search
    /// per group finds the same optimum as a joint one with far fewer evaluations.
    fn components(&self) -> Vec<(Vec<usize>, Vec<usize>)> {
        let params = &self.spec.parameters;
        let mut parent: Vec<usize> = (0..params.len()).collect();
        fn root(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        // Parameters on the same key always share rows' runs.
        for i in 0..params.len() {
            for j in 0..i {
                if Self::param_key(&params[i]) == Self::param_key(&params[j]) {
                    let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
        for r in self.rows.iter().filter(|r| r.fitted) {
            let on: Vec<usize> = (0..params.len()).filter(|&i| self.depends(r, &params[i])).collect();
            for w in on.windows(2) {
                let (a, b) = (root(&mut parent, w[0]), root(&mut parent, w[1]));
                parent[a.max(b)] = a.min(b);
            }
        }
        let mut comps: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
        for i in 0..params.len() {
            let r = root(&mut parent, i);
            match comps.iter_mut().find(|c| root(&mut parent, c.0[0]) == r) {
                Some(c) => c.0.push(i),
                None => comps.push((vec![i], Vec::new())),
            }
        }
        for (k, r) in self.rows.iter().enumerate().filter(|(_, r)| r.fitted) {
            if let Some(c) = comps.iter_mut().find(|c| c.0.iter().any(|&i| self.depends(r, &params[i]))) {
                c.1.push(k);
            }
        }
        comps
    }

    /// The profile at parameters `x` with model values `centre`: a model parameter fitted on a
    /// workload becomes that workload's deviation from the centre.
    fn profile_with(&self, x: &[f64], centre: &ModelParams) -> Profile {
        let mut p = self.profile.clone();
        p.model = centre.clone();
        for (param, v) in self.spec.parameters.iter().zip(x).filter(|(p, _)| p.guard.is_none()) {
            if let Some(kind) = &param.judge {
                p.judges.entry(kind.clone()).or_default().set(&param.name, *v);
                continue;
            }
            set_param(&mut p, &param.workload, &param.name, *v).expect("checked at load");
        }
        p
    }

    /// The penalty of parameters `which` at `x`: the sum of ((value − centre) / prior_sd)² over
    /// the model parameters among them with a prior_sd.
    fn penalty(&self, x: &[f64], centre: &ModelParams, which: &[usize]) -> f64 {
        which
            .iter()
            .filter_map(|&i| {
                let p = &self.spec.parameters[i];
                let sd = p.prior_sd?;
                let m = centre.get(&p.name)?;
                Some(((x[i] - m) / sd).powi(2))
            })
            .sum()
    }

    /// `arm` with the guard parameters of `x` that belong to it applied.
    fn arm_with(&self, arm: &crate::scenario::Arm, x: &[f64]) -> crate::scenario::Arm {
        let mut a = arm.clone();
        for (param, v) in self.spec.parameters.iter().zip(x) {
            if param.guard.as_deref() == Some(arm.name.as_str()) {
                a.guard = set_guard_param(&a.guard, &param.name, *v).expect("checked at load");
            }
        }
        a
    }

    /// The start value of every parameter: its `start`, else its current value.
    fn start(&self) -> Vec<f64> {
        self.spec.parameters.iter().zip(self.current()).map(|(p, c)| p.start.unwrap_or(c)).collect()
    }

    /// The current value of every parameter (the profile's, or the first scenario arm's).
    fn current(&self) -> Vec<f64> {
        self.spec
            .parameters
            .iter()
            .map(|p| match (&p.guard, &p.judge) {
                // A judge the profile does not shift yet starts unshifted.
                (None, Some(kind)) => self.profile.judges.get(kind).and_then(|j| j.get(&p.name)).unwrap_or(0.0),
                (None, None) => get_param(&self.profile, &p.workload, &p.name).expect("checked"),
                (Some(arm), _) => self
                    .scenarios
                    .values()
                    .flat_map(|ls| ls.scenario.arms.iter())
                    .find(|a| &a.name == arm)
                    .and_then(|a| get_guard_param(&a.guard, &p.name))
                    .unwrap_or((p.lo + p.hi) / 2.0),
            })
            .collect()
    }

    /// The fitted guard configurations, per arm, as RON (for pasting into scenarios).
    pub fn fitted_guards(&self, fit: &Fit) -> String {
        let x: Vec<f64> = fit.parameters.iter().map(|p| p.2).collect();
        let mut out = String::new();
        let mut done: Vec<&str> = Vec::new();
        for p in &self.spec.parameters {
            let Some(arm) = &p.guard else { continue };
            if done.contains(&arm.as_str()) {
                continue;
            }
            done.push(arm);
            if let Some(a) = self.scenarios.values().flat_map(|ls| ls.scenario.arms.iter()).find(|a| &a.name == arm) {
                let fitted = self.arm_with(a, &x);
                let ron = ron::ser::to_string(&fitted.guard).expect("serializable");
                out.push_str(&format!("(name: {:?}, guard: {ron}),\n", fitted.name));
            }
        }
        out
    }

    /// The attacker sets of a scenario key: its own entry (`source/setting`), else its
    /// setting's.
    fn attacker_sets(&self, scenario: &str) -> Option<&Vec<Vec<u32>>> {
        let sets = &self.spec.attacker_sets;
        sets.get(scenario).or_else(|| sets.get(scenario.rsplit('/').next().unwrap_or(scenario)))
    }

    /// The seeds a setting's rows run: its fit seeds, or (`interval`) its interval seeds.
    fn seeds_of(&self, setting: &str, interval: bool) -> &[u64] {
        let spec = &self.spec;
        let fit = spec.setting_seeds.get(setting).unwrap_or(&spec.seeds);
        if !interval {
            return fit;
        }
        match spec.setting_interval_seeds.get(setting) {
            Some(s) => s,
            None if spec.interval_seeds.is_empty() => fit,
            None => &spec.interval_seeds,
        }
    }

    /// Simulated percent of the rows `which` (indices into the rows) at parameters `x`, per
    /// seed of the row's fit seeds or (`interval`) interval seeds, each the mean over the
    /// row's topologies. Runs in parallel; results in a fixed order.
    fn simulate_seeds(&self, x: &[f64], centre: &ModelParams, interval: bool, which: &[usize]) -> Vec<Vec<f64>> {
        let profile = self.profile_with(x, centre);
        // Each distinct (scenario, method, attack-free, topology, seed, attacker set, backbone)
        // run once.
        type Job = (String, String, bool, Topology, u64, usize, String);
        let mut jobs: Vec<Job> = Vec::new();
        for r in which.iter().map(|&k| &self.rows[k]) {
            for t in &r.topologies {
                for &seed in self.seeds_of(&r.setting, interval) {
                    for set in 0..self.attacker_sets(&r.scenario).map_or(1, |v| v.len().max(1)) {
                        let j = (
                            r.scenario.clone(),
                            r.target.guard.clone(),
                            r.attack_free,
                            t.clone(),
                            seed,
                            set,
                            r.target.backbone.clone(),
                        );
                        if !jobs.contains(&j) {
                            jobs.push(j);
                        }
                    }
                }
            }
        }
        let results: Vec<crate::records::ArmResult> = jobs
            .par_iter()
            .map(|(scenario, guard, attack_free, topo, seed, set, backbone)| {
                let ls = &self.scenarios[scenario];
                let mut s = ls.scenario.clone();
                s.topology = topo.clone();
                if let Some(ids) = self.attacker_sets(scenario).and_then(|v| v.get(*set)) {
                    s.attackers = crate::scenario::Attackers::Ids(ids.clone());
                }
                if *attack_free {
                    s.attack = crate::attack::AttackConfig::None;
                }
                let arm = self.arm_with(s.arms.iter().find(|a| &a.name == guard).expect("checked at load"), x);
                let p = self.others.get(backbone).unwrap_or(&profile);
                crate::records::arm_result_kept(&s, p, &arm, *seed, &self.spec.name, Some(&["mdsr", "rda"]), || {
                    crate::records::ArmResult::of(&crate::world::run_arm(&s, p, &arm, *seed, false).summary)
                })
            })
            .collect();
        which
            .iter()
            .map(|&k| &self.rows[k])
            .map(|r| {
                self.seeds_of(&r.setting, interval)
                    .iter()
                    .map(|seed| {
                        let per_topology: Vec<f64> = r
                            .topologies
                            .iter()
                            .map(|t| {
                                // The mean over the setting's attacker sets.
                                let per_set: Vec<f64> = jobs
                                    .iter()
                                    .zip(&results)
                                    .filter(|(j, _)| {
                                        j.0 == r.scenario
                                            && j.1 == r.target.guard
                                            && j.2 == r.attack_free
                                            && &j.3 == t
                                            && j.4 == *seed
                                            && j.6 == r.target.backbone
                                    })
                                    .map(|(_, res)| {
                                        let m = &res.rounds[r.round - 1];
                                        100.0 * m[if r.mdsr { "mdsr" } else { "rda" }]
                                    })
                                    .collect();
                                per_set.iter().sum::<f64>() / per_set.len() as f64
                            })
                            .collect();
                        per_topology.iter().sum::<f64>() / per_topology.len() as f64
                    })
                    .collect()
            })
            .collect()
    }

    fn fitted_rows(&self) -> Vec<usize> {
        (0..self.rows.len()).filter(|&k| self.rows[k].fitted).collect()
    }

    /// Simulated percent of every fitted row (in [`Calibration::rows`] order) at parameters `x`.
    pub fn simulated(&self, x: &[f64]) -> Vec<f64> {
        self.simulate(x, &self.profile.model, &self.fitted_rows())
    }

    /// Simulated percent of rows `which` at `x`: the mean over the fitting seeds.
    fn simulate(&self, x: &[f64], centre: &ModelParams, which: &[usize]) -> Vec<f64> {
        self.simulate_seeds(x, centre, false, which).iter().map(|v| v.iter().sum::<f64>() / v.len() as f64).collect()
    }

    fn sigma(&self, r: &Row) -> f64 {
        r.target.topology_std.unwrap_or(0.0).max(self.spec.spread_floor)
    }

    /// The objective: the [`Loss`] of the spread-weighted residuals summed over the fitted
    /// rows, plus the deviation penalty of every parameter with a prior_sd (from the profile's
    /// model values), over the number of fitted rows.
    pub fn objective(&self, x: &[f64]) -> f64 {
        let all: Vec<usize> = (0..self.spec.parameters.len()).collect();
        self.objective_on(x, &self.profile.model, &self.fitted_rows(), &all)
    }

    /// The objective over rows `which` only, penalising the deviations of parameters `params`
    /// from `centre`.
    fn objective_on(&self, x: &[f64], centre: &ModelParams, which: &[usize], params: &[usize]) -> f64 {
        let sim = self.simulate(x, centre, which);
        let n = which.len() as f64;
        (which
            .iter()
            .zip(&sim)
            .map(|(&k, s)| self.spec.loss.of((s - self.rows[k].target.percent) / self.sigma(&self.rows[k])))
            .sum::<f64>()
            + self.penalty(x, centre, params))
            / n
    }

    fn state_path(&self, out: &Path) -> PathBuf {
        out.join(format!("{}.state.json", self.spec.name))
    }

    /// Reads a checkpoint of this calibration (`<out>/<name>.state.json`) and checks that it can
    /// be continued: one simplex per search at most, each of its search's dimension, with every
    /// vertex inside the parameters' bounds, finite non-negative objective values sorted best
    /// first, and consistent counters. A corrupted file is a positioned error, never a resumed fit
    /// from an impossible state.
    pub fn load_checkpoint(&self, state: &Path) -> Result<Vec<Simplex>> {
        self.checkpoint_from_str(&read_file(state)?, state)
    }

    /// [`Self::load_checkpoint`] of `text` as if read from `state`.
    pub fn checkpoint_from_str(&self, text: &str, state: &Path) -> Result<Vec<Simplex>> {
        let bad = |message: String| Error::Parse { path: state.to_path_buf(), pos: Pos { line: 1, col: 1 }, message };
        let s: Vec<Simplex> = serde_json::from_str(text).map_err(|e| Error::Parse {
            path: state.to_path_buf(),
            pos: Pos { line: e.line(), col: e.column() },
            message: format!("expected a calibration checkpoint: {e}"),
        })?;
        let comps = self.components();
        if s.len() > comps.len() {
            return Err(bad(format!(
                "a checkpoint of this calibration's {} searches, found {} simplices",
                comps.len(),
                s.len()
            )));
        }
        let params = &self.spec.parameters;
        for (ci, (x, (pi, _))) in s.iter().zip(&comps).enumerate() {
            let bounds = Bounds {
                lo: pi.iter().map(|&i| params[i].lo).collect(),
                hi: pi.iter().map(|&i| params[i].hi).collect(),
            };
            x.check(&self.spec.coordinates.bounds(&bounds), self.spec.max_evaluations)
                .map_err(|e| bad(format!("search {}: {e} (a checkpoint of this calibration)", ci + 1)))?;
        }
        Ok(s)
    }

    /// A checkpoint of this calibration's shape, as a fit's first iteration writes it (one
    /// simplex per search around the start point), with synthetic objective values: for tests
    /// of the checkpoint reader and as the fuzzer's seed.
    pub fn example_checkpoint(&self) -> Vec<Simplex> {
        let params = &self.spec.parameters;
        let x0 = Bounds { lo: params.iter().map(|p| p.lo).collect(), hi: params.iter().map(|p| p.hi).collect() }
            .clamp(&self.start());
        self.components()
            .iter()
            .map(|(pi, _)| {
                let b = Bounds {
                    lo: pi.iter().map(|&i| params[i].lo).collect(),
                    hi: pi.iter().map(|&i| params[i].hi).collect(),
                };
                let c = self.spec.coordinates;
                let sub = c.start(&pi.iter().map(|&i| x0[i]).collect::<Vec<f64>>(), &b);
                let step = c.steps(&pi.iter().map(|&i| 0.1 * (params[i].hi - params[i].lo)).collect::<Vec<f64>>(), &b);
                Simplex::start(&sub, &step, &c.bounds(&b), &mut |x| x.iter().map(|v| v.abs()).sum())
            })
            .collect()
    }

    /// Every row (fitted and checks) at `x` with model values `centre`, with intervals over the
    /// interval seeds.
    fn assess(
        &self,
        x0: &[f64],
        x: &[f64],
        centre: &ModelParams,
        objective: (f64, f64),
        iterations: u32,
        evaluations: u32,
    ) -> Fit {
        let params = &self.spec.parameters;
        let comps = self.components();
        let all: Vec<usize> = (0..self.rows.len()).collect();
        let spread = self.simulate_seeds(x, centre, true, &all);
        // Without separate interval seeds the fit's own runs give both numbers.
        let same = self.rows.iter().all(|r| self.seeds_of(&r.setting, true) == self.seeds_of(&r.setting, false));
        let sim = if same {
            spread.iter().map(|v| v.iter().sum::<f64>() / v.len() as f64).collect()
        } else {
            self.simulate(x, centre, &all)
        };
        let mut rows: Vec<RowFit> = self
            .rows
            .iter()
            .zip(sim.iter().zip(&spread))
            .map(|(r, (s, per_seed))| RowFit {
                source: r.target.source.clone(),
                backbone: r.target.backbone.clone(),
                setting: r.setting.clone(),
                guard: r.target.guard.clone(),
                topology: r.target.topology.clone(),
                metric: r.target.metric.clone(),
                target: r.target.percent,
                sigma: self.sigma(r),
                simulated: *s,
                interval: mean_ci95(per_seed),
                fitted: r.fitted,
            })
            .collect();
        // Fitted rows first (stable), then the checks.
        rows.sort_by_key(|r| !r.fitted);
        let names: Vec<String> = params
            .iter()
            .map(|p| match (&p.guard, &p.judge) {
                (None, Some(kind)) => format!("judge {kind}.{}", p.name),
                (None, None) => format!("{}.{}", p.workload, p.name),
                (Some(arm), _) => format!("{arm}: {}", p.name),
            })
            .collect();
        Fit {
            parameters: names.iter().zip(x0.iter().zip(x)).map(|(n, (a, b))| (n.clone(), *a, *b)).collect(),
            objective,
            iterations,
            evaluations,
            rows,
            components: comps.iter().map(|(pi, _)| pi.iter().map(|&i| names[i].clone()).collect()).collect(),
            centre: Vec::new(),
            stage_a: None,
            spreads: Vec::new(),
            added: Vec::new(),
        }
    }

    /// Writes the fitted profile (atomically) to `path` and returns its text.
    pub fn write_profile(&self, fit: &Fit, path: &Path) -> Result<String> {
        let x: Vec<f64> = fit.parameters.iter().map(|p| p.2).collect();
        let mut centre = self.profile.model.clone();
        for (name, v) in &fit.centre {
            *centre.field_mut(name).expect("a model field") = *v;
        }
        let mut p = if self.spec.pooled {
            let mut spec = self.spec.clone();
            spec.parameters.extend(fit.added.iter().cloned());
            self.derived(spec, self.shared_profile(&centre), self.rows.clone()).profile_with(&x, &centre)
        } else {
            self.profile_with(&x, &centre)
        };
        let entry = format!(
            "calibrated by `memlink calibrate {}` ({} parameters, {} fitted target rows, seeds {:?}, {} evaluations; objective {:.4} -> {:.4})",
            self.path.display(),
            fit.parameters.len(),
            fit.rows.iter().filter(|r| r.fitted).count(),
            self.spec.seeds,
            fit.evaluations,
            fit.objective.0,
            fit.objective.1
        );
        p.provenance = merge_provenance(&p.provenance, &entry);
        let body = ron::ser::to_string_pretty(&p, ron::ser::PrettyConfig::default()).expect("serializable");
        let text = format!(
            "// LLM stand-in profile for {}, written by `memlink calibrate`; see its provenance.\n{body}\n",
            p.name
        );
        write_atomic(path, &text)?;
        Ok(text)
    }

    /// Where the fitted profile goes by default: the profile file itself.
    pub fn profile_path(&self) -> &Path {
        &self.profile_path
    }

    /// The spec.
    pub fn spec(&self) -> &CalibrationSpec {
        &self.spec
    }

    /// The calibration file it was loaded from.
    pub fn file(&self) -> &Path {
        &self.path
    }
}

/// Mean and 95% half-width (normal approximation, sample sd) of `xs`.
fn mean_ci95(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (m, 0.0);
    }
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, 1.96 * (var / n).sqrt())
}

/// A stored result of a calibration command (JSON), or an error naming the file, the line and
/// column where it stops being `what`, and what it should be.
fn read_stored<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T> {
    let text = read_file(path)?;
    serde_json::from_str(&text).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        pos: Pos { line: e.line(), col: e.column() },
        message: format!("expected {what}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::merge_provenance;

    #[test]
    fn staged_calibrations_each_keep_one_provenance_entry() {
        let one = "calibrated by `memlink calibrate a.ron` (4 parameters; objective 2 -> 1)";
        let two = "calibrated by `memlink calibrate b.ron` (2 parameters; objective 9 -> 3)";
        assert_eq!(merge_provenance("hand-set first guesses", one), one);
        let both = merge_provenance(one, two);
        assert_eq!(both, format!("{one}; then {two}"));
        let refit = "calibrated by `memlink calibrate a.ron` (4 parameters; objective 2 -> 0.5)";
        assert_eq!(merge_provenance(&both, refit), format!("{refit}; then {two}"));
        assert_eq!(merge_provenance(&merge_provenance(&both, one), two), both, "rerunning both stages");
    }
}
