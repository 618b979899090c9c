//! An ensemble over the calibration's uncertainty (issue 43, point 4): draws of a backbone's
//! stand-in parameters from an approximate posterior, so that what memlink prints can carry
//! the calibration's uncertainty beside the seeds'.
//!
//! **The approximation.** Each search of a calibration (its independent groups of parameters
//! and rows) is treated on its own; the posterior is their product. For one search with fitted
//! parameters `θ̂` (the committed profile) and the stored identifiability analysis
//! ([`super::identify`], its Jacobian `J` of the rows' spread-weighted residuals):
//!
//! 1. *Target.* `log π(θ) = −χ²_rows(θ) / (2T) − penalty(θ) / 2` inside the parameters'
//!    bounds (zero outside): the rows' χ² tempered by `T = max(1, χ²_rows(θ̂) / dof)`,
//!    `dof = max(1, rows − parameters)`, so that a fit that misses its rows by more than their
//!    spreads says so in wider draws, and the deviation penalties (the priors) untempered.
//! 2. *Proposal.* A multivariate Student t with [`NU`] degrees of freedom centred on `θ̂`, with
//!    precision `JᵀJ / T + diag(1/τ²)` (the Laplace, Gauss–Newton, approximation of the target)
//!    plus `diag((4 / range)²)`: a floor that gives a direction no row sees a spread of a
//!    quarter of its range, so the proposal covers the box there. Draws outside the bounds are
//!    redrawn (the truncation's constant cancels in the normalised weights). Proposal 0 is `θ̂`.
//! 3. *Importance weights.* Each proposal is simulated once (the fit's seeds, as its objective)
//!    and weighted by `π / q`; the weights are normalised and their effective sample size
//!    `1 / Σ w²` is reported per search. A small ESS says the Laplace shape is poor there: the
//!    draws then concentrate on few proposals, which the report shows.
//! 4. *Draws.* `N` draws per search by systematic resampling of the weighted proposals, in a
//!    shuffled order (any prefix is a sample too); draw `i` of the ensemble joins draw `i` of
//!    every search.
//!
//! Every random number comes from one named stream ([`SEED`], the search's index): the same
//! calibration, identification, profile and `N`, `M` give the same file, byte for byte. Each
//! proposal's χ² is journalled as it finishes (`<out>/<name>.ensemble.journal`), so a killed run
//! resumes (`--resume`) without simulating a proposal twice.
//!
//! Why this route: the Jacobian is already computed and stored by the identifiability analysis,
//! so the proposal costs nothing; one simulated evaluation per proposal makes the weights exact
//! for the tempered target (not a quadratic guess); the Student tails keep weights bounded where
//! the target is wider than the Laplace shape. An MCMC sampler would need thousands of
//! sequential evaluations of a 7–15 s objective.

use super::identify::{Identification, eigen_symmetric, placed};
use super::{Calibration, set_param};
use crate::agent::Profile;
use crate::engine::SimRng;
use crate::error::{Error, Pos, Result, read_file};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Draws stored by default.
pub const DEFAULT_DRAWS: usize = 32;
/// Proposals evaluated per search by default.
pub const DEFAULT_PROPOSALS: usize = 128;
/// Degrees of freedom of the Student-t proposal.
pub const NU: u32 = 4;
/// Master seed of the ensemble's stream (one generator per search, by its index).
pub const SEED: u64 = 0x00E5_5E3B_1E43;

/// An ensemble of a backbone's stand-in parameters (`models/<profile>.ensemble.ron`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ensemble {
    /// The profile the draws modify (its name).
    pub profile: String,
    /// The calibration they come from (its name).
    pub calibration: String,
    /// How they were drawn, in words.
    pub method: String,
    /// Proposals evaluated per search.
    pub proposals: usize,
    /// Weight of the proposal's defensive wide component (absent: 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub defensive: f64,
    /// Per search: its posterior summary.
    pub searches: Vec<SearchPosterior>,
    /// The draws: each a value for every parameter (`workload.field`), applied over the
    /// profile as the calibration applies its parameters.
    pub draws: Vec<BTreeMap<String, f64>>,
}

/// One search's approximate posterior.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchPosterior {
    /// Its parameters (`workload.field`).
    pub parameters: Vec<String>,
    /// Their fitted values (the profile's).
    pub fitted: Vec<f64>,
    /// Its fitted rows.
    pub rows: usize,
    /// The rows' χ² at the fit.
    pub chi2_rows: f64,
    /// The tempering `T` (χ²_rows / dof, at least 1).
    pub inflation: f64,
    /// Effective sample size of the importance weights (out of the proposals).
    pub ess: f64,
    /// Per parameter, the weighted 2.5% and 97.5% quantiles of the proposals.
    pub interval: Vec<(f64, f64)>,
}

impl Ensemble {
    /// Reads an ensemble file; a malformed file is an error naming it and the position.
    pub fn load(path: &Path) -> Result<Self> {
        Self::load_str(&read_file(path)?, path)
    }

    /// [`Ensemble::load`] of `text` as if read from `path`.
    pub fn load_str(text: &str, path: &Path) -> Result<Self> {
        let e: Ensemble = crate::error::parse_ron(path, text)?;
        let bad = |message: String| Error::Parse { path: path.to_path_buf(), pos: Pos { line: 1, col: 1 }, message };
        if e.draws.is_empty() {
            return Err(bad("at least one draw".into()));
        }
        for (i, s) in e.searches.iter().enumerate() {
            let n = s.parameters.len();
            let finite = [s.chi2_rows, s.inflation, s.ess].iter().all(|v| v.is_finite())
                && s.fitted.iter().all(|v| v.is_finite())
                && s.interval.iter().all(|(a, b)| a.is_finite() && b.is_finite());
            if s.fitted.len() != n || s.interval.len() != n || !finite {
                return Err(bad(format!(
                    "search {}: a finite fitted value and interval for each of its {n} parameters, and finite χ², inflation and ESS",
                    i + 1
                )));
            }
        }
        let names: Vec<&String> = e.searches.iter().flat_map(|s| &s.parameters).collect();
        for (i, d) in e.draws.iter().enumerate() {
            if d.len() != names.len() || !names.iter().all(|n| d.get(*n).is_some_and(|v| v.is_finite())) {
                return Err(bad(format!("draw {i}: a finite value for each of the searches' parameters {names:?}")));
            }
        }
        Ok(e)
    }

    /// The ensemble as RON (what [`Ensemble::load`] reads).
    pub fn to_ron(&self) -> String {
        let cfg = ron::ser::PrettyConfig::new().depth_limit(3).struct_names(false);
        let body = ron::ser::to_string_pretty(self, cfg).expect("serializable");
        format!(
            "// Posterior draws of the `{}` stand-in, written by `memlink calibrate --ensemble`; see sim/study/calibrate/ensemble.rs.\n{body}\n",
            self.profile
        )
    }

    /// `base` with draw `k`'s values applied (a workload field directly, a model field through
    /// the workload's deviation). An error names the parameter the profile lacks.
    pub fn profile(&self, base: &Profile, k: usize) -> std::result::Result<Profile, String> {
        let mut p = base.clone();
        let draw = self.draws.get(k).ok_or_else(|| format!("draw {k} of {}", self.draws.len()))?;
        for (name, v) in draw {
            let (w, field) = name.split_once('.').ok_or_else(|| format!("a `workload.field` name, not `{name}`"))?;
            set_param(&mut p, w, field, *v).ok_or_else(|| format!("parameter `{name}` of profile `{}`", base.name))?;
        }
        Ok(p)
    }

    /// `base` with draw `k`'s values of `workload`'s parameters alone (the parameters named
    /// `<workload>.…`). A run reads only its own workload's parameters, so a draw that differs
    /// from another only in other workloads' values gives it the same profile, the same
    /// configuration hash, and is simulated once.
    pub fn profile_for(&self, base: &Profile, k: usize, workload: &str) -> std::result::Result<Profile, String> {
        let mut p = base.clone();
        let draw = self.draws.get(k).ok_or_else(|| format!("draw {k} of {}", self.draws.len()))?;
        for (name, v) in draw {
            let (w, field) = name.split_once('.').ok_or_else(|| format!("a `workload.field` name, not `{name}`"))?;
            if w == workload {
                set_param(&mut p, w, field, *v)
                    .ok_or_else(|| format!("parameter `{name}` of profile `{}`", base.name))?;
            }
        }
        Ok(p)
    }
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// Weighted quantile `q` of `values` with normalised `weights`.
fn weighted_quantile(values: &[f64], weights: &[f64], q: f64) -> f64 {
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by(|&a, &b| values[a].total_cmp(&values[b]).then(a.cmp(&b)));
    let mut acc = 0.0;
    for &i in &idx {
        acc += weights[i];
        if acc >= q {
            return values[i];
        }
    }
    values[*idx.last().expect("at least one value")]
}

/// How large an ensemble to draw, and where its journal lives.
#[derive(Clone, Copy, Debug)]
pub struct EnsembleOptions<'a> {
    /// Draws to store.
    pub draws: usize,
    /// Proposals evaluated per search.
    pub proposals: usize,
    /// Folder of the journal (`<name>.ensemble.journal`).
    pub dir: &'a Path,
    /// Reuse the journal's evaluated proposals.
    pub resume: bool,
    /// Weight α of the defensive wide component of the proposal (0: the Laplace t alone).
    pub defensive: f64,
}

/// A journal line: (search, proposal) → (the proposal's coordinates as bits, its χ²).
type JournalEntry = ((usize, usize), (Vec<u64>, f64));

/// A precision's eigen-decomposition: (eigenvalue, unit eigenvector) pairs.
type Eigen = Vec<(f64, Vec<f64>)>;

/// The squared Mahalanobis distance of `x` from `centre` under a precision's eigen-decomposition.
fn mahalanobis(eig: &[(f64, Vec<f64>)], centre: &[f64], x: &[f64]) -> f64 {
    eig.iter()
        .map(|(l, v)| {
            let c: f64 = v.iter().zip(x.iter().zip(centre)).map(|(vi, (xi, ci))| vi * (xi - ci)).sum();
            l * c * c
        })
        .sum()
}

/// A Student-t draw around `centre` with precision `eig`.
fn draw_t(rng: &mut SimRng, centre: &[f64], eig: &[(f64, Vec<f64>)]) -> Vec<f64> {
    let g: f64 = (0..NU).map(|_| rng.normal().powi(2)).sum();
    let scale = (f64::from(NU) / g).sqrt();
    let mut x = centre.to_vec();
    for (l, v) in eig {
        let z = rng.normal() * scale / l.sqrt();
        for (xi, vi) in x.iter_mut().zip(v) {
            *xi += z * vi;
        }
    }
    x
}

/// The proposal of one search: the Laplace Student t, and optionally a defensive wide one.
struct Proposal<'a> {
    centre: &'a [f64],
    /// The Laplace component's precision.
    narrow: Eigen,
    /// The defensive component (its weight α and precision), when α > 0: a Student t whose
    /// spread is a quarter of each parameter's range, so that a target wider than the Laplace
    /// shape (a plateau of a discrete objective) is still covered (defensive importance
    /// sampling, Hesterberg 1995).
    wide: Option<(f64, Eigen)>,
}

impl Proposal<'_> {
    /// Log density at `x` (up to a constant shared by every proposal of the search). Without a
    /// defensive component it is the Laplace t's kernel alone, as the committed ensembles
    /// were drawn; with one, the mixture's full density.
    fn log_q(&self, x: &[f64]) -> f64 {
        let n = self.centre.len() as f64;
        let kernel = |eig: &[(f64, Vec<f64>)]| {
            -0.5 * (f64::from(NU) + n) * (1.0 + mahalanobis(eig, self.centre, x) / f64::from(NU)).ln()
        };
        match &self.wide {
            None => kernel(&self.narrow),
            Some((alpha, wide)) => {
                let half_log_det = |eig: &[(f64, Vec<f64>)]| 0.5 * eig.iter().map(|(l, _)| l.ln()).sum::<f64>();
                let a = (1.0 - alpha).ln() + half_log_det(&self.narrow) + kernel(&self.narrow);
                let b = alpha.ln() + half_log_det(wide) + kernel(wide);
                let top = a.max(b);
                top + ((a - top).exp() + (b - top).exp()).ln()
            }
        }
    }

    /// One proposal inside the bounds and its log density. Draws outside are redrawn.
    fn propose(&self, rng: &mut SimRng, lo: &[f64], hi: &[f64]) -> (Vec<f64>, f64) {
        for _ in 0..10_000 {
            // No draw is spent on the choice without a defensive component, so such
            // ensembles keep the bytes they were committed with.
            let eig = match &self.wide {
                Some((alpha, wide)) if rng.uniform() < *alpha => wide,
                _ => &self.narrow,
            };
            let x = draw_t(rng, self.centre, eig);
            if x.iter().enumerate().all(|(i, v)| *v >= lo[i] && *v <= hi[i]) {
                let lq = self.log_q(&x);
                return (x, lq);
            }
        }
        // The box holds almost none of the proposal (a fit far outside its own bounds cannot be
        // loaded, so this is a degenerate search): the centre, which always lies inside.
        (self.centre.to_vec(), self.log_q(self.centre))
    }
}

impl Calibration {
    /// The default ensemble file of this calibration's profile: `<profile file stem>.ensemble.ron`
    /// beside it.
    pub fn ensemble_path(&self) -> PathBuf {
        self.profile_path.with_extension("ensemble.ron")
    }

    /// The ensemble (module docs): `opts.draws` draws from `opts.proposals` importance-weighted
    /// proposals per search, built on the stored identification `id` (which must have been computed at
    /// the committed profile). Each proposal's χ² is journalled in `opts.dir`; with `opts.resume` the
    /// journal's entries are reused. `progress` sees (search, proposal, χ²).
    pub fn ensemble(
        &self,
        id: &Identification,
        id_path: &Path,
        opts: EnsembleOptions<'_>,
        progress: &mut dyn FnMut(usize, usize, f64),
    ) -> Result<Ensemble> {
        let EnsembleOptions { draws, proposals, dir, resume, defensive } = opts;
        let bad = |message: String| Error::Parse { path: id_path.to_path_buf(), pos: Pos { line: 1, col: 1 }, message };
        if !(0.0..1.0).contains(&defensive) {
            return Err(Error::Invalid {
                path: self.path.clone(),
                pos: Pos { line: 1, col: 1 },
                field: "defensive".into(),
                expected: format!("a defensive weight in [0, 1), not {defensive}"),
            });
        }
        if let Some(p) = self.spec.parameters.iter().find(|p| p.guard.is_some() || p.judge.is_some()) {
            return Err(bad(format!(
                "an ensemble is of profile parameters (`workload.field`); `{}` is an arm's or a judge's",
                p.name
            )));
        }
        let x = self.current();
        let comps = self.stored_searches(id).map_err(bad)?;
        std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.to_path_buf(), source })?;
        let journal_path = dir.join(format!("{}.ensemble.journal", self.spec.name));
        let mut journal: BTreeMap<(usize, usize), (Vec<u64>, f64)> = BTreeMap::new();
        if resume && journal_path.exists() {
            for (ln, line) in read_file(&journal_path)?.lines().enumerate() {
                let parse = || -> Option<JournalEntry> {
                    let mut it = line.split_whitespace();
                    let s = it.next()?.parse().ok()?;
                    let k = it.next()?.parse().ok()?;
                    let chi2 = f64::from_bits(u64::from_str_radix(it.next()?, 16).ok()?);
                    let xs = it.map(|t| u64::from_str_radix(t, 16).ok()).collect::<Option<Vec<u64>>>()?;
                    Some(((s, k), (xs, chi2)))
                };
                // A torn last line (a killed run) is simulated again.
                match parse() {
                    Some((key, v)) => {
                        journal.insert(key, v);
                    }
                    None => eprintln!("{}:{}: unreadable journal line, recomputed", journal_path.display(), ln + 1),
                }
            }
        } else {
            crate::files::write_atomic(&journal_path, "")?;
        }
        let mut append = std::fs::OpenOptions::new()
            .append(true)
            .open(&journal_path)
            .map_err(|source| Error::Io { path: journal_path.clone(), source })?;
        let mut searches = Vec::new();
        let mut per_search_draws: Vec<Vec<Vec<f64>>> = Vec::new();
        for (si, ((pi, rows), s)) in comps.iter().zip(&id.searches).enumerate() {
            let n = pi.len();
            let centre: Vec<f64> = s.values.clone();
            let chi2_rows = (s.chi2 - s.penalty(&centre)).max(0.0);
            let dof = s.rows.saturating_sub(n).max(1);
            let inflation = (chi2_rows / dof as f64).max(1.0);
            let mut precision = s.fisher(false);
            for (k, row) in precision.iter_mut().enumerate() {
                for cell in row.iter_mut() {
                    *cell /= inflation;
                }
                if let Some(sd) = s.prior_sd[k] {
                    row[k] += 1.0 / (sd * sd);
                }
                row[k] += (4.0 / (s.hi[k] - s.lo[k])).powi(2);
            }
            let eig: Vec<(f64, Vec<f64>)> =
                eigen_symmetric(&precision).into_iter().map(|(l, v)| (l.max(1e-12), v)).collect();
            let wide = (defensive > 0.0).then(|| {
                let floor: Vec<Vec<f64>> = (0..n)
                    .map(|a| (0..n).map(|b| if a == b { (4.0 / (s.hi[a] - s.lo[a])).powi(2) } else { 0.0 }).collect())
                    .collect();
                (defensive, eigen_symmetric(&floor))
            });
            let proposal = Proposal { centre: &centre, narrow: eig, wide };
            let mut rng = SimRng::from_seed_u64(
                crate::engine::Streams::new(SEED).seed_of(crate::engine::StreamKind::Ensemble, &[si as u64]),
            );
            let mut points = Vec::with_capacity(proposals);
            let mut log_w = Vec::with_capacity(proposals);
            for k in 0..proposals.max(1) {
                let (theta, log_q) = if k == 0 {
                    // The fit itself; it consumes a proposal's draws like any other, so the
                    // later proposals do not depend on this choice.
                    let _ = proposal.propose(&mut rng, &s.lo, &s.hi);
                    (centre.clone(), proposal.log_q(&centre))
                } else {
                    proposal.propose(&mut rng, &s.lo, &s.hi)
                };
                let bits: Vec<u64> = theta.iter().map(|v| v.to_bits()).collect();
                let chi2 = match journal.get(&(si, k)) {
                    Some((xs, c)) if *xs == bits => *c,
                    _ => {
                        let full = placed(&x, pi, &theta);
                        let c = self.search_chi2(&full, &[], rows);
                        let mut line = format!("{si} {k} {:016x}", c.to_bits());
                        for b in &bits {
                            line.push_str(&format!(" {b:016x}"));
                        }
                        line.push('\n');
                        use std::io::Write;
                        append
                            .write_all(line.as_bytes())
                            .and_then(|_| append.flush())
                            .map_err(|source| Error::Io { path: journal_path.clone(), source })?;
                        c
                    }
                };
                progress(si, k, chi2);
                log_w.push(-chi2 / (2.0 * inflation) - s.penalty(&theta) / 2.0 - log_q);
                points.push(theta);
            }
            let top = log_w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let raw: Vec<f64> = log_w.iter().map(|l| (l - top).exp()).collect();
            let total: f64 = raw.iter().sum();
            let w: Vec<f64> = raw.iter().map(|r| r / total).collect();
            let ess = 1.0 / w.iter().map(|v| v * v).sum::<f64>();
            let interval = (0..n)
                .map(|c| {
                    let vals: Vec<f64> = points.iter().map(|p| p[c]).collect();
                    (weighted_quantile(&vals, &w, 0.025), weighted_quantile(&vals, &w, 0.975))
                })
                .collect();
            // Systematic resampling, then a shuffle so that any prefix is a sample too.
            let u0 = rng.uniform() / draws as f64;
            let mut chosen = Vec::with_capacity(draws);
            let (mut acc, mut j) = (w[0], 0);
            for d in 0..draws {
                let u = u0 + d as f64 / draws as f64;
                while u > acc && j + 1 < w.len() {
                    j += 1;
                    acc += w[j];
                }
                chosen.push(points[j].clone());
            }
            rng.shuffle(&mut chosen);
            per_search_draws.push(chosen);
            searches.push(SearchPosterior {
                parameters: s.parameters.clone(),
                fitted: centre,
                rows: s.rows,
                chi2_rows,
                inflation,
                ess,
                interval,
            });
        }
        let draws_out = (0..draws)
            .map(|d| {
                searches
                    .iter()
                    .zip(&per_search_draws)
                    .flat_map(|(s, ds)| s.parameters.iter().cloned().zip(ds[d].iter().copied()))
                    .collect()
            })
            .collect();
        Ok(Ensemble {
            profile: self.profile.name.clone(),
            calibration: self.spec.name.clone(),
            method: format!(
                "Laplace (Gauss–Newton) approximation at the fit from the stored identification, χ² tempered by max(1, χ²/dof) per search; {proposals} Student-t (ν = {NU}) proposals per search, {}each simulated once on the fit's seeds and importance-weighted; {draws} draws by systematic resampling",
                if defensive > 0.0 {
                    format!("mixed with weight {defensive} with a defensive t of a quarter of each range, ")
                } else {
                    String::new()
                }
            ),
            proposals,
            defensive,
            searches,
            draws: draws_out,
        })
    }
}

/// An effective sample size below this marks a search's draws as degenerate: they repeat a
/// handful of proposals, and its interval is not a posterior interval.
pub const MIN_ESS: f64 = 5.0;

/// The ensemble as markdown: per search the inflation and ESS, per parameter the fit and the
/// posterior interval; a search whose ESS is under [`MIN_ESS`] is marked degenerate.
pub fn ensemble_report(e: &Ensemble) -> String {
    let mut out = format!(
        "# Ensemble of `{}` from calibration `{}`\n\n{}.\n\n{} draws.\n\n| search | parameter | fitted | 95% posterior interval | rows | χ² of the rows at the fit | inflation T | ESS of {} proposals |\n|---|---|---|---|---|---|---|---|\n",
        e.profile,
        e.calibration,
        e.method,
        e.draws.len(),
        e.proposals
    );
    let mut degenerate = Vec::new();
    for (i, s) in e.searches.iter().enumerate() {
        if s.ess < MIN_ESS {
            degenerate.push(format!("{} (ESS {:.1})", i + 1, s.ess));
        }
        for (k, name) in s.parameters.iter().enumerate() {
            out.push_str(&format!(
                "| {} | {name} | {:.4} | {:.4} – {:.4} | {} | {:.2} | {:.2} | {:.1} |\n",
                i + 1,
                s.fitted[k],
                s.interval[k].0,
                s.interval[k].1,
                s.rows,
                s.chi2_rows,
                s.inflation,
                s.ess
            ));
        }
    }
    if !degenerate.is_empty() {
        out.push_str(&format!(
            "\n**Degenerate searches: {}.** Their importance weights sit on a handful of proposals (ESS under {MIN_ESS}), so their draws repeat those points and their intervals are not posterior intervals. Where the weight sits on a proposal whose χ² is below the fit's, the fit is not at the minimum of its search. More proposals, a wider proposal, or an MCMC sampler would be needed there.\n",
            degenerate.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(ess: f64) -> SearchPosterior {
        SearchPosterior {
            parameters: vec!["mmlu.skill".into()],
            fitted: vec![1.0],
            rows: 3,
            chi2_rows: 2.0,
            inflation: 1.0,
            ess,
            interval: vec![(0.5, 1.5)],
        }
    }

    /// A search whose weights sit on a handful of proposals is named degenerate; one with a
    /// healthy ESS is not.
    #[test]
    fn a_search_with_a_small_ess_is_marked_degenerate() {
        let mut e = Ensemble {
            profile: "p".into(),
            calibration: "c".into(),
            method: "m".into(),
            proposals: 32,
            defensive: 0.0,
            searches: vec![search(12.0), search(1.3)],
            draws: vec![BTreeMap::from([("mmlu.skill".to_string(), 1.0)])],
        };
        let md = ensemble_report(&e);
        assert!(md.contains("**Degenerate searches: 2 (ESS 1.3).**"), "{md}");
        e.searches[1].ess = 6.0;
        assert!(!ensemble_report(&e).contains("Degenerate"));
    }

    /// Weighted quantiles follow the weights, not the count of values.
    #[test]
    fn weighted_quantiles_follow_the_weights() {
        let v = [3.0, 1.0, 2.0];
        let w = [0.1, 0.1, 0.8];
        assert_eq!(weighted_quantile(&v, &w, 0.025), 1.0);
        assert_eq!(weighted_quantile(&v, &w, 0.5), 2.0);
        assert_eq!(weighted_quantile(&v, &w, 0.975), 3.0);
    }
}
