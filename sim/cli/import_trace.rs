//! `memlink import-trace`: a reference-harness trace as a memlink trace.

use clap::ValueEnum;
use memlink::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The reference trace file.
    file: PathBuf,
    /// `stream` (run_mmlu.py, run_appworld.py) or `infa` (infa_memlink_eval.py).
    #[arg(long, value_enum, default_value_t = Format::Stream)]
    format: Format,
    /// The stream run's trace.summary.json (config.attacker_ids, agents, warm-up).
    #[arg(long)]
    summary: Option<PathBuf>,
    /// The INFA method name (default: the file name before `.trace.jsonl`).
    #[arg(long)]
    method: Option<String>,
    /// Where to write the memlink trace.
    #[arg(long)]
    out: PathBuf,
}

/// `--format`.
#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Stream,
    Infa,
}

pub fn exec(a: Args) -> Result<()> {
    let t = match a.format {
        Format::Stream => memlink::study::trace::import::stream(&a.file, a.summary.as_deref())?,
        Format::Infa => memlink::study::trace::import::infa(&a.file, a.method.as_deref())?,
    };
    t.write(&a.out)?;
    let m = memlink::study::trace::metrics(&t);
    print!("{}", memlink::study::trace::import::metrics_table(&t, &m));
    println!("\nwrote {} ({} calls)", a.out.display(), t.calls.len() + t.unparsed.len());
    Ok(())
}
