//! What a finished sweep writes: the long-format runs, SALib's problem file, the analysis of
//! every (setting, arm, metric), the summary and the design's figures. Everything is a function
//! of the plan and the stored results, so a resumed, sharded or merged sweep writes the same
//! bytes as one uninterrupted run.

use super::design::morris_steps;
use super::exec::RunResult;
use super::stats::{Estimate, MorrisIndex, SobolIndex, estimate, mean, morris, paired, sobol};
use super::{Plan, design::Design};
use crate::error::{Error, Result};
use crate::files::write_atomic;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// One factor's OAT effects: per step, the factor's value and the paired effect (point −
/// nominal, percentage points) with its interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OatFactor {
    /// Factor.
    pub name: String,
    /// Its nominal value in this setting.
    pub nominal: f64,
    /// (step, value, effect).
    pub steps: Vec<(f64, f64, Estimate)>,
}

/// The analysis of one (setting, arm, metric).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Result_ {
    /// One at a time: the nominal value and each factor's effects.
    Oat {
        /// The metric at the nominal point.
        nominal: Estimate,
        /// Per factor.
        factors: Vec<OatFactor>,
    },
    /// Morris screening (effects per whole range of the factor, percentage points).
    Morris {
        /// Per factor.
        factors: Vec<(String, MorrisIndex)>,
    },
    /// Sobol indices.
    Sobol {
        /// Per factor.
        factors: Vec<(String, SobolIndex)>,
    },
    /// Every point's mean with its interval (factorial, Latin hypercube, CSV).
    Points {
        /// (label, factor values, estimate).
        points: Vec<(String, Vec<f64>, Estimate)>,
    },
}

/// One section of the analysis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Section {
    /// Setting.
    pub setting: String,
    /// Arm.
    pub arm: String,
    /// Metric (percent).
    pub metric: String,
    /// The result.
    pub result: Result_,
}

/// A gate decision of a worked example that a one-at-a-time step changes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlipPoint {
    /// Factor.
    pub factor: String,
    /// The smallest step (by distance from 1) at which a decision changes, if any.
    pub step: Option<f64>,
    /// The example and the decision that changes.
    pub what: String,
}

/// The responses of (setting, arm, metric): per point, per replicate (percent).
type Responses = BTreeMap<(String, String, String), Vec<Vec<f64>>>;
/// Each setting's arm names, in first-seen order.
type SettingArms = Vec<(String, Vec<String>)>;

fn responses(plan: &Plan, results: &[RunResult]) -> Result<(Responses, SettingArms)> {
    let mut out: Responses = BTreeMap::new();
    let mut arms: Vec<(String, Vec<String>)> = Vec::new();
    let npoints = plan.points.len();
    for (run, res) in plan.runs.iter().zip(results) {
        // Runs at posterior draws are summarised apart (super::ensemble).
        if run.draw.is_some() {
            continue;
        }
        if !arms.iter().any(|(s, _)| *s == run.setting) {
            arms.push((run.setting.clone(), res.arms.iter().map(|a| a.arm.clone()).collect()));
        }
        for a in &res.arms {
            for m in &plan.spec.metrics {
                let Some(v) = a.metric(m) else {
                    return Err(Error::Invalid {
                        path: plan.dir.join(format!("{}.ron", plan.spec.name)),
                        pos: crate::error::Pos { line: 1, col: 1 },
                        field: "metrics".into(),
                        expected: format!("metrics the runs have (`{m}` is not one of run {})", run.id),
                    });
                };
                let key = (run.setting.clone(), a.arm.clone(), m.clone());
                let slot = out.entry(key).or_insert_with(|| vec![Vec::new(); npoints]);
                let reps = &mut slot[run.point];
                if reps.len() <= run.replicate {
                    reps.resize(run.replicate + 1, f64::NAN);
                }
                reps[run.replicate] = 100.0 * v;
            }
        }
    }
    Ok((out, arms))
}

/// The analysis of every (setting, arm, metric) of a finished sweep.
pub fn analyse(plan: &Plan, results: &[RunResult]) -> Result<Vec<Section>> {
    let (resp, arms) = responses(plan, results)?;
    let b = plan.spec.bootstrap as usize;
    let seed = plan.spec.design_seed;
    let d = plan.factors.len();
    let mut sections = Vec::new();
    for (si, (setting, arm_names)) in arms.iter().enumerate() {
        for arm in arm_names {
            for metric in &plan.spec.metrics {
                let y = &resp[&(setting.clone(), arm.clone(), metric.clone())];
                let means: Vec<f64> = y.iter().map(|r| mean(r)).collect();
                let tag = seed ^ (sections.len() as u64).wrapping_mul(0x9e37_79b9);
                let result = match &plan.spec.design {
                    Design::Oat { steps } => {
                        let factors = plan
                            .factors
                            .iter()
                            .enumerate()
                            .map(|(i, f)| OatFactor {
                                name: f.name.clone(),
                                nominal: f.nominal[si],
                                steps: steps
                                    .iter()
                                    .enumerate()
                                    .map(|(j, s)| {
                                        let p = 1 + i * steps.len() + j;
                                        (*s, f.nominal[si] * s, paired(&y[0], &y[p], b, tag ^ p as u64))
                                    })
                                    .collect(),
                            })
                            .collect();
                        Result_::Oat { nominal: estimate(&y[0], b, tag), factors }
                    }
                    Design::Morris { .. } => {
                        let idx = morris(&morris_steps(&plan.unit, d), &means, d, b, tag);
                        Result_::Morris { factors: plan.factors.iter().map(|f| f.name.clone()).zip(idx).collect() }
                    }
                    Design::Sobol { samples } => {
                        let idx = sobol(&means, *samples as usize, d, b, tag);
                        Result_::Sobol { factors: plan.factors.iter().map(|f| f.name.clone()).zip(idx).collect() }
                    }
                    _ => {
                        let mut pts = Vec::new();
                        for (p, label) in plan.points.iter().enumerate() {
                            let values = plan
                                .runs
                                .iter()
                                .find(|r| r.point == p && r.setting == *setting)
                                .map(|r| r.values.clone());
                            pts.push((label.clone(), values.unwrap_or_default(), estimate(&y[p], b, tag ^ p as u64)));
                        }
                        Result_::Points { points: pts }
                    }
                };
                sections.push(Section { setting: setting.clone(), arm: arm.clone(), metric: metric.clone(), result });
            }
        }
    }
    Ok(sections)
}

fn fmt_est(e: &Estimate) -> String {
    format!("{:+.2} [{:+.2}, {:+.2}]", e.mean, e.lo, e.hi)
}

pub(crate) fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

fn num(x: f64) -> String {
    if x == x.trunc() && x.abs() < 1e15 { format!("{x:.1}") } else { format!("{x}") }
}

/// A value as a reader wants it in a table: at most six significant digits.
fn short(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return num(x);
    }
    let digits = (5 - x.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let s = format!("{x:.digits$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if s.contains('.') { s } else { format!("{s}.0") }
}

/// Writes every output of a finished sweep into `dir`.
pub fn finalize(plan: &Plan, results: &[RunResult], dir: &Path) -> Result<()> {
    let spec = &plan.spec;
    // Long format: one line per run and arm.
    let mut metric_names: Vec<String> = Vec::new();
    let max_rounds = results.iter().flat_map(|r| r.arms.iter().map(|a| a.rounds.len())).max().unwrap_or(0);
    let round_keys: Vec<String> = results
        .first()
        .and_then(|r| r.arms.first())
        .and_then(|a| a.rounds.first())
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    for k in 1..=max_rounds {
        for m in &round_keys {
            metric_names.push(format!("{m}@{k}"));
        }
    }
    let scalar_keys: Vec<String> =
        results.first().and_then(|r| r.arms.first()).map(|a| a.scalars.keys().cloned().collect()).unwrap_or_default();
    metric_names.extend(scalar_keys);
    let factor_names: Vec<String> = plan.factors.iter().map(|f| f.name.clone()).collect();
    let mut csv = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> =
        ["run", "design", "point", "point_label", "replicate", "seed", "setting", "topology", "arm", "guard"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    header.extend(factor_names.iter().cloned());
    header.extend(metric_names.iter().cloned());
    header.extend(["trace_hash", "config_hash", "memlink"].iter().map(|s| s.to_string()));
    let csv_err =
        |e: csv::Error| Error::Write { path: dir.join("runs.csv"), source: std::io::Error::other(e.to_string()) };
    csv.write_record(&header).map_err(csv_err)?;
    let mut jsonl = String::new();
    for (run, res) in plan.runs.iter().zip(results) {
        for a in &res.arms {
            let mut row: Vec<String> = vec![
                run.id.clone(),
                spec.design.name().into(),
                run.point.to_string(),
                plan.points[run.point].clone(),
                run.replicate.to_string(),
                run.seed.to_string(),
                run.setting.clone(),
                run.topology.clone(),
                a.arm.clone(),
                a.guard.clone(),
            ];
            row.extend(run.values.iter().map(|v| num(*v)));
            let mut obj = serde_json::Map::new();
            for (k, v) in header.iter().zip(&row) {
                obj.insert(k.clone(), Value::String(v.clone()));
            }
            for (k, v) in factor_names.iter().zip(&run.values) {
                obj.insert(k.clone(), serde_json::json!(v));
            }
            for m in &metric_names {
                let v = a.metric(m);
                row.push(v.map(num).unwrap_or_default());
                obj.insert(m.clone(), v.map_or(Value::Null, |x| serde_json::json!(x)));
            }
            row.extend([a.trace_hash.clone(), res.hash.clone(), res.memlink.clone()]);
            obj.insert("trace_hash".into(), Value::String(a.trace_hash.clone()));
            obj.insert("config_hash".into(), Value::String(res.hash.clone()));
            obj.insert("memlink".into(), Value::String(res.memlink.clone()));
            obj.insert("point".into(), serde_json::json!(run.point));
            obj.insert("replicate".into(), serde_json::json!(run.replicate));
            obj.insert("seed".into(), serde_json::json!(run.seed));
            csv.write_record(&row).map_err(csv_err)?;
            jsonl.push_str(&serde_json::to_string(&Value::Object(obj)).expect("serializable"));
            jsonl.push('\n');
        }
    }
    let csv_bytes = csv
        .into_inner()
        .map_err(|e| Error::Write { path: dir.join("runs.csv"), source: std::io::Error::other(e.to_string()) })?;
    write_atomic(&dir.join("runs.csv"), String::from_utf8_lossy(&csv_bytes).as_bytes())?;
    write_atomic(&dir.join("runs.jsonl"), &jsonl)?;
    // The same runs in the tidy long format, one row per metric and round.
    let mut tidy = String::from(crate::tidy::HEADER);
    for (run, res) in plan.runs.iter().zip(results) {
        for a in &res.arms {
            let key = crate::tidy::Key {
                study: "sweep",
                run: &run.id,
                setting: &run.setting,
                backbone: "",
                topology: &run.topology,
                seed: run.seed,
                draw: run.draw,
                arm: &a.arm,
            };
            tidy.push_str(&a.tidy(&key));
        }
    }
    write_atomic(&dir.join("tidy.csv"), tidy)?;
    // SALib's problem definition (bounds of the first setting). SALib knows only continuous
    // ranges, so a factor that takes discrete values says so in keys SALib ignores:
    // `discrete` (a factor's list of levels) and `integer` (fields simulated at the nearest
    // integer), present only when some factor is one.
    let mut problem = serde_json::json!({
        "num_vars": plan.factors.len(),
        "names": factor_names,
        "bounds": plan.factors.iter().map(|f| vec![f.bounds[0].0, f.bounds[0].1]).collect::<Vec<_>>(),
    });
    let discrete: serde_json::Map<String, Value> =
        spec.factors.iter().filter_map(|f| f.values.as_ref().map(|v| (f.label(), serde_json::json!(v)))).collect();
    if !discrete.is_empty() {
        problem["discrete"] = Value::Object(discrete);
    }
    let integer: Vec<&str> = plan.factors.iter().filter(|f| f.integer).map(|f| f.name.as_str()).collect();
    if !integer.is_empty() {
        problem["integer"] = serde_json::json!(integer);
    }
    write_atomic(&dir.join("problem.json"), &(serde_json::to_string_pretty(&problem).expect("json") + "\n"))?;
    write_salib(plan, results, dir)?;
    let sections = analyse(plan, results)?;
    write_atomic(&dir.join("analysis.json"), &(serde_json::to_string_pretty(&sections).expect("json") + "\n"))?;
    let figures = figures(plan, &sections, results, dir)?;
    write_atomic(&dir.join("summary.md"), summary(plan, &sections, &figures))?;
    Ok(())
}

/// The design points in SALib's sample order, for the designs SALib analyses: Sobol's Saltelli
/// rows per base sample (A_i, AB_1i … AB_Di, B_i, as `SALib.sample.saltelli` with
/// `calc_second_order=False` lays them out; memlink keeps the N rows of A, then of B, then of
/// each AB_j), and Morris's trajectories (the same order in both).
pub fn salib_order(design: &Design, points: usize, d: usize) -> Option<Vec<usize>> {
    match design {
        Design::Sobol { samples } => {
            let n = *samples as usize;
            Some(
                (0..n)
                    .flat_map(|i| std::iter::once(i).chain((0..d).map(move |j| (2 + j) * n + i)).chain([n + i]))
                    .collect(),
            )
        }
        Design::Morris { .. } => Some((0..points).collect()),
        _ => None,
    }
}

/// SALib's files of a Morris or Sobol sweep, read by SALib as they are: `salib-problem.txt` (its
/// parameter file: name, lower and upper bound per line, of the first setting),
/// `salib-X.txt` (the design's values in SALib's sample order, the first setting's) and
/// `salib-Y.txt` (one column per setting, arm and metric, named in its `#` header line; each
/// row the design point's mean over replicates, in percent). For example
/// `salib analyze sobol -p salib-problem.txt -Y salib-Y.txt -c 0 --max-order 1`.
fn write_salib(plan: &Plan, results: &[RunResult], dir: &Path) -> Result<()> {
    let d = plan.factors.len();
    let Some(order) = salib_order(&plan.spec.design, plan.points.len(), d) else { return Ok(()) };
    let first = plan.settings.first().cloned().unwrap_or_default();
    let mut problem = String::new();
    for f in &plan.factors {
        problem.push_str(&format!(
            "{} {} {}\n",
            f.name.replace(char::is_whitespace, "_"),
            f.bounds[0].0,
            f.bounds[0].1
        ));
    }
    let mut x = String::new();
    for &p in &order {
        let values =
            plan.runs.iter().find(|r| r.point == p && r.setting == first).map(|r| r.values.clone()).unwrap_or_default();
        x.push_str(&values.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(" "));
        x.push('\n');
    }
    let (resp, arms) = responses(plan, results)?;
    let mut columns: Vec<(String, Vec<f64>)> = Vec::new();
    for (setting, arm_names) in &arms {
        for arm in arm_names {
            for metric in &plan.spec.metrics {
                let y = &resp[&(setting.clone(), arm.clone(), metric.clone())];
                let means: Vec<f64> = y.iter().map(|r| mean(r)).collect();
                columns.push((format!("{setting}/{arm}/{metric}").replace(char::is_whitespace, "_"), means));
            }
        }
    }
    let mut ytext = format!("# {}\n", columns.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(" "));
    for &p in &order {
        ytext.push_str(&columns.iter().map(|(_, v)| format!("{:?}", v[p])).collect::<Vec<_>>().join(" "));
        ytext.push('\n');
    }
    write_atomic(&dir.join("salib-problem.txt"), problem)?;
    write_atomic(&dir.join("salib-X.txt"), x)?;
    write_atomic(&dir.join("salib-Y.txt"), ytext)
}

fn focus_arm(plan: &Plan, sections: &[Section], setting: &str) -> Option<String> {
    let arms: Vec<&str> = sections.iter().filter(|s| s.setting == setting).map(|s| s.arm.as_str()).collect();
    match &plan.spec.focus {
        Some(f) if arms.contains(&f.as_str()) => Some(f.clone()),
        _ => arms.last().map(|s| s.to_string()),
    }
}

/// Draws the design's figures; returns their file names.
fn figures(plan: &Plan, sections: &[Section], results: &[RunResult], dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for setting in &plan.settings {
        // Every arm's figures, one file each (`<design>-<setting>-<arm>-<metric>.svg`).
        for s in sections.iter().filter(|s| s.setting == *setting) {
            let arm = &s.arm;
            let name = format!("{}-{}-{}-{}.svg", plan.spec.design.name(), slug(setting), slug(arm), slug(&s.metric));
            let path = dir.join(&name);
            let title = format!("{}: {} {} ({})", plan.spec.name, arm, s.metric, setting);
            match &s.result {
                Result_::Oat { factors, .. } => {
                    let bars: Vec<crate::report::plot::TornadoBar> = factors
                        .iter()
                        .map(|f| {
                            let lo = f.steps.iter().min_by(|a, b| a.0.total_cmp(&b.0)).expect("steps");
                            let hi = f.steps.iter().max_by(|a, b| a.0.total_cmp(&b.0)).expect("steps");
                            crate::report::plot::TornadoBar {
                                label: f.name.clone(),
                                low: (lo.2.mean, lo.2.lo, lo.2.hi),
                                high: (hi.2.mean, hi.2.lo, hi.2.hi),
                            }
                        })
                        .collect();
                    let steps =
                        factors.first().map(|f| f.steps.iter().map(|s| s.0).collect::<Vec<_>>()).unwrap_or_default();
                    let lo = steps.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = steps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    crate::report::plot::tornado(
                        &path,
                        &title,
                        &format!("change in {} (percentage points, 95% CI)", s.metric),
                        &format!("×{lo}"),
                        &format!("×{hi}"),
                        &bars,
                    )?;
                }
                Result_::Morris { factors } => {
                    let pts: Vec<(String, f64, f64)> =
                        factors.iter().map(|(n, m)| (n.clone(), m.mu_star, m.sigma)).collect();
                    crate::report::plot::scatter(&path, &title, "μ* (points per range)", "σ", &pts)?;
                }
                Result_::Sobol { factors } => {
                    let bars: Vec<crate::report::plot::SobolBar> =
                        factors.iter().map(|(n, x)| (n.clone(), x.s1, x.s1_ci, x.st, x.st_ci)).collect();
                    crate::report::plot::sobol_bars(&path, &title, &bars)?;
                }
                Result_::Points { points } => {
                    if plan.factors.len() < 2 || !matches!(plan.spec.design, Design::Factorial { .. }) {
                        continue;
                    }
                    let levels = |i: usize| {
                        let mut v: Vec<f64> = points.iter().map(|p| p.1[i]).collect();
                        v.sort_by(f64::total_cmp);
                        v.dedup();
                        v
                    };
                    let (xs, ys) = (levels(1), levels(0));
                    let mut grid = vec![vec![Vec::new(); xs.len()]; ys.len()];
                    for p in points {
                        let xi = xs.iter().position(|v| *v == p.1[1]).unwrap_or(0);
                        let yi = ys.iter().position(|v| *v == p.1[0]).unwrap_or(0);
                        grid[yi][xi].push(p.2.mean);
                    }
                    let values: Vec<Vec<f64>> = grid.iter().map(|r| r.iter().map(|c| mean(c)).collect()).collect();
                    let xl: Vec<String> = xs.iter().map(|v| format!("{v:.3}")).collect();
                    let yl: Vec<String> = ys.iter().map(|v| format!("{v:.3}")).collect();
                    let name = format!("heatmap-{}-{}-{}.svg", slug(setting), slug(arm), slug(&s.metric));
                    crate::report::plot::heatmap(
                        &dir.join(&name),
                        &title,
                        (&plan.factors[1].name, &xl),
                        (&plan.factors[0].name, &yl),
                        &values,
                    )?;
                    out.push(name);
                    continue;
                }
            }
            out.push(name);
        }
        // Per-round curves and the exposure CDF at the first point (the nominal one for OAT).
        for base in ["mdsr", "rda"] {
            let name = format!("rounds-{}-{base}.svg", slug(setting));
            draw_rounds(plan, results, setting, base, &dir.join(&name))?;
            out.push(name);
        }
        let name = format!("exposure-{}.svg", slug(setting));
        if draw_exposure(plan, results, setting, &dir.join(&name))? {
            out.push(name);
        }
    }
    Ok(out)
}

fn first_point<'a>(
    plan: &'a Plan,
    results: &'a [RunResult],
    setting: &str,
) -> Vec<(&'a super::PlannedRun, &'a RunResult)> {
    plan.runs.iter().zip(results).filter(|(r, _)| r.point == 0 && r.setting == setting).collect()
}

/// Each arm's `base` metric per round at the first point, with 95% intervals over replicates.
fn draw_rounds(plan: &Plan, results: &[RunResult], setting: &str, base: &str, path: &Path) -> Result<()> {
    let runs = first_point(plan, results, setting);
    let arms: Vec<String> =
        runs.first().map(|(_, r)| r.arms.iter().map(|a| a.arm.clone()).collect()).unwrap_or_default();
    let series: Vec<crate::report::plot::Curve> = arms
        .iter()
        .map(|arm| {
            let rounds =
                runs.first().and_then(|(_, r)| r.arms.iter().find(|a| a.arm == *arm)).map_or(0, |a| a.rounds.len());
            let pts = (1..=rounds)
                .map(|k| {
                    let v: Vec<f64> = runs
                        .iter()
                        .filter_map(|(_, r)| {
                            r.arms.iter().find(|a| a.arm == *arm).and_then(|a| a.metric(&format!("{base}@{k}")))
                        })
                        .map(|x| 100.0 * x)
                        .collect();
                    let e = estimate(&v, plan.spec.bootstrap as usize, plan.spec.design_seed ^ k as u64);
                    (k as f64, e.mean, e.lo, e.hi)
                })
                .collect();
            (arm.clone(), pts)
        })
        .collect();
    crate::report::plot::curves(
        path,
        &format!("{}: {} per round at {} ({setting})", plan.spec.name, base.to_uppercase(), plan.points[0]),
        &format!("{} (%)", base.to_uppercase()),
        &series,
    )
}

/// Each arm's time to a benign agent's first exposure at the first point (the deciles of every
/// replicate pooled); false when no agent was exposed in any run.
fn draw_exposure(plan: &Plan, results: &[RunResult], setting: &str, path: &Path) -> Result<bool> {
    let runs = first_point(plan, results, setting);
    let arms: Vec<String> =
        runs.first().map(|(_, r)| r.arms.iter().map(|a| a.arm.clone()).collect()).unwrap_or_default();
    let cdf: Vec<(String, Vec<f64>)> = arms
        .iter()
        .map(|arm| {
            let xs = runs
                .iter()
                .filter_map(|(_, r)| r.arms.iter().find(|a| a.arm == *arm))
                .flat_map(|a| a.exposure_deciles.iter().map(|x| *x as f64))
                .collect();
            (arm.clone(), xs)
        })
        .collect();
    if cdf.iter().all(|c| c.1.is_empty()) {
        return Ok(false);
    }
    crate::report::plot::cdf(
        path,
        &format!("{}: time to a benign agent's first exposure ({setting})", plan.spec.name),
        "ticks from the run's start (deciles of each replicate, over the agents ever exposed; never-exposed agents are censored, not shown)",
        &cdf,
    )?;
    Ok(true)
}

fn summary(plan: &Plan, sections: &[Section], figures: &[String]) -> String {
    let spec = &plan.spec;
    let distinct: std::collections::BTreeSet<&str> = plan.runs.iter().map(|r| r.hash.as_str()).collect();
    let mut s = format!(
        "<!-- Generated by memlink sweep; do not edit. -->\n\n# Sweep `{}`\n\nDesign **{}** over {} factor(s): {} point(s) × {} setting(s) × topologies × seeds = {} runs ({} distinct configurations). \
         Every point runs the same seeds, so effects are paired differences (common random numbers). Metrics are percentages. \
         Every arm has its tables and figures. Intervals are 95%: percentile bootstraps for means and OAT effects, and SALib's \
         estimate ± z₀.₉₇₅·sd over bootstrap resamples for Morris and Sobol indices ({} resamples, seeded).\n\n",
        spec.name,
        spec.design.name(),
        plan.factors.len(),
        plan.points.len(),
        plan.settings.len(),
        plan.runs.len(),
        distinct.len(),
        spec.bootstrap
    );
    s.push_str("| factor | path | nominal | range |\n|---|---|---|---|\n");
    for f in &plan.factors {
        s.push_str(&format!(
            "| {} | `{}` | {} | [{}, {}] |\n",
            f.name,
            f.path,
            f.nominal.iter().map(|x| short(*x)).collect::<Vec<_>>().join(" / "),
            short(f.bounds[0].0),
            short(f.bounds[0].1)
        ));
    }
    for setting in &plan.settings {
        s.push_str(&format!("\n## {setting}\n"));
        for sec in sections.iter().filter(|x| x.setting == *setting) {
            match &sec.result {
                Result_::Oat { nominal, factors } => {
                    s.push_str(&format!(
                        "\n### {} — {}: nominal {:.2} [{:.2}, {:.2}]\n\n",
                        sec.arm, sec.metric, nominal.mean, nominal.lo, nominal.hi
                    ));
                    let steps: Vec<f64> =
                        factors.first().map(|f| f.steps.iter().map(|x| x.0).collect()).unwrap_or_default();
                    s.push_str(&format!(
                        "| factor | nominal | {} | largest |Δ| |\n|---|---|{}---|\n",
                        steps.iter().map(|x| format!("×{x}")).collect::<Vec<_>>().join(" | "),
                        "---|".repeat(steps.len())
                    ));
                    let mut rows: Vec<&OatFactor> = factors.iter().collect();
                    let big = |f: &OatFactor| f.steps.iter().map(|x| x.2.mean.abs()).fold(0.0, f64::max);
                    rows.sort_by(|a, b| big(b).total_cmp(&big(a)).then(a.name.cmp(&b.name)));
                    for f in rows {
                        s.push_str(&format!(
                            "| {} | {} | {} | {:.2} |\n",
                            f.name,
                            short(f.nominal),
                            f.steps.iter().map(|x| fmt_est(&x.2)).collect::<Vec<_>>().join(" | "),
                            big(f)
                        ));
                    }
                }
                Result_::Morris { factors } => {
                    s.push_str(&format!("\n### {} — {} (Morris, per whole range)\n\n| factor | μ* [95% CI] | μ | σ |\n|---|---|---|---|\n", sec.arm, sec.metric));
                    let mut rows: Vec<&(String, MorrisIndex)> = factors.iter().collect();
                    rows.sort_by(|a, b| b.1.mu_star.total_cmp(&a.1.mu_star).then(a.0.cmp(&b.0)));
                    for (n, m) in rows {
                        s.push_str(&format!(
                            "| {n} | {:.2} [{:.2}, {:.2}] | {:+.2} | {:.2} |\n",
                            m.mu_star, m.mu_star_ci.0, m.mu_star_ci.1, m.mu, m.sigma
                        ));
                    }
                }
                Result_::Sobol { factors } => {
                    s.push_str(&format!(
                        "\n### {} — {} (Sobol)\n\n| factor | S1 [95% CI] | ST [95% CI] |\n|---|---|---|\n",
                        sec.arm, sec.metric
                    ));
                    for (n, x) in factors {
                        s.push_str(&format!(
                            "| {n} | {:.3} [{:.3}, {:.3}] | {:.3} [{:.3}, {:.3}] |\n",
                            x.s1, x.s1_ci.0, x.s1_ci.1, x.st, x.st_ci.0, x.st_ci.1
                        ));
                    }
                }
                Result_::Points { points } => {
                    s.push_str(&format!(
                        "\n### {} — {}\n\n| point | {} | mean [95% CI] |\n|---|{}---|\n",
                        sec.arm,
                        sec.metric,
                        plan.factors.iter().map(|f| f.name.clone()).collect::<Vec<_>>().join(" | "),
                        "---|".repeat(plan.factors.len())
                    ));
                    for (label, values, e) in points {
                        s.push_str(&format!(
                            "| {label} | {} | {:.2} [{:.2}, {:.2}] |\n",
                            values.iter().map(|v| short(*v)).collect::<Vec<_>>().join(" | "),
                            e.mean,
                            e.lo,
                            e.hi
                        ));
                    }
                }
            }
        }
    }
    if !plan.flips.is_empty() {
        s.push_str("\n## Flip points of the worked examples\n\nThe smallest one-at-a-time step (closest to ×1) at which a gate decision of a bundled worked example (`scenarios/explain/`) changes.\n\n| factor | flip step | what changes |\n|---|---|---|\n");
        for f in &plan.flips {
            s.push_str(&format!(
                "| {} | {} | {} |\n",
                f.factor,
                f.step.map(|x| format!("×{x}")).unwrap_or_else(|| "none".into()),
                f.what
            ));
        }
    }
    if !figures.is_empty() {
        s.push_str("\n## Figures\n\n");
        for f in figures {
            s.push_str(&format!("- [{f}]({f})\n"));
        }
    }
    s
}

/// OAT flip points: for each factor inside a MAPLE-Guard arm's configuration, the smallest step
/// at which a decision of a worked example changes (write, promotion, each read's firewall, the
/// broker).
pub fn flip_points(
    factors: &[super::factor::Factor],
    steps: &[f64],
    base_scenario: &Value,
    examples: &Path,
) -> Vec<FlipPoint> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(examples)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == "ron")).collect()
        })
        .unwrap_or_default();
    files.sort();
    let items: Vec<(String, crate::study::explain::ExplainInput)> = files
        .iter()
        .filter_map(|p| {
            let name = p.file_stem()?.to_str()?.to_string();
            crate::study::explain::ExplainInput::load(p).ok().map(|i| (name, i))
        })
        .collect();
    if items.is_empty() {
        return Vec::new();
    }
    let decisions = |i: &crate::study::explain::ExplainInput| -> Vec<String> {
        let e = crate::study::explain::explain(i);
        let mut v = vec![
            format!("write {:?}", e.write.map(|d| d.reason)),
            format!("promotion {:?}", e.promotion.map(|d| d.reason)),
        ];
        v.extend(e.reads.iter().enumerate().map(|(k, r)| format!("read {k} {}", r.decision.reason)));
        v.extend(e.broker.iter().enumerate().map(|(k, b)| format!("broker {k} {}", b.reason)));
        v
    };
    let mut order: Vec<f64> = steps.to_vec();
    order.sort_by(|a, b| (a - 1.0).abs().total_cmp(&(b - 1.0).abs()).then(a.total_cmp(b)));
    let mut out = Vec::new();
    for f in factors {
        // `arms[X].guard.<MAPLE path>` (the variant may be named or implied).
        let Some(rest) = f.path.strip_prefix("arms[") else { continue };
        let Some((arm, sub)) = rest.split_once("].guard.") else { continue };
        let sub = sub.strip_prefix("Maple.").unwrap_or(sub);
        let mut scenario = base_scenario.clone();
        let Ok(guard) = super::factor::locate(&mut scenario, &format!("arms[{arm}].guard")) else { continue };
        let Some(cfg) = guard.get("Maple").cloned() else { continue };
        let Ok(nominal) = super::factor::read(&cfg, sub) else { continue };
        let mut found =
            FlipPoint { factor: f.label(), step: None, what: "no decision changes within the steps".into() };
        'steps: for &s in &order {
            let mut wrapped = serde_json::json!({ "cfg": cfg.clone() });
            let p = format!("cfg.{sub}");
            if super::factor::write(&mut wrapped, &p, nominal * s).is_err()
                || super::factor::renormalise_weights(&mut wrapped, std::slice::from_ref(&p)).is_err()
            {
                continue;
            }
            let Ok(cfg2) = serde_json::from_value::<crate::guard::maple::MapleConfig>(wrapped["cfg"].clone()) else {
                continue;
            };
            if cfg2.validate().is_err() {
                continue;
            }
            for (name, item) in &items {
                let mut base = item.clone();
                let nominal_cfg: Option<crate::guard::maple::MapleConfig> = serde_json::from_value(cfg.clone()).ok();
                base.config = nominal_cfg;
                let before = decisions(&base);
                let mut moved = item.clone();
                moved.config = Some(cfg2.clone());
                let after = decisions(&moved);
                if let Some((a, b)) = before.iter().zip(&after).find(|(a, b)| a != b) {
                    found = FlipPoint { factor: f.label(), step: Some(s), what: format!("{name}: {a} → {b}") };
                    break 'steps;
                }
            }
        }
        out.push(found);
    }
    out
}

pub(crate) fn plot_err(path: &Path, field: &str, expected: String) -> Error {
    Error::Invalid {
        path: path.to_path_buf(),
        pos: crate::error::Pos { line: 1, col: 1 },
        field: field.into(),
        expected,
    }
}

/// `memlink plot` on a sweep's output folder: one figure; returns its path. (A grid's
/// results file is drawn by `crate::study::grid::figures::plot`.)
pub fn plot_command(
    results: &Path,
    kind: &str,
    metric: Option<&str>,
    setting: Option<&str>,
    arm: Option<&str>,
    out: Option<&Path>,
) -> Result<std::path::PathBuf> {
    let plan = super::read_plan(results)?;
    let res = super::collect_plan(&plan, results)?;
    let sections = analyse(&plan, &res)?;
    let setting = setting.map(String::from).or_else(|| plan.settings.first().cloned()).unwrap_or_default();
    let arm = arm.map(String::from).or_else(|| focus_arm(&plan, &sections, &setting)).unwrap_or_default();
    // A named arm or setting the sweep does not have is the option's error, listing the choices.
    let arms: Vec<&str> = sections.iter().filter(|s| s.setting == setting).map(|s| s.arm.as_str()).collect();
    if !arms.contains(&arm.as_str()) {
        let mut known: Vec<&str> = arms.clone();
        known.dedup();
        return Err(Error::Arg {
            field: if arms.is_empty() { "--setting".into() } else { "--arm".into() },
            expected: if arms.is_empty() {
                format!("a setting of this sweep ({}), not `{setting}`", plan.settings.join(", "))
            } else {
                format!("an arm of this sweep ({}), not `{arm}`", known.join(", "))
            },
        });
    }
    let metric = metric.map(String::from).unwrap_or_else(|| plan.spec.metrics[0].clone());
    let file = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| results.join(format!("{kind}-{}-{}.svg", slug(&setting), slug(&metric))));
    let title = format!("{}: {arm} {metric} ({setting})", plan.spec.name);
    let sec = sections.iter().find(|s| s.setting == setting && s.arm == arm && s.metric == metric);
    match (kind, sec.map(|s| &s.result)) {
        ("tornado", Some(Result_::Oat { factors, .. })) => {
            let bars: Vec<crate::report::plot::TornadoBar> = factors
                .iter()
                .map(|f| {
                    let lo = f.steps.first().expect("steps");
                    let hi = f.steps.last().expect("steps");
                    crate::report::plot::TornadoBar {
                        label: f.name.clone(),
                        low: (lo.2.mean, lo.2.lo, lo.2.hi),
                        high: (hi.2.mean, hi.2.lo, hi.2.hi),
                    }
                })
                .collect();
            let (l, h) = (factors[0].steps.first().map_or(0.0, |s| s.0), factors[0].steps.last().map_or(0.0, |s| s.0));
            crate::report::plot::tornado(
                &file,
                &title,
                &format!("change in {metric} (percentage points)"),
                &format!("×{l}"),
                &format!("×{h}"),
                &bars,
            )?;
        }
        ("morris", Some(Result_::Morris { factors })) => {
            let pts: Vec<(String, f64, f64)> = factors.iter().map(|(n, m)| (n.clone(), m.mu_star, m.sigma)).collect();
            crate::report::plot::scatter(&file, &title, "μ* (points per range)", "σ", &pts)?;
        }
        ("sobol", Some(Result_::Sobol { factors })) => {
            let bars: Vec<crate::report::plot::SobolBar> =
                factors.iter().map(|(n, x)| (n.clone(), x.s1, x.s1_ci, x.st, x.st_ci)).collect();
            crate::report::plot::sobol_bars(&file, &title, &bars)?;
        }
        ("rounds", _) => draw_rounds(&plan, &res, &setting, metric.split('@').next().unwrap_or("mdsr"), &file)?,
        ("cdf", _) => {
            if !draw_exposure(&plan, &res, &setting, &file)? {
                return Err(plot_err(
                    results,
                    "kind",
                    "a sweep in which some benign agent was exposed (no exposure to plot)".into(),
                ));
            }
        }
        (k, _) => {
            return Err(plot_err(
                results,
                "kind",
                format!(
                    "a figure of this sweep's design ({}): tornado (OAT), morris, sobol, rounds or cdf, not `{k}` for {setting}/{arm}/{metric}",
                    plan.spec.design.name()
                ),
            ));
        }
    }
    Ok(file)
}
