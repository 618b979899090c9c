//! `memlink grid`: every cell of a grid, its table and its default figures.

use super::{invalid, shard_done, shard_of};
use memlink::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Grid file (RON).
    grid: PathBuf,
    /// Output folder (default: runs/<grid name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Round of the table (default: 3, the paper's round; the last if runs have fewer).
    #[arg(long)]
    round: Option<usize>,
    /// Run only shard i of N (`i/N`; default: Slurm's array variables when set). Merge the
    /// shards' folders with `memlink merge`.
    #[arg(long)]
    shard: Option<String>,
    /// Also run every cell at the first N posterior draws of its backbone's stand-in
    /// (`models/<backbone>.ensemble.ron`; all draws without N), on the same seeds: the
    /// table adds each cell's seed-only and 95% predictive intervals and the calibration's
    /// share of the variance.
    #[arg(long, value_name = "N")]
    ensemble: Option<Option<usize>>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

pub fn exec(a: Args) -> Result<()> {
    let (spec, mut runs) = memlink::study::grid::expand(&a.grid)?;
    if let Some(n) = a.ensemble {
        runs = memlink::study::grid::with_ensemble(runs, &mut memlink::study::predictive::Ensembles::new(n))?;
    }
    let fewest = runs.iter().map(|r| r.scenario.scenario.protocol.rounds as usize).min().unwrap_or(3);
    if a.round.is_some_and(|k| k == 0 || k > fewest) {
        return Err(invalid("round", &format!("a round every run has, 1 to {fewest}")));
    }
    let k = a.round.unwrap_or(3.min(fewest));
    let shard = shard_of(a.shard)?;
    eprintln!("{}: {} runs", spec.name, runs.len());
    let dir = a.out.unwrap_or_else(|| PathBuf::from("runs").join(&spec.name));
    // One writer per output folder: a second memlink waits instead of interleaving.
    let _lock = memlink::files::lock_folder(&dir)?;
    let bar = memlink::study::sweep::exec::progress_bar(runs.len() as u64, a.quiet, &spec.name);
    let Some(records) = memlink::study::grid::run_stored(&spec, &runs, &dir, shard, &bar, "")? else {
        shard_done(shard, &dir);
        return Ok(());
    };
    memlink::study::grid::write_records(&dir.join("results.jsonl"), &records)?;
    memlink::files::write_atomic(&dir.join("tidy.csv"), memlink::study::grid::tidy(&records))?;
    let rows = memlink::study::grid::table(&records, k);
    memlink::files::write_atomic(&dir.join("table.md"), memlink::study::grid::markdown(&rows, k))?;
    memlink::files::write_atomic(&dir.join("table.csv"), memlink::study::grid::csv(&rows, k))?;
    // The grid's default figures, next to its table: per setting, MDSR and RDA per round
    // and at round k by topology.
    let results = dir.join("results.jsonl");
    let mut settings: Vec<&str> = Vec::new();
    for r in &records {
        if !settings.contains(&r.setting.as_str()) {
            settings.push(&r.setting);
        }
    }
    let mut figures = 0;
    for setting in settings {
        for (kind, metric) in [("rounds", "mdsr"), ("rounds", "rda"), ("topology", "mdsr"), ("topology", "rda")] {
            let m = format!("{metric}@{k}");
            memlink::study::grid::figures::plot(&results, kind, Some(&m), Some(setting), None)?;
            figures += 1;
        }
    }
    print!("{}", memlink::study::grid::markdown(&rows, k));
    println!("\nwrote {}/results.jsonl, tidy.csv, table.md, table.csv and {figures} figures", dir.display());
    Ok(())
}
