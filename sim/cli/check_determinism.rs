//! `memlink check-determinism`: a scenario twice and in 1- and 2-thread pools.

use memlink::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Scenario file (RON).
    scenario: PathBuf,
    /// Master seed (default: the scenario's).
    #[arg(long)]
    seed: Option<u64>,
}

pub fn exec(a: Args) -> Result<()> {
    let ls = memlink::scenario::load(&a.scenario)?;
    let seed = a.seed.unwrap_or(ls.scenario.seed);
    let report = memlink::run::check_determinism(&ls, seed)?;
    println!("deterministic: {} identical summaries ({})", report.runs.len(), report.runs.join(", "));
    for (arm, h) in report.hashes {
        println!("  {arm:<24} trace hash {h}");
    }
    Ok(())
}
