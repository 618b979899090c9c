//! Partial pooling of model parameters across workloads (issue 15): one value per backbone,
//! each workload's departure from it penalised.
//!
//! A pooled calibration ([`super::CalibrationSpec::pooled`]) fits a model field `p` (memory
//! weight, peer weight, …) on several workloads, each with a `prior_sd` τ: how far a model's
//! behaviour may plausibly differ between workloads. The objective is
//!
//! ```text
//! Σ_rows loss(z) + Σ_k ((e_k − m_p) / τ)²
//! ```
//!
//! over the workloads' values e_k and the model's value m_p. Minimising over m_p exactly would
//! couple every workload's search; the fit instead runs the standard two-stage (empirical
//! Bayes) approximation:
//!
//! - **Stage A**: every workload's search free, giving ê_k (the searches stay independent).
//! - **Stage B**: the curvature of each workload's χ² (its rows' summed loss) along e_k at ê_k,
//!   by a central difference, gives ê_k's standard error s_k = √(2 / χ²''): the half-width at
//!   which χ² rises by 1. A workload whose rows do not move with e_k (χ²'' ≤ 0, or too small to
//!   measure) has no standard error: it says nothing about the model's value. Minimising the
//!   quadratic approximation over e_k leaves, per workload, (ê_k − m)² / (τ² + s_k²), so
//!   m_p = Σ w_k ê_k / Σ w_k with w_k = 1 / (τ² + s_k²): precise workloads count most, flat
//!   ones not at all.
//! - **Stage C**: every workload's search again from ê_k, with the deviations from m_p penalised.
//!   A workload that does not determine e_k moves to the model's value; one whose rows demand
//!   another value keeps a deviation, at a cost the report shows.
//!
//! A field no workload determines keeps the profile's value. The leave-one-setting-out folds
//! ([`super::loso`]) pool the same stage-A values and standard errors without the left-out
//! workload's.

use super::{Calibration, is_model_param};
use crate::agent::ModelParams;
use crate::error::{Error, Pos, Result, read_file};
use crate::files::write_atomic;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Stage B's measurement of one parameter at its stage-A value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The finite-difference step.
    pub step: f64,
    /// χ² of the parameter's search at value − step, at the value, at value + step.
    pub chi2: [f64; 3],
    /// The standard error √(2 / χ²''), None when χ²'' is not positive (the rows do not
    /// determine the parameter there).
    pub se: Option<f64>,
}

impl Spread {
    /// χ²'' by the central difference.
    pub fn curvature(&self) -> f64 {
        (self.chi2[0] - 2.0 * self.chi2[1] + self.chi2[2]) / (self.step * self.step)
    }
}

/// The step of stage B's central difference, as a fraction of a parameter's bounds.
pub const STEP_FRACTION: f64 = 0.05;

impl Calibration {
    fn spreads_path(&self, out: &Path) -> std::path::PathBuf {
        out.join(format!("{}.spreads.json", self.spec.name))
    }

    /// Stage B (module docs) at stage-A values `xa`: the spread of every pooled parameter,
    /// None for the rest. Written to `<out>/<name>.spreads.json` and read back from there when
    /// present and of this calibration's shape (its inputs are stage A's deterministic result).
    pub(super) fn stage_b(&self, out: &Path, xa: &[f64]) -> Result<Vec<Option<Spread>>> {
        let path = self.spreads_path(out);
        if path.exists() {
            let text = read_file(&path)?;
            let s: Vec<Option<Spread>> = serde_json::from_str(&text).map_err(|e| Error::Parse {
                path: path.clone(),
                pos: Pos { line: e.line(), col: e.column() },
                message: format!("expected the stage-B spreads of this calibration: {e}"),
            })?;
            if s.len() == self.spec.parameters.len() {
                return Ok(s);
            }
        }
        let comps = self.components();
        let mut spreads = Vec::with_capacity(xa.len());
        for (i, p) in self.spec.parameters.iter().enumerate() {
            if p.prior_sd.is_none() || !is_model_param(p) {
                spreads.push(None);
                continue;
            }
            let Some((pi, rows)) = comps.iter().find(|(pi, _)| pi.contains(&i)) else {
                spreads.push(None);
                continue;
            };
            let step = STEP_FRACTION * (p.hi - p.lo);
            // The point and its neighbours inside the bounds (a one-sided stencil at a bound).
            let mid = xa[i].clamp(p.lo + step, p.hi - step);
            let chi2 = [mid - step, mid, mid + step].map(|v| {
                let mut y = xa.to_vec();
                y[i] = v;
                // Free χ²: stage B measures what the rows say, not the penalty.
                rows.len() as f64 * self.objective_on(&y, &self.profile.model, rows, &[])
            });
            let _ = pi;
            let mut s = Spread { step, chi2, se: None };
            let c = s.curvature();
            // A curvature the rows cannot tell from flat: less than one unit of χ² across the
            // parameter's whole range.
            let range = p.hi - p.lo;
            if c > 0.0 && c * range * range / 2.0 >= 1.0 {
                s.se = Some((2.0 / c).sqrt());
            }
            spreads.push(Some(s));
        }
        write_atomic(&path, serde_json::to_string_pretty(&spreads).expect("serializable"))?;
        Ok(spreads)
    }

    /// The model values pooled from per-workload values `x` with stage-B `spreads`: each model
    /// field fitted on some workload with a prior_sd τ becomes Σ w_k x_k / Σ w_k with
    /// w_k = 1 / (τ² + s_k²) over the workloads whose rows determine it, leaving out workload
    /// `without` (a leave-one-setting-out fold). A field none of them determines keeps `base`'s
    /// value.
    pub(super) fn pool_from(
        &self,
        x: &[f64],
        spreads: &[Option<Spread>],
        without: Option<&str>,
        base: &ModelParams,
    ) -> ModelParams {
        let mut m = base.clone();
        for (name, _) in self.centre_entries(base) {
            let (mut num, mut den) = (0.0, 0.0);
            for (i, (p, v)) in self.spec.parameters.iter().zip(x).enumerate() {
                if p.name != name || Some(p.workload.as_str()) == without {
                    continue;
                }
                let (Some(tau), Some(Some(Spread { se: Some(se), .. }))) = (p.prior_sd, spreads.get(i)) else {
                    continue;
                };
                let w = 1.0 / (tau * tau + se * se);
                num += w * v;
                den += w;
            }
            if den > 0.0 {
                *m.field_mut(&name).expect("a model field") = num / den;
            }
        }
        m
    }
}
