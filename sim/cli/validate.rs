//! `memlink validate`: any input file checked without running it.

use memlink::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The file.
    scenario: PathBuf,
}

pub fn exec(a: Args) -> Result<()> {
    let (kind, summary) = memlink::inputs::validate(&a.scenario)?;
    println!("{}: ok — {}: {summary}", a.scenario.display(), kind.name());
    Ok(())
}
