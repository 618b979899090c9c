//! Parameter-sensitivity sweeps: a base scenario (or several settings) crossed with topologies
//! and seeds, and a design over factors — numbers anywhere in the scenario or its profile.
//!
//! A sweep file expands into a plan of runs (design point × setting × topology × seed). Every
//! point uses the same seeds (common random numbers), so differences between points are paired.
//! The plan runs through [`exec`]: each run's result is stored the moment it finishes, keyed by
//! a content hash, so a killed sweep resumes where it stopped and shards merge into the bytes of
//! an unsharded run. [`finalize`] turns the plan and the results into the long-format outputs
//! (`runs.csv`, `runs.jsonl`), SALib's `problem.json`, `analysis.json`, `summary.md` and the
//! design's figures.

pub mod design;
pub mod ensemble;
pub mod exec;
pub mod factor;
pub(crate) mod output;
pub mod stats;

pub use output::{analyse, finalize, flip_points, plot_command, salib_order};

use crate::error::{Error, Pos, Result, locate_field, parse_ron, read_file};
use crate::scenario::{LoadedScenario, load};
use crate::topology::Topology;
use design::{Coord, Design};
use exec::Job;
use factor::Factor;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The most distinct configurations (design points × settings × topologies) one sweep may plan.
pub const MAX_CONFIGURATIONS: usize = 200_000;
/// The most runs one sweep may plan.
pub const MAX_RUNS: usize = 2_000_000;

/// One setting of a sweep: a name and its base scenario (relative to the sweep file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSetting {
    /// Name in tables.
    pub name: String,
    /// Base scenario.
    pub base: PathBuf,
}

/// A sweep file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Name (output folder `runs/sweeps/<name>`).
    pub name: String,
    /// One base scenario (or use `settings`).
    #[serde(default)]
    pub base: Option<PathBuf>,
    /// Several settings, each analysed on its own.
    #[serde(default)]
    pub settings: Vec<SweepSetting>,
    /// Topologies to cross with (default: each base's).
    #[serde(default)]
    pub topologies: Option<Vec<Topology>>,
    /// Seeds, the same at every point (default: 1..=`replicates`).
    #[serde(default)]
    pub seeds: Option<Vec<u64>>,
    /// Replicates when `seeds` is omitted (default 10).
    #[serde(default)]
    pub replicates: Option<u32>,
    /// The base scenarios' arms to run, by name (default: all).
    #[serde(default)]
    pub arms: Option<Vec<String>>,
    /// The factors.
    pub factors: Vec<Factor>,
    /// The design.
    pub design: Design,
    /// Metrics the summary and figures analyse (`mdsr@3`, `rda@3`, `accuracy@1`, `pmur`, …).
    #[serde(default = "default_metrics")]
    pub metrics: Vec<String>,
    /// The arm `memlink plot` draws when none is named (default: the last arm). Every arm has its
    /// own tables in `summary.md` and its own figures.
    #[serde(default)]
    pub focus: Option<String>,
    /// Seed of the design's own stream (LHS, Morris, Sobol scrambling).
    #[serde(default = "one")]
    pub design_seed: u64,
    /// Bootstrap resamples of every interval.
    #[serde(default = "thousand")]
    pub bootstrap: u32,
    /// Worked examples for the OAT flip points (explain items; default `../explain` from the
    /// sweep file).
    #[serde(default)]
    pub examples: Option<PathBuf>,
}

fn default_metrics() -> Vec<String> {
    vec!["mdsr@3".into(), "rda@3".into()]
}
fn one() -> u64 {
    1
}
fn thousand() -> u32 {
    1000
}

/// One planned run, as `plan.json` records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedRun {
    /// Run id: `p<point>-<setting>-<topology>-s<seed>`.
    pub id: String,
    /// Content hash of its configuration.
    pub hash: String,
    /// Design point index.
    pub point: usize,
    /// Setting name.
    pub setting: String,
    /// Topology label.
    pub topology: String,
    /// Seed.
    pub seed: u64,
    /// Replicate index (topology × seed) within its point and setting.
    pub replicate: usize,
    /// Every factor's value, in factor order.
    pub values: Vec<f64>,
    /// The posterior draw of the stand-in the run is at (`--ensemble`; absent: the fitted
    /// profile, which the analysis reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<usize>,
}

/// A factor as the plan records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedFactor {
    /// Label.
    pub name: String,
    /// Path.
    pub path: String,
    /// Nominal value per setting.
    pub nominal: Vec<f64>,
    /// Bounds per setting.
    pub bounds: Vec<(f64, f64)>,
    /// Whether the field is an integer (simulated, and recorded, at the nearest integer).
    #[serde(default)]
    pub integer: bool,
}

/// The expanded sweep: everything [`finalize`] needs besides the results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The sweep file's contents.
    pub spec: SweepSpec,
    /// Settings in order.
    pub settings: Vec<String>,
    /// Factors.
    pub factors: Vec<PlannedFactor>,
    /// Point labels.
    pub points: Vec<String>,
    /// Unit coordinates of each point (Morris and Sobol analyses read them).
    pub unit: Vec<Vec<f64>>,
    /// The runs, in plan order.
    pub runs: Vec<PlannedRun>,
    /// The sweep file's folder (not stored: a plan is the same wherever it is checked out).
    #[serde(skip)]
    pub dir: PathBuf,
    /// OAT flip points of the worked examples (empty for other designs).
    pub flips: Vec<output::FlipPoint>,
}

/// A loaded sweep: the plan and its jobs.
pub struct Sweep {
    /// The plan.
    pub plan: Plan,
    /// One job per planned run, in plan order.
    pub jobs: Vec<Job>,
}

fn factor_pos(text: &str, path: &str) -> Pos {
    let needle = format!("\"{path}\"");
    for (i, line) in text.lines().enumerate() {
        if let Some(c) = line.find(&needle) {
            return Pos { line: i + 1, col: c + 1 };
        }
    }
    locate_field(text, "factors")
}

/// A scenario with every factor at `values` (the factors' own units); `Err` names the factor
/// (by index) and what was wrong. Weights that must sum to 1 are renormalised (module docs),
/// and the result passes every check of a hand-written scenario and profile.
pub fn apply(
    base: &LoadedScenario,
    factors: &[Factor],
    values: &[f64],
    nominal: &[f64],
) -> std::result::Result<LoadedScenario, (usize, String)> {
    let mut sv = serde_json::to_value(&base.scenario).expect("serializable");
    let mut pv = serde_json::to_value(&base.profile).expect("serializable");
    let mut scenario_paths = Vec::new();
    for (i, (f, &x)) in factors.iter().zip(values).enumerate() {
        let (profile, sub) = factor::split_root(&f.path);
        let target = if profile { &mut pv } else { &mut sv };
        factor::write(target, sub, x).map_err(|e| (i, e))?;
        if !profile && x != nominal[i] {
            scenario_paths.push(f.path.clone());
        }
    }
    factor::renormalise_weights(&mut sv, &scenario_paths).map_err(|e| (0, e))?;
    let scenario: crate::scenario::Scenario =
        serde_json::from_value(sv).map_err(|e| (0, format!("a value the scenario accepts: {e}")))?;
    let profile: crate::agent::Profile =
        serde_json::from_value(pv).map_err(|e| (0, format!("a value the profile accepts: {e}")))?;
    let blame = |field: &str| {
        factors.iter().position(|f| f.path.rsplit('.').next().is_some_and(|l| l.starts_with(field))).unwrap_or(0)
    };
    scenario.check().map_err(|(f, e)| (blame(&f), format!("`{f}`: {e}")))?;
    crate::scenario::check_size(&scenario).map_err(|e| (0, e))?;
    profile.check().map_err(|(f, e)| {
        let leaf = f.rsplit('.').next().unwrap_or(&f).to_string();
        (blame(&leaf), format!("`profile.{f}`: {e}"))
    })?;
    Ok(LoadedScenario { scenario, profile, path: base.path.clone() })
}

/// Reads a CSV design: a header naming every factor (by name or path), then rows of values; or,
/// as numpy's `np.savetxt` writes a SALib sample, rows of numbers alone (comma- or
/// whitespace-separated, `#` lines skipped), one column per factor in the sweep's order.
fn csv_points(path: &Path, factors: &[Factor]) -> Result<Vec<Vec<f64>>> {
    let text = read_file(path)?;
    let bad =
        |line: usize, message: String| Error::Parse { path: path.to_path_buf(), pos: Pos { line, col: 1 }, message };
    let first =
        text.lines().find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')).unwrap_or("").to_string();
    // np.savetxt's default delimiter is a space: read such a file as CSV.
    let text = if first.contains(',') {
        text
    } else {
        text.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(",")).collect::<Vec<_>>().join("\n")
    };
    let cells: Vec<&str> = first.split([',', ' ', '\t']).filter(|c| !c.trim().is_empty()).collect();
    let headerless = !cells.is_empty() && cells.iter().all(|c| c.trim().parse::<f64>().is_ok());
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .has_headers(!headerless)
        .from_reader(text.as_bytes());
    let (header, cols): (Vec<String>, Vec<usize>) = if headerless {
        if cells.len() != factors.len() {
            return Err(bad(
                1,
                format!(
                    "a header naming the factors, or exactly {} columns in the sweep's factor order (a headerless design, as np.savetxt writes one), not {}",
                    factors.len(),
                    cells.len()
                ),
            ));
        }
        (factors.iter().map(|f| f.label()).collect(), (0..factors.len()).collect())
    } else {
        let header: Vec<String> =
            rdr.headers().map_err(|e| bad(1, format!("a header row: {e}")))?.iter().map(String::from).collect();
        let cols = factors
            .iter()
            .map(|f| {
                header
                    .iter()
                    .position(|h| *h == f.label() || *h == f.path)
                    // The header is the design file's content: counted, never quoted (the file
                    // may be one the sweep names, not one the user did).
                    .ok_or_else(|| {
                        bad(
                            1,
                            format!(
                                "a column for factor `{}` (the header's {} columns name none)",
                                f.label(),
                                header.len()
                            ),
                        )
                    })
            })
            .collect::<Result<_>>()?;
        (header, cols)
    };
    let mut rows = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| bad(i + 2, format!("a row of values: {e}")))?;
        // The row's own line in the file (comment lines and a missing header counted right).
        let line = rec.position().map_or(i + 2, |p| p.line() as usize);
        let row = cols
            .iter()
            .map(|&c| {
                rec.get(c)
                    .and_then(|s| s.parse::<f64>().ok())
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| bad(line, format!("a finite number in column `{}`", header[c])))
            })
            .collect::<Result<Vec<f64>>>()?;
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(bad(2, "at least one design row".into()));
    }
    Ok(rows)
}

impl Sweep {
    /// Loads, checks and expands a sweep file; every design point's scenario is checked, and a
    /// factor that names no number, or a point outside a parameter's domain, is an error at that
    /// factor's line.
    pub fn load(path: &Path) -> Result<Sweep> {
        let text = read_file(path)?;
        Self::load_str(&text, path)
    }

    /// [`Self::load`] of `text` as if read from `path`.
    pub fn load_str(text: &str, path: &Path) -> Result<Sweep> {
        Self::load_with(text, path, None)
    }

    /// [`Self::load`] with every run also planned at each posterior draw of its base's
    /// stand-in ([`crate::study::predictive`]): the draw's parameters first, then the point's factors
    /// over them (a factor that sets a drawn parameter holds it at the factor's value). The
    /// draws' runs follow the fit's in the plan, so the fit's runs, their order and their
    /// analysis are the plain sweep's.
    pub fn load_ensemble(path: &Path, ensembles: &mut crate::study::predictive::Ensembles) -> Result<Sweep> {
        let text = read_file(path)?;
        Self::load_with(&text, path, Some(ensembles))
    }

    fn load_with(
        text: &str,
        path: &Path,
        mut ensembles: Option<&mut crate::study::predictive::Ensembles>,
    ) -> Result<Sweep> {
        let spec: SweepSpec = parse_ron(path, text)?;
        let invalid = |field: &str, expected: String| Error::Invalid {
            path: path.to_path_buf(),
            pos: locate_field(text, field),
            field: field.into(),
            expected,
        };
        let at_factor = |f: &Factor, expected: String| Error::Invalid {
            path: path.to_path_buf(),
            pos: factor_pos(text, &f.path),
            field: format!("factors[{}]", f.label()),
            expected,
        };
        spec.design.check(spec.factors.len()).map_err(|(f, e)| invalid(&f, e))?;
        for f in &spec.factors {
            f.check().map_err(|e| at_factor(f, e))?;
            // OAT steps every factor by multiples of its nominal value; a list of values would
            // be silently ignored, so it is refused.
            if matches!(spec.design, Design::Oat { .. }) && f.values.is_some() {
                return Err(at_factor(
                    f,
                    "a `range` or `relative` for an OAT design (it steps multiples of the nominal value; \
                     `values` lists levels for Factorial, Lhs, Morris or Sobol)"
                        .into(),
                ));
            }
            if spec.factors.iter().filter(|g| g.label() == f.label()).count() > 1 {
                return Err(at_factor(f, format!("distinct factor names (`{}` twice; set `name`)", f.label())));
            }
        }
        if spec.metrics.is_empty() {
            return Err(invalid("metrics", "at least one metric".into()));
        }
        if let Some(m) = spec.metrics.iter().enumerate().find(|(i, m)| spec.metrics[..*i].contains(m)).map(|x| x.1) {
            return Err(invalid("metrics", format!("distinct metrics, `{m}` twice")));
        }
        if let Some(a) = spec
            .arms
            .as_ref()
            .and_then(|arms| arms.iter().enumerate().find(|(i, a)| arms[..*i].contains(a)).map(|x| x.1.clone()))
        {
            return Err(invalid("arms", format!("distinct arm names, `{a}` twice")));
        }
        // The last round any metric reads (`mdsr@3` reads round 3).
        let needs = spec.metrics.iter().filter_map(|m| m.split_once('@')?.1.parse::<u32>().ok()).max().unwrap_or(0);
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let mut settings: Vec<SweepSetting> = spec.settings.clone();
        match (&spec.base, settings.is_empty()) {
            (Some(b), true) => settings.push(SweepSetting { name: String::new(), base: b.clone() }),
            (None, false) => {}
            (Some(_), false) => return Err(invalid("base", "either `base` or `settings`, not both".into())),
            (None, true) => return Err(invalid("settings", "a `base` scenario or at least one setting".into())),
        }
        let seeds: Vec<u64> = match (&spec.seeds, spec.replicates) {
            (Some(s), _) if s.is_empty() => return Err(invalid("seeds", "at least one seed".into())),
            (Some(s), _) => s.clone(),
            (None, Some(r)) if r == 0 || r > 100_000 => {
                return Err(invalid("replicates", format!("1 to 100000 replicates, got {r}")));
            }
            (None, r) => (1..=u64::from(r.unwrap_or(10))).collect(),
        };
        if let Some(t) = &spec.topologies
            && t.is_empty()
        {
            return Err(invalid("topologies", "at least one topology (omit it for each base's)".into()));
        }
        let d = spec.factors.len();
        // The plan's size before anything is expanded: a sweep too large to plan is refused.
        let n_points = match &spec.design {
            Design::Oat { steps } => 1 + d * steps.len(),
            Design::Factorial { levels } => (*levels as usize).saturating_pow(d as u32),
            Design::Lhs { samples } => *samples as usize,
            Design::Morris { trajectories, .. } => *trajectories as usize * (d + 1),
            Design::Sobol { samples } => *samples as usize * (d + 2),
            Design::Csv(_) => 1,
        };
        let cells = settings.len().max(1) * spec.topologies.as_ref().map_or(1, Vec::len);
        let total = n_points.saturating_mul(cells).saturating_mul(seeds.len());
        if n_points.saturating_mul(cells) > MAX_CONFIGURATIONS || total > MAX_RUNS {
            return Err(invalid(
                "design",
                format!(
                    "a sweep of at most {MAX_CONFIGURATIONS} configurations and {MAX_RUNS} runs; this one has {} configurations ({n_points} points × {cells} cells) and {total} runs — split it, or run fewer points or seeds",
                    n_points.saturating_mul(cells)
                ),
            ));
        }
        let design_points: Vec<Vec<Coord>> = match &spec.design {
            Design::Csv(file) => crate::files::load_referenced(path, Some(text), "design", Path::new(file), |p| {
                csv_points(p, &spec.factors)
            })?
            .into_iter()
            .map(|r| r.into_iter().map(Coord::Value).collect())
            .collect(),
            other => other.points(d, spec.design_seed).points,
        };
        let labels: Vec<String> = match &spec.design {
            Design::Oat { steps } => std::iter::once("nominal".to_string())
                .chain(spec.factors.iter().flat_map(|f| steps.iter().map(move |s| format!("{}×{s}", f.label()))))
                .collect(),
            Design::Csv(_) => (0..design_points.len()).map(|k| format!("row {}", k + 1)).collect(),
            other => other.points(d, spec.design_seed).labels,
        };
        // Unit coordinates, for the designs that have them (the others store none).
        let unit: Vec<Vec<f64>> = design_points
            .iter()
            .map(|p| p.iter().filter_map(|c| if let Coord::Unit(u) = c { Some(*u) } else { None }).collect())
            .collect();
        let mut factors: Vec<PlannedFactor> = spec
            .factors
            .iter()
            .map(|f| PlannedFactor {
                name: f.label(),
                path: f.path.clone(),
                nominal: Vec::new(),
                bounds: Vec::new(),
                integer: false,
            })
            .collect();
        let mut runs = Vec::new();
        let mut jobs = Vec::new();
        // The draws' runs and jobs, per draw, appended after the fit's.
        let mut draw_runs: Vec<Vec<(PlannedRun, Job)>> = Vec::new();
        let mut names = Vec::new();
        let mut flips = Vec::new();
        for (si, s) in settings.iter().enumerate() {
            let base_path = crate::files::referenced(path, &s.base).map_err(|e| invalid("base", e))?;
            let mut base = load(&base_path).map_err(|e| match crate::files::unreadable(&e, &base_path) {
                Some(expected) => invalid("base", format!("a base scenario: {expected}")),
                None => crate::files::unquoted(e),
            })?;
            let name = if s.name.is_empty() { base.scenario.name.clone() } else { s.name.clone() };
            if base.scenario.protocol.rounds < needs {
                return Err(invalid(
                    "metrics",
                    format!(
                        "metrics of the rounds the runs have: a metric reads round {needs}, {} runs {} round{}",
                        base_path.display(),
                        base.scenario.protocol.rounds,
                        if base.scenario.protocol.rounds == 1 { "" } else { "s" }
                    ),
                ));
            }
            names.push(name.clone());
            if let Some(wanted) = &spec.arms {
                let known: Vec<String> = base.scenario.arms.iter().map(|a| a.name.clone()).collect();
                if let Some(u) = wanted.iter().find(|w| !known.contains(w)) {
                    return Err(invalid(
                        "arms",
                        format!("arm names of {} ({}), not {u:?}", base_path.display(), known.join(", ")),
                    ));
                }
                base.scenario.arms.retain(|a| wanted.contains(&a.name));
            }
            let sv = serde_json::to_value(&base.scenario).expect("serializable");
            let pv = serde_json::to_value(&base.profile).expect("serializable");
            if let (Design::Oat { steps }, 0) = (&spec.design, si) {
                let examples = dir.join(spec.examples.clone().unwrap_or_else(|| PathBuf::from("../explain")));
                flips = output::flip_points(&spec.factors, steps, &sv, &examples);
            }
            for (f, pf) in spec.factors.iter().zip(factors.iter_mut()) {
                let (profile, sub) = factor::split_root(&f.path);
                let nominal = factor::read(if profile { &pv } else { &sv }, sub)
                    .map_err(|e| at_factor(f, format!("a path to a number of {} ({e})", base_path.display())))?;
                pf.nominal.push(nominal);
                pf.bounds.push(f.bounds(nominal));
                pf.integer = factor::is_integer(if profile { &pv } else { &sv }, sub);
            }
            let topologies = spec.topologies.clone().unwrap_or_else(|| vec![base.scenario.topology.clone()]);
            let draw_profiles: Vec<crate::agent::Profile> = match ensembles.as_deref_mut() {
                Some(e) => e.draws_of(&base)?.into_iter().map(|ls| ls.profile).collect(),
                None => Vec::new(),
            };
            if draw_runs.len() < draw_profiles.len() {
                draw_runs.resize_with(draw_profiles.len(), Vec::new);
            }
            for (pi, coords) in design_points.iter().enumerate() {
                let values: Vec<f64> = coords
                    .iter()
                    .zip(&spec.factors)
                    .zip(&factors)
                    .map(|((c, f), pf)| {
                        let v = match c {
                            Coord::Unit(u) => f.at_unit(*u, pf.nominal[si]),
                            Coord::Relative(r) => pf.nominal[si] * r,
                            Coord::Value(v) => *v,
                        };
                        // An integer field is simulated at the nearest integer
                        // (`factor::write`): record that value, not the design's.
                        if pf.integer { v.round() } else { v }
                    })
                    .collect();
                let mut replicate = 0;
                for topo in &topologies {
                    let mut cell = base.clone();
                    cell.scenario.topology = topo.clone();
                    let nominal: Vec<f64> = factors.iter().map(|f| f.nominal[si]).collect();
                    let ls = apply(&cell, &spec.factors, &values, &nominal).map_err(|(i, e)| {
                        at_factor(
                            &spec.factors[i],
                            format!("a value in the parameter's domain at point {pi} ({}): {e}", labels[pi]),
                        )
                    })?;
                    let base_hash = exec::scenario_hash(&ls);
                    let ls = std::sync::Arc::new(ls);
                    // The same point at each draw: the draw's profile, then the factors.
                    let mut at_draws = Vec::with_capacity(draw_profiles.len());
                    for (k, p) in draw_profiles.iter().enumerate() {
                        let mut dcell = cell.clone();
                        dcell.profile = p.clone();
                        let dls = apply(&dcell, &spec.factors, &values, &nominal).map_err(|(i, e)| {
                            at_factor(
                                &spec.factors[i],
                                format!(
                                    "a value in the parameter's domain at point {pi} ({}), draw {k}: {e}",
                                    labels[pi]
                                ),
                            )
                        })?;
                        let h = exec::scenario_hash(&dls);
                        at_draws.push((std::sync::Arc::new(dls), h));
                    }
                    for &seed in &seeds {
                        let job = Job::with_hash(ls.clone(), &base_hash, seed);
                        let run = PlannedRun {
                            id: format!("p{pi}-{name}-{}-s{seed}", topo.label()),
                            hash: job.hash.clone(),
                            point: pi,
                            setting: name.clone(),
                            topology: topo.label(),
                            seed,
                            replicate,
                            values: values.clone(),
                            draw: None,
                        };
                        for (k, (dls, h)) in at_draws.iter().enumerate() {
                            let djob = Job::with_hash(dls.clone(), h, seed).labelled(crate::study::predictive::LABEL);
                            let drun = PlannedRun {
                                id: format!("{}-d{k}", run.id),
                                hash: djob.hash.clone(),
                                draw: Some(k),
                                ..run.clone()
                            };
                            draw_runs[k].push((drun, djob));
                        }
                        runs.push(run);
                        jobs.push(job);
                        replicate += 1;
                    }
                }
            }
        }
        for (run, job) in draw_runs.into_iter().flatten() {
            runs.push(run);
            jobs.push(job);
        }
        let plan = Plan { spec, settings: names, factors, points: labels, unit, runs, dir, flips };
        Ok(Sweep { plan, jobs })
    }
}

/// Writes the plan (`plan.json`), so that `merge` and `--resume` know what the runs are.
pub fn write_plan(plan: &Plan, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_path_buf(), source })?;
    crate::files::write_atomic(
        &dir.join("plan.json"),
        &(serde_json::to_string_pretty(plan).expect("serializable") + "\n"),
    )
}

/// Reads a `plan.json`.
pub fn read_plan(dir: &Path) -> Result<Plan> {
    let p = dir.join("plan.json");
    let text = read_file(&p)?;
    serde_json::from_str(&text).map_err(|e| Error::Parse {
        path: p,
        pos: Pos { line: e.line(), col: e.column() },
        message: format!("expected a sweep plan: {e}"),
    })
}

/// Merges the finished runs of shard folders into `out`: every run of the plan must be in
/// exactly one folder (a run in two is an error, as is a missing one); then writes the outputs,
/// byte-identical to an unsharded run's.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<()> {
    let first = dirs
        .first()
        .ok_or_else(|| Error::Arg { field: "dirs".into(), expected: "at least one shard folder".into() })?;
    let plan = read_plan(first)?;
    for d in &dirs[1..] {
        if read_plan(d)? != plan {
            return Err(Error::Invalid {
                path: d.join("plan.json"),
                pos: Pos { line: 1, col: 1 },
                field: "plan".into(),
                expected: format!("the same plan as {}", first.join("plan.json").display()),
            });
        }
    }
    let mut hashes: Vec<&str> = plan.runs.iter().map(|r| r.hash.as_str()).collect();
    hashes.sort_unstable();
    hashes.dedup();
    let mut missing = Vec::new();
    for h in &hashes {
        let holders: Vec<&PathBuf> =
            dirs.iter().filter(|d| exec::runs_dir(d).join(format!("{h}.json")).exists()).collect();
        match holders.len() {
            0 => missing.push(h.to_string()),
            1 => {}
            _ => {
                return Err(Error::Invalid {
                    path: holders[1].clone(),
                    pos: Pos { line: 1, col: 1 },
                    field: "runs".into(),
                    expected: format!(
                        "each run in exactly one shard folder; run {h} is in {} and {}",
                        holders[0].display(),
                        holders[1].display()
                    ),
                });
            }
        }
    }
    if !missing.is_empty() {
        return Err(Error::Invalid {
            path: first.clone(),
            pos: Pos { line: 1, col: 1 },
            field: "runs".into(),
            expected: format!(
                "every run of the plan in one of the folders; {} of {} missing (first: {})",
                missing.len(),
                hashes.len(),
                missing[0]
            ),
        });
    }
    let runs = exec::runs_dir(out);
    std::fs::create_dir_all(&runs).map_err(|source| Error::Write { path: runs.clone(), source })?;
    for h in &hashes {
        let src =
            dirs.iter().map(|d| exec::runs_dir(d).join(format!("{h}.json"))).find(|p| p.exists()).expect("checked");
        let dst = runs.join(format!("{h}.json"));
        if src != dst {
            let text = read_file(&src)?;
            crate::files::write_atomic(&dst, &text)?;
        }
    }
    write_plan(&plan, out)?;
    let results = collect_plan(&plan, out)?;
    ensemble::finalize_with_draws(&plan, &results, out)
}

/// The results of every planned run from `dir`, in plan order.
pub fn collect_plan(plan: &Plan, dir: &Path) -> Result<Vec<exec::RunResult>> {
    let mut out = Vec::with_capacity(plan.runs.len());
    for r in &plan.runs {
        match exec::load_result(dir, &r.hash)? {
            Some(x) => out.push(x),
            None => {
                return Err(Error::Invalid {
                    path: dir.to_path_buf(),
                    pos: Pos { line: 1, col: 1 },
                    field: "runs".into(),
                    expected: format!("the result of run {} ({}); rerun to finish the sweep", r.id, r.hash),
                });
            }
        }
    }
    Ok(out)
}
