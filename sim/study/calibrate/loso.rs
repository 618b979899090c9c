//! Predictive power of a calibration (issue 15): leave-one-setting-out validation, and the
//! objective's slice through the fitted point along each parameter.
//!
//! **Leave one setting out.** For every setting S of a calibration, S's model parameters are
//! predicted from the other settings alone and S's poisoning rows are compared with the
//! prediction; no row of S that measures an attack is seen. A fold runs in three steps:
//!
//! 1. *Model values without S.* Each model field the calibration pools (fitted per workload
//!    with a `prior_sd`) takes the precision-weighted mean of the other workloads' stage-A
//!    values, weighted by their stage-B standard errors ([`super::pool`]). Stage A is the free
//!    per-workload fit and stage B measures each workload on its own rows, so neither couples
//!    two workloads: the other workloads' values are untouched by S's rows. A field that only S fits takes the
//!    stand-in's default ([`ModelParams::default`]): nothing else informs it. Fields the
//!    calibration never fits keep the profile's values (hand-set, equal on every workload).
//! 2. *S's workload block from its attack-free rows.* S's own workload fields (difficulty and
//!    knowledge: what a new workload changes) are set to the defaults of
//!    [`WorkloadBlock::default`], S's deviations are removed, and S's skill alone is fitted on
//!    S's attack-free rows (Table 6): measuring a new workload's attack-free accuracy is what a
//!    researcher does before asking how it is poisoned. Every setting has one attack-free row,
//!    and one row determines one number ([`BlockFit::Skill`]). For comparison every fold is also
//!    run with all of S's workload fields fitted to that row ([`BlockFit::All`], the rule before
//!    it): two or three fields on one row are not determined, so where the search stops (the
//!    rest of the block wandering along the row's level set) decides the prediction.
//! 3. *Predict S's other fitted rows* (every row that measures an attack) at those parameters,
//!    on the interval seeds.
//!
//! The same fold is run with a second predictor, *defaults*, that gives S the stand-in's
//! default values for the pooled fields: what a profile without shared model values (the
//! structure before issue 15, where every workload's memory weight was its own) can say about
//! a workload it has not seen. The pooled predictor is worth the restructuring only where it
//! beats that one. A third, *shared* ([`Predictor::Shared`]), pools only the fields that two or
//! more other workloads fit and gives the rest their defaults: a value that one other setting
//! alone fixes (AppWorld's instruction gain, LongMemEval's self-claim gain) describes how that
//! setting's attack reaches the model as much as the model, and this predictor measures how
//! much of the pooled error such values carry.
//!
//! **Slices.** [`Calibration::slices`] evaluates the objective of each parameter's search at
//! evenly spaced values across its bounds with every other parameter at the profile's value.
//! A parameter along which the objective's sum (χ², the rows' squared spread-weighted
//! residuals) changes by less than 1 over its whole range is left undetermined by the targets
//! there; a slice is not a profile (the other parameters are not re-optimised), so a steep
//! slice can still hide a direction the targets leave open.

use super::{Calibration, Fit, FitParameter, RowFit, Simplex, is_model_param};
use crate::agent::{ModelParams, WorkloadBlock};
use crate::error::Result;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Most evaluations of a fold's search: a few workload fields fitted to one or two attack-free
/// rows settle long before a full search's budget.
pub const FOLD_EVALUATIONS: u32 = 40;

/// Where a fold takes the left-out workload's model values from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Predictor {
    /// The precision-weighted mean of the other workloads' values.
    Pooled,
    /// As [`Predictor::Pooled`], but a field that fewer than two other workloads fit takes the
    /// stand-in's default: a value one other setting alone fixes says how that setting's attack
    /// works, not how the model does. A diagnostic: how much of the pooled error such values
    /// carry.
    Shared,
    /// The stand-in's defaults (no shared model values).
    Defaults,
}

impl Predictor {
    /// Every predictor, in the order folds are computed and reported.
    pub const ALL: [Predictor; 3] = [Predictor::Pooled, Predictor::Shared, Predictor::Defaults];

    fn label(self) -> &'static str {
        match self {
            Predictor::Pooled => "pooled from the other settings",
            Predictor::Shared => "pooled where two or more other settings fit the value, else the default",
            Predictor::Defaults => "defaults (no shared model)",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Predictor::Pooled => "pooled",
            Predictor::Shared => "shared",
            Predictor::Defaults => "defaults",
        }
    }
}

/// Which of the left-out workload's own fields a fold fits on its attack-free rows (module
/// docs, step 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlockFit {
    /// Its skill alone; every other workload field the calibration fits stays at the stand-in's
    /// default. One attack-free row determines one number.
    Skill,
    /// Every workload field the calibration fits, from the defaults: under-determined on one
    /// row. A stored result without a `block` was computed this way.
    All,
}

impl BlockFit {
    /// Both rules, the one the report leads with first.
    pub const BOTH: [BlockFit; 2] = [BlockFit::Skill, BlockFit::All];

    fn label(self) -> &'static str {
        match self {
            BlockFit::Skill => "skill fitted",
            BlockFit::All => "every block field fitted",
        }
    }

    fn key(self) -> &'static str {
        match self {
            BlockFit::Skill => "skill",
            BlockFit::All => "all",
        }
    }

    /// Stored results from before the rule existed fitted every field.
    fn stored_default() -> BlockFit {
        BlockFit::All
    }

    fn fits(self, field: &str) -> bool {
        self == BlockFit::All || field == "skill"
    }
}

/// One fold: a setting left out and predicted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fold {
    /// The setting left out.
    pub setting: String,
    /// Its workload class.
    pub workload: String,
    /// Where its model values came from.
    pub predictor: Predictor,
    /// Which of its workload fields were fitted.
    #[serde(default = "BlockFit::stored_default")]
    pub block: BlockFit,
    /// The pooled model fields and the values the left-out workload took.
    pub model: Vec<(String, f64)>,
    /// Its workload fields fitted on its attack-free rows (start, fitted).
    pub workload_fit: Vec<(String, f64, f64)>,
    /// Its rows at the fold's parameters: the attack-free rows (`fitted`: seen by the fold)
    /// and the held-out rows (`fitted` false), means over the interval seeds.
    pub rows: Vec<RowFit>,
}

/// The leave-one-setting-out outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Loso {
    /// Every fold: settings in order, within one the pooled predictor first, within one
    /// predictor [`BlockFit::BOTH`]'s order.
    pub folds: Vec<Fold>,
    /// The committed profile's own rows (in-sample), for comparison.
    pub in_sample: Vec<RowFit>,
}

/// One parameter's slice.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Slice {
    /// Parameter name as the fit report names it.
    pub name: String,
    /// Its value in the profile.
    pub value: f64,
    /// Rows of its search.
    pub rows: usize,
    /// (value, objective sum χ²) across the bounds, the profile's value included.
    pub points: Vec<(f64, f64)>,
}

impl Slice {
    /// The largest change of χ² along the slice.
    pub fn range(&self) -> f64 {
        let (lo, hi) =
            self.points.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.1), b.max(p.1)));
        hi - lo
    }
}

impl Calibration {
    /// The model values workload `w` takes in a fold under `predictor`, from the other
    /// workloads' stage-A values `xa` and their spreads.
    fn fold_model(
        &self,
        xa: &[f64],
        spreads: &[Option<super::pool::Spread>],
        w: &str,
        predictor: Predictor,
    ) -> ModelParams {
        let base = self.pool_base();
        match predictor {
            Predictor::Defaults => base,
            Predictor::Pooled => self.pool_from(xa, spreads, Some(w), &base),
            Predictor::Shared => self.shared_only(&self.pool_from(xa, spreads, Some(w), &base), w),
        }
    }

    /// The pooled fields that fewer than two workloads other than `w` fit (by the
    /// calibration's parameters), with the workloads that do.
    pub fn single_source(&self, w: &str) -> Vec<(String, Vec<String>)> {
        self.centre_entries(&self.pool_base())
            .into_iter()
            .filter_map(|(name, _)| {
                let mut by: Vec<String> = self
                    .spec
                    .parameters
                    .iter()
                    .filter(|p| p.prior_sd.is_some() && p.name == name && p.workload != w)
                    .map(|p| p.workload.clone())
                    .collect();
                by.dedup();
                (by.len() < 2).then_some((name, by))
            })
            .collect()
    }

    /// `pooled` with every field [`Self::single_source`] names for `w` at the base value (the
    /// stand-in's default).
    fn shared_only(&self, pooled: &ModelParams, w: &str) -> ModelParams {
        let base = self.pool_base();
        let mut m = pooled.clone();
        for (name, _) in self.single_source(w) {
            *m.field_mut(&name).expect("a model field") = base.get(&name).expect("a model field");
        }
        m
    }

    /// Leave-one-setting-out validation (module docs): stage A (or its checkpoint in `out`
    /// with `resume`), then per setting, predictor and [`BlockFit`] a fit of the workload
    /// fields on the attack-free rows (checkpointed as
    /// `<name>.loso-<setting>-<predictor>-<block>.state.json`) and the held-out rows at the result.
    pub fn leave_one_out(&self, out: &Path, resume: bool, progress: &mut dyn FnMut(usize, &Simplex)) -> Result<Loso> {
        let a = self.stage_a(out, resume, progress)?;
        let spreads = self.stage_b(out, &a.x)?;
        let mut folds = Vec::new();
        for setting in self.spec.settings.keys() {
            let Some(ls) = self.scenarios.get(setting) else { continue };
            let w = ls.scenario.workload.class().to_string();
            if !self.rows.iter().any(|r| r.fitted && &r.setting == setting && !r.attack_free) {
                continue;
            }
            for predictor in Predictor::ALL {
                let model = self.fold_model(&a.x, &spreads, &w, predictor);
                for block in BlockFit::BOTH {
                    folds.push(self.fold(setting, &w, &model, predictor, block, out, resume, progress)?);
                }
            }
        }
        let current = self.evaluate();
        Ok(Loso { folds, in_sample: current.rows })
    }

    /// The folds `stored` lacks, computed from its model values: for every setting it holds,
    /// each [`Predictor`] and [`BlockFit`] it has no fold of is fitted and predicted at the
    /// model values of that predictor's stored folds ([`Predictor::Shared`]'s derived from the
    /// pooled ones: the same values with the single-source fields at their defaults). Stages A
    /// and B are not run again; the stored folds are kept as they are. Valid while the
    /// simulator produces the bytes it produced when `stored` was computed: the model values are
    /// stage A's and B's output on those runs.
    pub fn refold(
        &self,
        stored: &Loso,
        out: &Path,
        resume: bool,
        progress: &mut dyn FnMut(usize, &Simplex),
    ) -> Result<Loso> {
        let path = self.loso_path().unwrap_or_else(|| out.join("stored.loso.json"));
        std::fs::create_dir_all(out).map_err(|source| crate::error::Error::Io { path: out.to_path_buf(), source })?;
        let mut folds = Vec::new();
        let mut settings: Vec<&str> = stored.folds.iter().map(|f| f.setting.as_str()).collect();
        settings.dedup();
        for setting in settings {
            let of = |p: Predictor| stored.folds.iter().find(|f| f.setting == setting && f.predictor == p);
            for predictor in Predictor::ALL {
                let model = match (of(predictor), of(Predictor::Pooled)) {
                    (Some(f), _) => Some((self.stored_model(f, &path)?, f)),
                    (None, Some(f)) if predictor == Predictor::Shared => {
                        Some((self.shared_only(&self.stored_model(f, &path)?, &f.workload), f))
                    }
                    _ => None,
                };
                let Some((model, f)) = model else { continue };
                for block in BlockFit::BOTH {
                    let have = stored
                        .folds
                        .iter()
                        .find(|g| g.setting == setting && g.predictor == predictor && g.block == block);
                    folds.push(match have {
                        Some(g) => g.clone(),
                        None => self.fold(setting, &f.workload, &model, predictor, block, out, resume, progress)?,
                    });
                }
            }
        }
        Ok(Loso { folds, in_sample: stored.in_sample.clone() })
    }

    #[allow(clippy::too_many_arguments)]
    fn fold(
        &self,
        setting: &str,
        w: &str,
        model: &ModelParams,
        predictor: Predictor,
        block: BlockFit,
        out: &Path,
        resume: bool,
        progress: &mut dyn FnMut(usize, &Simplex),
    ) -> Result<Fold> {
        let fold = self.fold_calibration(setting, w, model, predictor, block, None);
        let fit: Fit = if fold.spec.parameters.is_empty() || !fold.rows.iter().any(|r| r.fitted) {
            let x = fold.current();
            fold.assess(&x, &x, model, (0.0, 0.0), 0, 0)
        } else {
            let x0 = fold.bounds().clamp(&fold.start());
            let r = fold.search(&x0, model, false, &fold.state_path(out), resume, 0, progress)?;
            fold.assess(&x0, &r.x, model, r.objective, r.iterations, r.evaluations)
        };
        Ok(Fold {
            setting: setting.to_string(),
            workload: w.to_string(),
            predictor,
            block,
            model: self.centre_entries(model),
            workload_fit: fit.parameters.clone(),
            rows: fit.rows,
        })
    }

    /// The calibration of one fold: setting `setting` (workload `w`) alone, its attack-free rows
    /// fitted and its other rows checks, the profile's model values `model` and `w`'s block
    /// without deviations, every workload field the calibration fits at its default, those
    /// `block` names fitted from there (or, with `at`, set to those values).
    fn fold_calibration(
        &self,
        setting: &str,
        w: &str,
        model: &ModelParams,
        predictor: Predictor,
        block: BlockFit,
        at: Option<&[(String, f64, f64)]>,
    ) -> Calibration {
        let mut profile = self.profile.clone();
        profile.model = model.clone();
        let defaults = WorkloadBlock::default();
        let wb = profile.workloads.get_mut(w).expect("checked at load");
        wb.deviations.clear();
        // S's workload fields at the defaults; its model fields are the fold's.
        let fields: Vec<FitParameter> = self
            .spec
            .parameters
            .iter()
            .filter(|p| p.guard.is_none() && p.judge.is_none() && p.workload == w && !is_model_param(p))
            .map(|p| {
                let d = defaults.get(&p.name).expect("a workload field");
                FitParameter { start: Some(d.clamp(p.lo, p.hi)), prior_sd: None, ..p.clone() }
            })
            .collect();
        for p in &fields {
            let stored = at.and_then(|v| v.iter().find(|(n, _, _)| n == &format!("{w}.{}", p.name)).map(|x| x.2));
            *wb.field_mut(&p.name).expect("a workload field") = stored.unwrap_or(p.start.expect("set above"));
        }
        let params: Vec<FitParameter> = fields.into_iter().filter(|p| block.fits(&p.name)).collect();
        let rows: Vec<super::Row> = self
            .rows
            .iter()
            .filter(|r| r.fitted && r.setting == setting)
            .map(|r| super::Row { fitted: r.attack_free, ..r.clone() })
            .collect();
        let mut spec = self.spec.clone();
        spec.name = format!("{}.loso-{setting}-{}-{}", self.spec.name, predictor.key(), block.key());
        spec.pooled = false;
        spec.max_evaluations = spec.max_evaluations.min(FOLD_EVALUATIONS);
        spec.parameters = params;
        self.derived(spec, profile, rows)
    }

    /// The file of the calibration's stored result (its `loso`), if it names one.
    pub fn loso_path(&self) -> Option<std::path::PathBuf> {
        self.spec.loso.as_ref().map(|rel| self.path.parent().unwrap_or(Path::new(".")).join(rel))
    }

    /// The calibration's stored leave-one-setting-out result as written, None without a `loso`.
    pub fn stored_loso(&self) -> Result<Option<Loso>> {
        let Some(path) = self.loso_path() else { return Ok(None) };
        super::read_stored(&path, "a leave-one-setting-out result (`memlink calibrate --leave-one-out`)").map(Some)
    }

    /// A stored fold's model values over the calibration's base; an error names `path` when
    /// the fold does not fit this calibration (an unknown setting, workload or model field).
    fn stored_model(&self, f: &Fold, path: &Path) -> Result<ModelParams> {
        let bad = |message: String| crate::error::Error::Parse {
            path: path.to_path_buf(),
            pos: crate::error::Pos { line: 1, col: 1 },
            message,
        };
        let Some(ls) = self.scenarios.get(&f.setting) else {
            return Err(bad(format!("folds of this calibration's settings, not `{}`", f.setting)));
        };
        if ls.scenario.workload.class() != f.workload {
            return Err(bad(format!("fold `{}` of workload `{}`", f.setting, ls.scenario.workload.class())));
        }
        let mut model = self.pool_base();
        for (name, v) in &f.model {
            *model
                .field_mut(name)
                .ok_or_else(|| bad(format!("model fields in fold `{}`, not `{name}`", f.setting)))? = *v;
        }
        Ok(model)
    }

    /// The calibration's stored leave-one-setting-out result (its `loso` file), re-evaluated
    /// with `fit`'s rows (the committed profile's) as the in-sample ones; None without a `loso`.
    pub fn assess_loso(&self, fit: &Fit) -> Result<Option<Loso>> {
        let Some(stored) = self.stored_loso()? else { return Ok(None) };
        let path = self.loso_path().expect("a stored result has a path");
        self.reassess_loso(&stored, fit.rows.clone(), &path).map(Some)
    }

    /// A stored leave-one-setting-out result re-evaluated by the current code: every fold's
    /// rows at its stored model values and fitted workload fields (no search), with this
    /// calibration's `in_sample` rows. An error names `path` when a fold does not fit this
    /// calibration (an unknown setting or workload field).
    pub fn reassess_loso(&self, stored: &Loso, in_sample: Vec<RowFit>, path: &Path) -> Result<Loso> {
        let mut folds = Vec::new();
        for f in &stored.folds {
            let model = self.stored_model(f, path)?;
            let fold =
                self.fold_calibration(&f.setting, &f.workload, &model, f.predictor, f.block, Some(&f.workload_fit));
            let x = fold.current();
            let fit = fold.assess(&x, &x, &model, (0.0, 0.0), 0, 0);
            folds.push(Fold { rows: fit.rows, workload_fit: f.workload_fit.clone(), ..f.clone() });
        }
        Ok(Loso { folds, in_sample })
    }

    /// The objective's slice along every parameter (module docs): `points` values evenly
    /// spaced across its bounds plus the profile's own, the others at the profile's values,
    /// each as its search's χ² (the sum of its rows' losses and penalties).
    pub fn slices(&self, points: usize, progress: &mut dyn FnMut(&Slice)) -> Vec<Slice> {
        let x = self.current();
        let names = self.evaluate_names();
        let all_params: Vec<usize> = (0..self.spec.parameters.len()).collect();
        let mut out = Vec::new();
        for (pi, rows) in self.components() {
            if rows.is_empty() {
                continue;
            }
            for &i in &pi {
                let p = &self.spec.parameters[i];
                let mut values: Vec<f64> =
                    (0..points.max(2)).map(|k| p.lo + (p.hi - p.lo) * k as f64 / (points.max(2) - 1) as f64).collect();
                values.push(x[i]);
                values.sort_by(f64::total_cmp);
                values.dedup();
                let pts = values
                    .iter()
                    .map(|&v| {
                        let mut y = x.clone();
                        y[i] = v;
                        let n = rows.len() as f64;
                        (v, n * self.objective_on(&y, &self.profile.model, &rows, &all_params))
                    })
                    .collect();
                let s = Slice { name: names[i].clone(), value: x[i], rows: rows.len(), points: pts };
                progress(&s);
                out.push(s);
            }
        }
        out
    }

    /// Parameter names as the fit report prints them.
    pub(super) fn evaluate_names(&self) -> Vec<String> {
        self.spec
            .parameters
            .iter()
            .map(|p| match (&p.guard, &p.judge) {
                (None, Some(kind)) => format!("judge {kind}.{}", p.name),
                (None, None) => format!("{}.{}", p.workload, p.name),
                (Some(arm), _) => format!("{arm}: {}", p.name),
            })
            .collect()
    }
}

/// z of a row: the interval mean's residual over σ.
fn z(r: &RowFit) -> f64 {
    (r.interval.0 - r.target) / r.sigma
}

fn rms(zs: &[f64]) -> f64 {
    if zs.is_empty() { 0.0 } else { (zs.iter().map(|z| z * z).sum::<f64>() / zs.len() as f64).sqrt() }
}

fn same_row(a: &RowFit, b: &RowFit) -> bool {
    a.source == b.source
        && a.backbone == b.backbone
        && a.setting == b.setting
        && a.guard == b.guard
        && a.topology == b.topology
        && a.metric == b.metric
}

/// The folds a report can compare, in its columns' order: the rule (skill fitted) under each
/// predictor, then every block field fitted under each.
const VARIANTS: [(Predictor, BlockFit); 6] = [
    (Predictor::Pooled, BlockFit::Skill),
    (Predictor::Shared, BlockFit::Skill),
    (Predictor::Defaults, BlockFit::Skill),
    (Predictor::Pooled, BlockFit::All),
    (Predictor::Shared, BlockFit::All),
    (Predictor::Defaults, BlockFit::All),
];

/// A report column's name for a variant.
fn column(p: Predictor, b: BlockFit) -> String {
    let p = match p {
        Predictor::Pooled => "pooled",
        Predictor::Shared => "pooled where shared",
        Predictor::Defaults => "defaults",
    };
    match b {
        BlockFit::Skill => p.to_string(),
        BlockFit::All => format!("{p}, every block field fitted"),
    }
}

/// The leave-one-setting-out report as markdown: per setting the held-out rows' RMS of
/// (prediction − target) / σ under each predictor and [`BlockFit`] the result holds folds of
/// (a column per variant; the committed results hold the rule's pooled and default folds, a
/// full run or `--refold` all of them), beside the committed profile's in-sample value on the
/// same rows, then every held-out row.
pub fn loso_report(cal: &Calibration, loso: &Loso) -> String {
    let mut s = format!(
        "## Leave-one-setting-out validation of `{}` (`{}`)\n\n`memlink calibrate {} --leave-one-out`. Each setting's rows that measure an attack are predicted from the other settings: its model parameters pooled from theirs (or, for comparison, the stand-in's defaults), its skill fitted on its one attack-free row with its other workload fields at the stand-in's defaults. sim/study/calibrate/loso.rs says how, and what the diagnostic variants a full run also computes are. Predictions are means over the interval seeds; z = (prediction − target) / σ. In-sample: the committed profile on the same rows.\n\n",
        cal.spec.name,
        cal.profile.name,
        cal.path.display()
    );
    let variants: Vec<(Predictor, BlockFit)> = VARIANTS
        .iter()
        .copied()
        .filter(|&(p, b)| loso.folds.iter().any(|f| f.predictor == p && f.block == b))
        .collect();
    let names: Vec<String> = variants.iter().map(|&(p, b)| column(p, b)).collect();
    s.push_str(&format!(
        "| setting | held-out rows | in-sample RMS z |{} within max(3, σ): in-sample / {} |\n|---|---|---|{}---|\n",
        names.iter().map(|n| format!(" LOSO RMS z, {n} |")).collect::<String>(),
        names.join(" / "),
        "---|".repeat(names.len())
    ));
    let within = |r: &RowFit| (r.interval.0 - r.target).abs() <= r.sigma.max(3.0);
    let n = variants.len() + 1;
    let mut all: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut counts = vec![0usize; n];
    let mut complete = vec![true; n];
    let mut n_total = 0;
    let settings: Vec<&String> = {
        let mut v: Vec<&String> = loso.folds.iter().map(|f| &f.setting).collect();
        v.dedup();
        v
    };
    for setting in settings {
        let folds: Vec<Option<&Fold>> = variants
            .iter()
            .map(|&(p, b)| loso.folds.iter().find(|f| &f.setting == setting && f.predictor == p && f.block == b))
            .collect();
        let Some(first) = folds.iter().flatten().next() else { continue };
        let held: Vec<&RowFit> = first.rows.iter().filter(|r| !r.fitted).collect();
        let pick = |rows: &[RowFit]| -> Vec<RowFit> {
            held.iter().filter_map(|h| rows.iter().find(|r| same_row(r, h)).cloned()).collect()
        };
        let mut sets: Vec<Option<Vec<RowFit>>> = vec![Some(pick(&loso.in_sample))];
        sets.extend(folds.iter().map(|f| f.map(|f| pick(&f.rows))));
        let mut rms_cells = Vec::new();
        let mut within_cells = Vec::new();
        for (k, set) in sets.iter().enumerate() {
            match set {
                Some(v) => {
                    let zs: Vec<f64> = v.iter().map(z).collect();
                    let w = v.iter().filter(|r| within(r)).count();
                    rms_cells.push(format!("{:.2}", rms(&zs)));
                    within_cells.push(w.to_string());
                    all[k].extend(zs);
                    counts[k] += w;
                }
                None => {
                    rms_cells.push("–".into());
                    within_cells.push("–".into());
                    complete[k] = false;
                }
            }
        }
        n_total += held.len();
        s.push_str(&format!(
            "| {setting} | {} | {} | {} |\n",
            held.len(),
            rms_cells.join(" | "),
            within_cells.join(" / ")
        ));
    }
    // A total over some settings only would not compare with the others: a dash.
    let totals: Vec<String> =
        (0..n).map(|k| if complete[k] { format!("{:.2}", rms(&all[k])) } else { "–".into() }).collect();
    let total_counts: Vec<String> =
        (0..n).map(|k| if complete[k] { counts[k].to_string() } else { "–".into() }).collect();
    s.push_str(&format!("| **all** | {n_total} | {} | {} |\n", totals.join(" | "), total_counts.join(" / ")));
    s.push_str("\n### Folds\n\n");
    for f in &loso.folds {
        s.push_str(&format!("#### {} — {}, {}\n\n", f.setting, f.predictor.label(), f.block.label()));
        let model: Vec<String> = f.model.iter().map(|(n, v)| format!("{n} {v:.3}")).collect();
        let block: Vec<String> = f.workload_fit.iter().map(|(n, a, b)| format!("{n} {a:.3} → {b:.3}")).collect();
        s.push_str(&format!(
            "Model values: {}. Workload block fitted on the attack-free rows: {}.",
            if model.is_empty() { "none pooled".into() } else { model.join(", ") },
            if block.is_empty() { "nothing to fit".into() } else { block.join(", ") }
        ));
        if f.predictor != Predictor::Defaults {
            let single: Vec<String> = cal
                .single_source(&f.workload)
                .into_iter()
                .map(|(n, by)| format!("{n} ({})", if by.is_empty() { "none".into() } else { by.join(", ") }))
                .collect();
            if !single.is_empty() {
                s.push_str(&format!(" Fitted by fewer than two other settings' workloads: {}.", single.join(", ")));
            }
        }
        s.push_str("\n\n");
        s.push_str("| source | method | topology | metric | role | target | σ | prediction ± 95% | z |\n|---|---|---|---|---|---|---|---|---|\n");
        for r in &f.rows {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} ± {:.1} | {:+.2} |\n",
                r.source,
                r.guard,
                r.topology,
                r.metric,
                if r.fitted { "attack-free (fitted)" } else { "held out" },
                r.target,
                r.sigma,
                r.interval.0,
                r.interval.1,
                z(r)
            ));
        }
        s.push('\n');
    }
    s
}

/// The slices as markdown: per parameter its value, χ² across its bounds and the range.
pub fn slices_report(cal: &Calibration, slices: &[Slice]) -> String {
    let mut s = format!(
        "# Objective slices of `{}` (`{}`)\n\n`memlink calibrate {} --slices N`: each parameter moved across its bounds with every other at the profile's value; χ² is its search's sum of squared spread-weighted residuals (and deviation penalties). A range under 1 means the targets do not determine the parameter there (sim/study/calibrate/loso.rs on what a slice does not show).\n\n| parameter | value | rows | χ² across the bounds (value: χ²) | range | determined |\n|---|---|---|---|---|---|\n",
        cal.spec.name,
        cal.profile.name,
        cal.path.display()
    );
    for sl in slices {
        let pts: Vec<String> = sl.points.iter().map(|(v, c)| format!("{v:.3}: {c:.1}")).collect();
        s.push_str(&format!(
            "| {} | {:.3} | {} | {} | {:.2} | {} |\n",
            sl.name,
            sl.value,
            sl.rows,
            pts.join(", "),
            sl.range(),
            if sl.range() < 1.0 { "no" } else { "yes" }
        ));
    }
    s
}
