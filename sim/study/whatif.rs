//! Threat-model what-ifs: one question, answered by running the same settings, topologies,
//! seeds and arms under several attacker *conditions* (capability lists), and comparing each
//! condition with a reference one, paired (the same seed and topology on both sides: common
//! random numbers), with 95% bootstrap intervals.
//!
//! A what-if file (`scenarios/whatif/*.ron`):
//!
//! ```ron
//! (
//!     name: "forgery",
//!     question: "…",
//!     settings: [(name: "mmlu_minja", base: "../paper/mmlu-minja-wheel.ron", tasks: Some(100))],
//!     topologies: [Wheel, Chain, Tree],
//!     replicates: 10,                       // seeds 1..=10
//!     arms: [(name: "MAPLE-Guard", guard: Maple(())), …],
//!     conditions: [(name: "honest", capabilities: []), (name: "forged", capabilities: [Forge(())])],
//!     reference: "honest",
//!     metrics: ["rda@3", "mdsr@3", "asr@3"],
//! )
//! ```
//!
//! Runs go through the sweep engine's store (`DIR/runs/<hash>.json`, written as each finishes),
//! so a killed what-if resumes and a rerun skips finished runs.

use crate::attack::capability::Capability;
use crate::error::{Error, Result, locate_field, parse_ron, read_file};
use crate::scenario::{Arm, Attackers, LoadedScenario, Placement};
use crate::study::predictive::{Component, Ensembles, Predictive};
use crate::study::sweep::exec::{Job, RunResult, collect, execute, progress_bar};
use crate::study::sweep::stats::{Estimate, estimate, paired};
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A scenario at one posterior draw and its configuration hash.
type DrawJob = (std::sync::Arc<LoadedScenario>, String);

/// One benchmark setting of a what-if.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setting {
    /// Name in tables.
    pub name: String,
    /// Base scenario (relative to the what-if file).
    pub base: PathBuf,
    /// Tasks per run, overriding the base's (the committed what-ifs are sized for CI).
    #[serde(default)]
    pub tasks: Option<u32>,
}

/// One attacker condition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// Name in tables.
    pub name: String,
    /// The attacker's capabilities under it (empty: the paper's attacker).
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// The attackers under it, replacing the base scenario's (`Count(2)`, `Ids([0])`); with a
    /// count, `placement` places them.
    #[serde(default)]
    pub attackers: Option<Attackers>,
    /// Where counted attackers sit (`HighestDegree`: hubs, `LowestDegree`: leaves, `Random`).
    #[serde(default)]
    pub placement: Option<Placement>,
}

fn default_metrics() -> Vec<String> {
    vec!["rda@3".into(), "mdsr@3".into(), "asr@3".into()]
}

fn default_bootstrap() -> usize {
    1000
}

/// A what-if file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WhatIfSpec {
    /// Name (the report is `<name>.md`).
    pub name: String,
    /// The question, as the report states it.
    pub question: String,
    /// Settings.
    pub settings: Vec<Setting>,
    /// Topologies every setting runs on.
    pub topologies: Vec<Topology>,
    /// Seeds 1..=replicates.
    pub replicates: u32,
    /// Arms (replacing the bases').
    pub arms: Vec<Arm>,
    /// Attacker conditions.
    pub conditions: Vec<Condition>,
    /// The condition the others are compared with.
    pub reference: String,
    /// Metrics (`rda@3`, `mdsr@3`, `asr@3`, `pmur_agent@3`, `pmur`, …), in percent.
    #[serde(default = "default_metrics")]
    pub metrics: Vec<String>,
    /// Bootstrap resamples.
    #[serde(default = "default_bootstrap")]
    pub bootstrap: usize,
    /// The metrics that get a figure per setting (default: every metric).
    #[serde(default)]
    pub figures: Option<Vec<String>>,
    /// A trade-off figure per setting: each listed arm a line through its conditions, one
    /// metric against another (the adaptive attacker's evasion-versus-success curve).
    #[serde(default)]
    pub tradeoff: Option<Tradeoff>,
}

/// A trade-off figure of a what-if.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tradeoff {
    /// The metric on the x axis.
    pub x: String,
    /// The metric on the y axis.
    pub y: String,
    /// The arms drawn (default: every arm).
    #[serde(default)]
    pub arms: Vec<String>,
}

/// A loaded what-if: its spec and one job per (setting, condition, topology, seed), in that
/// order.
pub struct WhatIf {
    /// Where it was read from.
    pub path: PathBuf,
    /// The spec.
    pub spec: WhatIfSpec,
    /// The jobs: the fitted profile's, then (`--ensemble`) the same again at each posterior
    /// draw, draw by draw.
    pub jobs: Vec<Job>,
    /// Posterior draws the jobs run at besides the fit (0 without `--ensemble`).
    pub draws: usize,
}

/// One cell of the analysis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    /// Setting.
    pub setting: String,
    /// Metric.
    pub metric: String,
    /// Arm.
    pub arm: String,
    /// Condition.
    pub condition: String,
    /// The metric over (topology, seed), in percent.
    pub value: Estimate,
    /// The paired difference from the reference condition (`None` for the reference).
    pub vs_reference: Option<Estimate>,
    /// The value with its predictive interval over the posterior draws and the seeds
    /// (`--ensemble`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predictive: Option<Predictive>,
    /// The paired difference likewise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_reference_predictive: Option<Predictive>,
}

/// A ledger arm's mean work per run under one condition.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LedgerCost {
    /// Setting.
    pub setting: String,
    /// Arm.
    pub arm: String,
    /// Condition.
    pub condition: String,
    /// (signed, write checks, read checks, distrusted, rejected) as (name, mean per run).
    pub per_run: Vec<(String, f64)>,
}

/// What a what-if found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Analysis {
    /// Every cell, by setting, metric, arm, condition.
    pub cells: Vec<Cell>,
    /// Per setting, ledger arm and condition, the ledger's work.
    pub ledger: Vec<LedgerCost>,
}

impl Analysis {
    /// The cell of (setting, metric, arm, condition); every combination has one.
    pub fn cell(&self, setting: &str, metric: &str, arm: &str, condition: &str) -> &Cell {
        self.cells
            .iter()
            .find(|x| x.setting == setting && x.metric == metric && x.arm == arm && x.condition == condition)
            .expect("every cell")
    }
}

impl WhatIf {
    /// Loads a what-if file; every setting's scenario under every condition is checked as a
    /// hand-written one.
    pub fn load(path: &Path) -> Result<WhatIf> {
        let text = read_file(path)?;
        WhatIf::load_str(&text, path)
    }

    /// Loads what-if `text` as if read from `path` (bases resolve relative to it).
    pub fn load_str(text: &str, path: &Path) -> Result<WhatIf> {
        let mut spec: WhatIfSpec = parse_ron(path, text)?;
        let invalid = |field: &str, expected: String| Error::Invalid {
            path: path.to_path_buf(),
            pos: locate_field(text, field),
            field: field.into(),
            expected,
        };
        crate::scenario::read_key_files(&mut spec.arms, path).map_err(|e| invalid("key_file", e))?;
        if spec.settings.is_empty() || spec.topologies.is_empty() || spec.arms.is_empty() {
            return Err(invalid("settings", "at least one setting, topology and arm".into()));
        }
        if spec.replicates == 0 || spec.replicates > 1000 {
            return Err(invalid("replicates", format!("1..=1000 seeds, got {}", spec.replicates)));
        }
        if spec.bootstrap == 0 || spec.bootstrap > 100_000 {
            return Err(invalid("bootstrap", format!("1..=100000 resamples, got {}", spec.bootstrap)));
        }
        if !spec.conditions.iter().any(|c| c.name == spec.reference) {
            let names: Vec<&str> = spec.conditions.iter().map(|c| c.name.as_str()).collect();
            return Err(invalid("reference", format!("a condition's name among {names:?}, got `{}`", spec.reference)));
        }
        for (i, c) in spec.conditions.iter().enumerate() {
            if spec.conditions[..i].iter().any(|d| d.name == c.name) {
                return Err(invalid("conditions", format!("distinct condition names, `{}` twice", c.name)));
            }
        }
        if let Some(m) = spec.metrics.iter().enumerate().find(|(i, m)| spec.metrics[..*i].contains(m)).map(|x| x.1) {
            return Err(invalid("metrics", format!("distinct metrics, `{m}` twice")));
        }
        for c in &spec.conditions {
            if let Some(x) =
                c.capabilities.iter().enumerate().find(|(i, x)| c.capabilities[..*i].contains(x)).map(|x| x.1)
            {
                return Err(invalid(
                    "capabilities",
                    format!("distinct capabilities (condition `{}`), {x:?} twice", c.name),
                ));
            }
        }
        for m in &spec.metrics {
            let (name, round) = m.split_once('@').map_or((m.as_str(), None), |(a, b)| (a, Some(b)));
            let known = ["rda", "mdsr", "asr", "pmur_agent", "accuracy", "target_hit", "retrieval_rda"];
            let scalars = ["sr", "pmur", "cpr", "pmwr", "ppr", "evasion", "undetected"];
            let ok = match round {
                Some(k) => known.contains(&name) && k.parse::<u32>().is_ok_and(|k| k >= 1),
                None => scalars.contains(&name) || name.starts_with("cap_") || name.starts_with("ledger_"),
            };
            if !ok {
                return Err(invalid(
                    "metrics",
                    format!("metrics such as rda@3, mdsr@3, asr@3, pmur, evasion; got `{m}`"),
                ));
            }
        }
        let listed = spec.figures.iter().flatten().chain(spec.tradeoff.iter().flat_map(|t| [&t.x, &t.y]));
        for m in listed {
            if !spec.metrics.contains(m) {
                return Err(invalid(
                    if spec.figures.as_ref().is_some_and(|f| f.contains(m)) { "figures" } else { "tradeoff" },
                    format!("a metric the what-if lists in `metrics` ({:?}), got `{m}`", spec.metrics),
                ));
            }
        }
        if let Some(t) = &spec.tradeoff
            && let Some(a) = t.arms.iter().find(|a| !spec.arms.iter().any(|b| &b.name == *a))
        {
            return Err(invalid("tradeoff", format!("arm names of this what-if, got `{a}`")));
        }
        let mut jobs = Vec::new();
        for s in &spec.settings {
            let base = crate::files::load_referenced(path, Some(text), "base", &s.base, crate::scenario::load)?;
            let base_path = base.path.clone();
            for c in &spec.conditions {
                for t in &spec.topologies {
                    let mut scn = base.scenario.clone();
                    scn.name = format!("{}-{}-{}", spec.name, s.name, c.name);
                    scn.topology = t.clone();
                    scn.arms = spec.arms.clone();
                    if let Some(n) = s.tasks {
                        scn.workload.set_tasks(n);
                    }
                    if let Some(a) = &c.attackers {
                        scn.attackers = a.clone();
                    }
                    if let Some(p) = c.placement {
                        scn.placement = p;
                    }
                    match scn.attack.capabilities_mut() {
                        Some(caps) => caps.clone_from(&c.capabilities),
                        None if c.capabilities.is_empty() => {}
                        None => {
                            return Err(invalid(
                                "conditions",
                                format!(
                                    "capabilities only on attacks that write memory; setting `{}` runs `{}`",
                                    s.name,
                                    scn.attack.family()
                                ),
                            ));
                        }
                    }
                    scn.check()
                        .map_err(|(f, e)| invalid("settings", format!("{e} (setting `{}`, field `{f}`)", s.name)))?;
                    crate::scenario::check_size(&scn).map_err(|e| invalid("settings", e))?;
                    if scn.protocol.rounds
                        < spec.metrics.iter().filter_map(|m| m.split_once('@')?.1.parse().ok()).max().unwrap_or(0)
                    {
                        return Err(invalid("metrics", format!("rounds the runs have (setting `{}`)", s.name)));
                    }
                    let ls = LoadedScenario { scenario: scn, profile: base.profile.clone(), path: base_path.clone() };
                    let shared = std::sync::Arc::new(ls);
                    let base_hash = crate::study::sweep::exec::scenario_hash(&shared);
                    for seed in 1..=u64::from(spec.replicates) {
                        jobs.push(Job::with_hash(shared.clone(), &base_hash, seed));
                    }
                }
            }
        }
        Ok(WhatIf { path: path.to_path_buf(), spec, jobs, draws: 0 })
    }

    /// The what-if with every job also run at each posterior draw of its backbone's stand-in
    /// ([`crate::study::predictive`]), on the same seeds: the analysis adds predictive intervals.
    pub fn with_ensemble(mut self, ensembles: &mut Ensembles) -> Result<WhatIf> {
        let fit = self.jobs.clone();
        // The seeds of one scenario share it: its draws are made once.
        let mut per_job: Vec<std::sync::Arc<Vec<DrawJob>>> = Vec::new();
        for (i, j) in fit.iter().enumerate() {
            if i > 0 && std::sync::Arc::ptr_eq(&fit[i - 1].scenario, &j.scenario) {
                per_job.push(per_job[i - 1].clone());
                continue;
            }
            let at = ensembles
                .draws_of(&j.scenario)?
                .into_iter()
                .map(|ls| {
                    let h = crate::study::sweep::exec::scenario_hash(&ls);
                    (std::sync::Arc::new(ls), h)
                })
                .collect();
            per_job.push(std::sync::Arc::new(at));
        }
        self.draws = per_job.first().map_or(0, |d| d.len());
        let keep = self.kept_metrics();
        for d in 0..self.draws {
            for (j, at) in fit.iter().zip(&per_job) {
                let (ls, h) = &at[d];
                self.jobs.push(
                    Job::with_hash(ls.clone(), h, j.seed).labelled(crate::study::predictive::LABEL).keeping(keep),
                );
            }
        }
        Ok(self)
    }

    /// Runs what `dir` does not hold yet (each run stored as it finishes) and returns every
    /// job's result in job order.
    pub fn run(&self, dir: &Path, quiet: bool) -> Result<Vec<RunResult>> {
        let bar = progress_bar(self.jobs.len() as u64, quiet, &self.spec.name);
        execute(&self.jobs, dir, None, &bar)?;
        collect(&self.jobs, &[dir.to_path_buf()])
    }

    /// What a run at a posterior draw keeps of its results: the what-if's metrics alone (the
    /// ledger's work is read from the fit's runs), by name: `rda@3` keeps RDA's rounds, `evasion`
    /// the scalar. The list lives as long as the process (job configurations are `'static`);
    /// one short list per loaded what-if.
    fn kept_metrics(&self) -> &'static [&'static str] {
        let mut names: Vec<&'static str> = Vec::new();
        for m in &self.spec.metrics {
            let name = m.split_once('@').map_or(m.as_str(), |(n, _)| n);
            if !names.contains(&name) {
                names.push(Box::leak(name.to_string().into_boxed_str()));
            }
        }
        Box::leak(names.into_boxed_slice())
    }

    /// Index of the job of (setting, condition, topology, seed), all 0-based, at the fit.
    fn job(&self, s: usize, c: usize, t: usize, seed: usize) -> usize {
        let sp = &self.spec;
        ((s * sp.conditions.len() + c) * sp.topologies.len() + t) * sp.replicates as usize + seed
    }

    /// The metric of `arm` in every (topology, seed) unit of (setting, condition), in unit order,
    /// at the fit.
    fn units(&self, results: &[RunResult], s: usize, c: usize, arm: usize, metric: &str) -> Vec<f64> {
        self.units_at(results, None, s, c, arm, metric)
    }

    /// [`WhatIf::units`] at posterior draw `draw` (`None`: the fit).
    fn units_at(
        &self,
        results: &[RunResult],
        draw: Option<usize>,
        s: usize,
        c: usize,
        arm: usize,
        metric: &str,
    ) -> Vec<f64> {
        let sp = &self.spec;
        let per_profile = self.jobs.len() / (self.draws + 1);
        let offset = draw.map_or(0, |d| (d + 1) * per_profile);
        let mut out = Vec::with_capacity(sp.topologies.len() * sp.replicates as usize);
        for t in 0..sp.topologies.len() {
            for seed in 0..sp.replicates as usize {
                let r = &results[offset + self.job(s, c, t, seed)];
                out.push(100.0 * r.arms[arm].metric(metric).unwrap_or(0.0));
            }
        }
        out
    }

    /// Every cell: the metric per arm and condition, and its paired difference from the
    /// reference condition; and the ledger's work.
    pub fn analyse(&self, results: &[RunResult]) -> Analysis {
        let sp = &self.spec;
        let reference = sp.conditions.iter().position(|c| c.name == sp.reference).expect("checked at load");
        let mut cells = Vec::new();
        let seed_of = |parts: &[&str]| {
            let h = blake3::hash(parts.join("/").as_bytes());
            u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"))
        };
        for (s, setting) in sp.settings.iter().enumerate() {
            for metric in &sp.metrics {
                for (a, arm) in sp.arms.iter().enumerate() {
                    let base = self.units(results, s, reference, a, metric);
                    for (c, cond) in sp.conditions.iter().enumerate() {
                        let xs = self.units(results, s, c, a, metric);
                        let seed = seed_of(&[&sp.name, &setting.name, metric, &arm.name, &cond.name]);
                        // Per draw: the value's and the paired difference's units.
                        let at: Vec<(Vec<f64>, Vec<f64>)> = (0..self.draws)
                            .map(|d| {
                                let b = self.units_at(results, Some(d), s, reference, a, metric);
                                let x = self.units_at(results, Some(d), s, c, a, metric);
                                let diff = b.iter().zip(&x).map(|(p, q)| q - p).collect();
                                (x, diff)
                            })
                            .collect();
                        let fit_diff: Vec<f64> = base.iter().zip(&xs).map(|(p, q)| q - p).collect();
                        let predictive = (self.draws > 0).then(|| {
                            let draws: Vec<Component> = at.iter().map(|(x, _)| Component::of(x)).collect();
                            Predictive::of(Component::of(&xs), &draws, (0.0, 100.0))
                        });
                        let vs_reference_predictive = (self.draws > 0 && c != reference).then(|| {
                            let draws: Vec<Component> = at.iter().map(|(_, d)| Component::of(d)).collect();
                            Predictive::of(Component::of(&fit_diff), &draws, (-100.0, 100.0))
                        });
                        cells.push(Cell {
                            setting: setting.name.clone(),
                            metric: metric.clone(),
                            arm: arm.name.clone(),
                            condition: cond.name.clone(),
                            value: estimate(&xs, sp.bootstrap, seed),
                            vs_reference: (c != reference).then(|| paired(&base, &xs, sp.bootstrap, seed ^ 1)),
                            predictive,
                            vs_reference_predictive,
                        });
                    }
                }
            }
        }
        let mut ledger = Vec::new();
        for (s, setting) in sp.settings.iter().enumerate() {
            for (a, arm) in sp.arms.iter().enumerate() {
                if arm.ledger.is_none() {
                    continue;
                }
                for (c, cond) in sp.conditions.iter().enumerate() {
                    let keys = [
                        "ledger_signed",
                        "ledger_write_checks",
                        "ledger_read_checks",
                        "ledger_distrusted",
                        "ledger_rejected",
                    ];
                    let per_run: Vec<(String, f64)> = keys
                        .iter()
                        .map(|k| {
                            let xs = self.units(results, s, c, a, k);
                            (k.trim_start_matches("ledger_").to_string(), crate::study::sweep::stats::mean(&xs) / 100.0)
                        })
                        .collect();
                    ledger.push(LedgerCost {
                        setting: setting.name.clone(),
                        arm: arm.name.clone(),
                        condition: cond.name.clone(),
                        per_run,
                    });
                }
            }
        }
        Analysis { cells, ledger }
    }

    /// The report (markdown) and its figures, written to `out` (`<name>.md`,
    /// `<name>-<setting>-<metric>.svg`).
    pub fn report(&self, a: &Analysis, out: &Path) -> Result<PathBuf> {
        let sp = &self.spec;
        std::fs::create_dir_all(out).map_err(|source| Error::Write { path: out.to_path_buf(), source })?;
        let ci = |e: &Estimate| format!("{:.1} [{:.1}, {:.1}]", e.mean, e.lo, e.hi);
        let mut md = format!(
            "<!-- Generated by `memlink whatif {}`; do not edit. -->\n\n# What if: {}\n\n{}\n\n",
            self.path.display(),
            sp.name,
            sp.question
        );
        let topologies: Vec<String> = sp.topologies.iter().map(Topology::label).collect();
        md.push_str(&format!(
            "Design: {} × topologies {} × seeds 1–{} per cell ({} runs of {} arms). Every condition runs the same seeds and topologies, so differences are paired; intervals are 95% percentile bootstrap intervals over the (topology, seed) units ({} resamples). Metrics in percent.\n\n",
            sp.settings.iter().map(|s| format!("`{}`{}", s.name, s.tasks.map_or(String::new(), |n| format!(" ({n} tasks)")))).collect::<Vec<_>>().join(", "),
            topologies.join(", "),
            sp.replicates,
            self.jobs.len() / (self.draws + 1),
            sp.arms.len(),
            sp.bootstrap
        ));
        if self.draws > 0 {
            md.push_str(&format!(
                "Calibration uncertainty: every run also ran at the first {} posterior draws of its backbone's stand-in (`memlink whatif --ensemble`; models/<backbone>.ensemble.ron), on the same seeds. The tables show the fitted profile's values with their seed-only intervals; the section *Calibration uncertainty* below gives each difference's 95% predictive interval over the draws and the seeds, and the calibration's share of its variance.\n\n",
                self.draws
            ));
        }
        md.push_str("Conditions:\n\n");
        for c in &sp.conditions {
            let mut caps = if c.capabilities.is_empty() {
                "the paper's attacker".to_string()
            } else {
                ron::to_string(&c.capabilities).unwrap_or_default()
            };
            if let Some(a) = &c.attackers {
                caps.push_str(&format!("; attackers {}", ron::to_string(a).unwrap_or_default()));
            }
            if let Some(p) = c.placement {
                caps.push_str(&format!("; placement {p:?}"));
            }
            md.push_str(&format!(
                "- **{}**: {caps}{}\n",
                c.name,
                if c.name == sp.reference { " (reference)" } else { "" }
            ));
        }
        md.push('\n');
        for setting in &sp.settings {
            md.push_str(&format!("## {}\n\n", setting.name));
            for metric in &sp.metrics {
                md.push_str(&format!("### {metric}\n\n| arm |"));
                for c in &sp.conditions {
                    md.push_str(&format!(" {} |", c.name));
                }
                md.push_str("\n|---|");
                md.push_str(&"---|".repeat(sp.conditions.len()));
                md.push('\n');
                for arm in &sp.arms {
                    md.push_str(&format!("| {} |", arm.name));
                    for c in &sp.conditions {
                        let cell = a.cell(&setting.name, metric, &arm.name, &c.name);
                        match &cell.vs_reference {
                            None => md.push_str(&format!(" {} |", ci(&cell.value))),
                            Some(d) => md.push_str(&format!(
                                " {}; Δ {:+.1} [{:+.1}, {:+.1}] |",
                                ci(&cell.value),
                                d.mean,
                                d.lo,
                                d.hi
                            )),
                        }
                    }
                    md.push('\n');
                }
                md.push('\n');
                if sp.figures.as_ref().is_some_and(|f| !f.contains(metric)) {
                    continue;
                }
                let fig = out.join(format!("{}-{}-{}.svg", sp.name, setting.name, metric.replace('@', "-")));
                let series: Vec<crate::report::plot::IntervalSeries> = sp
                    .arms
                    .iter()
                    .map(|arm| {
                        let vals = sp
                            .conditions
                            .iter()
                            .map(|c| {
                                let cell = a.cell(&setting.name, metric, &arm.name, &c.name);
                                (cell.value.mean, cell.value.lo, cell.value.hi)
                            })
                            .collect();
                        (arm.name.clone(), vals)
                    })
                    .collect();
                let groups: Vec<String> = sp.conditions.iter().map(|c| c.name.clone()).collect();
                crate::report::plot::grouped_intervals(
                    &fig,
                    &format!("{} · {} by condition (95% CI)", setting.name, crate::tidy::human(metric)),
                    &format!("{} (%)", crate::tidy::human(metric)),
                    &groups,
                    &series,
                    1.1 + 0.07 * (sp.arms.len() + 1) as f64,
                )?;
                md.push_str(&format!(
                    "![{metric} on {}]({})\n\n",
                    setting.name,
                    fig.file_name().expect("a file").to_string_lossy()
                ));
            }
        }
        if let Some(Tradeoff { x, y, arms }) = &sp.tradeoff {
            md.push_str(&format!("## Trade-off: {y} against {x}\n\n"));
            for setting in &sp.settings {
                let fig = out.join(format!("{}-{}-tradeoff.svg", sp.name, setting.name));
                let series: Vec<(String, Vec<crate::report::plot::TradeoffPoint>)> = sp
                    .arms
                    .iter()
                    .filter(|arm| arms.is_empty() || arms.contains(&arm.name))
                    .map(|arm| {
                        let pts = sp
                            .conditions
                            .iter()
                            .map(|c| {
                                let cx = &a.cell(&setting.name, x, &arm.name, &c.name).value;
                                let cy = &a.cell(&setting.name, y, &arm.name, &c.name).value;
                                (c.name.clone(), (cx.mean, cx.lo, cx.hi), (cy.mean, cy.lo, cy.hi))
                            })
                            .collect();
                        (arm.name.clone(), pts)
                    })
                    .collect();
                crate::report::plot::tradeoff(
                    &fig,
                    &format!(
                        "{} · {} against {} by condition (95% CI)",
                        setting.name,
                        crate::tidy::human(y),
                        crate::tidy::human(x)
                    ),
                    &format!("{} (%)", crate::tidy::human(x)),
                    &format!("{} (%)", crate::tidy::human(y)),
                    &series,
                )?;
                md.push_str(&format!(
                    "![{y} against {x} on {}]({})\n\n",
                    setting.name,
                    fig.file_name().expect("a file").to_string_lossy()
                ));
            }
        }
        if self.draws > 0 {
            md.push_str(&format!(
                "## Calibration uncertainty\n\nEach condition's paired difference from **{}** at the fitted profile, its seed-only 95% interval (the bootstrap above), its 95% predictive interval over {} posterior draws and the seeds, and the calibration's share of the predictive variance.\n\n| setting | metric | arm | condition | Δ | seed-only | predictive | calib. |\n|---|---|---|---|---|---|---|---|\n",
                sp.reference, self.draws
            ));
            for c in &a.cells {
                if let (Some(d), Some(p)) = (&c.vs_reference, &c.vs_reference_predictive) {
                    md.push_str(&format!(
                        "| {} | {} | {} | {} | {:+.1} | [{:+.1}, {:+.1}] | [{:+.1}, {:+.1}] | {:.0}% |\n",
                        c.setting,
                        c.metric,
                        c.arm,
                        c.condition,
                        d.mean,
                        d.lo,
                        d.hi,
                        p.interval.0,
                        p.interval.1,
                        100.0 * p.calibration_share
                    ));
                }
            }
            md.push('\n');
        }
        md.push_str("## Paired differences whose interval excludes zero\n\n");
        let mut any = false;
        for c in &a.cells {
            if let Some(d) = &c.vs_reference
                && (d.lo > 0.0 || d.hi < 0.0)
            {
                any = true;
                let calibration = match &c.vs_reference_predictive {
                    Some(p) if p.interval.0 > 0.0 || p.interval.1 < 0.0 => {
                        format!(
                            "; predictive [{:+.1}, {:+.1}]: it holds over the calibration's uncertainty",
                            p.interval.0, p.interval.1
                        )
                    }
                    Some(p) => format!(
                        "; predictive [{:+.1}, {:+.1}] includes zero: the calibration's uncertainty leaves it open",
                        p.interval.0, p.interval.1
                    ),
                    None => String::new(),
                };
                md.push_str(&format!(
                    "- {} · {} · {}: **{}** moves it by {:+.1} [{:+.1}, {:+.1}] points against **{}**{calibration}\n",
                    c.setting, c.metric, c.arm, c.condition, d.mean, d.lo, d.hi, sp.reference
                ));
            }
        }
        if !any {
            md.push_str("None: no condition moves any metric of any arm beyond its interval.\n");
        }
        md.push('\n');
        if !a.ledger.is_empty() {
            md.push_str("## What the ledger costs (mean per run)\n\n| setting | arm | condition | signed | write checks | read checks | distrusted | rejected |\n|---|---|---|---|---|---|---|---|\n");
            for l in &a.ledger {
                md.push_str(&format!("| {} | {} | {} |", l.setting, l.arm, l.condition));
                for (_, x) in &l.per_run {
                    md.push_str(&format!(" {x:.0} |"));
                }
                md.push('\n');
            }
            md.push('\n');
        }
        let file = out.join(format!("{}.md", sp.name));
        crate::files::write_atomic(&file, &md)?;
        crate::files::write_atomic(
            &out.join(format!("{}.json", sp.name)),
            &(serde_json::to_string_pretty(a).expect("serializable") + "\n"),
        )?;
        Ok(file)
    }
}
