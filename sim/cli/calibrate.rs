//! `memlink calibrate`: fit a backbone's stand-in, or validate the fit (leave one setting
//! out, slices, identifiability), or draw its posterior ensemble.

use super::invalid;
use memlink::error::{Error, Result};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Calibration file (RON).
    calibration: PathBuf,
    /// Folder for the checkpoint and the report (default: runs/calibrate-<name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where to write the fitted profile (default: the profile file itself).
    #[arg(long)]
    profile_out: Option<PathBuf>,
    /// Continue from the checkpoint in the output folder instead of starting afresh.
    #[arg(long)]
    resume: bool,
    /// Also write the fit report here (e.g. reports/calibration-qwen.md).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Instead of fitting: leave-one-setting-out validation (each setting's attack rows
    /// predicted from the other settings; with --resume, the fit's stage A checkpoint in
    /// the output folder is reused). Writes `<name>.loso.md` and `.json`; the profile is
    /// not touched.
    #[arg(long, conflicts_with = "slices")]
    leave_one_out: bool,
    /// With --leave-one-out: start from the calibration's stored result (its `loso` file)
    /// and compute only the folds it lacks, at its folds' model values (stages A and B
    /// are not run again; valid while the simulator's bytes are those it was computed
    /// with). Writes the stored folds and the new ones.
    #[arg(long, requires = "leave_one_out")]
    refold: bool,
    /// Instead of fitting: the objective's slice along each parameter at N evenly spaced
    /// values across its bounds, at the committed profile. Writes `<name>.slices.md`.
    #[arg(long, value_name = "N")]
    slices: Option<usize>,
    /// Instead of fitting: which parameters the targets leave undetermined, from the
    /// objective's profile over each at N evenly spaced values across its bounds (N >= 2;
    /// the Jacobian's Gauss–Newton model gives the other parameters' path; see
    /// sim/study/calibrate/identify.rs). Writes `<name>.identify.md` and `.json` (the file a
    /// calibration's `identify` names).
    #[arg(long, value_name = "N", conflicts_with_all = ["slices", "leave_one_out"])]
    identify: Option<usize>,
    /// With --identify: refine each profile point by up to K Nelder–Mead evaluations over the
    /// search's other parameters (0: the linearised path alone; each evaluation costs what
    /// one of the fit's does).
    #[arg(long, value_name = "K", requires = "identify", default_value_t = 0)]
    refine: u32,
    /// Instead of fitting: an ensemble of N draws (default 32, at least 16 advised) from the
    /// calibration's approximate posterior, built on its stored identifiability analysis
    /// (its `identify` file, which must be at the committed profile): a Laplace proposal,
    /// importance-weighted by simulation (sim/study/calibrate/ensemble.rs). Writes
    /// `<profile>.ensemble.ron` beside the profile and `<name>.ensemble.md`; each
    /// proposal's χ² is journalled in the output folder (`--resume` reuses it).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "32",
          conflicts_with_all = ["slices", "leave_one_out", "identify"])]
    ensemble: Option<usize>,
    /// With --ensemble: proposals evaluated per search (each costs one of the fit's
    /// evaluations of that search).
    #[arg(long, value_name = "M", requires = "ensemble", default_value_t = memlink::study::calibrate::ensemble::DEFAULT_PROPOSALS)]
    proposals: usize,
    /// With --ensemble: the weight of a defensive wide component in the proposal (a
    /// Student t of a quarter of each parameter's range), which covers a target wider than
    /// the Laplace shape, such as a plateau of a discrete objective (0: the Laplace t alone).
    #[arg(long, value_name = "A", requires = "ensemble", default_value_t = 0.0)]
    defensive: f64,
}

pub fn exec(a: Args) -> Result<()> {
    let Args {
        calibration,
        out,
        profile_out,
        resume,
        report: report_out,
        leave_one_out,
        refold,
        slices,
        identify,
        refine,
        ensemble,
        proposals,
        defensive,
    } = a;
    let cal = memlink::study::calibrate::Calibration::load(&calibration)?;
    let name = cal.spec().name.clone();
    let dir = out.unwrap_or_else(|| PathBuf::from("runs").join(format!("calibrate-{name}")));
    // One writer per output folder: a second memlink waits instead of interleaving.
    let _lock = memlink::files::lock_folder(&dir)?;
    if let Some(n) = ensemble {
        let opts =
            memlink::study::calibrate::ensemble::EnsembleOptions { draws: n, proposals, dir: &dir, resume, defensive };
        return calibrate_ensemble(&cal, opts, report_out.as_deref());
    }
    if leave_one_out || slices.is_some() || identify.is_some() {
        let v = Validation { resume, leave_one_out, refold, slices, identify, refine };
        return calibrate_validation(&cal, &dir, v, report_out.as_deref());
    }
    eprintln!(
        "{name}: fitting {} parameters to {} target rows ({} more rows checked, not fitted)",
        cal.spec().parameters.len(),
        cal.rows().len(),
        cal.checks().len()
    );
    let fit = cal.fit(&dir, resume, &mut search_progress)?;
    let mut wrote = Vec::new();
    if cal.spec().parameters.iter().any(|p| p.guard.is_none()) {
        let target = profile_out.unwrap_or_else(|| cal.profile_path().to_path_buf());
        cal.write_profile(&fit, &target)?;
        wrote.push(target.display().to_string());
    }
    let guards = cal.fitted_guards(&fit);
    if !guards.is_empty() {
        let g = dir.join(format!("{name}.guards.ron"));
        memlink::files::write_atomic(&g, format!("// Fitted arms of `{name}`, to paste into scenarios.\n{guards}"))?;
        wrote.push(g.display().to_string());
    }
    let report = memlink::study::calibrate::report(&cal, &fit);
    let r = dir.join(format!("{name}.md"));
    memlink::files::write_atomic(&r, &report)?;
    wrote.push(r.display().to_string());
    if let Some(r) = report_out {
        memlink::files::write_atomic(&r, &report)?;
        wrote.push(r.display().to_string());
    }
    print!("{report}");
    println!("\nwrote {}", wrote.join(", "));
    Ok(())
}

/// One line of a calibration's progress: search `c`'s iteration.
fn search_progress(c: usize, s: &memlink::study::calibrate::Simplex) {
    let (x, v) = s.best();
    eprintln!(
        "  search {} · iteration {:>3} · {:>4} evaluations · objective {v:.4} · {x:.4?}",
        c + 1,
        s.iterations,
        s.evaluations
    );
}

/// What `memlink calibrate` validates instead of fitting.
struct Validation {
    resume: bool,
    leave_one_out: bool,
    refold: bool,
    slices: Option<usize>,
    identify: Option<usize>,
    refine: u32,
}

/// `memlink calibrate --ensemble N`: the calibration's posterior ensemble, written beside the
/// profile (`<profile>.ensemble.ron`) with its summary `<dir>/<name>.ensemble.md` (and `report`).
fn calibrate_ensemble(
    cal: &memlink::study::calibrate::Calibration,
    opts: memlink::study::calibrate::ensemble::EnsembleOptions<'_>,
    report: Option<&std::path::Path>,
) -> Result<()> {
    let memlink::study::calibrate::ensemble::EnsembleOptions { draws, proposals, dir, .. } = opts;
    if draws == 0 {
        return Err(invalid("ensemble", "at least one draw (default 32)"));
    }
    if proposals < 2 {
        return Err(invalid("proposals", "at least 2 proposals per search (the fit and one draw)"));
    }
    let name = cal.spec().name.clone();
    let Some(id_path) = cal.identify_path() else {
        return Err(Error::Invalid {
            path: cal.file().to_path_buf(),
            pos: memlink::error::Pos { line: 1, col: 1 },
            field: "identify".into(),
            expected: "the stored identifiability analysis the ensemble's proposal is built on (`memlink calibrate FILE --identify N`)".into(),
        });
    };
    let id = cal.stored_identification()?.expect("a calibration with an identify file");
    eprintln!("{name}: ensemble of {draws} draws from {proposals} proposals per search ({})", id_path.display());
    let e = cal.ensemble(&id, &id_path, opts, &mut |s, k, chi2| {
        if k % 16 == 0 || k + 1 == proposals {
            eprintln!("  search {} · proposal {k} · χ² {chi2:.2}", s + 1);
        }
    })?;
    let text = memlink::study::calibrate::ensemble::ensemble_report(&e);
    let path = cal.ensemble_path();
    memlink::files::write_atomic(&path, e.to_ron())?;
    let md = dir.join(format!("{name}.ensemble.md"));
    memlink::files::write_atomic(&md, &text)?;
    if let Some(r) = report {
        memlink::files::write_atomic(r, &text)?;
    }
    print!("{text}");
    println!("\nwrote {} and {}", path.display(), md.display());
    Ok(())
}

/// `memlink calibrate --leave-one-out [--refold]` or `--slices N`: validation of a calibration,
/// written to `<dir>/<name>.{loso,slices}.{md,json}` (and `report`), the profile untouched.
fn calibrate_validation(
    cal: &memlink::study::calibrate::Calibration,
    dir: &std::path::Path,
    v: Validation,
    report: Option<&std::path::Path>,
) -> Result<()> {
    use memlink::study::calibrate::loso;
    let Validation { resume, leave_one_out, refold, slices, identify, refine } = v;
    let name = cal.spec().name.clone();
    std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.to_path_buf(), source })?;
    let (kind, text, json) = if leave_one_out {
        eprintln!("{name}: leave-one-setting-out validation over {} settings", cal.spec().settings.len());
        let l = if refold {
            let Some(stored) = cal.stored_loso()? else {
                return Err(Error::Invalid {
                    path: cal.file().to_path_buf(),
                    pos: memlink::error::Pos { line: 1, col: 1 },
                    field: "loso".into(),
                    expected: "the stored leave-one-setting-out result that --refold starts from".into(),
                });
            };
            cal.refold(&stored, dir, resume, &mut search_progress)?
        } else {
            cal.leave_one_out(dir, resume, &mut search_progress)?
        };
        ("loso", loso::loso_report(cal, &l), serde_json::to_string_pretty(&l).expect("serializable"))
    } else if let Some(n) = identify {
        if n < 2 {
            return Err(invalid("identify", "at least 2 points (the bounds) per parameter"));
        }
        eprintln!(
            "{name}: identifiability of {} parameters, {n} profile points each, {refine} refining evaluations per point",
            cal.spec().parameters.len()
        );
        let id = cal.identify(n, refine, &mut |p| eprintln!("  {p} · profile traced"));
        (
            "identify",
            memlink::study::calibrate::identify::identify_report(cal, &id),
            serde_json::to_string_pretty(&id).expect("serializable"),
        )
    } else {
        let n = slices.unwrap_or(5);
        eprintln!("{name}: slices of {} parameters at {n} points", cal.spec().parameters.len());
        let s = cal.slices(n, &mut |s| eprintln!("  {} · χ² range {:.2}", s.name, s.range()));
        ("slices", loso::slices_report(cal, &s), serde_json::to_string_pretty(&s).expect("serializable"))
    };
    let md = dir.join(format!("{name}.{kind}.md"));
    memlink::files::write_atomic(&md, &text)?;
    memlink::files::write_atomic(&dir.join(format!("{name}.{kind}.json")), &json)?;
    if let Some(r) = report {
        memlink::files::write_atomic(r, &text)?;
    }
    print!("{text}");
    println!("\nwrote {}", md.display());
    Ok(())
}
