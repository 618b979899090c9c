//! Identifiability of a calibration (issue 15, point 10): which parameters the targets leave
//! undetermined, read from the objective's profile over each parameter.
//!
//! A parameter is *determined* by the targets when moving it away from its fitted value raises
//! the objective by at least one unit of χ² (the sum of the rows' squared spread-weighted
//! residuals, the fit's objective times its rows) even after the other parameters of its search
//! have moved to compensate. That is the profile of the objective over the parameter; a slice
//! ([`super::loso`], the others held) overstates how well a parameter is determined whenever
//! another parameter can take its place (the split of damage between peer messages and memory
//! is the case issue 15 names).
//!
//! **The computation.** Each search (the fit's independent groups of parameters and rows) is
//! analysed at the committed profile `θ̂`, with the fit's seeds:
//!
//! 1. *Jacobian.* Each row's residual `r = (simulated − target) / σ` is differentiated by central
//!    differences with a step of [`STEP`] of the parameter's bounds (one-sided where the fitted
//!    value sits at a bound). The outcome of a simulated answer is discrete, so the step must
//!    move enough decisions to be seen: a twentieth of the range does on every committed
//!    calibration. The Gauss–Newton matrix `F = JᵀJ` gives `Δχ² ≈ δᵀFδ` for a move `δ`
//!    near `θ̂`. A model parameter with a prior_sd adds `1/τ²` on its diagonal (the fit's
//!    deviation penalty).
//! 2. *Linearised profile.* With parameter `i` held at `θ̂ᵢ + t` and the others re-optimised in
//!    that quadratic model, `Δχ² = s·t²` with `s` the Schur complement of `F` at `i`; the
//!    half-width `1/√s` is where it reaches 1 ([`SearchId::half_width`]), `None` when `F` is
//!    singular along `i` (a direction the rows do not see at all). It is reported for the
//!    targets alone and with the prior.
//! 3. *The profile trace.* At `points` values evenly spaced across the bounds, the others move
//!    along the linearised conditional optimum `δ₋ᵢ = −F₋ᵢ₋ᵢ⁺ F₋ᵢᵢ t` (clamped into their
//!    bounds), and the objective is evaluated there by simulation; with `refine K`, a
//!    Nelder–Mead search over the others from that point spends up to `K` more evaluations per
//!    point minimising the rows' χ² (a penalty would trade the rows' fit for the prior's). Every trace value is an upper bound on the true profile (it is a feasible point of
//!    the minimisation the profile does). So a side along which the trace stays within one unit
//!    of the fitted χ² is *open* without qualification (as long as the fit is the minimum: a
//!    trace point more than one unit below it is reported), and a side along which it rises by
//!    one or more is *bounded* to the accuracy of the path (exactly as `K` grows).
//! 4. *The flattest direction.* The eigenvectors of the targets' `F` in units of each
//!    parameter's range: an eigenvalue is the χ² a move of one full range along its direction
//!    costs, to first order. An eigenvalue under 1 names a combination of parameters the targets
//!    leave open even when each parameter alone looks determined.
//!
//! A stored result (the calibration's `identify` file) is re-evaluated by `memlink assess`:
//! the objective at the profile and at every stored trace point, with the current code, so the
//! committed verdicts are drift-checked without recomputing the Jacobian. A stored result
//! computed at other parameter values than the profile's is refused, naming the file and the
//! parameter.

use super::{Bounds, Calibration, Simplex};
use crate::error::{Error, Pos, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The finite-difference step of the Jacobian, as a fraction of each parameter's bounds.
pub const STEP: f64 = 0.05;

/// Eigenvalues below this fraction of the largest count as zero (a direction no row sees).
pub const RANK_TOLERANCE: f64 = 1e-9;

/// The rise of χ² that makes a side of a parameter determined.
pub const DELTA_CHI2: f64 = 1.0;

/// A fitted value within this fraction of its range from a bound sits at that bound.
pub const AT_BOUND: f64 = 0.01;

/// The identifiability analysis of one calibration: one entry per search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Identification {
    /// Most Nelder–Mead evaluations that refined each trace point (0: the tangent path alone).
    #[serde(default)]
    pub refine: u32,
    /// The searches, in the fit's order.
    pub searches: Vec<SearchId>,
}

/// One search's analysis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchId {
    /// Parameter names as the fit report prints them.
    pub parameters: Vec<String>,
    /// Their values in the profile (`θ̂`).
    pub values: Vec<f64>,
    /// Their lower bounds.
    pub lo: Vec<f64>,
    /// Their upper bounds.
    pub hi: Vec<f64>,
    /// Their prior_sd (model parameters fitted per workload), else None.
    pub prior_sd: Vec<Option<f64>>,
    /// The model value each deviation is penalised from (where `prior_sd` is set).
    pub centre: Vec<Option<f64>>,
    /// The fitted rows of the search.
    pub rows: usize,
    /// χ² at the profile: the rows' losses plus the search's deviation penalties.
    pub chi2: f64,
    /// ∂(residual of row k)/∂(parameter i), rows × parameters, per unit of the parameter.
    pub jacobian: Vec<Vec<f64>>,
    /// One trace per parameter, in order.
    pub traces: Vec<Trace>,
    /// The fitted rows' spread-weighted residuals at the profile, in the Jacobian's row order
    /// (empty in files written before issue 43; `memlink assess` fills them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub residuals: Vec<f64>,
    /// The fitted rows' names (`source setting method metric`), in the same order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub row_names: Vec<String>,
}

/// The profile trace of one parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The parameter's index in its search.
    pub parameter: usize,
    /// The evaluated points, by value.
    pub points: Vec<TracePoint>,
}

/// One point of a profile trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TracePoint {
    /// Every parameter of the search at this point (the traced one at its trace value).
    pub x: Vec<f64>,
    /// χ² there.
    pub chi2: f64,
}

/// How the targets bound one side of a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The fitted value sits at this bound.
    AtBound,
    /// χ² rises by [`DELTA_CHI2`] or more on this side.
    Bounded,
    /// χ² stays within [`DELTA_CHI2`] of the fit up to the bound.
    Open,
}

impl SearchId {
    /// The Gauss–Newton matrix `JᵀJ`, plus `1/τ²` on the diagonal of every parameter with a
    /// prior_sd when `prior`.
    pub fn fisher(&self, prior: bool) -> Vec<Vec<f64>> {
        let n = self.parameters.len();
        let mut f = vec![vec![0.0; n]; n];
        for (a, row) in f.iter_mut().enumerate() {
            for (b, cell) in row.iter_mut().enumerate() {
                *cell = self.jacobian.iter().map(|r| r[a] * r[b]).sum();
            }
        }
        if prior {
            for (i, sd) in self.prior_sd.iter().enumerate() {
                if let Some(sd) = sd {
                    f[i][i] += 1.0 / (sd * sd);
                }
            }
        }
        f
    }

    /// The linearised profile's half-width at Δχ² = 1 for parameter `i`, the others
    /// re-optimised: `1/√s` with `s` the Schur complement of `F` at `i`. None when `F` is
    /// singular along `i`.
    pub fn half_width(&self, i: usize, prior: bool) -> Option<f64> {
        let f = self.fisher(prior);
        let (others, cross) = split(&f, i);
        let x = pseudo_solve(&others, &cross);
        let s = f[i][i] - cross.iter().zip(&x).map(|(a, b)| a * b).sum::<f64>();
        let scale = f.iter().enumerate().map(|(k, r)| r[k]).fold(0.0, f64::max);
        (s > RANK_TOLERANCE * scale && s > 0.0).then(|| 1.0 / s.sqrt())
    }

    /// The linearised conditional optimum's direction for parameter `i` under the targets
    /// alone (no prior): how every parameter moves per unit of `i`, 1 at `i`. Where the
    /// targets leave the others' move open, the smallest one in units of each parameter's range.
    pub fn path(&self, i: usize) -> Vec<f64> {
        let w = self.widths();
        let f = self.fisher(false);
        let scaled: Vec<Vec<f64>> =
            f.iter().enumerate().map(|(a, r)| r.iter().enumerate().map(|(b, v)| v * w[a] * w[b]).collect()).collect();
        let (others, cross) = split(&scaled, i);
        let x = pseudo_solve(&others, &cross);
        let mut d = Vec::with_capacity(f.len());
        let mut k = 0;
        for j in 0..f.len() {
            if j == i {
                d.push(1.0);
            } else {
                d.push(-x[k] * w[j] / w[i]);
                k += 1;
            }
        }
        d
    }

    fn widths(&self) -> Vec<f64> {
        self.lo.iter().zip(&self.hi).map(|(l, h)| h - l).collect()
    }

    /// The deviation penalty at the search's parameters `x`: Σ ((x − centre) / prior_sd)².
    pub fn penalty(&self, x: &[f64]) -> f64 {
        x.iter()
            .zip(self.prior_sd.iter().zip(&self.centre))
            .filter_map(|(v, (sd, m))| Some(((v - (*m)?) / (*sd)?).powi(2)))
            .sum()
    }

    /// The parameters that sit at a bound (within [`AT_BOUND`] of its range) and what holds
    /// them there, as markdown lines: the rows whose χ² would rise if the parameter moved
    /// inward (the gradient `2 r J` along the inward direction, per unit of the parameter, from
    /// the residuals and the Jacobian), largest first, and the prior's own pull. Empty when no
    /// parameter is at a bound or the residuals are unknown.
    pub fn at_bounds(&self) -> String {
        if self.residuals.len() != self.jacobian.len() || self.row_names.len() != self.jacobian.len() {
            return String::new();
        }
        let mut out = String::new();
        for i in 0..self.parameters.len() {
            let range = self.hi[i] - self.lo[i];
            let (which, inward) = if self.values[i] - self.lo[i] <= AT_BOUND * range {
                ("lower", 1.0)
            } else if self.hi[i] - self.values[i] <= AT_BOUND * range {
                ("upper", -1.0)
            } else {
                continue;
            };
            let mut pushes: Vec<(f64, &str)> = self
                .jacobian
                .iter()
                .zip(&self.residuals)
                .zip(&self.row_names)
                .map(|((j, r), name)| (2.0 * r * j[i] * inward, name.as_str()))
                .filter(|(g, _)| *g > 0.0)
                .collect();
            pushes.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
            let rows: Vec<String> = pushes.iter().take(4).map(|(g, n)| format!("{n} ({g:+.1})")).collect();
            let prior = match (self.prior_sd[i], self.centre[i]) {
                (Some(sd), Some(c)) => {
                    let g = 2.0 * (self.values[i] - c) / (sd * sd) * inward;
                    format!("; the prior's deviation penalty {g:+.1} (centre {c})")
                }
                _ => String::new(),
            };
            out.push_str(&format!(
                "\n**{} at its {which} bound** ({:.4}, bound {}). Rows whose χ² rises if it moves inward (Δχ² per unit, first order): {}{prior}.\n",
                self.parameters[i],
                self.values[i],
                if inward > 0.0 { self.lo[i] } else { self.hi[i] },
                if rows.is_empty() { "none (the bound is where the search stopped, not where the rows hold it)".to_string() } else { rows.join(", ") },
            ));
        }
        out
    }

    /// The targets' χ² (the rows alone, without the penalty) at `p`.
    pub fn targets_chi2(&self, p: &TracePoint) -> f64 {
        p.chi2 - self.penalty(&p.x)
    }

    /// The eigenvalues and unit eigenvectors of the targets' matrix in units of each
    /// parameter's range, smallest first: χ² of a move of one full range along each direction.
    pub fn directions(&self) -> Vec<(f64, Vec<f64>)> {
        let f = self.fisher(false);
        let w = self.widths();
        let scaled: Vec<Vec<f64>> =
            f.iter().enumerate().map(|(a, r)| r.iter().enumerate().map(|(b, v)| v * w[a] * w[b]).collect()).collect();
        eigen_symmetric(&scaled)
    }

    /// The two sides of parameter `i`'s trace under the targets' χ² (`objective`: with the
    /// penalty), and the lowest Δχ² on it.
    pub fn sides(&self, i: usize, objective: bool) -> (Side, Side, f64) {
        let v = self.values[i];
        let tol = 1e-12 * (self.hi[i] - self.lo[i]);
        let pts = self.traces.iter().find(|t| t.parameter == i).map_or(&[][..], |t| &t.points[..]);
        let delta = |p: &TracePoint| {
            if objective { p.chi2 - self.chi2 } else { self.targets_chi2(p) - (self.chi2 - self.penalty(&self.values)) }
        };
        let rise = |below: bool| {
            pts.iter()
                .filter(|p| if below { p.x[i] < v - tol } else { p.x[i] > v + tol })
                .map(delta)
                .fold(f64::NEG_INFINITY, f64::max)
        };
        let side = |at_bound: bool, below: bool| {
            if at_bound {
                Side::AtBound
            } else if rise(below) >= DELTA_CHI2 {
                Side::Bounded
            } else {
                Side::Open
            }
        };
        let lowest = pts.iter().map(delta).fold(0.0, f64::min);
        (side(v <= self.lo[i] + tol, true), side(v >= self.hi[i] - tol, false), lowest)
    }

    /// The verdict on parameter `i` in words: *undetermined* when no side rises by
    /// [`DELTA_CHI2`] (a fitted value at one bound with the other side open is undetermined
    /// within its bounds), *open below* or *open above* when one side does, else *determined*.
    pub fn verdict(&self, i: usize, objective: bool) -> &'static str {
        match self.sides(i, objective) {
            (Side::Open | Side::AtBound, Side::Open, _) | (Side::Open, Side::AtBound, _) => "undetermined",
            (Side::Open, Side::Bounded, _) => "open below",
            (Side::Bounded, Side::Open, _) => "open above",
            _ => "determined",
        }
    }
}

/// `f` without row and column `i`, and column `i` without row `i`.
fn split(f: &[Vec<f64>], i: usize) -> (Vec<Vec<f64>>, Vec<f64>) {
    let keep: Vec<usize> = (0..f.len()).filter(|&j| j != i).collect();
    let others = keep.iter().map(|&a| keep.iter().map(|&b| f[a][b]).collect()).collect();
    let cross = keep.iter().map(|&a| f[a][i]).collect();
    (others, cross)
}

/// The minimum-norm solution of `a x = b` for symmetric positive semi-definite `a`: the
/// pseudo-inverse through the eigen-decomposition, eigenvalues below [`RANK_TOLERANCE`] of
/// the largest dropped.
fn pseudo_solve(a: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let eig = eigen_symmetric(a);
    let top = eig.iter().map(|e| e.0.abs()).fold(0.0, f64::max);
    let mut x = vec![0.0; b.len()];
    for (lambda, v) in &eig {
        if *lambda > RANK_TOLERANCE * top && *lambda > 0.0 {
            let c = v.iter().zip(b).map(|(p, q)| p * q).sum::<f64>() / lambda;
            for (xi, vi) in x.iter_mut().zip(v) {
                *xi += c * vi;
            }
        }
    }
    x
}

/// Eigenvalues and unit eigenvectors of a symmetric matrix by cyclic Jacobi rotations,
/// smallest eigenvalue first; each vector's largest component is positive.
pub fn eigen_symmetric(a: &[Vec<f64>]) -> Vec<(f64, Vec<f64>)> {
    let n = a.len();
    let mut m: Vec<Vec<f64>> = a.to_vec();
    let mut v: Vec<Vec<f64>> = (0..n).map(|i| (0..n).map(|j| f64::from(u8::from(i == j))).collect()).collect();
    let norm: f64 = m.iter().flatten().map(|x| x * x).sum::<f64>().sqrt();
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|p| (0..n).filter(move |&q| q != p).map(move |q| (p, q)))
            .map(|(p, q)| m[p][q] * m[p][q])
            .sum();
        if off.sqrt() <= 1e-15 * norm || norm == 0.0 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                if m[p][q] == 0.0 {
                    continue;
                }
                let theta = (m[q][q] - m[p][p]) / (2.0 * m[p][q]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for row in m.iter_mut() {
                    let (mkp, mkq) = (row[p], row[q]);
                    row[p] = c * mkp - s * mkq;
                    row[q] = s * mkp + c * mkq;
                }
                let (rp, rq) = (m[p].clone(), m[q].clone());
                m[p] = rp.iter().zip(&rq).map(|(a, b)| c * a - s * b).collect();
                m[q] = rp.iter().zip(&rq).map(|(a, b)| s * a + c * b).collect();
                for row in v.iter_mut() {
                    let (vp, vq) = (row[p], row[q]);
                    row[p] = c * vp - s * vq;
                    row[q] = s * vp + c * vq;
                }
            }
        }
    }
    let mut out: Vec<(f64, Vec<f64>)> = (0..n)
        .map(|k| {
            let mut col: Vec<f64> = v.iter().map(|r| r[k]).collect();
            let lead = col.iter().copied().fold(0.0, |a: f64, x| if x.abs() > a.abs() { x } else { a });
            if lead < 0.0 {
                col.iter_mut().for_each(|x| *x = -*x);
            }
            (m[k][k], col)
        })
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

impl Calibration {
    /// χ² of search (`pi`, `rows`) at full parameters `x`: its rows' losses and its
    /// parameters' deviation penalties (the fit's objective times its rows).
    pub(super) fn search_chi2(&self, x: &[f64], pi: &[usize], rows: &[usize]) -> f64 {
        rows.len() as f64 * self.objective_on(x, &self.profile.model, rows, pi)
    }

    /// The names of `rows` as the reports print them: `source setting method metric`.
    fn row_names(&self, rows: &[usize]) -> Vec<String> {
        rows.iter()
            .map(|&k| {
                let t = &self.rows[k].target;
                format!("{} {} {} {}", t.source, t.setting, t.guard, t.metric)
            })
            .collect()
    }

    /// The spread-weighted residual of each of `rows` at `x`.
    fn residuals(&self, x: &[f64], rows: &[usize]) -> Vec<f64> {
        let sim = self.simulate(x, &self.profile.model, rows);
        rows.iter().zip(sim).map(|(&k, s)| (s - self.rows[k].target.percent) / self.sigma(&self.rows[k])).collect()
    }

    /// The identifiability analysis at the committed profile (module docs): per search the
    /// Jacobian, then per parameter a profile trace at `points` values evenly spaced across
    /// its bounds (at least 2: the bounds), each point refined by up to `refine` Nelder–Mead
    /// evaluations over the search's other parameters. `progress` sees each parameter's name
    /// when its trace is done.
    pub fn identify(&self, points: usize, refine: u32, progress: &mut dyn FnMut(&str)) -> Identification {
        let x = self.current();
        let names = self.evaluate_names();
        let mut searches = Vec::new();
        for (pi, rows) in self.components() {
            if rows.is_empty() {
                continue;
            }
            let params: Vec<_> = pi.iter().map(|&i| &self.spec.parameters[i]).collect();
            let r0 = self.residuals(&x, &rows);
            let chi2 = self.search_chi2(&x, &pi, &rows);
            let mut jacobian = vec![vec![0.0; pi.len()]; rows.len()];
            for (c, (&i, p)) in pi.iter().zip(&params).enumerate() {
                let h = STEP * (p.hi - p.lo);
                let (up, down) = ((x[i] + h).min(p.hi), (x[i] - h).max(p.lo));
                let at = |v: f64| {
                    if v == x[i] {
                        r0.clone()
                    } else {
                        let mut y = x.clone();
                        y[i] = v;
                        self.residuals(&y, &rows)
                    }
                };
                let (ru, rd) = (at(up), at(down));
                for (k, row) in jacobian.iter_mut().enumerate() {
                    row[c] = if up > down { (ru[k] - rd[k]) / (up - down) } else { 0.0 };
                }
            }
            let mut s = SearchId {
                parameters: pi.iter().map(|&i| names[i].clone()).collect(),
                values: pi.iter().map(|&i| x[i]).collect(),
                lo: params.iter().map(|p| p.lo).collect(),
                hi: params.iter().map(|p| p.hi).collect(),
                prior_sd: params
                    .iter()
                    .map(|p| p.prior_sd.filter(|_| self.profile.model.get(&p.name).is_some()))
                    .collect(),
                centre: params.iter().map(|p| p.prior_sd.and_then(|_| self.profile.model.get(&p.name))).collect(),
                rows: rows.len(),
                chi2,
                jacobian,
                traces: Vec::new(),
                residuals: r0.clone(),
                row_names: self.row_names(&rows),
            };
            for c in 0..pi.len() {
                let d = s.path(c);
                let n = points.max(2);
                let mut pts = Vec::new();
                for k in 0..n {
                    let v = s.lo[c] + (s.hi[c] - s.lo[c]) * k as f64 / (n - 1) as f64;
                    let t = v - s.values[c];
                    let start: Vec<f64> = (0..pi.len())
                        .map(|j| if j == c { v } else { (s.values[j] + d[j] * t).clamp(s.lo[j], s.hi[j]) })
                        .collect();
                    pts.push(self.refine_point(&x, &pi, &rows, c, start, refine));
                }
                s.traces.push(Trace { parameter: c, points: pts });
                progress(&s.parameters[c]);
            }
            searches.push(s);
        }
        Identification { refine, searches }
    }

    /// One trace point: `start` (the search's parameters) evaluated, then improved by up to
    /// `refine` evaluations of a Nelder–Mead search over every parameter but `c` that
    /// minimises the rows' χ² (the targets' profile); the point found replaces `start` when
    /// its rows fit better.
    fn refine_point(
        &self,
        x: &[f64],
        pi: &[usize],
        rows: &[usize],
        c: usize,
        start: Vec<f64>,
        refine: u32,
    ) -> TracePoint {
        let full = |sub: &[f64]| placed(x, pi, sub);
        let chi2 = self.search_chi2(&full(&start), pi, rows);
        let free: Vec<usize> = (0..pi.len()).filter(|&k| k != c).collect();
        if refine == 0 || free.is_empty() {
            return TracePoint { x: start, chi2 };
        }
        let params = &self.spec.parameters;
        let bounds = Bounds {
            lo: free.iter().map(|&k| params[pi[k]].lo).collect(),
            hi: free.iter().map(|&k| params[pi[k]].hi).collect(),
        };
        let step: Vec<f64> = free.iter().map(|&k| STEP * (params[pi[k]].hi - params[pi[k]].lo)).collect();
        let with = |sub: &[f64]| {
            let mut y = start.clone();
            for (k, &j) in free.iter().enumerate() {
                y[j] = sub[k];
            }
            y
        };
        // The targets' profile: the rows' χ² alone is minimised (a penalty would trade the rows'
        // fit for the prior's); the point keeps the objective's χ² like every other.
        let mut f = |sub: &[f64]| self.search_chi2(&full(&with(sub)), &[], rows);
        let sub0: Vec<f64> = free.iter().map(|&k| start[k]).collect();
        let mut simplex = Simplex::start(&sub0, &step, &bounds, &mut f);
        let targets_start = simplex.vertices.iter().find(|v| v.0 == sub0).map_or_else(|| f(&sub0), |v| v.1);
        while simplex.evaluations < refine && simplex.spread() > self.spec.tolerance {
            simplex.step(&bounds, &mut f);
        }
        let (best, targets_best) = simplex.best();
        if targets_best < targets_start {
            TracePoint { x: with(best), chi2: self.search_chi2(&full(&with(best)), pi, rows) }
        } else {
            TracePoint { x: start, chi2 }
        }
    }

    /// The file of the calibration's stored identification (its `identify`), if it names one.
    pub fn identify_path(&self) -> Option<PathBuf> {
        self.spec.identify.as_ref().map(|rel| self.path.parent().unwrap_or(Path::new(".")).join(rel))
    }

    /// The stored identification re-evaluated by the current code (module docs), None when
    /// the calibration names none. An error names the file when it does not parse or does
    /// not belong to this calibration and profile.
    pub fn assess_identification(&self) -> Result<Option<Identification>> {
        let (Some(path), Some(stored)) = (self.identify_path(), self.stored_identification()?) else {
            return Ok(None);
        };
        self.reassess_identification(&stored, &path).map(Some)
    }

    /// The stored identification as written (not re-evaluated), None when the calibration
    /// names none; an error names the file when it does not parse.
    pub fn stored_identification(&self) -> Result<Option<Identification>> {
        let Some(path) = self.identify_path() else { return Ok(None) };
        super::read_stored(&path, "an identifiability analysis (`memlink calibrate --identify`)").map(Some)
    }

    /// The calibration's searches (parameter and row indices) matched to a stored
    /// identification's, after checking that it belongs to this calibration at the committed
    /// profile: as many searches, the same parameters, computed at the profile's values. The
    /// error says what differs and how to recompute.
    pub(super) fn stored_searches(&self, stored: &Identification) -> std::result::Result<Vec<Search>, String> {
        let x = self.current();
        let names = self.evaluate_names();
        let comps: Vec<(Vec<usize>, Vec<usize>)> =
            self.components().into_iter().filter(|(_, rows)| !rows.is_empty()).collect();
        if comps.len() != stored.searches.len() {
            return Err(format!(
                "{} searches stored, the calibration has {}: recompute with `memlink calibrate {} --identify N`",
                stored.searches.len(),
                comps.len(),
                self.path.display()
            ));
        }
        for ((pi, _), s) in comps.iter().zip(&stored.searches) {
            let want: Vec<&String> = pi.iter().map(|&i| &names[i]).collect();
            if s.parameters.iter().collect::<Vec<_>>() != want {
                return Err(format!("a search of parameters {:?}, expected {:?}", s.parameters, want));
            }
            for (k, &i) in pi.iter().enumerate() {
                let stored_v = s.values.get(k).copied().unwrap_or(f64::NAN);
                if (stored_v - x[i]).abs() > 1e-9 * x[i].abs().max(1.0) {
                    return Err(format!(
                        "computed at {} = {stored_v}, the profile has {}: recompute with `memlink calibrate {} --identify N`",
                        names[i],
                        x[i],
                        self.path.display()
                    ));
                }
            }
        }
        Ok(comps)
    }

    /// `stored` with χ² at the profile and at every trace point evaluated by the current code.
    pub fn reassess_identification(&self, stored: &Identification, path: &Path) -> Result<Identification> {
        let x = self.current();
        let bad = |message: String| Error::Parse { path: path.to_path_buf(), pos: Pos { line: 1, col: 1 }, message };
        let comps = self.stored_searches(stored).map_err(bad)?;
        let mut searches = Vec::new();
        for ((pi, rows), s) in comps.iter().zip(&stored.searches) {
            let n = pi.len();
            let shaped = s.lo.len() == n
                && s.hi.len() == n
                && s.prior_sd.len() == n
                && s.centre.len() == n
                && s.jacobian.len() == rows.len()
                && s.jacobian.iter().all(|r| r.len() == n && r.iter().all(|v| v.is_finite()))
                && s.traces.iter().all(|t| t.parameter < n && t.points.iter().all(|p| p.x.len() == n));
            if !shaped {
                return Err(bad(format!(
                    "the search of {:?} does not have one bound, prior, Jacobian column and trace coordinate per parameter and one Jacobian row per fitted row ({})",
                    s.parameters,
                    rows.len()
                )));
            }
            let full = |sub: &[f64]| placed(&x, pi, sub);
            let traces = s
                .traces
                .iter()
                .map(|t| Trace {
                    parameter: t.parameter,
                    points: t
                        .points
                        .iter()
                        .map(|p| TracePoint { x: p.x.clone(), chi2: self.search_chi2(&full(&p.x), pi, rows) })
                        .collect(),
                })
                .collect();
            searches.push(SearchId {
                chi2: self.search_chi2(&x, pi, rows),
                traces,
                residuals: self.residuals(&x, rows),
                row_names: self.row_names(rows),
                ..s.clone()
            });
        }
        Ok(Identification { refine: stored.refine, searches })
    }
}

/// One search of a calibration: its parameters' and its fitted rows' indices.
pub(super) type Search = (Vec<usize>, Vec<usize>);

/// The full parameter vector `x` with a search's parameters (indices `pi`) set to `sub`.
pub(super) fn placed(x: &[f64], pi: &[usize], sub: &[f64]) -> Vec<f64> {
    let mut y = x.to_vec();
    for (k, &i) in pi.iter().enumerate() {
        y[i] = sub[k];
    }
    y
}

/// The identifiability analysis as markdown (the module docs' terms).
pub fn identify_report(cal: &Calibration, id: &Identification) -> String {
    let spec = cal.spec();
    let mut s = format!(
        "## Identifiability of `{}` (`{}`): the objective's profile over each parameter\n\n",
        spec.name, spec.profile
    );
    let points = id.searches.iter().flat_map(|s| &s.traces).map(|t| t.points.len()).max().unwrap_or(2);
    let refine = if id.refine > 0 { format!(" --refine {}", id.refine) } else { String::new() };
    let stored = spec.identify.as_ref().map_or(String::new(), |p| format!(" (stored in `{}`)", p.display()));
    s.push_str(&format!(
        "`memlink calibrate {} --identify {points}{refine}` computed it{stored}; `memlink assess` re-evaluates χ² at the profile and at every stored point with the current code. \
Per search: χ² is the rows' squared spread-weighted residuals plus the deviation penalties, on the fit's seeds. \
**±Δχ²=1** is the linearised profile's half-width (the other parameters re-optimised in the Gauss–Newton model from central differences at {} of the bounds), from the targets alone and with the prior; ∞ where no row sees the parameter once the others compensate. \
**Δχ² along the profile** is simulated at evenly spaced values across the bounds, the other parameters of the search on the targets' linearised conditional optimum (clamped into their bounds): an upper bound on the targets' true profile, so *open* (Δχ² under {DELTA_CHI2} up to the bound) is certain and *bounded* holds to the path's accuracy. \
The verdicts: **targets** from the rows' Δχ² alone (which parameters the targets leave undetermined), **objective** with the deviation penalties added (what the fit minimises; a model parameter the targets leave open is then held by its prior). \
**Flattest direction**: the smallest eigenvalue of the targets' matrix in units of each parameter's range, i.e. the χ² of a move of one full range along it (to first order); under 1, the targets leave that combination open. \
sim/study/calibrate/identify.rs has the method.\n\n",
        cal.file().display(),
        STEP
    ));
    s.push_str(&if id.refine == 0 {
        "**These traces follow the tangent path alone** (no refinement): a side marked bounded is bounded along that path, which a curved valley can leave; `--refine K` re-optimises every point over the search's other parameters.\n\n".to_string()
    } else {
        format!("Every trace point was re-optimised over the search's other parameters by up to {} Nelder–Mead evaluations from the tangent path's point.\n\n", id.refine)
    });
    for (k, srch) in id.searches.iter().enumerate() {
        s.push_str(&format!(
            "### Search {}: {} ({} rows, χ² {:.1} at the profile)\n\n",
            k + 1,
            srch.parameters.join(", "),
            srch.rows,
            srch.chi2
        ));
        s.push_str("| parameter | value | bounds | ±Δχ²=1, targets alone | ±Δχ²=1, with the prior | Δχ² of the targets along the profile (value: Δχ², the objective's with the prior) | targets | objective |\n|---|---|---|---|---|---|---|---|\n");
        let t0 = srch.chi2 - srch.penalty(&srch.values);
        for i in 0..srch.parameters.len() {
            let hw = |prior| srch.half_width(i, prior).map_or("∞".to_string(), |w| format!("{w:.3}"));
            let trace = srch.traces.iter().find(|t| t.parameter == i).map_or(String::new(), |t| {
                t.points
                    .iter()
                    .map(|p| format!("{:.3}: {:+.1} ({:+.1})", p.x[i], srch.targets_chi2(p) - t0, p.chi2 - srch.chi2))
                    .collect::<Vec<_>>()
                    .join(", ")
            });
            let verdict = |objective| {
                let (_, _, lowest) = srch.sides(i, objective);
                let note =
                    if lowest <= -DELTA_CHI2 { format!(" (below the fit: {lowest:+.1})") } else { String::new() };
                format!("{}{note}", srch.verdict(i, objective))
            };
            s.push_str(&format!(
                "| {} | {:.3} | [{}, {}] | {} | {} | {} | {} | {} |\n",
                srch.parameters[i],
                srch.values[i],
                srch.lo[i],
                srch.hi[i],
                hw(false),
                hw(true),
                trace,
                verdict(false),
                verdict(true)
            ));
        }
        s.push_str(&srch.at_bounds());
        let dirs = srch.directions();
        if let Some((lambda, v)) = dirs.first() {
            let parts: Vec<String> = v
                .iter()
                .enumerate()
                .filter(|(_, c)| c.abs() >= 0.25)
                .map(|(j, c)| format!("{c:+.2} {}", srch.parameters[j]))
                .collect();
            let open = dirs.iter().filter(|d| d.0 < DELTA_CHI2).count();
            s.push_str(&format!(
                "\nFlattest direction of the targets: χ² {:.2} across one full range along {} ({} of {} directions under {DELTA_CHI2}).\n\n",
                lambda.max(0.0),
                parts.join(" "),
                open,
                dirs.len()
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(jacobian: Vec<Vec<f64>>, prior_sd: Vec<Option<f64>>) -> SearchId {
        let n = prior_sd.len();
        let centre = prior_sd.iter().map(|sd| sd.map(|_| 0.5)).collect();
        SearchId {
            parameters: (0..n).map(|i| format!("p{i}")).collect(),
            values: vec![0.5; n],
            lo: vec![0.0; n],
            hi: vec![1.0; n],
            prior_sd,
            centre,
            rows: jacobian.len(),
            chi2: 3.0,
            jacobian,
            traces: Vec::new(),
            residuals: Vec::new(),
            row_names: Vec::new(),
        }
    }

    /// A parameter at its lower bound names the rows that hold it there: those whose squared
    /// residual grows when it moves up (a positive residual rising with it, or a negative one
    /// falling), largest first, and never a row it would help.
    #[test]
    fn a_parameter_at_a_bound_names_the_rows_that_hold_it_there() {
        let mut s = search(vec![vec![2.0, 0.0], vec![-1.0, 1.0], vec![3.0, 0.0]], vec![Some(0.25), None]);
        s.values = vec![0.001, 0.5];
        s.centre = vec![Some(1.0), None];
        s.residuals = vec![1.0, 2.0, -0.5];
        s.row_names = vec!["t11 a".into(), "t11 b".into(), "t6 c".into()];
        let md = s.at_bounds();
        // Row a: 2·1·2 = +4 (held); row b: 2·2·(−1) = −4 (helped); row c: 2·(−0.5)·3 = −3.
        assert!(md.contains("**p0 at its lower bound**") && md.contains("t11 a (+4.0)"), "{md}");
        assert!(!md.contains("t11 b") && !md.contains("t6 c") && !md.contains("p1 at"), "{md}");
        assert!(md.contains("prior's deviation penalty -32.0"), "the prior pulls it up: {md}");
        s.residuals.clear();
        assert_eq!(s.at_bounds(), "", "unknown residuals: nothing claimed");
    }

    #[test]
    fn jacobi_finds_a_known_decomposition() {
        let e = eigen_symmetric(&[vec![2.0, 1.0], vec![1.0, 2.0]]);
        assert!((e[0].0 - 1.0).abs() < 1e-12 && (e[1].0 - 3.0).abs() < 1e-12, "{e:?}");
        let h = std::f64::consts::FRAC_1_SQRT_2;
        assert!((e[0].1[0].abs() - h).abs() < 1e-12 && (e[0].1[0] + e[0].1[1]).abs() < 1e-12, "{e:?}");
        assert!((e[1].1[0] - h).abs() < 1e-12 && (e[1].1[1] - h).abs() < 1e-12, "{e:?}");
    }

    #[test]
    fn two_parameters_only_their_sum_moves_leave_each_undetermined_and_name_the_direction() {
        // Two rows that see a + b only: each parameter alone looks determined (a slice moves
        // the sum) but the other compensates, and the direction a − b is flat.
        let s = search(vec![vec![2.0, 2.0], vec![1.0, 1.0]], vec![None, None]);
        assert_eq!(s.half_width(0, false), None);
        assert_eq!(s.path(0), vec![1.0, -1.0]);
        let d = s.directions();
        assert!(d[0].0.abs() < 1e-9 && (d[0].1[0] + d[0].1[1]).abs() < 1e-12, "{d:?}");
        // A prior on the second holds it, and the first is then determined to 1/√(5·1/(1+5))...
        let p = search(vec![vec![2.0, 2.0], vec![1.0, 1.0]], vec![None, Some(1.0)]);
        let w = p.half_width(0, true).expect("the prior determines the pair");
        // F = [[5, 5], [5, 6]]: s = 5 − 25/6 = 5/6.
        assert!((w - (6.0f64 / 5.0).sqrt()).abs() < 1e-9, "{w}");
        assert_eq!(p.half_width(0, false), None, "the targets alone still leave it open");
    }

    #[test]
    fn a_side_is_open_until_chi2_rises_by_one_and_a_lower_point_is_reported() {
        let mut s = search(vec![vec![1.0]], vec![None]);
        let pt = |v: f64, chi2: f64| TracePoint { x: vec![v], chi2 };
        s.traces = vec![Trace { parameter: 0, points: vec![pt(0.0, 3.9), pt(0.5, 3.0), pt(1.0, 4.0)] }];
        assert_eq!(s.sides(0, false), (Side::Open, Side::Bounded, 0.0));
        assert_eq!(s.verdict(0, false), "open below");
        s.traces[0].points[0].chi2 = 1.5;
        assert_eq!(s.sides(0, false).2, -1.5);
        s.values[0] = 0.0;
        s.traces[0].points = vec![pt(0.0, 3.0), pt(1.0, 3.5)];
        assert_eq!(s.sides(0, false), (Side::AtBound, Side::Open, 0.0));
        assert_eq!(s.verdict(0, false), "undetermined", "at one bound with the other side open");
        s.traces[0].points[1].chi2 = 4.0;
        assert_eq!(s.verdict(0, false), "determined");
        s.values[0] = 0.5;
        s.traces[0].points = vec![pt(0.0, 5.0), pt(1.0, 3.2)];
        assert_eq!(s.verdict(0, false), "open above");
        // A prior (centre 0.5, sd 0.5) that alone makes a side rise: the targets' verdict keeps
        // it open, the objective's does not.
        s.prior_sd = vec![Some(0.5)];
        s.centre = vec![Some(0.5)];
        s.traces[0].points = vec![pt(0.0, 5.0), pt(1.0, 3.2 + 1.0)];
        assert_eq!(s.verdict(0, false), "open above");
        assert_eq!(s.verdict(0, true), "determined");
    }
}
