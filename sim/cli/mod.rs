//! The `memlink` command line: the parser, the options every command shares, and one module
//! per command (`run.rs` for `memlink run`, and so on), each an `Args` struct and an `exec`.
//!
//! A command module parses nothing by hand and prints what its library call returns; the
//! simulation, the studies and the reports live in the library (`memlink::…`).

mod assess;
mod calibrate;
mod check;
mod check_determinism;
mod effects;
mod explain;
mod fidelity;
mod grid;
mod import_trace;
mod merge;
mod plot;
mod replay;
mod report;
mod run;
mod scenario;
mod sweep;
mod validate;
mod whatif;

use clap::{Parser, Subcommand, ValueEnum};
use memlink::error::{Error, Result};
use memlink::study::sweep::exec::Shard;
use std::path::PathBuf;

/// The parsed command line.
#[derive(Parser)]
#[command(
    name = "memlink",
    version,
    about = "Deterministic simulator of memory-link poisoning in LLM multi-agent systems"
)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Report records (JSON lines, see `memlink::records`): every run a study asks for is
    /// answered from this file where it holds it.
    #[arg(long, global = true, value_name = "FILE")]
    records: Option<PathBuf>,
    /// With --records: `fill` simulates and keeps missing runs; `render` answers from the file
    /// alone (a missing run is an error); `verify` renders, then re-simulates a stratified
    /// sample (every stratum, at least one run in 20) and fails on any record that differs.
    #[arg(long, global = true, value_name = "MODE", value_enum, default_value_t = RecordsMode::Fill)]
    records_mode: RecordsMode,
    /// A folder that files named inside input files may lie under, besides the naming file's
    /// folder and the working directory (the path policy, see `memlink::files`); repeatable.
    #[arg(long, global = true, value_name = "DIR")]
    allow_root: Vec<PathBuf>,
}

/// `--records-mode`.
#[derive(Clone, Copy, ValueEnum)]
enum RecordsMode {
    Fill,
    Render,
    Verify,
}

impl From<RecordsMode> for memlink::records::Mode {
    fn from(m: RecordsMode) -> Self {
        match m {
            RecordsMode::Fill => Self::Fill,
            RecordsMode::Render => Self::Render,
            RecordsMode::Verify => Self::Verify,
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Check invariants over scenarios generated from a space (a check file, see
    /// scenarios/invariants/) or a scenario's seeds; a violation is shrunk to a minimal
    /// scenario, written as RON that `memlink run` reproduces. Exits 1 when an outcome is not
    /// what the file expects.
    Check(check::Args),
    /// Run a scenario: every arm on the same seed; prints per-round metrics and writes
    /// summary.json, rounds.csv and tidy.csv.
    Run(run::Args),
    /// Replay a recorded trace: the recorded arm bit for bit (strict), or another arm on the
    /// same agent decisions wherever a call's key still matches (a counterfactual); writes
    /// summary.json, rounds.csv and replay.json (per metric, which share of the calls came
    /// from the recording and which from the fallback).
    Replay(replay::Args),
    /// Answer a threat-model what-if (scenarios/whatif/*.ron): the settings, topologies,
    /// seeds and arms under each attacker condition, compared paired with the reference
    /// condition (95% bootstrap intervals); writes <name>.md, <name>.json and the figures.
    Whatif(whatif::Args),
    /// Import a reference-harness trace as a memlink trace: the MMLU/AppWorld stream trace
    /// (trace.jsonl, with --summary trace.summary.json for the attacker ids) or an INFA
    /// per-method trace (<method>.trace.jsonl); prints the paper metrics it carries.
    ImportTrace(import_trace::Args),
    /// Print a scenario as memlink reads it, with every default filled in (RON that runs as
    /// the original does).
    Scenario(scenario::Args),
    /// Check any file memlink reads without running it: a scenario (with its backbone profile
    /// and the run's estimated memory), grid, calibration, backbone profile, explain item, grid
    /// results or calibration checkpoint. Says which kind it took the file for.
    Validate(validate::Args),
    /// Score one memory item through MAPLE-Guard and print each signal and gate decision.
    Explain(explain::Args),
    /// Expand a grid file (settings × backbones × seeds × topologies × attacker sets), run every
    /// cell on all cores, write one result line per run and arm, and print the table.
    Grid(grid::Args),
    /// Run a parameter-sensitivity sweep: a design (OAT, factorial, Latin hypercube, Morris,
    /// Sobol, or a CSV) over factors of a scenario or its profile, crossed with settings,
    /// topologies and seeds. Each run is stored as it finishes; a rerun (or `--resume`) skips
    /// finished runs. Writes runs.csv, runs.jsonl, problem.json, analysis.json, summary.md and
    /// the figures.
    Sweep(sweep::Args),
    /// The fidelity report: the paper's grid as bundled and with each routing switch in its
    /// other state (fixes reverted to memlink's earlier routing, undetermined details switched),
    /// row beside row. Runs are stored by content hash under OUT (a rerun skips them).
    Fidelity(fidelity::Args),
    /// Merge shard folders of one sweep into OUT: every run must be present exactly once; the
    /// outputs are byte-identical to an unsharded run's.
    Merge(merge::Args),
    /// Draw a figure from results: a sweep folder (`tornado`, `morris`, `sobol`, `rounds`,
    /// `cdf`) or a grid's results.jsonl (`rounds`, `topology`).
    Plot(plot::Args),
    /// Fit chosen stand-in parameters of a backbone profile to published numbers (Nelder–Mead
    /// over simulated runs with fixed seeds); checkpoints every iteration, writes the fitted
    /// profile and a fit report.
    Calibrate(calibrate::Args),
    /// Assess the committed profiles (and arms) on every row of calibration files, without
    /// fitting: the calibration report, regenerated from the code.
    Assess(assess::Args),
    /// Compare each baseline's published effect (method − No Defense) in Table 2 with its
    /// effect in the round-level table of the same setting and backbone (markdown).
    Effects(effects::Args),
    /// Render the table of a grid's results (markdown; `--csv` for CSV).
    Report(report::Args),
    /// Run a scenario twice and in 1- and 2-thread pools; name the first divergent event if any.
    CheckDeterminism(check_determinism::Args),
}

impl Cli {
    /// Installs the shared options (allowed roots, the records store), runs the command, and
    /// writes or checks the records store even when the command failed, so that runs
    /// simulated before a failure are kept. Returns the command's outcome and the exit code
    /// to leave with.
    pub fn exec(self) -> std::result::Result<(), (Error, u8)> {
        for dir in &self.allow_root {
            if let Err(e) = memlink::files::allow_root(dir) {
                return Err((invalid("--allow-root", &format!("an existing folder, got {} ({e})", dir.display())), 2));
            }
        }
        if let Some(path) = &self.records {
            memlink::records::install(path, self.records_mode.into()).map_err(|e| (e, 2))?;
        }
        let done = dispatch(self.cmd);
        let finished = memlink::records::finish();
        if let (Ok(Some(f)), Some(path)) = (&finished, &self.records) {
            eprintln!("{}", f.line(path));
        }
        done.and(finished.map(|_| ())).map_err(|e| {
            let code = if e.is_input_error() { 2 } else { 1 };
            (e, code)
        })
    }
}

fn dispatch(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Check(a) => check::exec(a),
        Cmd::Run(a) => run::exec(a),
        Cmd::Replay(a) => replay::exec(a),
        Cmd::Whatif(a) => whatif::exec(a),
        Cmd::ImportTrace(a) => import_trace::exec(a),
        Cmd::Scenario(a) => scenario::exec(a),
        Cmd::Validate(a) => validate::exec(a),
        Cmd::Explain(a) => explain::exec(a),
        Cmd::Grid(a) => grid::exec(a),
        Cmd::Sweep(a) => sweep::exec(a),
        Cmd::Fidelity(a) => fidelity::exec(a),
        Cmd::Merge(a) => merge::exec(a),
        Cmd::Plot(a) => plot::exec(a),
        Cmd::Calibrate(a) => calibrate::exec(a),
        Cmd::Assess(a) => assess::exec(a),
        Cmd::Effects(a) => effects::exec(a),
        Cmd::Report(a) => report::exec(a),
        Cmd::CheckDeterminism(a) => check_determinism::exec(a),
    }
}

/// A command-line value that is not what `field` takes, positioned at the command line.
fn invalid(field: &str, expected: &str) -> Error {
    Error::Arg { field: field.into(), expected: expected.into() }
}

/// `--shard i/N`, else Slurm's array variables when set.
fn shard_of(arg: Option<String>) -> Result<Option<Shard>> {
    match arg {
        Some(a) => Shard::parse(&a).map(Some).map_err(|e| invalid("--shard", &e)),
        None => Shard::from_slurm().transpose().map_err(|e| invalid("SLURM_ARRAY_TASK_ID", &e)),
    }
}

/// What a shard run prints instead of the study's outputs.
fn shard_done(shard: Option<Shard>, dir: &std::path::Path) {
    let label = shard.map(|s| format!("{}/{}", s.index, s.count)).unwrap_or_default();
    println!(
        "shard {label}: finished runs are in {}/runs; merge the shards' folders with `memlink merge`",
        dir.display()
    );
}
