//! Experimental designs over D factors, as points in the unit cube `[0, 1]^D` (mapped onto each
//! factor's range by the sweep) or, for one-at-a-time designs, as multipliers of the nominal
//! values. Every design is a pure function of its parameters and a seed, so a sweep file gives
//! the same points on every machine.
//!
//! - **OAT** (one at a time): the nominal point, then each factor alone at each relative step
//!   (×0.8, ×0.9, ×1.1, ×1.2: 4D + 1 points).
//! - **Full factorial**: every combination of L levels per factor (L^D points).
//! - **Latin hypercube**: n points; each factor's range is cut into n equal strata and each
//!   stratum holds exactly one point (McKay, Beckman & Conover 1979), jittered inside it.
//! - **Morris** elementary effects: r trajectories of D + 1 points on a p-level grid with step
//!   Δ = p / (2(p − 1)) (Morris 1991; the SALib default), each moving one factor at a time.
//! - **Sobol / Saltelli**: N base points of a 2D-dimensional Owen-scrambled Sobol sequence
//!   (`sobol_burley`), split into matrices A and B; the design is A, B and, per factor i, A with
//!   column i from B: N(D + 2) points (Saltelli 2002, 2010), which the estimators of
//!   [`super::stats`] need.
//! - **CSV**: the rows of a file, with one column per factor (a SALib sample run verbatim).

use crate::engine::SimRng;
use serde::{Deserialize, Serialize};

/// A design as written in a sweep file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Design {
    /// One at a time: each factor at `steps` × its nominal value, the others nominal.
    Oat {
        /// Relative steps (the reviewer's [0.8, 0.9, 1.1, 1.2]).
        steps: Vec<f64>,
    },
    /// Every combination of `levels` evenly spaced values per factor (ends included).
    Factorial {
        /// Levels per factor (≥ 2).
        levels: u32,
    },
    /// A Latin hypercube of `samples` points.
    Lhs {
        /// Points.
        samples: u32,
    },
    /// Morris elementary effects.
    Morris {
        /// Trajectories r.
        trajectories: u32,
        /// Grid levels p (even, ≥ 2).
        levels: u32,
    },
    /// Sobol first-order and total indices by Saltelli sampling.
    Sobol {
        /// Base samples N (a power of two keeps the Sobol sequence balanced).
        samples: u32,
    },
    /// Rows of a CSV file (relative to the sweep file): a header naming the factors, then one
    /// row of values per point, in the factors' own units.
    Csv(String),
}

/// A point of a design: where each factor sits.
#[derive(Clone, Debug, PartialEq)]
pub enum Coord {
    /// In the unit cube (to be mapped onto the factor's range).
    Unit(f64),
    /// A multiple of the nominal value.
    Relative(f64),
    /// A value in the factor's own units.
    Value(f64),
}

/// Points of a design with what each point is for the analysis.
#[derive(Clone, Debug, PartialEq)]
pub struct Points {
    /// The points, D coordinates each.
    pub points: Vec<Vec<Coord>>,
    /// For each point, a short label ("nominal", "provenance×0.8", "traj 3 step 2", "A 5", …).
    pub labels: Vec<String>,
}

impl Design {
    /// The design's name in outputs.
    pub fn name(&self) -> &'static str {
        match self {
            Design::Oat { .. } => "oat",
            Design::Factorial { .. } => "factorial",
            Design::Lhs { .. } => "lhs",
            Design::Morris { .. } => "morris",
            Design::Sobol { .. } => "sobol",
            Design::Csv(_) => "csv",
        }
    }

    /// Checks the design's parameters for `d` factors; (field, expected) on the first problem.
    pub fn check(&self, d: usize) -> std::result::Result<(), (String, String)> {
        let bad = |f: &str, e: String| Err((f.to_string(), e));
        if d == 0 {
            return bad("factors", "at least one factor".into());
        }
        match self {
            Design::Oat { steps }
                if steps.is_empty() || steps.iter().any(|s| !(s.is_finite() && *s > 0.0 && *s != 1.0)) =>
            {
                return bad("steps", "at least one positive relative step other than 1".into());
            }
            Design::Factorial { levels } if *levels < 2 || (*levels as f64).powi(d as i32) > 1e6 => {
                return bad("levels", format!("2 or more levels and at most 10^6 points, got {levels}^{d}"));
            }
            Design::Lhs { samples } if !(1..=1_000_000).contains(samples) => {
                return bad("samples", format!("1 to 1000000 samples, got {samples}"));
            }
            Design::Morris { trajectories, levels } => {
                if *trajectories < 2 || *trajectories > 100_000 {
                    return bad("trajectories", format!("2 to 100000 trajectories, got {trajectories}"));
                }
                if *levels < 2 || levels % 2 == 1 {
                    return bad("levels", format!("an even number of levels >= 2, got {levels}"));
                }
            }
            Design::Sobol { samples } => {
                if *samples < 2 || *samples > 1 << 20 {
                    return bad("samples", format!("2 to 2^20 base samples, got {samples}"));
                }
                if 2 * d > 256 {
                    return bad("factors", format!("at most 128 factors for a Sobol design, got {d}"));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The points for `d` factors (CSV designs are read by the sweep, not here).
    pub fn points(&self, d: usize, seed: u64) -> Points {
        match self {
            Design::Oat { steps } => oat(d, steps),
            Design::Factorial { levels } => factorial(d, *levels),
            Design::Lhs { samples } => lhs(d, *samples as usize, seed),
            Design::Morris { trajectories, levels } => morris(d, *trajectories as usize, *levels, seed),
            Design::Sobol { samples } => saltelli(d, *samples as usize, seed),
            Design::Csv(_) => Points { points: Vec::new(), labels: Vec::new() },
        }
    }
}

/// OAT: nominal first, then factor by factor, step by step.
pub fn oat(d: usize, steps: &[f64]) -> Points {
    let mut points = vec![vec![Coord::Relative(1.0); d]];
    let mut labels = vec!["nominal".to_string()];
    for i in 0..d {
        for &s in steps {
            let mut p = vec![Coord::Relative(1.0); d];
            p[i] = Coord::Relative(s);
            points.push(p);
            labels.push(format!("f{i}×{s}"));
        }
    }
    Points { points, labels }
}

/// Full factorial, the first factor varying slowest.
pub fn factorial(d: usize, levels: u32) -> Points {
    let l = levels as usize;
    let n = l.pow(d as u32);
    let mut points = Vec::with_capacity(n);
    let mut labels = Vec::with_capacity(n);
    for k in 0..n {
        let mut rest = k;
        let mut p = vec![Coord::Unit(0.0); d];
        let mut idx = vec![0; d];
        for i in (0..d).rev() {
            idx[i] = rest % l;
            rest /= l;
            p[i] = Coord::Unit(idx[i] as f64 / (l - 1) as f64);
        }
        points.push(p);
        labels.push(format!("levels {idx:?}"));
    }
    Points { points, labels }
}

/// Latin hypercube: stratum permutations per factor from the design's own stream.
pub fn lhs(d: usize, n: usize, seed: u64) -> Points {
    let mut rng = SimRng::from_seed_u64(seed ^ 0x4c48_5300);
    let mut cols: Vec<Vec<f64>> = Vec::with_capacity(d);
    for _ in 0..d {
        let mut perm: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            perm.swap(i, j);
        }
        cols.push(perm.iter().map(|&s| (s as f64 + rng.uniform()) / n as f64).collect());
    }
    let points = (0..n).map(|k| (0..d).map(|i| Coord::Unit(cols[i][k])).collect()).collect();
    Points { points, labels: (0..n).map(|k| format!("sample {k}")).collect() }
}

/// Morris trajectories: a random base point on the p-level grid (coordinates that leave room
/// for +Δ), then each factor in a random order moved by +Δ or −Δ.
pub fn morris(d: usize, r: usize, p: u32, seed: u64) -> Points {
    let mut rng = SimRng::from_seed_u64(seed ^ 0x4d4f_5252);
    let delta = p as f64 / (2.0 * (p as f64 - 1.0));
    let mut points = Vec::with_capacity(r * (d + 1));
    let mut labels = Vec::with_capacity(r * (d + 1));
    // Grid values from which both +Δ and −Δ stay in [0, 1] are not guaranteed; pick the base
    // among levels ≤ 1 − Δ and move up, or ≥ Δ and move down, as Morris's construction does.
    let grid: Vec<f64> = (0..p).map(|k| k as f64 / (p as f64 - 1.0)).collect();
    for t in 0..r {
        let mut x: Vec<f64> = (0..d)
            .map(|_| {
                let low: Vec<f64> = grid.iter().copied().filter(|g| *g <= 1.0 - delta + 1e-12).collect();
                low[rng.below(low.len() as u64) as usize]
            })
            .collect();
        let mut order: Vec<usize> = (0..d).collect();
        for i in (1..d).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        // Each factor moves up from a low base, or starts high and moves down.
        let down: Vec<bool> = (0..d).map(|_| rng.below(2) == 1).collect();
        for i in 0..d {
            if down[i] {
                x[i] += delta;
            }
        }
        points.push(x.iter().map(|&v| Coord::Unit(v)).collect());
        labels.push(format!("traj {t} start"));
        for &i in &order {
            x[i] += if down[i] { -delta } else { delta };
            points.push(x.iter().map(|&v| Coord::Unit(v)).collect());
            labels.push(format!("traj {t} f{i}"));
        }
    }
    Points { points, labels }
}

/// The order factors move in each trajectory of a Morris design, and the step's sign, read back
/// from its points: for each trajectory, (factor, Δ) per step.
pub fn morris_steps(points: &[Vec<f64>], d: usize) -> Vec<Vec<(usize, f64)>> {
    points
        .chunks(d + 1)
        .map(|traj| {
            traj.windows(2)
                .map(|w| {
                    let i = (0..d).find(|&i| (w[1][i] - w[0][i]).abs() > 1e-12).unwrap_or(0);
                    (i, w[1][i] - w[0][i])
                })
                .collect()
        })
        .collect()
}

/// Saltelli: rows A (N), then B (N), then AB_i (N each) for i = 0..D.
pub fn saltelli(d: usize, n: usize, seed: u64) -> Points {
    let scramble = (seed as u32) ^ 0x5a17;
    let sample = |k: usize, dim: usize| f64::from(sobol_burley::sample(k as u32, dim as u32, scramble));
    let a: Vec<Vec<f64>> = (0..n).map(|k| (0..d).map(|i| sample(k, i)).collect()).collect();
    let b: Vec<Vec<f64>> = (0..n).map(|k| (0..d).map(|i| sample(k, d + i)).collect()).collect();
    let unit = |v: &Vec<f64>| v.iter().map(|&x| Coord::Unit(x)).collect::<Vec<_>>();
    let mut points = Vec::with_capacity(n * (d + 2));
    let mut labels = Vec::with_capacity(n * (d + 2));
    for (k, row) in a.iter().enumerate() {
        points.push(unit(row));
        labels.push(format!("A {k}"));
    }
    for (k, row) in b.iter().enumerate() {
        points.push(unit(row));
        labels.push(format!("B {k}"));
    }
    for i in 0..d {
        for k in 0..n {
            let mut row = a[k].clone();
            row[i] = b[k][i];
            points.push(unit(&row));
            labels.push(format!("AB{i} {k}"));
        }
    }
    Points { points, labels }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(p: &Points) -> Vec<Vec<f64>> {
        p.points
            .iter()
            .map(|r| r.iter().map(|c| if let Coord::Unit(x) = c { *x } else { f64::NAN }).collect())
            .collect()
    }

    #[test]
    fn oat_has_4d_plus_1_points_each_moving_one_factor() {
        let p = oat(5, &[0.8, 0.9, 1.1, 1.2]);
        assert_eq!(p.points.len(), 4 * 5 + 1);
        for row in &p.points[1..] {
            assert_eq!(row.iter().filter(|c| **c != Coord::Relative(1.0)).count(), 1);
        }
    }

    #[test]
    fn saltelli_has_n_times_d_plus_2_points() {
        let p = saltelli(3, 16, 1);
        assert_eq!(p.points.len(), 16 * (3 + 2));
        let u = unit(&p);
        // AB_i differs from A only in column i, where it equals B.
        for i in 0..3 {
            for k in 0..16 {
                let (a, b, ab) = (&u[k], &u[16 + k], &u[32 + 16 * i + k]);
                for j in 0..3 {
                    assert_eq!(ab[j], if j == i { b[j] } else { a[j] });
                }
            }
        }
    }

    #[test]
    fn every_lhs_stratum_is_hit_once() {
        let n = 25;
        let u = unit(&lhs(4, n, 9));
        for i in 0..4 {
            let mut hits = vec![0; n];
            for row in &u {
                hits[(row[i] * n as f64).floor() as usize] += 1;
            }
            assert!(hits.iter().all(|h| *h == 1), "factor {i}: {hits:?}");
        }
    }

    #[test]
    fn morris_trajectories_move_one_factor_by_delta_per_step() {
        let (d, r, p) = (4, 6, 4);
        let u = unit(&morris(d, r, p, 3));
        assert_eq!(u.len(), r * (d + 1));
        let delta = p as f64 / (2.0 * (p as f64 - 1.0));
        for steps in morris_steps(&u, d) {
            let mut seen: Vec<usize> = steps.iter().map(|s| s.0).collect();
            seen.sort();
            assert_eq!(seen, (0..d).collect::<Vec<_>>(), "every factor moves once");
            assert!(steps.iter().all(|s| (s.1.abs() - delta).abs() < 1e-12));
        }
        assert!(u.iter().flatten().all(|x| (0.0..=1.0 + 1e-12).contains(x)));
    }

    #[test]
    fn factorial_covers_the_grid() {
        let u = unit(&factorial(2, 3));
        assert_eq!(u.len(), 9);
        assert_eq!(u[0], vec![0.0, 0.0]);
        assert_eq!(u[8], vec![1.0, 1.0]);
        assert_eq!(u[1], vec![0.0, 0.5]);
    }
}
