//! `memlink check`: invariants over generated scenarios, counterexamples shrunk.

use super::invalid;
use memlink::error::{Error, Result};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Check file (RON with a `space`), or a scenario (its seeds 1..=cases are checked).
    file: Option<PathBuf>,
    /// Only these invariants (comma-separated; default: the file's, or every one).
    #[arg(long, value_delimiter = ',')]
    invariants: Vec<String>,
    /// Cases per invariant (default: the file's, 1000).
    #[arg(long)]
    cases: Option<u32>,
    /// Output folder (default: runs/check/<name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Skip invariants whose outcome the output folder already holds.
    #[arg(long)]
    resume: bool,
    /// List the registered invariants and exit.
    #[arg(long)]
    list: bool,
    /// Draw each case at the fitted profile or at one of the first N posterior draws of
    /// the base's stand-in (`models/<backbone>.ensemble.ron`; all draws without N): the
    /// invariants must hold over the calibration's uncertainty too. Default output folder:
    /// runs/check/<name>-ensemble.
    #[arg(long, value_name = "N")]
    ensemble: Option<Option<usize>>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

pub fn exec(a: Args) -> Result<()> {
    if a.list {
        for e in memlink::eval::monitor::REGISTRY {
            println!("{:<28} {}{}", e.name, e.about, if e.truth { " [reads evaluator truth]" } else { "" });
        }
        return Ok(());
    }
    let Some(file) = a.file else {
        return Err(invalid("file", "a check file or a scenario (or --list)"));
    };
    let mut check = memlink::study::check::Check::load_any(&file)?;
    let mut name = check.spec.name.clone();
    if let Some(n) = a.ensemble {
        check = check.with_ensemble(&mut memlink::study::predictive::Ensembles::new(n))?;
        name.push_str("-ensemble");
    }
    let dir = a.out.unwrap_or_else(|| PathBuf::from("runs").join("check").join(name));
    // One writer per output folder: a second memlink waits instead of interleaving.
    let _lock = memlink::files::lock_folder(&dir)?;
    let outcomes = check.run(&dir, a.cases, &a.invariants, a.resume, a.quiet)?;
    print!("{}", check.report(&outcomes));
    println!("\nwrote {}/check.md and check.json", dir.display());
    if let Some(o) = outcomes.iter().find(|o| !o.as_expected()) {
        let expected = if o.expect == memlink::study::check::Expect::Holds { "hold" } else { "fail" };
        let what = match &o.counterexample {
            Some(c) => format!("was violated (counterexample {})", c.scenario.display()),
            None => format!("held over {} cases", o.cases),
        };
        return Err(Error::CheckOutcome(format!(
            "`{}` on `{}` was expected to {expected} but {what}",
            o.invariant, o.arm
        )));
    }
    Ok(())
}
