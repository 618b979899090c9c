//! `memlink run`: every arm of a scenario on one seed.

use super::invalid;
use memlink::error::{Error, Result};
use memlink::scenario::LoadedScenario;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// Scenario file (RON).
    scenario: PathBuf,
    /// Master seed (default: the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Output folder (default: runs/<scenario name>/seed-<seed>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the summary JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Invariants to monitor besides the scenario's `invariants` (comma-separated names;
    /// `memlink check --list` lists them). Violations are reported and written to
    /// invariants.json; the results are the same bytes as without monitors.
    #[arg(long, value_delimiter = ',')]
    invariants: Vec<String>,
    /// Exit with an error (code 1, after writing every result) when a monitored invariant
    /// was violated.
    #[arg(long)]
    fail_on_violation: bool,
    /// Record every backbone call (answers, summaries, judge verdicts) into a trace file
    /// (JSON lines; one file per arm: FILE itself for one arm, else FILE with each arm's
    /// name before the extension). The results are the same bytes as without recording.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Also run every arm at the first N posterior draws of the backbone's stand-in
    /// (`models/<backbone>.ensemble.ron`; all draws without N), on the same seed: prints
    /// each metric's range over the draws and writes ensemble.csv (one row per draw, arm
    /// and round).
    #[arg(long, value_name = "N")]
    ensemble: Option<Option<usize>>,
}

pub fn exec(a: Args) -> Result<()> {
    let ls = memlink::scenario::load(&a.scenario)?;
    let seed = a.seed.unwrap_or(ls.scenario.seed);
    let dir =
        a.out.clone().unwrap_or_else(|| PathBuf::from("runs").join(&ls.scenario.name).join(format!("seed-{seed}")));
    // One writer per output folder: a second memlink waits instead of interleaving.
    let _lock = memlink::files::lock_folder(&dir)?;
    let monitored = !ls.scenario.invariants.is_empty() || !a.invariants.is_empty();
    if let Some(n) = a.ensemble {
        if a.record.is_some() || monitored {
            return Err(invalid(
                "--ensemble",
                "a run without --record and without invariant monitors (run those at the fit)",
            ));
        }
        return ensemble(&ls, seed, n, &dir, a.json);
    }
    if let Some(file) = &a.record {
        if monitored {
            return Err(invalid(
                "--record",
                "a run without invariant monitors (record first, then monitor a replay-free run)",
            ));
        }
        return record(&ls, seed, file, &dir, a.json);
    }
    if !monitored {
        let result = memlink::run::run_scenario(&ls, seed);
        result.write(&dir)?;
        if a.json {
            print!("{}", result.to_json());
        } else {
            print!("{}", result.table());
            println!("\nwrote {}/summary.json, rounds.csv and tidy.csv", dir.display());
        }
        return Ok(());
    }
    let run = memlink::run::run_monitored(&ls, seed, &a.invariants)?;
    run.result.write(&dir)?;
    memlink::files::write_atomic(&dir.join("invariants.json"), run.to_json())?;
    if a.json {
        print!("{}", run.result.to_json());
    } else {
        print!("{}", run.result.table());
        print!("{}", run.table());
        println!("\nwrote {}/summary.json, rounds.csv, tidy.csv and invariants.json", dir.display());
    }
    if a.fail_on_violation && !run.holds() {
        let (arm, v) = run.violations().next().expect("a violation");
        return Err(Error::Violated(format!(
            "{} in arm `{arm}` of {}: {}",
            v.invariant,
            a.scenario.display(),
            memlink::run::describe_violation(v)
        )));
    }
    Ok(())
}

/// `--ensemble`: every arm at the fit and at the posterior draws.
fn ensemble(ls: &LoadedScenario, seed: u64, n: Option<usize>, dir: &Path, json: bool) -> Result<()> {
    let e = memlink::study::predictive::EnsembleRun::run(ls, seed, &mut memlink::study::predictive::Ensembles::new(n))?;
    e.fit.write(dir)?;
    memlink::files::write_atomic(&dir.join("ensemble.csv"), e.csv())?;
    if json {
        print!("{}", e.fit.to_json());
    } else {
        print!("{}", e.fit.table());
        print!("{}", e.table());
        println!("\nwrote {}/summary.json, rounds.csv, tidy.csv and ensemble.csv", dir.display());
    }
    Ok(())
}

/// `--record FILE`: the run, and every backbone call written as a trace per arm.
fn record(ls: &LoadedScenario, seed: u64, file: &Path, dir: &Path, json: bool) -> Result<()> {
    let (result, traces) = memlink::study::trace::replay::record_scenario(ls, seed);
    result.write(dir)?;
    let paths = memlink::study::trace::replay::trace_paths(file, &ls.scenario.arms);
    for (t, p) in traces.iter().zip(&paths) {
        t.write(p)?;
    }
    if json {
        print!("{}", result.to_json());
    } else {
        print!("{}", result.table());
        println!("\nwrote {}/summary.json, rounds.csv and tidy.csv", dir.display());
        for (t, p) in traces.iter().zip(&paths) {
            println!("recorded {} calls of `{}` to {}", t.calls.len(), t.header.arm, p.display());
        }
    }
    Ok(())
}
