//! Calibration of the LLM stand-in (issue 4): chosen parameters of one backbone profile are
//! fitted to published numbers by Nelder–Mead over simulated runs with common random numbers
//! (fixed seeds), so the objective is a deterministic function of the parameters and the fit is
//! reproducible from the file. Each target weighs by its reported spread.
//!
//! MAPLE-Guard's numbers are predictions: a calibration that selects a MAPLE-Guard row is
//! refused ([`Error::Invalid`] naming the row), so no MAPLE number can enter an objective.

pub mod effects;
mod nelder_mead;
mod targets;

pub use nelder_mead::{Bounds, Simplex};
pub use targets::{Target, read_targets};

use crate::agent::{Profile, WorkloadParams};
use crate::error::{Error, Pos, Result, locate_field, parse_ron, read_file};
use crate::run::write_atomic;
use crate::scenario::{GuardSpec, LoadedScenario, load, resolve_profile};
use crate::topology::Topology;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Which target rows a calibration fits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RowFilter {
    /// Source tables ("table2", "table6_attack_free", …); empty = all.
    pub sources: Vec<String>,
    /// Methods; default No Defense only.
    pub guards: Vec<String>,
    /// Metrics ("MDSR@3", "RDA@1", …); empty = all.
    pub metrics: Vec<String>,
    /// `source/setting` pairs left out ("table2/mmlu_minja"): a table that prints another
    /// table's numbers for a setting (Qwen's Table 2 MMLU baselines are Table 11's round 3)
    /// is fitted once, where those numbers were measured.
    pub except: Vec<String>,
}

impl Default for RowFilter {
    fn default() -> Self {
        RowFilter {
            sources: vec!["table2".into()],
            guards: vec!["No Defense".into()],
            metrics: Vec::new(),
            except: Vec::new(),
        }
    }
}

/// One fitted parameter: a field of the profile's parameters for one workload, (with `judge`)
/// a field of the profile's shift for one LLM-judge guard kind, or (with `guard`) a number in
/// the configuration of the scenarios' arm of that name — a baseline's detector, fitted with
/// the profile held fixed. MAPLE-Guard's constants are the paper's and are refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitParameter {
    /// Workload key in the profile ("mmlu"); unused for guard and judge parameters.
    #[serde(default)]
    pub workload: String,
    /// LLM-judge guard kind whose shift in the profile holds the parameter ("challenger"; see
    /// [`crate::agent::JUDGE_KINDS`]); `name` is then `bias` or `dissent`.
    #[serde(default)]
    pub judge: Option<String>,
    /// Arm whose guard configuration holds the parameter ("Challenger").
    #[serde(default)]
    pub guard: Option<String>,
    /// Field of `WorkloadParams` ("memory_weight"), or a dotted path in the guard's
    /// configuration ("detector.bias").
    pub name: String,
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
    /// Where the search starts (default: the profile's or the arm's current value).
    #[serde(default)]
    pub start: Option<f64>,
}

/// How a row's spread-weighted residual z enters the objective.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum Loss {
    /// z²: every row pulls in proportion to its miss.
    #[default]
    Squared,
    /// Huber's loss at k spreads: z² while |z| ≤ k, then 2k|z| − k², so a row pulls no harder
    /// than k however far it is. For rows the mechanism cannot reach (a baseline the paper ran
    /// under another setup), which would otherwise decide the fit for every row it can.
    Huber(f64),
}

impl Loss {
    /// The loss of a spread-weighted residual `z`.
    pub fn of(self, z: f64) -> f64 {
        match self {
            Loss::Squared => z * z,
            Loss::Huber(k) if z.abs() <= k => z * z,
            Loss::Huber(k) => 2.0 * k * z.abs() - k * k,
        }
    }

    /// How the report names the objective: the mean loss of the residuals over σ.
    pub fn describe(self) -> String {
        match self {
            Loss::Squared => "mean squared residual / σ".into(),
            Loss::Huber(k) => format!("mean Huber loss (k = {k}) of residual / σ"),
        }
    }
}

/// A calibration file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationSpec {
    /// Name (output file names).
    pub name: String,
    /// Backbone profile to fit (name under models/, or a path).
    pub profile: String,
    /// Further backbone profiles whose rows are selected too, each simulated with its own
    /// profile, held fixed: a baseline's detector is one configuration on both backbones, so
    /// it is fitted to both backbones' rows at once.
    #[serde(default)]
    pub also: Vec<String>,
    /// Targets CSV, relative to the calibration file.
    pub targets: PathBuf,
    /// Which rows to fit (only rows of this profile's backbone and of a listed setting).
    #[serde(default)]
    pub rows: RowFilter,
    /// Further rows evaluated at the fitted parameters and reported, never fitted (e.g. the
    /// round-level rows, whose direction from round 1 to round 3 the report checks). Unlike
    /// `rows`, these may include MAPLE-Guard's: they are predictions.
    #[serde(default)]
    pub checks: Option<RowFilter>,
    /// Setting name → scenario file (relative to the calibration file); its arms must include
    /// every selected method by name.
    pub settings: BTreeMap<String, PathBuf>,
    /// Per source table, setting name → scenario file replacing the one in `settings` for
    /// that table's rows: a table the paper ran under another protocol (the round-level tables
    /// on random graphs come from the strict matrix, spec §11).
    #[serde(default)]
    pub source_settings: BTreeMap<String, BTreeMap<String, PathBuf>>,
    /// The parameters to fit.
    pub parameters: Vec<FitParameter>,
    /// Seeds every evaluation runs (common random numbers).
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// Tasks per run, overriding the scenarios' (None keeps them).
    #[serde(default)]
    pub tasks: Option<u32>,
    /// Most objective evaluations.
    #[serde(default = "default_evals")]
    pub max_evaluations: u32,
    /// Stop when the simplex's values differ by less than this.
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// Smallest spread (percentage points) a target is weighted by.
    #[serde(default = "default_floor")]
    pub spread_floor: f64,
    /// How a row's spread-weighted residual enters the objective.
    #[serde(default)]
    pub loss: Loss,
    /// Seeds the report's 95% intervals are computed over at the fitted parameters (default:
    /// the fitting seeds). Never part of the objective.
    #[serde(default)]
    pub interval_seeds: Vec<u64>,
    /// Per setting, fit seeds replacing `seeds`: a small setting (CSQA's 24 tasks) needs more
    /// runs before its mean settles, and costs little per run.
    #[serde(default)]
    pub setting_seeds: BTreeMap<String, Vec<u64>>,
    /// Per setting, interval seeds replacing `interval_seeds`.
    #[serde(default)]
    pub setting_interval_seeds: BTreeMap<String, Vec<u64>>,
    /// Per setting, the attacker sets a target averages over (Table 2 averages the 15 fixed
    /// triples of spec §10); a setting without an entry keeps its scenario's attackers.
    #[serde(default)]
    pub attacker_sets: BTreeMap<String, Vec<Vec<u32>>>,
}

fn default_seeds() -> Vec<u64> {
    vec![42]
}
fn default_evals() -> u32 {
    80
}
fn default_tolerance() -> f64 {
    1e-3
}
fn default_floor() -> f64 {
    1.0
}

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
#[derive(Clone, Debug, PartialEq, Serialize)]
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

fn set_param(p: &mut WorkloadParams, name: &str, v: f64) -> std::result::Result<(), String> {
    let mut j = serde_json::to_value(&*p).map_err(|e| e.to_string())?;
    let slot = j.get_mut(name).ok_or_else(|| format!("a field of the workload parameters, not `{name}`"))?;
    *slot = serde_json::json!(v);
    *p = serde_json::from_value(j).map_err(|e| e.to_string())?;
    Ok(())
}

fn get_param(p: &WorkloadParams, name: &str) -> Option<f64> {
    serde_json::to_value(p).ok()?.get(name)?.as_f64()
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
    /// Loads a calibration file, its targets, profile and scenarios, and checks that no
    /// MAPLE-Guard row is selected.
    pub fn load(path: &Path) -> Result<Self> {
        Self::load_str(&read_file(path)?, path)
    }

    /// [`Self::load`] of calibration `text` as if read from `path`.
    pub fn load_str(text: &str, path: &Path) -> Result<Self> {
        let text = text.to_string();
        let spec: CalibrationSpec = parse_ron(path, &text)?;
        let invalid = |field: &str, expected: String| Error::Invalid {
            path: path.to_path_buf(),
            pos: locate_field(&text, field),
            field: field.to_string(),
            expected,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let profile_path = resolve_profile(path, &spec.profile);
        let profile = crate::agent::load_profile(&profile_path)?;
        let mut others = BTreeMap::new();
        for name in &spec.also {
            let p = crate::agent::load_profile(&resolve_profile(path, name))?;
            if p.name == profile.name {
                return Err(invalid("also", format!("a backbone other than the fitted one, not `{name}`")));
            }
            others.insert(p.name.clone(), p);
        }
        if spec.parameters.is_empty() {
            return Err(invalid("parameters", "at least one parameter to fit".into()));
        }
        for p in &spec.parameters {
            if p.guard.is_some() && p.judge.is_some() {
                return Err(invalid("judge", format!("either `guard` or `judge` for `{}`, not both", p.name)));
            }
            let Some(kind) = &p.judge else { continue };
            if !crate::agent::JUDGE_KINDS.contains(&kind.as_str()) {
                return Err(invalid(
                    "judge",
                    format!("a judge guard kind, one of {:?}, not `{kind}`", crate::agent::JUDGE_KINDS),
                ));
            }
            if crate::agent::JudgeShift::default().get(&p.name).is_none() {
                return Err(invalid("name", format!("`bias` or `dissent` for judge `{kind}`, not `{}`", p.name)));
            }
        }
        for p in spec.parameters.iter().filter(|p| p.guard.is_none() && p.judge.is_none()) {
            let w = profile
                .workload(&p.workload)
                .ok_or_else(|| invalid("workload", format!("a workload of profile `{}`", profile.name)))?;
            if get_param(w, &p.name).is_none() {
                return Err(invalid("name", format!("a parameter of the `{}` workload, not `{}`", p.workload, p.name)));
            }
        }
        for p in &spec.parameters {
            if !(p.lo.is_finite() && p.hi.is_finite() && p.lo.partial_cmp(&p.hi) == Some(std::cmp::Ordering::Less)) {
                return Err(invalid("lo", format!("lo < hi for `{}`", p.name)));
            }
        }
        if let Loss::Huber(k) = spec.loss
            && !(k.is_finite() && k > 0.0)
        {
            return Err(invalid("loss", format!("Huber(k) with k > 0, got {k}")));
        }
        if spec.seeds.is_empty() {
            return Err(invalid("seeds", "at least one seed".into()));
        }
        let targets = read_targets(&dir.join(&spec.targets))?;
        let selects = |f: &RowFilter, t: &Target| {
            (t.backbone == profile.name || others.contains_key(&t.backbone))
                && spec.settings.contains_key(&t.setting)
                && (f.sources.is_empty() || f.sources.contains(&t.source))
                && (f.guards.is_empty() || f.guards.contains(&t.guard))
                && (f.metrics.is_empty() || f.metrics.contains(&t.metric))
                && !f.except.contains(&format!("{}/{}", t.source, t.setting))
        };
        let mut rows = Vec::new();
        for t in targets {
            let fitted = selects(&spec.rows, &t);
            if !fitted && !spec.checks.as_ref().is_some_and(|c| selects(c, &t)) {
                continue;
            }
            if fitted && t.guard.to_lowercase().contains("maple") {
                return Err(invalid(
                    "guards",
                    format!(
                        "no MAPLE-Guard row: its numbers are predictions and never enter a fit (targets line {})",
                        t.line
                    ),
                ));
            }
            let topologies = topologies_of(&t.topology).ok_or_else(|| {
                invalid("targets", format!("a known topology, not `{}` (line {})", t.topology, t.line))
            })?;
            let (mdsr, round) = match t.metric.split_once('@') {
                Some(("MDSR", k)) => (true, k.parse().unwrap_or(0)),
                Some(("RDA", k)) => (false, k.parse().unwrap_or(0)),
                _ => return Err(invalid("metrics", format!("MDSR@k or RDA@k, not `{}` (line {})", t.metric, t.line))),
            };
            let attack_free = t.source.contains("attack_free");
            let scenario = match spec.source_settings.get(&t.source) {
                Some(m) if m.contains_key(&t.setting) => format!("{}/{}", t.source, t.setting),
                _ => t.setting.clone(),
            };
            rows.push(Row {
                setting: t.setting.clone(),
                scenario,
                topologies,
                mdsr,
                round,
                attack_free,
                fitted,
                target: t,
            });
        }
        if !rows.iter().any(|r| r.fitted) {
            return Err(invalid("rows", "a filter that selects at least one target row".into()));
        }
        for (field, map) in
            [("setting_seeds", &spec.setting_seeds), ("setting_interval_seeds", &spec.setting_interval_seeds)]
        {
            for (name, seeds) in map {
                if !spec.settings.contains_key(name) {
                    return Err(invalid(field, format!("a setting of `settings`, not `{name}`")));
                }
                if seeds.is_empty() {
                    return Err(invalid(field, format!("at least one seed for `{name}`")));
                }
            }
        }
        let replaced = |key: &str| {
            key.split_once('/')
                .is_some_and(|(src, name)| spec.source_settings.get(src).is_some_and(|m| m.contains_key(name)))
        };
        for (name, sets) in &spec.attacker_sets {
            if !spec.settings.contains_key(name) && !replaced(name) {
                return Err(invalid(
                    "attacker_sets",
                    format!("a setting of `settings` or a `source/setting` of `source_settings`, not `{name}`"),
                ));
            }
            if sets.is_empty() {
                return Err(invalid("attacker_sets", format!("at least one attacker set for `{name}`")));
            }
        }
        for (source, map) in &spec.source_settings {
            for name in map.keys() {
                if !spec.settings.contains_key(name) {
                    return Err(invalid(
                        "source_settings",
                        format!("a setting of `settings`, not `{name}` ({source})"),
                    ));
                }
            }
        }
        let sources = spec.settings.iter().map(|(name, rel)| (name.clone(), name.clone(), rel)).chain(
            spec.source_settings
                .iter()
                .flat_map(|(src, m)| m.iter().map(move |(name, rel)| (format!("{src}/{name}"), name.clone(), rel))),
        );
        let mut scenarios = BTreeMap::new();
        for (key, name, rel) in sources {
            let name = &name;
            let mut ls = load(&dir.join(rel))?;
            if let Some(n) = spec.tasks {
                set_tasks(&mut ls, n);
            }
            for p in &spec.parameters {
                let Some(arm) = &p.guard else { continue };
                let Some(a) = ls.scenario.arms.iter().find(|a| &a.name == arm) else { continue };
                if is_maple(&a.guard) {
                    return Err(invalid(
                        "guard",
                        format!(
                            "a baseline's arm: `{arm}` runs MAPLE-Guard, whose constants are the paper's and never fitted"
                        ),
                    ));
                }
                if get_guard_param(&a.guard, &p.name).is_none() {
                    return Err(invalid(
                        "name",
                        format!("a number in the configuration of arm `{arm}`, not `{}`", p.name),
                    ));
                }
            }
            for ids in spec.attacker_sets.get(&key).or_else(|| spec.attacker_sets.get(name)).into_iter().flatten() {
                let mut s = ls.scenario.clone();
                s.attackers = crate::scenario::Attackers::Ids(ids.clone());
                s.check().map_err(|(_, e)| invalid("attacker_sets", e))?;
            }
            for r in rows.iter().filter(|r| r.scenario == key) {
                if !ls.scenario.arms.iter().any(|a| a.name == r.target.guard) {
                    return Err(invalid(
                        "settings",
                        format!("scenario of `{name}` with an arm named `{}`", r.target.guard),
                    ));
                }
                if ls.scenario.protocol.rounds < r.round as u32 {
                    return Err(invalid("settings", format!("scenario of `{name}` with at least {} rounds", r.round)));
                }
            }
            scenarios.insert(key, ls);
        }
        Ok(Calibration { spec, path: path.to_path_buf(), profile_path, profile, others, rows, scenarios })
    }

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

    fn profile_with(&self, x: &[f64]) -> Profile {
        let mut p = self.profile.clone();
        for (param, v) in self.spec.parameters.iter().zip(x).filter(|(p, _)| p.guard.is_none()) {
            if let Some(kind) = &param.judge {
                p.judges.entry(kind.clone()).or_default().set(&param.name, *v);
                continue;
            }
            let w = p.workloads.get_mut(&param.workload).expect("checked at load");
            set_param(w, &param.name, *v).expect("checked at load");
        }
        p
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
                (None, None) => {
                    get_param(self.profile.workload(&p.workload).expect("checked"), &p.name).expect("checked")
                }
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
    fn simulate_seeds(&self, x: &[f64], interval: bool, which: &[usize]) -> Vec<Vec<f64>> {
        let profile = self.profile_with(x);
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
        let results: Vec<crate::metrics::ArmSummary> = jobs
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
                crate::world::run_arm(&s, p, &arm, *seed, false).summary
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
                                        100.0 * if r.mdsr { m.mdsr_strict } else { m.table_rda }
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
        self.simulate(x, &self.fitted_rows())
    }

    /// Simulated percent of rows `which` at `x`: the mean over the fitting seeds.
    fn simulate(&self, x: &[f64], which: &[usize]) -> Vec<f64> {
        self.simulate_seeds(x, false, which).iter().map(|v| v.iter().sum::<f64>() / v.len() as f64).collect()
    }

    fn sigma(&self, r: &Row) -> f64 {
        r.target.topology_std.unwrap_or(0.0).max(self.spec.spread_floor)
    }

    /// The objective: the mean [`Loss`] of the spread-weighted residuals over the fitted rows.
    pub fn objective(&self, x: &[f64]) -> f64 {
        self.objective_on(x, &self.fitted_rows())
    }

    /// The objective over rows `which` only.
    fn objective_on(&self, x: &[f64], which: &[usize]) -> f64 {
        let sim = self.simulate(x, which);
        let n = which.len() as f64;
        which
            .iter()
            .zip(&sim)
            .map(|(&k, s)| self.spec.loss.of((s - self.rows[k].target.percent) / self.sigma(&self.rows[k])))
            .sum::<f64>()
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
            x.check(&bounds, self.spec.max_evaluations)
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
                let sub: Vec<f64> = pi.iter().map(|&i| x0[i]).collect();
                let step: Vec<f64> = pi.iter().map(|&i| 0.1 * (params[i].hi - params[i].lo)).collect();
                Simplex::start(&sub, &step, &b, &mut |x| x.iter().map(|v| v.abs()).sum())
            })
            .collect()
    }

    /// Runs the fit, writing a checkpoint after every iteration into `out`; with `resume` a
    /// checkpoint of the same calibration continues where it stopped. The parameters split
    /// into independent searches ([`Fit::components`]), run one after another, each up to
    /// `max_evaluations`. `progress` sees each iteration with its search's index.
    pub fn fit(&self, out: &Path, resume: bool, progress: &mut dyn FnMut(usize, &Simplex)) -> Result<Fit> {
        std::fs::create_dir_all(out).map_err(|source| Error::Io { path: out.to_path_buf(), source })?;
        let params = &self.spec.parameters;
        let bounds = Bounds { lo: params.iter().map(|p| p.lo).collect(), hi: params.iter().map(|p| p.hi).collect() };
        let x0 = bounds.clamp(&self.start());
        let comps = self.components();
        let state = self.state_path(out);
        let mut done: Vec<Simplex> = if resume && state.exists() { self.load_checkpoint(&state)? } else { Vec::new() };
        let mut x = x0.clone();
        let (mut start_total, mut end_total) = (0.0, 0.0);
        let n_fitted = self.fitted_rows().len() as f64;
        for (ci, (pi, rows)) in comps.iter().enumerate() {
            let sub_bounds = Bounds {
                lo: pi.iter().map(|&i| bounds.lo[i]).collect(),
                hi: pi.iter().map(|&i| bounds.hi[i]).collect(),
            };
            let sub0: Vec<f64> = pi.iter().map(|&i| x0[i]).collect();
            let step: Vec<f64> = pi.iter().map(|&i| 0.1 * (params[i].hi - params[i].lo)).collect();
            let base = x.clone();
            let mut f = |sub: &[f64]| {
                let mut full = base.clone();
                for (k, &i) in pi.iter().enumerate() {
                    full[i] = sub[k];
                }
                if rows.is_empty() { 0.0 } else { self.objective_on(&full, rows) }
            };
            let mut simplex = if ci < done.len() {
                done[ci].clone()
            } else {
                let s = Simplex::start(&sub0, &step, &sub_bounds, &mut f);
                done.push(s.clone());
                s
            };
            let start_value = simplex.vertices.iter().find(|v| v.0 == sub0).map_or_else(|| f(&sub0), |v| v.1);
            while simplex.evaluations < self.spec.max_evaluations && simplex.spread() > self.spec.tolerance {
                simplex.step(&sub_bounds, &mut f);
                done[ci] = simplex.clone();
                write_atomic(&state, &serde_json::to_string_pretty(&done).expect("serializable"))?;
                progress(ci, &simplex);
            }
            done[ci] = simplex.clone();
            write_atomic(&state, &serde_json::to_string_pretty(&done).expect("serializable"))?;
            let (best, value) = simplex.best();
            for (k, &i) in pi.iter().enumerate() {
                x[i] = best[k];
            }
            let share = rows.len() as f64 / n_fitted;
            start_total += share * start_value;
            end_total += share * value;
        }
        let iterations = done.iter().map(|s| s.iterations).sum();
        let evaluations = done.iter().map(|s| s.evaluations).sum();
        Ok(self.assess(&x0, &x, (start_total, end_total), iterations, evaluations))
    }

    /// The profile (and arms) as they are, assessed on every row without fitting: the report
    /// of the committed calibration, regenerated from the code.
    pub fn evaluate(&self) -> Fit {
        let x = self.current();
        let objective = self.objective(&x);
        self.assess(&x, &x, (objective, objective), 0, 0)
    }

    /// Every row (fitted and checks) at `x`, with intervals over the interval seeds.
    fn assess(&self, x0: &[f64], x: &[f64], objective: (f64, f64), iterations: u32, evaluations: u32) -> Fit {
        let params = &self.spec.parameters;
        let comps = self.components();
        let all: Vec<usize> = (0..self.rows.len()).collect();
        let spread = self.simulate_seeds(x, true, &all);
        // Without separate interval seeds the fit's own runs give both numbers.
        let same = self.rows.iter().all(|r| self.seeds_of(&r.setting, true) == self.seeds_of(&r.setting, false));
        let sim = if same {
            spread.iter().map(|v| v.iter().sum::<f64>() / v.len() as f64).collect()
        } else {
            self.simulate(x, &all)
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
        }
    }

    /// Writes the fitted profile (atomically) to `path` and returns its text.
    pub fn write_profile(&self, fit: &Fit, path: &Path) -> Result<String> {
        let x: Vec<f64> = fit.parameters.iter().map(|p| p.2).collect();
        let mut p = self.profile_with(&x);
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

fn set_tasks(ls: &mut LoadedScenario, n: u32) {
    use crate::workload::WorkloadConfig as W;
    match &mut ls.scenario.workload {
        W::Mmlu(c) | W::Csqa(c) => c.tasks = n,
        W::AppWorld(c) => c.tasks = n,
        W::InjectAgent(c) => c.tasks = n,
        W::LongMemEval(c) => c.tasks = n,
    }
}

/// The fit report as markdown: parameters, searches, every row (fitted or a check) with its
/// residual and interval, and the round-1 → round-3 direction of round-level rows.
pub fn report(cal: &Calibration, fit: &Fit) -> String {
    let mut s = format!("# Calibration `{}` of `{}`\n\n", cal.spec.name, cal.profile.name);
    if !cal.others.is_empty() {
        s.push_str(&format!(
            "Rows of {} as well, each simulated with its own profile, held fixed.\n\n",
            cal.others.keys().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    if fit.evaluations == 0 {
        s.push_str(&format!(
            "The profile as committed, assessed without fitting: `memlink assess {}`. Its provenance: {}.\n\nObjective ({} over the rows the calibration fits): {:.4}; seeds {:?}.\n\nNo MAPLE-Guard row is fitted: the calibration refuses any selection that contains one.\n\n| parameter | value |\n|---|---|\n",
            cal.path.display(),
            cal.profile.provenance,
            cal.spec.loss.describe(),
            fit.objective.1,
            cal.spec.seeds
        ));
        for (name, _, b) in &fit.parameters {
            s.push_str(&format!("| {name} | {b:.4} |\n"));
        }
    } else {
        s.push_str(&format!(
            "Fitted by `memlink calibrate {}`.\n\nObjective ({} over the fitted rows): {:.4} → {:.4} after {} iterations, {} evaluations; seeds {:?}.\n\nNo MAPLE-Guard row is fitted: the calibration refuses any selection that contains one.\n\n| parameter | start | fitted |\n|---|---|---|\n",
            cal.path.display(),
            cal.spec.loss.describe(),
            fit.objective.0,
            fit.objective.1,
            fit.iterations,
            fit.evaluations,
            cal.spec.seeds
        ));
        for (name, a, b) in &fit.parameters {
            s.push_str(&format!("| {name} | {a:.4} | {b:.4} |\n"));
        }
    }
    s.push_str("\nIndependent searches (no fitted row depends on parameters of two of them):\n\n");
    for (k, c) in fit.components.iter().enumerate() {
        s.push_str(&format!("{}. {}\n", k + 1, c.join(", ")));
    }
    let seeds = if cal.spec.interval_seeds.is_empty() { &cal.spec.seeds } else { &cal.spec.interval_seeds };
    let mut seeds_note = format!("Fit seeds {:?}, interval seeds {seeds:?}", cal.spec.seeds);
    for name in cal.spec.settings.keys() {
        let (f, i) = (cal.seeds_of(name, false), cal.seeds_of(name, true));
        if f != cal.spec.seeds.as_slice() || i != seeds.as_slice() {
            seeds_note.push_str(&format!("; {name}: fit seeds {f:?}, interval seeds {i:?}"));
        }
    }
    let disjoint =
        cal.spec.settings.keys().all(|n| cal.seeds_of(n, true).iter().all(|x| !cal.seeds_of(n, false).contains(x)));
    s.push_str(&format!(
        "\n{seeds_note}. {}\n",
        if disjoint {
            "The interval seeds are disjoint from the fit seeds: the interval mean is an out-of-sample check."
        } else {
            "The interval seeds overlap the fit seeds."
        }
    ));
    let within = |r: &RowFit| (r.interval.0 - r.target).abs() <= r.sigma.max(3.0);
    let fitted: Vec<&RowFit> = fit.rows.iter().filter(|r| r.fitted).collect();
    let directions = round_directions(&fit.rows);
    s.push_str(&format!(
        "\nSummary: {} of {} fitted rows within max(3, σ) points of their target (the interval mean); {} of {} checks; {} of {} round-level series move from round 1 to round 3 in the published direction (by at least a point).\n",
        fitted.iter().filter(|r| within(r)).count(),
        fitted.len(),
        fit.rows.iter().filter(|r| !r.fitted && within(r)).count(),
        fit.rows.iter().filter(|r| !r.fitted).count(),
        directions.iter().filter(|d| d.same()).count(),
        directions.len()
    ));
    s.push_str(
        "\n| source | backbone | setting | method | topology | metric | fitted | target | σ | simulated (fit seeds) | residual | interval mean ± 95% half-width | interval mean within max(3, σ) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in &fit.rows {
        let residual = r.simulated - r.target;
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:+.1} | {:.1} ± {:.1} | {} |\n",
            r.source,
            r.backbone,
            r.setting,
            r.guard,
            r.topology,
            r.metric,
            if r.fitted { "yes" } else { "no (check)" },
            r.target,
            r.sigma,
            r.simulated,
            residual,
            r.interval.0,
            r.interval.1,
            if within(r) { "yes" } else { "no" },
        ));
    }
    if !directions.is_empty() {
        s.push_str("\nRound-level rows, round 1 → round 3 (published direction vs simulated, the latter the interval seeds' mean; a simulated change under a point counts as none):\n\n| source | setting | method | metric | published | simulated | same direction |\n|---|---|---|---|---|---|---|\n");
        for d in directions {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {:.1} → {:.1} | {:.1} → {:.1} | {} |\n",
                d.source,
                d.setting,
                d.guard,
                d.metric,
                d.published.0,
                d.published.1,
                d.simulated.0,
                d.simulated.1,
                if d.same() { "yes" } else { "no" }
            ));
        }
    }
    s
}

/// A round-level series' change from round 1 to round 3, published and simulated.
#[derive(Clone, Debug, PartialEq)]
pub struct Direction {
    /// Source table.
    pub source: String,
    /// Setting.
    pub setting: String,
    /// Method.
    pub guard: String,
    /// "MDSR" or "RDA".
    pub metric: String,
    /// Published round 1 and round 3.
    pub published: (f64, f64),
    /// Simulated round 1 and round 3.
    pub simulated: (f64, f64),
}

/// The smallest round-1 → round-3 change (percentage points) that counts as a direction.
pub const DIRECTION_MIN_CHANGE: f64 = 1.0;

impl Direction {
    /// Whether the simulated series moves as the published one: by at least
    /// [`DIRECTION_MIN_CHANGE`] points with the published sign (a flat published series
    /// accepts any change within that). A change smaller than a point in a held-out mean is
    /// noise, not a direction.
    pub fn same(&self) -> bool {
        let p = self.published.1 - self.published.0;
        let q = self.simulated.1 - self.simulated.0;
        if p == 0.0 {
            q.abs() <= DIRECTION_MIN_CHANGE
        } else {
            p.signum() == q.signum() && q.abs() >= DIRECTION_MIN_CHANGE
        }
    }
}

/// Every (source, setting, method, metric) series with both an @1 and an @3 row.
pub fn round_directions(rows: &[RowFit]) -> Vec<Direction> {
    let mut out = Vec::new();
    for r1 in rows {
        let Some((m, "1")) = r1.metric.split_once('@') else { continue };
        let third = format!("{m}@3");
        let Some(r3) = rows.iter().find(|r| {
            r.source == r1.source
                && r.backbone == r1.backbone
                && r.setting == r1.setting
                && r.guard == r1.guard
                && r.topology == r1.topology
                && r.metric == third
        }) else {
            continue;
        };
        out.push(Direction {
            source: r1.source.clone(),
            setting: r1.setting.clone(),
            guard: r1.guard.clone(),
            metric: m.to_string(),
            published: (r1.target, r3.target),
            // The interval seeds' mean: more runs than the fit's, so a direction is not one
            // seed's noise.
            simulated: (r1.interval.0, r3.interval.0),
        });
    }
    out
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
