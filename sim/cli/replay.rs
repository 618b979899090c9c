//! `memlink replay`: a recorded trace, bit for bit or as a counterfactual arm.

use clap::ValueEnum;
use memlink::agent::ReplayMode;
use memlink::error::Result;
use memlink::study::trace::replay::{ArmChoice, ReplayOptions};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Trace file (from `memlink run --record` or `memlink import-trace`).
    trace: PathBuf,
    /// The arm to replay: a name in the trace's scenario, a scenario file (its arms; its
    /// world must be the trace's), or an inline arm `(name: "…", guard: …)`. Default: the
    /// recorded arm.
    #[arg(long)]
    arm: Option<String>,
    /// strict (a call the trace lacks is an error), fallback (the stand-in answers it and
    /// it is logged) or flag (as fallback, and later calls of that task and agent are marked
    /// downstream). Default: strict for the recorded arm, fallback for another.
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// The fallback stand-in's profile (a backbone name or a .ron file). Default: the
    /// trace's.
    #[arg(long)]
    fallback: Option<PathBuf>,
    /// Output folder (default: runs/replay/<trace file stem> for the recorded arm,
    /// runs/replay/<trace file stem>-as-<arm> for another, so a counterfactual never
    /// replaces the strict replay).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the summary JSON instead of the tables.
    #[arg(long)]
    json: bool,
}

/// `--mode`.
#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Strict,
    Fallback,
    Flag,
}

pub fn exec(a: Args) -> Result<()> {
    let t = memlink::study::trace::Trace::read(&a.trace)?;
    let stem = a.trace.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    // A counterfactual gets a folder of its own, named after the arm: its name, its file's
    // stem, or `inline`.
    let folder = match &a.arm {
        None => stem,
        Some(s) if s.trim_start().starts_with('(') => format!("{stem}-as-inline"),
        Some(s) if s.ends_with(".ron") => {
            let arm_stem = PathBuf::from(s).file_stem().map(|x| x.to_string_lossy().to_string()).unwrap_or_default();
            format!("{stem}-as-{arm_stem}")
        }
        Some(s) => format!("{stem}-as-{}", s.replace(['/', '\\', ' '], "_")),
    };
    let arm = match a.arm {
        None => ArmChoice::Recorded,
        Some(s) if s.trim_start().starts_with('(') => ArmChoice::Inline(s),
        Some(s) if s.ends_with(".ron") => ArmChoice::File(PathBuf::from(s)),
        Some(s) => ArmChoice::Named(s),
    };
    let mode = a.mode.map(|m| match m {
        Mode::Strict => ReplayMode::Strict,
        Mode::Fallback => ReplayMode::Fallback,
        Mode::Flag => ReplayMode::Flag,
    });
    let outcome = memlink::study::trace::replay::replay(&t, &ReplayOptions { arm, mode, fallback: a.fallback })?;
    let dir = a.out.unwrap_or_else(|| PathBuf::from("runs").join("replay").join(folder));
    // One writer per output folder: a second memlink waits instead of interleaving.
    let _lock = memlink::files::lock_folder(&dir)?;
    outcome.result.write(&dir)?;
    memlink::files::write_atomic(&dir.join("replay.json"), outcome.to_json())?;
    if a.json {
        print!("{}", outcome.result.to_json());
    } else {
        print!("{}", outcome.result.table());
        print!("{}", outcome.table());
        println!("\nwrote {}/summary.json, rounds.csv, tidy.csv and replay.json", dir.display());
    }
    Ok(())
}
