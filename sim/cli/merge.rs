//! `memlink merge`: shard folders of one sweep into one.

use memlink::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Shard folders.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Output folder.
    #[arg(long)]
    out: PathBuf,
}

pub fn exec(a: Args) -> Result<()> {
    memlink::study::sweep::merge(&a.dirs, &a.out)?;
    println!("merged {} folders into {}", a.dirs.len(), a.out.display());
    Ok(())
}
