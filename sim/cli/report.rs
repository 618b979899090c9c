//! `memlink report`: the table of a grid's results.

use super::invalid;
use memlink::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// results.jsonl written by `memlink grid`.
    results: PathBuf,
    /// Round of the table (default: 3).
    #[arg(long, default_value_t = 3)]
    round: usize,
    /// Print CSV instead of markdown.
    #[arg(long)]
    csv: bool,
    /// Set the table beside published numbers from this targets CSV (Table 2 rows).
    #[arg(long)]
    targets: Option<PathBuf>,
}

pub fn exec(a: Args) -> Result<()> {
    let records = memlink::study::grid::read_records(&a.results)?;
    if a.round == 0 || records.iter().any(|r| r.mdsr.len() < a.round) {
        return Err(invalid("round", "a round that every result has (1-based)"));
    }
    let rows = memlink::study::grid::table(&records, a.round);
    if let Some(t) = a.targets {
        let targets = memlink::study::calibrate::read_targets(&t)?;
        print!("{}", memlink::study::grid::versus_paper(&rows, &targets, a.round));
    } else if a.csv {
        print!("{}", memlink::study::grid::csv(&rows, a.round));
    } else {
        print!("{}", memlink::study::grid::markdown(&rows, a.round));
    }
    Ok(())
}
