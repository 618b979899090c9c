//! Nelder–Mead simplex minimisation in a box (reflection 1, expansion 2, contraction ½,
//! shrink ½). Points are clamped into the box before evaluation. The whole state is plain
//! data, so a long fit can be checkpointed after every iteration and resumed bit for bit.

use serde::{Deserialize, Serialize};

/// The state of a minimisation: the simplex with its values, best first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Simplex {
    /// Vertices and their objective values, sorted best first.
    pub vertices: Vec<(Vec<f64>, f64)>,
    /// Iterations done.
    pub iterations: u32,
    /// Objective evaluations done.
    pub evaluations: u32,
}

/// A box constraint per coordinate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bounds {
    /// Lower bounds.
    pub lo: Vec<f64>,
    /// Upper bounds.
    pub hi: Vec<f64>,
}

impl Bounds {
    /// `x` moved into the box.
    pub fn clamp(&self, x: &[f64]) -> Vec<f64> {
        x.iter().enumerate().map(|(i, v)| v.clamp(self.lo[i], self.hi[i])).collect()
    }
}

/// The coordinates a search moves in (a calibration's `coordinates`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Coordinates {
    /// The parameters themselves, clamped into their box: a fit can end exactly at a bound.
    #[default]
    Box,
    /// `u = logit((x − lo) / (hi − lo))`, within ±`LOGIT_LIMIT` (12): the box's interior is the
    /// whole search space, so a parameter approaches a bound only as far as the objective keeps
    /// paying for it, and never sits on it (issue 43, point 2).
    Logit,
}

/// The logit coordinate's range: σ(12) leaves 6·10⁻⁶ of a parameter's range to each bound.
pub const LOGIT_LIMIT: f64 = 12.0;

/// How far inside its bounds a logit search starts, as a share of the range.
pub const LOGIT_START_MARGIN: f64 = 0.05;

impl Coordinates {
    /// The box the search moves in, for parameters in `b`.
    pub fn bounds(&self, b: &Bounds) -> Bounds {
        match self {
            Coordinates::Box => b.clone(),
            Coordinates::Logit => Bounds { lo: vec![-LOGIT_LIMIT; b.lo.len()], hi: vec![LOGIT_LIMIT; b.lo.len()] },
        }
    }

    /// Parameters `x` (in `b`) as search coordinates.
    pub fn to_search(&self, x: &[f64], b: &Bounds) -> Vec<f64> {
        match self {
            Coordinates::Box => b.clamp(x),
            Coordinates::Logit => x
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let p = ((v - b.lo[i]) / (b.hi[i] - b.lo[i])).clamp(0.0, 1.0);
                    (p.ln() - (1.0 - p).ln()).clamp(-LOGIT_LIMIT, LOGIT_LIMIT)
                })
                .collect(),
        }
    }

    /// Where a search from parameters `x` starts: `x` itself in box coordinates; in logit
    /// coordinates at least `LOGIT_START_MARGIN` (5%) of each range inside a bound (at a bound the
    /// logit's slope is nil, so a simplex there could not move).
    pub fn start(&self, x: &[f64], b: &Bounds) -> Vec<f64> {
        match self {
            Coordinates::Box => b.clamp(x),
            Coordinates::Logit => {
                let m = LOGIT_START_MARGIN;
                let inside: Vec<f64> = x
                    .iter()
                    .enumerate()
                    .map(|(i, v)| v.clamp(b.lo[i] + m * (b.hi[i] - b.lo[i]), b.hi[i] - m * (b.hi[i] - b.lo[i])))
                    .collect();
                self.to_search(&inside, b)
            }
        }
    }

    /// Search coordinates `u` as parameters in `b`.
    pub fn to_params(&self, u: &[f64], b: &Bounds) -> Vec<f64> {
        match self {
            Coordinates::Box => b.clamp(u),
            Coordinates::Logit => u
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let p = 1.0 / (1.0 + (-v.clamp(-LOGIT_LIMIT, LOGIT_LIMIT)).exp());
                    b.lo[i] + p * (b.hi[i] - b.lo[i])
                })
                .collect(),
        }
    }

    /// The initial simplex's steps in search coordinates, for parameter steps `step`: the
    /// same at the middle of each range (a logit's slope there is a quarter of the range).
    pub fn steps(&self, step: &[f64], b: &Bounds) -> Vec<f64> {
        match self {
            Coordinates::Box => step.to_vec(),
            Coordinates::Logit => step.iter().enumerate().map(|(i, s)| 4.0 * s / (b.hi[i] - b.lo[i])).collect(),
        }
    }

    /// `s` with its vertices in parameter coordinates (for progress lines and reports).
    pub fn simplex_as_params(&self, s: &Simplex, b: &Bounds) -> Simplex {
        Simplex { vertices: s.vertices.iter().map(|(u, v)| (self.to_params(u, b), *v)).collect(), ..s.clone() }
    }
}

fn sort(v: &mut [(Vec<f64>, f64)]) {
    // Ties keep vertex order, so the simplex is the same on every run.
    v.sort_by(|a, b| a.1.total_cmp(&b.1));
}

impl Simplex {
    /// Whether this state can be continued inside `bounds`: dimension + 1 vertices of the
    /// bounds' dimension, inside them, finite non-negative values best first, iterations no more
    /// than evaluations, evaluations at least the vertices and at most `max_evaluations` plus one
    /// step's (a shrink: 2n + 2); a state with no iteration has evaluated exactly its vertices.
    pub fn check(&self, bounds: &Bounds, max_evaluations: u32) -> Result<(), String> {
        let n = bounds.lo.len();
        if self.vertices.len() != n + 1 {
            return Err(format!("{} vertices of a {n}-parameter search, expected {}", self.vertices.len(), n + 1));
        }
        for (k, (x, v)) in self.vertices.iter().enumerate() {
            if x.len() != n {
                return Err(format!("vertex {k} has {} coordinates, expected {n}", x.len()));
            }
            if let Some(i) = (0..n).find(|&i| !(x[i] >= bounds.lo[i] && x[i] <= bounds.hi[i])) {
                return Err(format!(
                    "vertex {k} coordinate {i} = {} outside its bounds [{}, {}]",
                    x[i], bounds.lo[i], bounds.hi[i]
                ));
            }
            if !(v.is_finite() && *v >= 0.0) {
                return Err(format!("vertex {k} has objective {v}, expected a finite value >= 0"));
            }
        }
        if self.vertices.windows(2).any(|w| w[0].1 > w[1].1) {
            return Err("vertices not sorted best first".into());
        }
        let nv = self.vertices.len() as u32;
        if self.evaluations < nv || self.iterations > self.evaluations {
            return Err(format!(
                "{} iterations and {} evaluations for {nv} vertices, expected evaluations >= vertices >= 1 and >= iterations",
                self.iterations, self.evaluations
            ));
        }
        if self.iterations == 0 && self.evaluations != nv {
            return Err(format!("no iteration but {} evaluations, expected {nv}", self.evaluations));
        }
        if self.evaluations > max_evaluations.max(nv) + 2 * nv + 2 {
            return Err(format!("{} evaluations, beyond the limit of {max_evaluations}", self.evaluations));
        }
        Ok(())
    }

    /// The initial simplex around `x0`: `x0` and one vertex per coordinate moved by `step[i]`
    /// (inwards if that would leave the box).
    pub fn start(x0: &[f64], step: &[f64], bounds: &Bounds, f: &mut dyn FnMut(&[f64]) -> f64) -> Self {
        let x0 = bounds.clamp(x0);
        let mut vertices = vec![(x0.clone(), f(&x0))];
        for i in 0..x0.len() {
            let mut x = x0.clone();
            x[i] = if x[i] + step[i] <= bounds.hi[i] { x[i] + step[i] } else { x[i] - step[i] };
            let x = bounds.clamp(&x);
            let v = f(&x);
            vertices.push((x, v));
        }
        sort(&mut vertices);
        let n = vertices.len() as u32;
        Simplex { vertices, iterations: 0, evaluations: n }
    }

    /// The best vertex and its value.
    pub fn best(&self) -> (&[f64], f64) {
        (&self.vertices[0].0, self.vertices[0].1)
    }

    /// Spread of the values (best to worst), the convergence measure.
    pub fn spread(&self) -> f64 {
        self.vertices.last().map_or(0.0, |w| w.1) - self.vertices[0].1
    }

    /// One Nelder–Mead iteration.
    pub fn step(&mut self, bounds: &Bounds, f: &mut dyn FnMut(&[f64]) -> f64) {
        let n = self.vertices.len() - 1;
        let dim = self.vertices[0].0.len();
        let centroid: Vec<f64> =
            (0..dim).map(|j| self.vertices[..n].iter().map(|v| v.0[j]).sum::<f64>() / n as f64).collect();
        let worst = self.vertices[n].clone();
        let along = |t: f64| -> Vec<f64> {
            bounds.clamp(&(0..dim).map(|j| centroid[j] + t * (worst.0[j] - centroid[j])).collect::<Vec<_>>())
        };
        let mut eval = |x: &[f64], evals: &mut u32| {
            *evals += 1;
            f(x)
        };
        let xr = along(-1.0);
        let fr = eval(&xr, &mut self.evaluations);
        if fr < self.vertices[0].1 {
            let xe = along(-2.0);
            let fe = eval(&xe, &mut self.evaluations);
            self.vertices[n] = if fe < fr { (xe, fe) } else { (xr, fr) };
        } else if fr < self.vertices[n - 1].1 {
            self.vertices[n] = (xr, fr);
        } else {
            let (xc, fc) = if fr < worst.1 {
                let x = along(-0.5);
                let v = eval(&x, &mut self.evaluations);
                (x, v)
            } else {
                let x = along(0.5);
                let v = eval(&x, &mut self.evaluations);
                (x, v)
            };
            if fc < worst.1.min(fr) {
                self.vertices[n] = (xc, fc);
            } else {
                // Shrink towards the best vertex.
                let best = self.vertices[0].0.clone();
                for v in self.vertices.iter_mut().skip(1) {
                    let x = bounds.clamp(&(0..dim).map(|j| best[j] + 0.5 * (v.0[j] - best[j])).collect::<Vec<_>>());
                    self.evaluations += 1;
                    *v = (x.clone(), f(&x));
                }
            }
        }
        sort(&mut self.vertices);
        self.iterations += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rosenbrock(x: &[f64]) -> f64 {
        (1.0 - x[0]).powi(2) + 100.0 * (x[1] - x[0] * x[0]).powi(2)
    }

    #[test]
    fn finds_the_rosenbrock_minimum() {
        let b = Bounds { lo: vec![-3.0, -3.0], hi: vec![3.0, 3.0] };
        let mut f = |x: &[f64]| rosenbrock(x);
        let mut s = Simplex::start(&[-1.2, 1.0], &[0.5, 0.5], &b, &mut f);
        for _ in 0..400 {
            s.step(&b, &mut f);
        }
        let (x, v) = s.best();
        assert!(v < 1e-8, "{v}");
        assert!((x[0] - 1.0).abs() < 1e-3 && (x[1] - 1.0).abs() < 1e-3, "{x:?}");
    }

    /// A minimum beyond the box: in box coordinates the search ends on the bound; in logit
    /// coordinates it ends inside, within a hair of it, and the coordinates round-trip.
    #[test]
    fn logit_coordinates_keep_a_search_off_its_bounds() {
        let b = Bounds { lo: vec![0.0, -1.0], hi: vec![2.0, 1.0] };
        let g = |x: &[f64]| (x[0] + 1.0).powi(2) + (x[1] - 0.3).powi(2);
        let run = |c: Coordinates| {
            let sb = c.bounds(&b);
            let mut f = |u: &[f64]| g(&c.to_params(u, &b));
            let mut s = Simplex::start(&c.start(&[1.0, 0.0], &b), &c.steps(&[0.2, 0.2], &b), &sb, &mut f);
            for _ in 0..300 {
                s.step(&sb, &mut f);
            }
            c.to_params(s.best().0, &b)
        };
        let boxed = run(Coordinates::Box);
        assert_eq!(boxed[0], 0.0, "{boxed:?}");
        let logit = run(Coordinates::Logit);
        assert!(logit[0] > 0.0 && logit[0] < 1e-3, "{logit:?}");
        assert!((logit[1] - 0.3).abs() < 1e-3, "{logit:?}");
        let c = Coordinates::Logit;
        for x in [[0.5, 0.0], [1.999, -0.999], [1.0, 0.3]] {
            let back = c.to_params(&c.to_search(&x, &b), &b);
            assert!((back[0] - x[0]).abs() < 1e-9 && (back[1] - x[1]).abs() < 1e-9, "{x:?} → {back:?}");
        }
        // A point on a bound maps to the edge of the search box, not to infinity; a search
        // from it starts 5% of the range inside.
        assert_eq!(c.to_search(&[0.0, 1.0], &b), vec![-LOGIT_LIMIT, LOGIT_LIMIT]);
        let s = c.to_params(&c.start(&[0.0, 1.0], &b), &b);
        assert!((s[0] - 0.1).abs() < 1e-9 && (s[1] - 0.9).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn respects_the_box_and_resumes_exactly() {
        let b = Bounds { lo: vec![2.0, -1.0], hi: vec![5.0, 1.0] };
        let mut f = |x: &[f64]| (x[0] - 0.0).powi(2) + x[1] * x[1];
        let mut s = Simplex::start(&[4.0, 0.5], &[0.5, 0.5], &b, &mut f);
        for _ in 0..10 {
            s.step(&b, &mut f);
        }
        // A checkpoint taken now and resumed gives the same path as going on.
        let saved: Simplex = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        let mut a = s.clone();
        let mut c = saved;
        for _ in 0..60 {
            a.step(&b, &mut f);
            c.step(&b, &mut f);
        }
        assert_eq!(a, c);
        let (x, _) = a.best();
        assert!((x[0] - 2.0).abs() < 1e-6 && x[1].abs() < 1e-3, "{x:?}");
        assert!(a.vertices.iter().all(|v| v.0[0] >= 2.0 && v.0[0] <= 5.0));
    }
}
