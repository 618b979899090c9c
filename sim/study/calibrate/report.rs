//! The fit report as markdown, and the round-1 → round-3 directions it checks.

use super::{Calibration, Fit, RowFit};

/// The fit report as markdown: parameters, searches, every row (fitted or a check) with its
/// residual and interval, and the round-1 → round-3 direction of round-level rows.
pub fn report(cal: &Calibration, fit: &Fit) -> String {
    let mut s = format!("# Calibration `{}` of `{}`\n\n", cal.spec.name, cal.profile.name);
    if !cal.others.is_empty() {
        s.push_str(&format!(
            "Rows of {} as well, each simulated with its own profile, held fixed.\n\n",
            cal.others.keys().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    if fit.evaluations == 0 {
        s.push_str(&format!(
            "The profile as committed, assessed without fitting: `memlink assess {}`. Its provenance: {}.\n\nObjective ({} over the rows the calibration fits): {:.4}; seeds {:?}.\n\nNo attacked MAPLE-Guard row is fitted: the calibration refuses any selection that contains one (Table 6's attack-free MAPLE-Guard rows may be, issue 43).\n\n| parameter | value | prior | its source |\n|---|---|---|---|\n",
            cal.path.display(),
            cal.profile.provenance,
            cal.spec.loss.describe(),
            fit.objective.1,
            cal.spec.seeds
        ));
        for ((name, _, b), p) in fit.parameters.iter().zip(&cal.spec.parameters) {
            let prior = match (p.prior_sd, cal.profile.model.get(&p.name)) {
                (Some(sd), Some(m)) => format!("deviation from the model value {m:.4}, penalised with spread {sd}"),
                _ => format!("flat on [{}, {}]", p.lo, p.hi),
            };
            let source = p.source.as_deref().unwrap_or("none given");
            s.push_str(&format!("| {name} | {b:.4} | {prior} | {source} |\n"));
        }
    } else {
        s.push_str(&format!(
            "Fitted by `memlink calibrate {}`.\n\nObjective ({} over the fitted rows): {:.4} → {:.4} after {} iterations, {} evaluations; seeds {:?}.\n\nNo attacked MAPLE-Guard row is fitted: the calibration refuses any selection that contains one (Table 6's attack-free MAPLE-Guard rows may be, issue 43).\n\n| parameter | start | fitted |\n|---|---|---|\n",
            cal.path.display(),
            cal.spec.loss.describe(),
            fit.objective.0,
            fit.objective.1,
            fit.iterations,
            fit.evaluations,
            cal.spec.seeds
        ));
        for (name, a, b) in &fit.parameters {
            s.push_str(&format!("| {name} | {a:.4} | {b:.4} |\n"));
        }
    }
    if !fit.centre.is_empty() {
        s.push_str(&format!(
            "\nModel values shared by every workload (each a pooled field: fitted per workload with a prior_sd; a workload's value above is the model's plus its deviation): {}.\n",
            fit.centre.iter().map(|(n, v)| format!("{n} {v:.4}")).collect::<Vec<_>>().join(", ")
        ));
    }
    if fit.spreads.iter().any(Option::is_some) {
        s.push_str("\nStage B: how firmly each workload's own rows fix its value of a pooled model parameter (χ² of its search at the stage-A value ± step; standard error √(2 / χ²''), none where the rows do not determine it, which then does not pull the model's value):\n\n| parameter | stage-A value | χ² at −step, value, +step | standard error |\n|---|---|---|---|\n");
        if let Some((xa, _)) = &fit.stage_a {
            for ((p, sp), v) in fit.parameters.iter().zip(&fit.spreads).zip(xa) {
                let Some(sp) = sp else { continue };
                s.push_str(&format!(
                    "| {} | {v:.4} | {:.2}, {:.2}, {:.2} (step {:.3}) | {} |\n",
                    p.0,
                    sp.chi2[0],
                    sp.chi2[1],
                    sp.chi2[2],
                    sp.step,
                    sp.se.map_or("undetermined".to_string(), |e| format!("{e:.3}"))
                ));
            }
        }
    }
    if let Some((xa, oa)) = &fit.stage_a {
        s.push_str(&format!(
            "\nStage A (every workload free) ended at objective {oa:.4}; stage C penalised each deviation from the pooled values. Stage A's values: {}.\n",
            fit.parameters.iter().zip(xa).map(|(p, v)| format!("{} {v:.4}", p.0)).collect::<Vec<_>>().join(", ")
        ));
    }
    if !fit.added.is_empty() {
        s.push_str(&format!(
            "\nStage C also fitted, penalised, the deviations of pooled fields these workloads do not list but whose rows depend on them (χ² moves by 1 or more between the workload's own value and the pooled one): {}.\n",
            fit.added.iter().map(|p| format!("{}.{}", p.workload, p.name)).collect::<Vec<_>>().join(", ")
        ));
    }
    s.push_str("\nIndependent searches (no fitted row depends on parameters of two of them):\n\n");
    for (k, c) in fit.components.iter().enumerate() {
        s.push_str(&format!("{}. {}\n", k + 1, c.join(", ")));
    }
    let seeds = if cal.spec.interval_seeds.is_empty() { &cal.spec.seeds } else { &cal.spec.interval_seeds };
    let mut seeds_note = format!("Fit seeds {:?}, interval seeds {seeds:?}", cal.spec.seeds);
    for name in cal.spec.settings.keys() {
        let (f, i) = (cal.seeds_of(name, false), cal.seeds_of(name, true));
        if f != cal.spec.seeds.as_slice() || i != seeds.as_slice() {
            seeds_note.push_str(&format!("; {name}: fit seeds {f:?}, interval seeds {i:?}"));
        }
    }
    let disjoint =
        cal.spec.settings.keys().all(|n| cal.seeds_of(n, true).iter().all(|x| !cal.seeds_of(n, false).contains(x)));
    s.push_str(&format!(
        "\n{seeds_note}. {}\n",
        if disjoint {
            "The interval seeds are disjoint from the fit seeds: the interval mean is an out-of-sample check."
        } else {
            "The interval seeds overlap the fit seeds."
        }
    ));
    let within = |r: &RowFit| (r.interval.0 - r.target).abs() <= r.sigma.max(3.0);
    let fitted: Vec<&RowFit> = fit.rows.iter().filter(|r| r.fitted).collect();
    let directions = round_directions(&fit.rows);
    s.push_str(&format!(
        "\nSummary: {} of {} fitted rows within max(3, σ) points of their target (the interval mean); {} of {} checks; {} of {} round-level series move from round 1 to round 3 in the published direction (by at least a point).\n",
        fitted.iter().filter(|r| within(r)).count(),
        fitted.len(),
        fit.rows.iter().filter(|r| !r.fitted && within(r)).count(),
        fit.rows.iter().filter(|r| !r.fitted).count(),
        directions.iter().filter(|d| d.same()).count(),
        directions.len()
    ));
    s.push_str(
        "\n| source | backbone | setting | method | topology | metric | fitted | target | σ | simulated (fit seeds) | residual | interval mean ± 95% half-width | interval mean within max(3, σ) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in &fit.rows {
        let residual = r.simulated - r.target;
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:+.1} | {:.1} ± {:.1} | {} |\n",
            r.source,
            r.backbone,
            r.setting,
            r.guard,
            r.topology,
            r.metric,
            if r.fitted { "yes" } else { "no (check)" },
            r.target,
            r.sigma,
            r.simulated,
            residual,
            r.interval.0,
            r.interval.1,
            if within(r) { "yes" } else { "no" },
        ));
    }
    if !directions.is_empty() {
        s.push_str("\nRound-level rows, round 1 → round 3 (published direction vs simulated, the latter the interval seeds' mean; a simulated change under a point counts as none):\n\n| source | setting | method | metric | published | simulated | same direction |\n|---|---|---|---|---|---|---|\n");
        for d in directions {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {:.1} → {:.1} | {:.1} → {:.1} | {} |\n",
                d.source,
                d.setting,
                d.guard,
                d.metric,
                d.published.0,
                d.published.1,
                d.simulated.0,
                d.simulated.1,
                if d.same() { "yes" } else { "no" }
            ));
        }
    }
    s
}

/// A round-level series' change from round 1 to round 3, published and simulated.
#[derive(Clone, Debug, PartialEq)]
pub struct Direction {
    /// Source table.
    pub source: String,
    /// Setting.
    pub setting: String,
    /// Method.
    pub guard: String,
    /// "MDSR" or "RDA".
    pub metric: String,
    /// Published round 1 and round 3.
    pub published: (f64, f64),
    /// Simulated round 1 and round 3.
    pub simulated: (f64, f64),
}

/// The smallest round-1 → round-3 change (percentage points) that counts as a direction.
pub const DIRECTION_MIN_CHANGE: f64 = 1.0;

impl Direction {
    /// Whether the simulated series moves as the published one: by at least
    /// [`DIRECTION_MIN_CHANGE`] points with the published sign (a flat published series
    /// accepts any change within that). A change smaller than a point in a held-out mean is
    /// noise, not a direction.
    pub fn same(&self) -> bool {
        let p = self.published.1 - self.published.0;
        let q = self.simulated.1 - self.simulated.0;
        if p == 0.0 {
            q.abs() <= DIRECTION_MIN_CHANGE
        } else {
            p.signum() == q.signum() && q.abs() >= DIRECTION_MIN_CHANGE
        }
    }
}

/// Every (source, setting, method, metric) series with both an @1 and an @3 row.
pub fn round_directions(rows: &[RowFit]) -> Vec<Direction> {
    let mut out = Vec::new();
    for r1 in rows {
        let Some((m, "1")) = r1.metric.split_once('@') else { continue };
        let third = format!("{m}@3");
        let Some(r3) = rows.iter().find(|r| {
            r.source == r1.source
                && r.backbone == r1.backbone
                && r.setting == r1.setting
                && r.guard == r1.guard
                && r.topology == r1.topology
                && r.metric == third
        }) else {
            continue;
        };
        out.push(Direction {
            source: r1.source.clone(),
            setting: r1.setting.clone(),
            guard: r1.guard.clone(),
            metric: m.to_string(),
            published: (r1.target, r3.target),
            // The interval seeds' mean: more runs than the fit's, so a direction is not one
            // seed's noise.
            simulated: (r1.interval.0, r3.interval.0),
        });
    }
    out
}
