//! The fit: independent Nelder–Mead searches, checkpointed every iteration; a pooled
//! calibration runs them in stages (sim/study/calibrate/pool.rs).

use super::*;

/// One (workload, pooled field) pair of stage C's probe (`Calibration::stage_c_probe`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// The deviation stage C would fit: the workload, the field, its bounds and prior_sd.
    pub parameter: FitParameter,
    /// The field's value in the workload's stage-A runs.
    pub own: f64,
    /// The pooled (model) value.
    pub shared: f64,
    /// χ² of the workload's rows at `own` and at `shared`.
    pub chi2: [f64; 2],
    /// Whether they differ by one unit or more: stage C then fits the deviation.
    pub added: bool,
}

impl Calibration {
    /// Runs the fit, writing a checkpoint after every iteration into `out`; with `resume` a
    /// checkpoint of the same calibration continues where it stopped. The parameters split
    /// into independent searches ([`Fit::components`]), run one after another, each up to
    /// `max_evaluations`. A pooled calibration runs them twice (stages A and C, see
    /// [`CalibrationSpec::pooled`]), each stage with its own checkpoint. `progress` sees each
    /// iteration with its search's index (stage C's after stage A's).
    pub fn fit(&self, out: &Path, resume: bool, progress: &mut dyn FnMut(usize, &Simplex)) -> Result<Fit> {
        std::fs::create_dir_all(out).map_err(|source| Error::Io { path: out.to_path_buf(), source })?;
        let x0 = self.bounds().clamp(&self.start());
        let centre0 = self.profile.model.clone();
        if !self.spec.pooled {
            let r = self.search(&x0, &centre0, true, &self.state_path(out), resume, 0, progress)?;
            let mut fit = self.assess(&x0, &r.x, &centre0, r.objective, r.iterations, r.evaluations);
            fit.centre = self.centre_entries(&centre0);
            return Ok(fit);
        }
        let a = self.stage_a(out, resume, progress)?;
        let spreads = self.stage_b(out, &a.x)?;
        let centre = self.pool_from(&a.x, &spreads, None, &self.pool_base());
        // Stage C runs on the shared profile: a workload whose rows depend on a pooled field it
        // does not list gets a penalised deviation of it (the probe); every other workload that
        // does not fit a pooled field takes the model's value of it.
        let added = self.stage_c_probe(out, &a.x, &centre)?.into_iter().filter(|p| p.added).collect::<Vec<_>>();
        let mut spec_c = self.spec.clone();
        spec_c.max_evaluations = self.spec.pooled_evaluations.unwrap_or(self.spec.max_evaluations);
        let mut xc0 = a.x.clone();
        for p in &added {
            spec_c.parameters.push(p.parameter.clone());
            xc0.push(p.own);
        }
        let shared = self.derived(spec_c, self.shared_profile(&centre), self.rows.clone());
        let n = self.components().len();
        let c = shared.search(&xc0, &centre, true, &self.pooled_state_path(out), resume, n, progress)?;
        let x0: Vec<f64> = x0.iter().copied().chain(added.iter().map(|p| p.own)).collect();
        let mut fit = shared.assess(
            &x0,
            &c.x,
            &centre,
            (a.objective.0, c.objective.1),
            a.iterations + c.iterations,
            a.evaluations + c.evaluations,
        );
        fit.stage_a = Some((a.x.clone(), a.objective.1));
        fit.spreads = spreads;
        fit.centre = self.centre_entries(&centre);
        fit.added = added.into_iter().map(|p| p.parameter).collect();
        Ok(fit)
    }

    /// Stage C's probe: for every workload the spec fits and every pooled field it does not
    /// list, χ² of the workload's rows at stage A's values `xa` with the field at the value the
    /// workload ran with (`own`) and at the pooled value (`shared`). Where they differ by one
    /// unit of χ² or more the workload's rows depend on the field, and stage C fits a
    /// deviation of it penalised by the field's prior_sd (from `own`, within the union of the
    /// field's bounds); elsewhere the workload takes the model's value. Cached in
    /// `<out>/<name>.probe.json` (its inputs are stages A and B's deterministic results).
    pub(super) fn stage_c_probe(&self, out: &Path, xa: &[f64], centre: &ModelParams) -> Result<Vec<Probe>> {
        let path = out.join(format!("{}.probe.json", self.spec.name));
        if path.exists() {
            let text = read_file(&path)?;
            let probes: Vec<Probe> = serde_json::from_str(&text).map_err(|e| Error::Parse {
                path: path.clone(),
                pos: Pos { line: e.line(), col: e.column() },
                message: format!("expected the stage-C probe of this calibration: {e}"),
            })?;
            return Ok(probes);
        }
        let params = &self.spec.parameters;
        let mut classes: Vec<&str> =
            params.iter().filter(|p| p.guard.is_none() && p.judge.is_none()).map(|p| p.workload.as_str()).collect();
        classes.sort_unstable();
        classes.dedup();
        let mut probes = Vec::new();
        for (name, m) in self.centre_entries(centre) {
            let listings: Vec<&FitParameter> =
                params.iter().filter(|p| p.name == name && p.prior_sd.is_some()).collect();
            let lo = listings.iter().map(|p| p.lo).fold(f64::INFINITY, f64::min);
            let hi = listings.iter().map(|p| p.hi).fold(f64::NEG_INFINITY, f64::max);
            for &class in &classes {
                if params.iter().any(|p| is_model_param(p) && p.workload == class && p.name == name) {
                    continue;
                }
                let own = get_param(&self.profile, class, &name).expect("a model field");
                let parameter = FitParameter {
                    workload: class.to_string(),
                    judge: None,
                    guard: None,
                    name: name.clone(),
                    lo: lo.min(own).min(m),
                    hi: hi.max(own).max(m),
                    start: Some(own),
                    source: listings[0].source.clone(),
                    prior_sd: listings[0].prior_sd,
                };
                let mut spec = self.spec.clone();
                spec.parameters.push(parameter.clone());
                let probe = self.derived(spec, self.profile.clone(), self.rows.clone());
                let comps = probe.components();
                let last = params.len();
                let Some((_, rows)) = comps.iter().find(|(pi, _)| pi.contains(&last)) else { continue };
                if rows.is_empty() {
                    continue;
                }
                let chi2 = |v: f64| {
                    let mut y = xa.to_vec();
                    y.push(v);
                    rows.len() as f64 * probe.objective_on(&y, &self.profile.model, rows, &[])
                };
                let (own_chi2, shared_chi2) = (chi2(own), chi2(m));
                probes.push(Probe {
                    added: (shared_chi2 - own_chi2).abs() >= 1.0,
                    parameter,
                    own,
                    shared: m,
                    chi2: [own_chi2, shared_chi2],
                });
            }
        }
        write_atomic(&path, serde_json::to_string_pretty(&probes).expect("serializable"))?;
        Ok(probes)
    }

    /// Stage A of a pooled fit: every search free (no penalty) from the start point, with its
    /// checkpoint `<out>/<name>.state.json` (shared with [`Self::leave_one_out`]).
    pub(super) fn stage_a(
        &self,
        out: &Path,
        resume: bool,
        progress: &mut dyn FnMut(usize, &Simplex),
    ) -> Result<Searched> {
        std::fs::create_dir_all(out).map_err(|source| Error::Io { path: out.to_path_buf(), source })?;
        let x0 = self.bounds().clamp(&self.start());
        self.search(&x0, &self.profile.model, false, &self.state_path(out), resume, 0, progress)
    }

    /// This calibration with another spec, profile and rows (the scenarios shared).
    pub(super) fn derived(&self, spec: CalibrationSpec, profile: Profile, rows: Vec<Row>) -> Calibration {
        Calibration {
            spec,
            path: self.path.clone(),
            profile_path: self.profile_path.clone(),
            profile,
            others: self.others.clone(),
            rows,
            scenarios: self.scenarios.clone(),
        }
    }

    /// The model values a pooled field starts from when no workload determines it: the
    /// stand-in's defaults for the fields this calibration pools (the profile's value of such a
    /// field is some workload's fit), the profile's for the rest.
    pub(super) fn pool_base(&self) -> ModelParams {
        let defaults = ModelParams::default();
        let mut base = self.profile.model.clone();
        for (name, _) in self.centre_entries(&self.profile.model) {
            *base.field_mut(&name).expect("a model field") = defaults.get(&name).expect("a model field");
        }
        base
    }

    /// The profile with model values `centre`, and every workload that fits no value of a
    /// pooled field without a deviation of it: what the backbone shares.
    pub(super) fn shared_profile(&self, centre: &ModelParams) -> Profile {
        let mut p = self.profile.clone();
        p.model = centre.clone();
        for (name, _) in self.centre_entries(centre) {
            for (class, w) in p.workloads.iter_mut() {
                let fits =
                    self.spec.parameters.iter().any(|q| is_model_param(q) && &q.workload == class && q.name == name);
                if !fits {
                    w.deviations.remove(&name);
                }
            }
        }
        p
    }

    pub(super) fn bounds(&self) -> Bounds {
        let params = &self.spec.parameters;
        Bounds { lo: params.iter().map(|p| p.lo).collect(), hi: params.iter().map(|p| p.hi).collect() }
    }

    pub(super) fn pooled_state_path(&self, out: &Path) -> PathBuf {
        out.join(format!("{}.pooled.state.json", self.spec.name))
    }

    /// The model fields pooled by this calibration (fitted per workload with a prior_sd), with
    /// their values in `centre`.
    pub(super) fn centre_entries(&self, centre: &ModelParams) -> Vec<(String, f64)> {
        let mut names: Vec<&str> =
            self.spec.parameters.iter().filter(|p| p.prior_sd.is_some()).map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.iter().map(|n| (n.to_string(), centre.get(n).expect("a model field"))).collect()
    }

    /// One pass of the independent searches from `x0`, with deviations penalised from `centre`
    /// when `penalise`; checkpoints in `state`, progress indices offset by `first`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn search(
        &self,
        x0: &[f64],
        centre: &ModelParams,
        penalise: bool,
        state: &Path,
        resume: bool,
        first: usize,
        progress: &mut dyn FnMut(usize, &Simplex),
    ) -> Result<Searched> {
        let params = &self.spec.parameters;
        let bounds = self.bounds();
        let comps = self.components();
        let mut done: Vec<Simplex> = if resume && state.exists() { self.load_checkpoint(state)? } else { Vec::new() };
        let mut x = x0.to_vec();
        let (mut start_total, mut end_total) = (0.0, 0.0);
        let n_fitted = self.fitted_rows().len() as f64;
        let coords = self.spec.coordinates;
        for (ci, (pi, rows)) in comps.iter().enumerate() {
            let param_bounds = Bounds {
                lo: pi.iter().map(|&i| bounds.lo[i]).collect(),
                hi: pi.iter().map(|&i| bounds.hi[i]).collect(),
            };
            // The simplex moves in the calibration's coordinates; the objective sees parameters.
            let sub_bounds = coords.bounds(&param_bounds);
            let sub0 = coords.start(&pi.iter().map(|&i| x0[i]).collect::<Vec<f64>>(), &param_bounds);
            let step = coords
                .steps(&pi.iter().map(|&i| 0.1 * (params[i].hi - params[i].lo)).collect::<Vec<f64>>(), &param_bounds);
            let base = x.clone();
            let penalised: Vec<usize> = if penalise { pi.clone() } else { Vec::new() };
            let mut f = |sub: &[f64]| {
                let mut full = base.clone();
                for (k, v) in pi.iter().zip(coords.to_params(sub, &param_bounds)) {
                    full[*k] = v;
                }
                if rows.is_empty() { 0.0 } else { self.objective_on(&full, centre, rows, &penalised) }
            };
            let mut simplex = if ci < done.len() {
                done[ci].clone()
            } else {
                let s = Simplex::start(&sub0, &step, &sub_bounds, &mut f);
                done.push(s.clone());
                s
            };
            let start_value = simplex.vertices.iter().find(|v| v.0 == sub0).map_or_else(|| f(&sub0), |v| v.1);
            while simplex.evaluations < self.spec.max_evaluations && simplex.spread() > self.spec.tolerance {
                simplex.step(&sub_bounds, &mut f);
                done[ci] = simplex.clone();
                write_atomic(state, serde_json::to_string_pretty(&done).expect("serializable"))?;
                progress(first + ci, &coords.simplex_as_params(&simplex, &param_bounds));
            }
            done[ci] = simplex.clone();
            write_atomic(state, serde_json::to_string_pretty(&done).expect("serializable"))?;
            let (best, value) = simplex.best();
            let best = coords.to_params(best, &param_bounds);
            for (k, &i) in pi.iter().enumerate() {
                x[i] = best[k];
            }
            let share = rows.len() as f64 / n_fitted;
            start_total += share * start_value;
            end_total += share * value;
        }
        Ok(Searched {
            x,
            objective: (start_total, end_total),
            iterations: done.iter().map(|s| s.iterations).sum(),
            evaluations: done.iter().map(|s| s.evaluations).sum(),
        })
    }

    /// The profile (and arms) as they are, assessed on every row without fitting: the report
    /// of the committed calibration, regenerated from the code.
    pub fn evaluate(&self) -> Fit {
        let x = self.current();
        let objective = self.objective(&x);
        let mut fit = self.assess(&x, &x, &self.profile.model, (objective, objective), 0, 0);
        fit.centre = self.centre_entries(&self.profile.model);
        fit
    }
}
