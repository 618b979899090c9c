//! `memlink sweep`: a parameter-sensitivity design, run, stored and analysed.

use super::{shard_done, shard_of};
use memlink::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Sweep file (RON).
    sweep: PathBuf,
    /// Output folder (default: runs/sweeps/<name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue a killed sweep (finished runs are always kept; this is the default too).
    #[arg(long)]
    resume: bool,
    /// Also run the design at the first N posterior draws of each base's stand-in
    /// (`models/<backbone>.ensemble.ron`; all draws without N), on the same seeds: the
    /// analysis is the fit's, and ensemble.json and summary.md add each quantity's 95%
    /// predictive interval and the calibration's share.
    #[arg(long, value_name = "N")]
    ensemble: Option<Option<usize>>,
    /// Run only shard i of N (`i/N`; default: Slurm's array variables when set).
    #[arg(long)]
    shard: Option<String>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

pub fn exec(a: Args) -> Result<()> {
    // `--resume` is the default behaviour: finished runs are always kept.
    let _ = a.resume;
    let sw = match a.ensemble {
        Some(n) => {
            memlink::study::sweep::Sweep::load_ensemble(&a.sweep, &mut memlink::study::predictive::Ensembles::new(n))?
        }
        None => memlink::study::sweep::Sweep::load(&a.sweep)?,
    };
    let plan = &sw.plan;
    let dir = a.out.unwrap_or_else(|| PathBuf::from("runs/sweeps").join(&plan.spec.name));
    // One writer per output folder: a second memlink waits instead of interleaving.
    let _lock = memlink::files::lock_folder(&dir)?;
    let shard = shard_of(a.shard)?;
    memlink::study::sweep::write_plan(plan, &dir)?;
    let distinct: std::collections::BTreeSet<&str> = sw.jobs.iter().map(|j| j.hash.as_str()).collect();
    eprintln!(
        "{}: {} design points, {} runs ({} distinct){}",
        plan.spec.name,
        plan.points.len(),
        plan.runs.len(),
        distinct.len(),
        shard.map(|s| format!(", shard {}/{}", s.index, s.count)).unwrap_or_default()
    );
    let bar = memlink::study::sweep::exec::progress_bar(distinct.len() as u64, a.quiet, &plan.spec.name);
    let done = memlink::study::sweep::exec::execute(&sw.jobs, &dir, shard, &bar)?;
    eprintln!("{}: {}", plan.spec.name, done.describe());
    if shard.is_some_and(|s| s.count > 1) {
        shard_done(shard, &dir);
        return Ok(());
    }
    let results = memlink::study::sweep::collect_plan(plan, &dir)?;
    memlink::study::sweep::ensemble::finalize_with_draws(plan, &results, &dir)?;
    println!("wrote {}/summary.md, runs.csv, runs.jsonl, problem.json, analysis.json and the figures", dir.display());
    Ok(())
}
