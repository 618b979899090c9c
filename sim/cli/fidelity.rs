//! `memlink fidelity`: the paper's grid with each routing switch in its other state.

use memlink::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Fidelity file (RON).
    file: PathBuf,
    /// Folder for the stored runs (default: runs/fidelity).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write the report here (default: print it).
    #[arg(long)]
    report: Option<PathBuf>,
    /// No progress.
    #[arg(long)]
    quiet: bool,
}

pub fn exec(a: Args) -> Result<()> {
    let spec = memlink::study::fidelity::load(&a.file)?;
    let dir = a.out.unwrap_or_else(|| PathBuf::from("runs/fidelity"));
    // One writer per output folder: a second memlink waits instead of interleaving.
    let _lock = memlink::files::lock_folder(&dir)?;
    let text = memlink::study::fidelity::run(&spec, &a.file, &dir, a.quiet)?;
    match a.report {
        Some(p) => {
            memlink::files::write_atomic(&p, &text)?;
            eprintln!("wrote {}", p.display());
        }
        None => print!("{text}"),
    }
    Ok(())
}
