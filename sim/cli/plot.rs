//! `memlink plot`: one figure from a sweep folder or a grid's results file.

use super::invalid;
use clap::ValueEnum;
use memlink::error::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// A sweep output folder, a grid's results.jsonl, or (for `--kind spread`) a scenario.
    results: PathBuf,
    /// The figure: tornado, morris, sobol, rounds or cdf of a sweep; rounds or topology of a
    /// grid; spread of a scenario (runs it: per arm, the communication graph with each agent
    /// coloured by when poison first reached its prompt and the edges poison crossed).
    #[arg(long, value_enum)]
    kind: Kind,
    /// Metric (`rda@3`; for `rounds`, `mdsr` or `rda`).
    #[arg(long)]
    metric: Option<String>,
    /// Setting (default: the first).
    #[arg(long)]
    setting: Option<String>,
    /// Arm (default: the sweep's focus arm).
    #[arg(long)]
    arm: Option<String>,
    /// Output file (.svg, or .png for PNG; default next to the results, or for `spread`
    /// runs/<scenario name>/seed-<seed>/spread.svg).
    #[arg(long)]
    out: Option<PathBuf>,
    /// With `--kind spread`: the seed to run (default: the scenario's).
    #[arg(long)]
    seed: Option<u64>,
}

/// `--kind`.
#[derive(Clone, Copy, ValueEnum)]
enum Kind {
    Tornado,
    Morris,
    Sobol,
    Rounds,
    Cdf,
    Topology,
    Spread,
}

pub fn exec(a: Args) -> Result<()> {
    let kind = a.kind.to_possible_value().expect("no variant is skipped");
    if let Some(out) = &a.out {
        let ext = out.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext != "svg" && ext != "png" {
            return Err(invalid("--out", &format!("a file ending .svg or .png, got {}", out.display())));
        }
    }
    if matches!(a.kind, Kind::Spread) {
        let ls = memlink::scenario::load(&a.results)?;
        let seed = a.seed.unwrap_or(ls.scenario.seed);
        let file = memlink::study::spread::draw(&ls, seed, a.out.as_deref())?;
        println!("wrote {}", file.display());
        return Ok(());
    }
    if a.seed.is_some() {
        return Err(invalid("--seed", "`--kind spread` (the other figures draw stored results)"));
    }
    let file = if a.results.is_dir() {
        memlink::study::sweep::plot_command(
            &a.results,
            kind.get_name(),
            a.metric.as_deref(),
            a.setting.as_deref(),
            a.arm.as_deref(),
            a.out.as_deref(),
        )?
    } else {
        memlink::study::grid::figures::plot(
            &a.results,
            kind.get_name(),
            a.metric.as_deref(),
            a.setting.as_deref(),
            a.out.as_deref(),
        )?
    };
    println!("wrote {}", file.display());
    Ok(())
}
