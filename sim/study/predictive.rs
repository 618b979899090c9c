//! Predictive intervals: every number memlink prints can carry the calibration's uncertainty
//! beside the seeds' (issue 43, point 5).
//!
//! **Draws.** A backbone's posterior ensemble (`models/<profile>.ensemble.ron`, written by
//! `memlink calibrate <file> --ensemble`, see [`crate::study::calibrate::ensemble`]) holds draws of its
//! stand-in parameters. `--ensemble [N]` on a study runs each of its cells at the fitted profile
//! (the point estimate, what the study prints without the flag) and at the ensemble's first `N`
//! draws (all of them by default), on the same seeds. A run applies only its own workload's
//! parameters of a draw ([`crate::study::calibrate::ensemble::Ensemble::profile_for`]), so draws that
//! agree on that workload are one configuration and simulated once.
//!
//! **What is summarised.** A cell's value is what the study reports: the mean over its runs
//! (seeds, attacker sets), taken within strata first where the study does (a grid's topologies:
//! the mean of the per-topology means). At the fit and at each draw `d` it has a mean `m_d` and
//! a seed variance of that mean `v_d` (stratified: `Σ_t s_t² / n_t / T²`, where `s_t²` is the
//! sample variance of stratum `t`'s `n_t` runs; zero from one run). Then:
//!
//! - the **seed-only interval** is the fit's `m ± 1.96 √v`: what the seeds alone leave open;
//! - the **predictive interval** is the 2.5% and 97.5% quantiles of the equal mixture over draws
//!   of `Normal(m_d, v_d)` (a point mass where `v_d = 0`): the value a rerun of the study would
//!   print, given the calibration's uncertainty and the seeds';
//! - the **calibration's share** of the predictive variance is
//!   `Var_d[m_d] / (E_d[v_d] + Var_d[m_d])` (the law of total variance, population moments over
//!   the draws).
//!
//! Both intervals are clipped to the metric's range. The normal shape per draw is the
//! central-limit approximation of a mean over runs; with a handful of runs per cell it is
//! rough at the tails, which is why the draws' spread, not the per-draw shape, carries the
//! calibration's part. The normal distribution is `statrs`'s.

use crate::error::{Error, Pos, Result};
use crate::scenario::LoadedScenario;
use crate::study::calibrate::ensemble::Ensemble;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The study condition label of runs at an ensemble draw (their report records' stratum: one
/// stratum beside the fit's, not one per draw).
pub const LABEL: &str = "ensemble";

/// Where the posterior ensemble of the profile at `profile_path` lives: beside it, as
/// `<stem>.ensemble.ron`.
pub fn ensemble_path(profile_path: &Path) -> PathBuf {
    let stem = profile_path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    profile_path.with_file_name(format!("{stem}.ensemble.ron"))
}

/// The ensembles a study's scenarios use, loaded once per profile, and how many draws to take.
#[derive(Debug, Default)]
pub struct Ensembles {
    want: Option<usize>,
    loaded: BTreeMap<PathBuf, Ensemble>,
}

impl Ensembles {
    /// Draw the first `want` draws of each ensemble (`None`: all of them).
    pub fn new(want: Option<usize>) -> Self {
        Ensembles { want, loaded: BTreeMap::new() }
    }

    /// `ls` at each draw, in draw order: the same scenario with its profile's parameters of
    /// `ls`'s workload set to the draw's. An error names the ensemble file that is missing or
    /// malformed, or the draws it lacks.
    pub fn draws_of(&mut self, ls: &LoadedScenario) -> Result<Vec<LoadedScenario>> {
        let profile_path = crate::scenario::resolve_profile(&ls.path, &ls.scenario.backbone);
        let path = ensemble_path(&profile_path);
        if !self.loaded.contains_key(&path) {
            if !path.exists() {
                return Err(Error::Invalid {
                    path: ls.path.clone(),
                    pos: crate::error::locate_field(&std::fs::read_to_string(&ls.path).unwrap_or_default(), "backbone"),
                    field: "--ensemble".into(),
                    expected: format!(
                        "a posterior ensemble of backbone `{}` at {} (write one with `memlink calibrate <calibration> --ensemble`)",
                        ls.scenario.backbone,
                        path.display()
                    ),
                });
            }
            let e = Ensemble::load(&path)?;
            self.loaded.insert(path.clone(), e);
        }
        let e = &self.loaded[&path];
        let at = |message: String| Error::Parse { path: path.clone(), pos: Pos { line: 1, col: 1 }, message };
        if e.profile != ls.profile.name {
            return Err(at(format!(
                "draws of profile `{}`, which the scenario uses; found `{}`",
                ls.profile.name, e.profile
            )));
        }
        let n = self.want.unwrap_or(e.draws.len());
        if n == 0 || n > e.draws.len() {
            return Err(Error::Invalid {
                path: path.clone(),
                pos: Pos { line: 1, col: 1 },
                field: "--ensemble".into(),
                expected: format!("1 to {} draws (the ensemble's), got {n}", e.draws.len()),
            });
        }
        let class = ls.scenario.workload.class();
        (0..n)
            .map(|k| {
                let profile = e.profile_for(&ls.profile, k, class).map_err(|m| at(format!("expected {m}")))?;
                Ok(LoadedScenario { scenario: ls.scenario.clone(), profile, path: ls.path.clone() })
            })
            .collect()
    }
}

/// One configuration's (the fit's or a draw's) estimate of a cell: the mean over its runs and
/// the seed variance of that mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Component {
    /// The cell's mean.
    pub mean: f64,
    /// The variance of that mean over seeds.
    pub var: f64,
    /// Runs it was estimated from.
    pub runs: usize,
}

impl Component {
    /// The cell of `strata` (each a stratum's run values): the mean of the strata's means and
    /// the stratified variance of that mean, `Σ_t s_t² / n_t / T²` (empty strata are skipped).
    /// Where a stratum has a single run its variance cannot be estimated within it: the
    /// variance of the mean is then that of all runs pooled, `s² / n` (which counts the
    /// strata's differences as noise, so it errs wide); one run in all has variance 0.
    pub fn of_strata(strata: &[Vec<f64>]) -> Component {
        let kept: Vec<&Vec<f64>> = strata.iter().filter(|s| !s.is_empty()).collect();
        let runs = kept.iter().map(|s| s.len()).sum::<usize>();
        if kept.is_empty() {
            return Component { mean: 0.0, var: 0.0, runs };
        }
        let t = kept.len() as f64;
        let mut mean = 0.0;
        let mut var = 0.0;
        for s in &kept {
            let n = s.len() as f64;
            let m = s.iter().sum::<f64>() / n;
            mean += m;
            if s.len() > 1 {
                let s2 = s.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
                var += s2 / n;
            }
        }
        let mut var = var / (t * t);
        if kept.iter().any(|s| s.len() == 1) && runs > 1 {
            let all: Vec<f64> = kept.iter().flat_map(|s| s.iter().copied()).collect();
            let n = all.len() as f64;
            let m = all.iter().sum::<f64>() / n;
            var = all.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0) / n;
        }
        Component { mean: mean / t, var, runs }
    }

    /// The cell of one stratum of runs.
    pub fn of(values: &[f64]) -> Component {
        Component::of_strata(&[values.to_vec()])
    }
}

/// A cell's point estimate with its seed-only and predictive 95% intervals.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Predictive {
    /// The fit's value (what the study prints without `--ensemble`).
    pub point: f64,
    /// The seed-only 95% interval around it (`None` from a single run, where the seeds'
    /// spread cannot be estimated).
    pub seed: Option<(f64, f64)>,
    /// The 95% predictive interval over draws and seeds.
    pub interval: (f64, f64),
    /// The calibration's share of the predictive variance (0 to 1).
    pub calibration_share: f64,
    /// Draws it summarises.
    pub draws: usize,
}

impl Predictive {
    /// From the fit's component and the draws' (at least one), clipped to `range`.
    pub fn of(fit: Component, draws: &[Component], range: (f64, f64)) -> Predictive {
        let clip = |x: f64| x.clamp(range.0, range.1);
        let half = 1.96 * fit.var.max(0.0).sqrt();
        let seed = (fit.runs > 1).then(|| (clip(fit.mean - half), clip(fit.mean + half)));
        if draws.is_empty() {
            let point = (fit.mean, fit.mean);
            return Predictive {
                point: fit.mean,
                seed,
                interval: seed.unwrap_or(point),
                calibration_share: 0.0,
                draws: 0,
            };
        }
        let d = draws.len() as f64;
        let mean_of_means = draws.iter().map(|c| c.mean).sum::<f64>() / d;
        let between = draws.iter().map(|c| (c.mean - mean_of_means).powi(2)).sum::<f64>() / d;
        let within = draws.iter().map(|c| c.var.max(0.0)).sum::<f64>() / d;
        let total = between + within;
        let share = if total > 0.0 { between / total } else { 0.0 };
        let interval = (clip(mixture_quantile(draws, 0.025)), clip(mixture_quantile(draws, 0.975)));
        Predictive { point: fit.mean, seed, interval, calibration_share: share, draws: draws.len() }
    }

    /// `point [lo, hi]` with one decimal.
    pub fn show_interval(&self) -> String {
        format!("[{:.1}, {:.1}]", self.interval.0, self.interval.1)
    }

    /// The seed-only interval with one decimal ("one run" where it cannot be estimated).
    pub fn show_seed(&self) -> String {
        match self.seed {
            Some((lo, hi)) => format!("[{lo:.1}, {hi:.1}]"),
            None => "one run".into(),
        }
    }
}

/// The CDF at `x` of the equal mixture of `Normal(mean, var)` over `parts` (a point mass
/// where `var` is 0).
fn mixture_cdf(parts: &[Component], x: f64) -> f64 {
    let mut acc = 0.0;
    for c in parts {
        acc += if c.var > 0.0 {
            Normal::new(c.mean, c.var.sqrt()).map(|n| n.cdf(x)).unwrap_or(if x >= c.mean { 1.0 } else { 0.0 })
        } else if x >= c.mean {
            1.0
        } else {
            0.0
        };
    }
    acc / parts.len() as f64
}

/// The `q` quantile of the mixture: the least `x` (to 1e-9 of the range) with CDF ≥ `q`,
/// found by bisection; where the mixture is all point masses, the empirical quantile (the
/// least mean whose cumulative share reaches `q`).
fn mixture_quantile(parts: &[Component], q: f64) -> f64 {
    let sd = |c: &Component| c.var.max(0.0).sqrt();
    let mut lo = parts.iter().map(|c| c.mean - 9.0 * sd(c)).fold(f64::INFINITY, f64::min);
    let mut hi = parts.iter().map(|c| c.mean + 9.0 * sd(c)).fold(f64::NEG_INFINITY, f64::max);
    if parts.iter().all(|c| c.var <= 0.0) {
        let mut means: Vec<f64> = parts.iter().map(|c| c.mean).collect();
        means.sort_by(f64::total_cmp);
        let i = ((q * means.len() as f64).ceil() as usize).clamp(1, means.len()) - 1;
        return means[i];
    }
    let tol = 1e-9 * (hi - lo).max(1e-12);
    for _ in 0..200 {
        if hi - lo <= tol {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if mixture_cdf(parts, mid) >= q {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// A scenario run at its fitted profile and at each posterior draw, on one seed
/// (`memlink run --ensemble`).
#[derive(Clone, Debug)]
pub struct EnsembleRun {
    /// The fitted profile's results (what `run` prints without `--ensemble`).
    pub fit: crate::run::ScenarioResult,
    /// Each draw's results, in draw order.
    pub draws: Vec<crate::run::ScenarioResult>,
}

/// A per-round metric `run --ensemble` summarises: (label, column name, value).
type RunMetric = (&'static str, &'static str, fn(&crate::eval::metrics::RoundMetrics) -> f64);

/// Per arm and round (arm, round, per metric its label and predictive summary).
pub type RoundPredictive = (String, u32, Vec<(&'static str, Predictive)>);

/// The per-round metrics `run --ensemble` summarises.
const RUN_METRICS: [RunMetric; 4] = [
    ("MDSR", "mdsr_strict", |r| r.mdsr_strict),
    ("RDA", "rda", |r| r.table_rda),
    ("ASR", "asr_exposure", |r| r.asr_exposure),
    ("accuracy", "accuracy", |r| r.accuracy),
];

impl EnsembleRun {
    /// Runs `ls` at `seed` at the fit and at each of `ensembles`' draws of its backbone (the
    /// draws in parallel; the results in draw order, whatever the thread count).
    pub fn run(ls: &LoadedScenario, seed: u64, ensembles: &mut Ensembles) -> Result<EnsembleRun> {
        use rayon::prelude::*;
        let at = ensembles.draws_of(ls)?;
        let fit = crate::run::run_scenario(ls, seed);
        let draws = at.par_iter().map(|d| crate::run::run_scenario(d, seed)).collect();
        Ok(EnsembleRun { fit, draws })
    }

    /// Per arm and round, each metric's fit value and predictive interval over the draws
    /// (percent). One seed: the interval is the draws' alone, the seeds' part is not estimated.
    pub fn predictive(&self) -> Vec<RoundPredictive> {
        let mut out = Vec::new();
        for (i, a) in self.fit.arms.iter().enumerate() {
            for (j, r) in a.rounds.iter().enumerate() {
                let metrics = RUN_METRICS
                    .iter()
                    .map(|(label, _, f)| {
                        let draws: Vec<Component> = self
                            .draws
                            .iter()
                            .filter_map(|d| d.arms.get(i)?.rounds.get(j))
                            .map(|x| Component::of(&[100.0 * f(x)]))
                            .collect();
                        (*label, Predictive::of(Component::of(&[100.0 * f(r)]), &draws, (0.0, 100.0)))
                    })
                    .collect();
                out.push((a.arm.clone(), r.round, metrics));
            }
        }
        out
    }

    /// The readable account: per arm and round, each metric's fit value and its 95% interval
    /// over the draws.
    pub fn table(&self) -> String {
        let mut s = format!(
            "\n== calibration uncertainty: {} posterior draws of the `{}` stand-in, seed {}\nEach value is the fitted profile's, with the 2.5–97.5% range over the draws (one seed: the seeds' part is not in it; a grid with several seeds gives both, `memlink grid --ensemble`).\n",
            self.draws.len(),
            self.fit.backbone,
            self.fit.seed
        );
        let mut arm = String::new();
        for (a, round, metrics) in self.predictive() {
            if a != arm {
                s.push_str(&format!("\n{a}\n"));
                arm = a;
            }
            let cells: Vec<String> =
                metrics.iter().map(|(label, p)| format!("{label} {:.1} {}", p.point, p.show_interval())).collect();
            s.push_str(&format!("  round {round}: {}\n", cells.join(" · ")));
        }
        s
    }

    /// `ensemble.csv`: one row per draw (`fit` for the fitted profile), arm and round.
    pub fn csv(&self) -> String {
        let mut s = String::from("draw,arm,guard,round");
        for (_, column, _) in RUN_METRICS {
            s.push_str(&format!(",{column}"));
        }
        s.push('\n');
        let all = std::iter::once(("fit".to_string(), &self.fit))
            .chain(self.draws.iter().enumerate().map(|(k, d)| (k.to_string(), d)));
        for (draw, res) in all {
            for a in &res.arms {
                for r in &a.rounds {
                    s.push_str(&format!("{draw},{},{},{}", crate::run::csv_field(&a.arm), a.guard, r.round));
                    for (_, _, f) in RUN_METRICS {
                        s.push_str(&format!(",{}", f(r)));
                    }
                    s.push('\n');
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stratified_variance_of_the_mean() {
        // Two strata: means 1 and 3, sample variances 1 and 4, two and four runs.
        let c = Component::of_strata(&[vec![0.5, 1.5], vec![1.0, 3.0, 3.0, 5.0]]);
        assert!((c.mean - 2.0).abs() < 1e-12);
        let s2a = 0.5;
        let s2b = (4.0 + 0.0 + 0.0 + 4.0) / 3.0;
        assert!((c.var - (s2a / 2.0 + s2b / 4.0) / 4.0).abs() < 1e-12, "{}", c.var);
        assert_eq!(Component::of(&[0.7]).var, 0.0);
        // A stratum of one run: the pooled variance of the mean.
        let p = Component::of_strata(&[vec![1.0], vec![3.0]]);
        assert_eq!((p.mean, p.var, p.runs), (2.0, 1.0, 2));
    }

    #[test]
    fn one_normal_gives_the_normal_quantiles() {
        let c = Component { mean: 50.0, var: 4.0, runs: 10 };
        let p = Predictive::of(c, &[c], (0.0, 100.0));
        assert!((p.interval.0 - (50.0 - 1.959964 * 2.0)).abs() < 1e-4, "{:?}", p.interval);
        assert!((p.interval.1 - (50.0 + 1.959964 * 2.0)).abs() < 1e-4);
        assert!((p.seed.expect("ten runs").0 - (50.0 - 1.96 * 2.0)).abs() < 1e-9);
        assert_eq!(p.calibration_share, 0.0);
    }

    #[test]
    fn the_variance_split_follows_the_law_of_total_variance() {
        // Draw means 40 and 60 (between variance 100), seed variances 20 and 40 (within 30).
        let draws = [Component { mean: 40.0, var: 20.0, runs: 5 }, Component { mean: 60.0, var: 40.0, runs: 5 }];
        let p = Predictive::of(Component { mean: 50.0, var: 1.0, runs: 5 }, &draws, (0.0, 100.0));
        assert!((p.calibration_share - 100.0 / 130.0).abs() < 1e-12);
        // The ends are the mixture's 2.5% and 97.5% points: each draw's tail holds half the mass,
        // so the lower end sits near draw 40's 5% point, the upper near draw 60's 95% point.
        let cdf =
            |x: f64| draws.iter().map(|d| Normal::new(d.mean, d.var.sqrt()).expect("finite").cdf(x)).sum::<f64>() / 2.0;
        assert!((cdf(p.interval.0) - 0.025).abs() < 1e-6, "{:?}", p.interval);
        assert!((cdf(p.interval.1) - 0.975).abs() < 1e-6, "{:?}", p.interval);
        // It spans both draws and is wider than either draw's own interval.
        assert!(p.interval.0 < 40.0 - 1.6 * 20f64.sqrt() && p.interval.1 > 60.0 + 1.6 * 40f64.sqrt());
        assert!(p.interval.1 - p.interval.0 > 2.0 * 1.96 * 40f64.sqrt());
        assert_eq!(p.draws, 2);
    }

    #[test]
    fn point_masses_give_empirical_quantiles_and_clipping_holds() {
        let draws: Vec<Component> = (0..40).map(|i| Component { mean: i as f64, var: 0.0, runs: 1 }).collect();
        let p = Predictive::of(Component { mean: 20.0, var: 0.0, runs: 1 }, &draws, (0.0, 100.0));
        assert_eq!(p.interval, (0.0, 38.0));
        assert_eq!(p.seed, None);
        assert_eq!(p.show_seed(), "one run");
        assert_eq!(p.calibration_share, 1.0);
        let c = Component { mean: 99.0, var: 25.0, runs: 9 };
        let wide = Predictive::of(c, &[c], (0.0, 100.0));
        assert_eq!(wide.interval.1, 100.0);
        assert_eq!(wide.seed.expect("nine runs").1, 100.0);
    }
}
