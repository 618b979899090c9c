//! A sweep over the calibration's posterior draws (`memlink sweep --ensemble`): the design is
//! run at the fitted profile and again at each draw of the stand-in, on the same seeds; the
//! fit's runs are analysed and written exactly as a plain sweep's, and each quantity of the
//! analysis (an OAT effect, a Morris μ*, a Sobol index, a point's mean) is analysed again per
//! draw and summarised with its seed-only and 95% predictive intervals and the calibration's
//! share of its variance ([`crate::study::predictive`]), in `ensemble.json` and a section of
//! `summary.md`.

use super::Plan;
use super::exec::RunResult;
use super::output::{Result_, Section, analyse, finalize};
use super::stats::Estimate;
use crate::error::Result;
use crate::study::predictive::{Component, Predictive};
use serde::Serialize;
use std::path::Path;

/// One quantity of the analysis over the draws.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Quantity {
    /// Setting.
    pub setting: String,
    /// Arm.
    pub arm: String,
    /// Metric.
    pub metric: String,
    /// What it is (`nominal`, `<factor>×<step> effect`, `<factor> μ*`, `<factor> ST`, …).
    pub quantity: String,
    /// The fit's value with its intervals.
    pub predictive: Predictive,
}

/// The fit's runs (the plain sweep's plan and results) and, per draw, that draw's runs as a
/// plan of their own.
type Split = ((Plan, Vec<RunResult>), Vec<(Plan, Vec<RunResult>)>);

fn split(plan: &Plan, results: &[RunResult]) -> Split {
    let draws = plan.runs.iter().filter_map(|r| r.draw).max().map_or(0, |d| d + 1);
    let part = |want: Option<usize>| {
        let mut p = plan.clone();
        let mut res = Vec::new();
        p.runs.clear();
        for (r, x) in plan.runs.iter().zip(results) {
            if r.draw == want {
                p.runs.push(super::PlannedRun { draw: None, ..r.clone() });
                res.push(x.clone());
            }
        }
        (p, res)
    };
    (part(None), (0..draws).map(|d| part(Some(d))).collect())
}

/// The seed variance of an estimate from its 95% interval (a normal's half-width / 1.96).
fn from_ci(mean: f64, ci: (f64, f64)) -> Component {
    let sd = (ci.1 - ci.0).max(0.0) / (2.0 * 1.96);
    Component { mean, var: sd * sd, runs: 2 }
}

fn from_estimate(e: &Estimate) -> Component {
    Component { mean: e.mean, var: e.se * e.se, runs: e.n }
}

/// A quantity of a section: (name, component, range).
type Named = (String, Component, (f64, f64));

/// Every quantity of a section.
fn quantities(s: &Section) -> Vec<Named> {
    let any = (f64::NEG_INFINITY, f64::INFINITY);
    match &s.result {
        Result_::Oat { nominal, factors } => {
            std::iter::once(("nominal".to_string(), from_estimate(nominal), (0.0, 100.0)))
                .chain(factors.iter().flat_map(|f| {
                    f.steps.iter().map(move |(step, _, e)| {
                        (format!("{}×{step} effect", f.name), from_estimate(e), (-100.0, 100.0))
                    })
                }))
                .collect()
        }
        Result_::Morris { factors } => factors
            .iter()
            .map(|(name, m)| (format!("{name} μ*"), from_ci(m.mu_star, m.mu_star_ci), (0.0, f64::INFINITY)))
            .collect(),
        Result_::Sobol { factors } => factors
            .iter()
            .flat_map(|(name, x)| {
                [
                    (format!("{name} S1"), from_ci(x.s1, x.s1_ci), any),
                    (format!("{name} ST"), from_ci(x.st, x.st_ci), any),
                ]
            })
            .collect(),
        Result_::Points { points } => {
            points.iter().map(|(label, _, e)| (label.clone(), from_estimate(e), (0.0, 100.0))).collect()
        }
    }
}

/// Every quantity of the fit's analysis with its predictive summary over the draws' analyses.
pub fn summarise(fit: &[Section], draws: &[Vec<Section>]) -> Vec<Quantity> {
    let mut out = Vec::new();
    for (i, s) in fit.iter().enumerate() {
        let at: Vec<Vec<Named>> = draws.iter().filter_map(|d| d.get(i)).map(quantities).collect();
        for (j, (name, c, range)) in quantities(s).into_iter().enumerate() {
            let per_draw: Vec<Component> = at.iter().filter_map(|q| q.get(j)).map(|q| q.1).collect();
            out.push(Quantity {
                setting: s.setting.clone(),
                arm: s.arm.clone(),
                metric: s.metric.clone(),
                quantity: name,
                predictive: Predictive::of(c, &per_draw, range),
            });
        }
    }
    out
}

/// The markdown section of `summary.md`.
fn markdown(q: &[Quantity], draws: usize) -> String {
    let mut s = format!(
        "\n## Calibration uncertainty\n\nThe sweep also ran at the first {draws} posterior draws of each base's stand-in (`memlink sweep --ensemble`), on the same seeds; everything above is the fitted profile's. Per quantity: the fit's value, its seed-only 95% interval, the 95% predictive interval over the draws and the seeds, and the calibration's share of the predictive variance (ensemble.json holds every number).\n\n| setting | arm | metric | quantity | fit | seed-only | predictive | calib. |\n|---|---|---|---|---|---|---|---|\n"
    );
    for x in q {
        let p = &x.predictive;
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} | {} | [{:.2}, {:.2}] | {:.0}% |\n",
            x.setting,
            x.arm,
            x.metric,
            x.quantity,
            p.point,
            p.seed.map_or("–".to_string(), |(lo, hi)| format!("[{lo:.2}, {hi:.2}]")),
            p.interval.0,
            p.interval.1,
            100.0 * p.calibration_share
        ));
    }
    s
}

/// Writes a finished sweep's outputs: the fit's as [`finalize`] writes a plain sweep's (the
/// same bytes), and where the plan has runs at posterior draws, `ensemble.json` and the
/// *Calibration uncertainty* section of `summary.md`.
pub fn finalize_with_draws(plan: &Plan, results: &[RunResult], dir: &Path) -> Result<()> {
    let ((fit_plan, fit_results), draws) = split(plan, results);
    finalize(&fit_plan, &fit_results, dir)?;
    if draws.is_empty() {
        return Ok(());
    }
    let fit = analyse(&fit_plan, &fit_results)?;
    let per_draw = draws.iter().map(|(p, r)| analyse(p, r)).collect::<Result<Vec<_>>>()?;
    let q = summarise(&fit, &per_draw);
    crate::files::write_atomic(
        &dir.join("ensemble.json"),
        &(serde_json::to_string_pretty(&serde_json::json!({ "draws": draws.len(), "quantities": q }))
            .expect("serializable")
            + "\n"),
    )?;
    let summary = dir.join("summary.md");
    let text = crate::error::read_file(&summary)?;
    crate::files::write_atomic(&summary, &(text + &markdown(&q, draws.len())))
}
