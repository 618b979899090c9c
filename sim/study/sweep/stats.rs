//! The statistics a sensitivity analyst expects, each reproducible from its seed: means with
//! standard errors and percentile bootstrap intervals, paired differences under common random
//! numbers, Morris's μ* and σ, and Sobol first-order and total indices. Every reduction runs in
//! a fixed order.
//!
//! The Morris and Sobol statistics are SALib's (`SALib.analyze.morris`, `SALib.analyze.sobol`
//! with `calc_second_order=False`), so that a researcher who checks them against SALib on the
//! same responses gets the same numbers: Sobol's responses are standardised first (SALib's
//! `Y = (Y − mean) / std`), S1 is Saltelli 2010's estimator and ST Jansen's over the variance of
//! A and B together, and each confidence is SALib's: z₀.₉₇₅ times the sample standard deviation
//! of the estimate over bootstrap resamples. Only the resamples come from memlink's own seeded
//! stream ([`resample_indices`]) rather than numpy's; `tests/salib.rs` runs SALib itself on
//! memlink's responses and resamples and agrees to 1e-9.

use crate::engine::SimRng;
use serde::Serialize;

/// A mean with its standard error and 95% percentile bootstrap interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// Mean.
    pub mean: f64,
    /// Standard error (sample sd / √n; 0 with one value).
    pub se: f64,
    /// 2.5% bootstrap quantile.
    pub lo: f64,
    /// 97.5% bootstrap quantile.
    pub hi: f64,
    /// Values.
    pub n: usize,
}

/// Mean of `xs` (0 for none), summed in order.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() { 0.0 } else { xs.iter().sum::<f64>() / xs.len() as f64 }
}

/// Sample standard deviation (0 for fewer than two values).
pub fn sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// The `q` quantile of sorted `v` (linear interpolation).
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let pos = q * (v.len() - 1) as f64;
    let (i, f) = (pos.floor() as usize, pos - pos.floor());
    if i + 1 < v.len() { v[i] * (1.0 - f) + v[i + 1] * f } else { v[i] }
}

/// `resamples` bootstrap resamples of the indices 0..len (each `len` indices drawn with
/// replacement), from their own seeded stream: the draws [`bootstrap`] and the SALib
/// confidences use.
pub fn resample_indices(len: usize, resamples: usize, seed: u64) -> Vec<Vec<usize>> {
    if len == 0 {
        return Vec::new();
    }
    let mut rng = SimRng::from_seed_u64(seed);
    (0..resamples).map(|_| (0..len).map(|_| rng.below(len as u64) as usize).collect()).collect()
}

/// A statistic's 95% percentile bootstrap interval over `n` resamples of the indices 0..len,
/// from its own seeded stream.
pub fn bootstrap(len: usize, resamples: usize, seed: u64, stat: &dyn Fn(&[usize]) -> f64) -> (f64, f64) {
    if len == 0 {
        return (0.0, 0.0);
    }
    let mut vals: Vec<f64> = resample_indices(len, resamples, seed).iter().map(|ix| stat(ix)).collect();
    vals.sort_by(f64::total_cmp);
    (quantile(&vals, 0.025), quantile(&vals, 0.975))
}

/// The normal quantile of a two-sided 95% interval, Φ⁻¹(0.975) (SALib's
/// `norm.ppf(0.5 + conf_level / 2)`).
pub fn z95() -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    Normal::standard().inverse_cdf(0.975)
}

/// SALib's confidence of a statistic: z₀.₉₇₅ times the sample standard deviation (ddof 1) of
/// its values over `resamples` (0 with fewer than two resamples).
fn salib_conf(resamples: &[Vec<usize>], stat: &dyn Fn(&[usize]) -> f64) -> f64 {
    let vals: Vec<f64> = resamples.iter().map(|ix| stat(ix)).collect();
    z95() * sd(&vals)
}

/// Mean, SE and bootstrap interval of `xs`.
pub fn estimate(xs: &[f64], resamples: usize, seed: u64) -> Estimate {
    let (lo, hi) = bootstrap(xs.len(), resamples, seed, &|ix| ix.iter().map(|&i| xs[i]).sum::<f64>() / ix.len() as f64);
    let n = xs.len();
    Estimate { mean: mean(xs), se: if n > 1 { sd(xs) / (n as f64).sqrt() } else { 0.0 }, lo, hi, n }
}

/// The paired difference `b − a` (same replicates, common random numbers).
pub fn paired(a: &[f64], b: &[f64], resamples: usize, seed: u64) -> Estimate {
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    estimate(&d, resamples, seed)
}

/// Morris screening of one factor: μ* (mean |EE|), μ (mean EE), σ (sd of EE), and μ*'s
/// confidence over the trajectories (SALib's `mu_star_conf`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MorrisIndex {
    /// Mean absolute elementary effect.
    pub mu_star: f64,
    /// Mean elementary effect.
    pub mu: f64,
    /// Standard deviation of the elementary effects.
    pub sigma: f64,
    /// SALib's `mu_star_conf`: z₀.₉₇₅ × the sd of μ* over bootstrap resamples of the
    /// trajectories.
    pub mu_star_conf: f64,
    /// The 95% interval μ* ± `mu_star_conf`.
    pub mu_star_ci: (f64, f64),
}

/// Morris indices from each trajectory's steps (factor, Δ in unit coordinates) and responses
/// `y` (D + 1 per trajectory, in design order). Elementary effects are per unit of the factor's
/// range: EE = (y(x + Δeᵢ) − y(x)) / Δ.
pub fn morris(steps: &[Vec<(usize, f64)>], y: &[f64], d: usize, resamples: usize, seed: u64) -> Vec<MorrisIndex> {
    let mut ee: Vec<Vec<f64>> = vec![Vec::new(); d];
    for (t, traj) in steps.iter().enumerate() {
        let base = t * (d + 1);
        for (k, (i, delta)) in traj.iter().enumerate() {
            ee[*i].push((y[base + k + 1] - y[base + k]) / delta);
        }
    }
    ee.iter()
        .enumerate()
        .map(|(i, e)| {
            let abs: Vec<f64> = e.iter().map(|x| x.abs()).collect();
            let r = resample_indices(abs.len(), resamples, seed ^ (i as u64 + 1));
            let conf = salib_conf(&r, &|ix| ix.iter().map(|&j| abs[j]).sum::<f64>() / ix.len() as f64);
            let mu_star = mean(&abs);
            MorrisIndex {
                mu_star,
                mu: mean(e),
                sigma: sd(e),
                mu_star_conf: conf,
                mu_star_ci: (mu_star - conf, mu_star + conf),
            }
        })
        .collect()
}

/// Sobol indices of one factor with SALib's confidences.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SobolIndex {
    /// First-order index S1.
    pub s1: f64,
    /// SALib's `S1_conf`: z₀.₉₇₅ × the sd of S1 over bootstrap resamples of the base rows.
    pub s1_conf: f64,
    /// The 95% interval S1 ± `s1_conf`.
    pub s1_ci: (f64, f64),
    /// Total index ST.
    pub st: f64,
    /// SALib's `ST_conf`.
    pub st_conf: f64,
    /// The 95% interval ST ± `st_conf`.
    pub st_ci: (f64, f64),
}

/// Sobol indices from Saltelli responses `y` (N rows of A, N of B, then N of each AB_i), as
/// SALib's `sobol.analyze(…, calc_second_order=False)` computes them: `y` standardised by its
/// mean and population sd over all N(D + 2) rows, S1_i = mean(f_B (f_ABi − f_A)) / V (Saltelli
/// 2010), ST_i = mean((f_A − f_ABi)²) / (2V) (Jansen 1999), V the population variance of f_A and
/// f_B together; each confidence over one set of resamples of the N base rows shared by every
/// factor. A constant response gives 0 indices (SALib divides by zero).
pub fn sobol(y: &[f64], n: usize, d: usize, resamples: usize, seed: u64) -> Vec<SobolIndex> {
    let zero = SobolIndex { s1: 0.0, s1_conf: 0.0, s1_ci: (0.0, 0.0), st: 0.0, st_conf: 0.0, st_ci: (0.0, 0.0) };
    let m = mean(y);
    let v_all = if y.is_empty() { 0.0 } else { y.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / y.len() as f64 };
    if n == 0 || v_all <= 0.0 {
        return vec![zero; d];
    }
    let s = v_all.sqrt();
    let y: Vec<f64> = y.iter().map(|x| (x - m) / s).collect();
    let f_a = &y[..n];
    let f_b = &y[n..2 * n];
    let variance = |rows: &[usize]| -> f64 {
        let all: Vec<f64> = rows.iter().map(|&k| f_a[k]).chain(rows.iter().map(|&k| f_b[k])).collect();
        let m = mean(&all);
        all.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / all.len() as f64
    };
    let first = |rows: &[usize], i: usize| -> f64 {
        let f_ab = &y[(2 + i) * n..(3 + i) * n];
        let v = variance(rows);
        if v <= 0.0 {
            return 0.0;
        }
        rows.iter().map(|&r| f_b[r] * (f_ab[r] - f_a[r])).sum::<f64>() / rows.len() as f64 / v
    };
    let total = |rows: &[usize], i: usize| -> f64 {
        let f_ab = &y[(2 + i) * n..(3 + i) * n];
        let v = variance(rows);
        if v <= 0.0 {
            return 0.0;
        }
        0.5 * (rows.iter().map(|&r| (f_a[r] - f_ab[r]).powi(2)).sum::<f64>() / rows.len() as f64) / v
    };
    let every: Vec<usize> = (0..n).collect();
    let r = resample_indices(n, resamples, seed);
    (0..d)
        .map(|i| {
            let (s1, st) = (first(&every, i), total(&every, i));
            let s1_conf = salib_conf(&r, &|ix| first(ix, i));
            let st_conf = salib_conf(&r, &|ix| total(ix, i));
            SobolIndex {
                s1,
                s1_conf,
                s1_ci: (s1 - s1_conf, s1 + s1_conf),
                st,
                st_conf,
                st_ci: (st - st_conf, st + st_conf),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::sweep::design::{Coord, morris as morris_design, morris_steps, saltelli};

    /// The Ishigami function on [−π, π]³ (a = 7, b = 0.1), the standard test of sensitivity
    /// estimators, with known indices: S1 = (0.3139, 0.4424, 0), ST = (0.5576, 0.4424, 0.2437).
    fn ishigami(x: &[f64]) -> f64 {
        let (a, b) = (7.0, 0.1);
        x[0].sin() + a * x[1].sin().powi(2) + b * x[2].powi(4) * x[0].sin()
    }

    fn scale(c: &[Coord]) -> Vec<f64> {
        let pi = std::f64::consts::PI;
        c.iter().map(|c| if let Coord::Unit(u) = c { -pi + 2.0 * pi * u } else { 0.0 }).collect()
    }

    #[test]
    fn sobol_recovers_the_ishigami_indices_within_their_intervals() {
        let n = 4096;
        let p = saltelli(3, n, 5);
        let y: Vec<f64> = p.points.iter().map(|c| ishigami(&scale(c))).collect();
        let idx = sobol(&y, n, 3, 300, 7);
        let s1 = [0.3139, 0.4424, 0.0];
        let st = [0.5576, 0.4424, 0.2437];
        for i in 0..3 {
            let x = idx[i];
            // Within the interval, widened by a hundredth for the quasi-random grid's bias.
            assert!(x.s1_ci.0 - 0.01 <= s1[i] && s1[i] <= x.s1_ci.1 + 0.01, "S1[{i}] {x:?} vs {}", s1[i]);
            assert!(x.st_ci.0 - 0.01 <= st[i] && st[i] <= x.st_ci.1 + 0.01, "ST[{i}] {x:?} vs {}", st[i]);
        }
    }

    #[test]
    fn morris_ranks_the_ishigami_factors_and_finds_x3_interacting() {
        let d = 3;
        let p = morris_design(d, 200, 4, 11);
        let unit: Vec<Vec<f64>> = p
            .points
            .iter()
            .map(|r| r.iter().map(|c| if let Coord::Unit(u) = c { *u } else { 0.0 }).collect())
            .collect();
        let y: Vec<f64> = p.points.iter().map(|c| ishigami(&scale(c))).collect();
        let idx = morris(&morris_steps(&unit, d), &y, d, 200, 3);
        // Known screening result: x1 and x2 matter, x3 has no first-order effect but a large σ
        // relative to its μ (it acts only through its interaction with x1).
        assert!(idx[0].mu_star > idx[2].mu_star * 0.5 && idx[1].mu_star > idx[2].mu_star * 0.5, "{idx:?}");
        assert!(idx[2].mu.abs() < idx[2].mu_star, "x3's effects change sign: {idx:?}");
        assert!(idx[2].sigma > 0.5 * idx[2].mu_star, "{idx:?}");
        for x in &idx {
            assert!(x.mu_star_ci.0 <= x.mu_star && x.mu_star <= x.mu_star_ci.1);
        }
    }

    #[test]
    fn the_bootstrap_is_reproducible_and_brackets_the_mean() {
        let xs: Vec<f64> = (0..40).map(|i| (i as f64 * 0.37).sin()).collect();
        let a = estimate(&xs, 500, 1);
        assert_eq!(a, estimate(&xs, 500, 1));
        assert!(a.lo <= a.mean && a.mean <= a.hi && a.se > 0.0);
        let b: Vec<f64> = xs.iter().map(|x| x + 0.25).collect();
        let d = paired(&xs, &b, 500, 2);
        assert!((d.mean - 0.25).abs() < 1e-12 && d.se < 1e-12, "paired differences are exact: {d:?}");
    }
}
