//! The `memlink` command line.

use clap::{Parser, Subcommand};
use memlink::error::{Error, Result};
use memlink::explain::{ExplainInput, ReadInput, ReadState, explain, render};
use memlink::memory::{Scope, Taint};
use memlink::run::{check_determinism, run_scenario};
use memlink::scenario::load;
use std::path::PathBuf;
use std::process::ExitCode;

// The simulator allocates many small strings and vectors per memory item; mimalloc serves
// them several times faster than the system allocator (see benches/paper_run.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "memlink",
    version,
    about = "Deterministic simulator of memory-link poisoning in LLM multi-agent systems"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Report records (JSON lines, see `memlink::records`): every run a study asks for is
    /// answered from this file where it holds it.
    #[arg(long, global = true, value_name = "FILE")]
    records: Option<PathBuf>,
    /// With --records: `fill` simulates and keeps missing runs; `render` answers from the file
    /// alone (a missing run is an error); `verify` renders, then re-simulates a stratified
    /// sample (every stratum, at least one run in 20) and fails on any record that differs.
    #[arg(long, global = true, value_name = "MODE", default_value = "fill", value_parser = ["fill", "render", "verify"])]
    records_mode: String,
    /// A folder that files named inside input files may lie under, besides the naming file's
    /// folder and the working directory (the path policy, see `memlink::files`); repeatable.
    #[arg(long, global = true, value_name = "DIR")]
    allow_root: Vec<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check invariants over scenarios generated from a space (a check file, see
    /// scenarios/invariants/) or a scenario's seeds; a violation is shrunk to a minimal
    /// scenario, written as RON that `memlink run` reproduces. Exits 1 when an outcome is not
    /// what the file expects.
    Check {
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
    },
    /// Run a scenario: every arm on the same seed; prints per-round metrics and writes
    /// summary.json and rounds.csv.
    Run {
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
    },
    /// Replay a recorded trace: the recorded arm bit for bit (strict), or another arm on the
    /// same agent decisions wherever a call's key still matches (a counterfactual); writes
    /// summary.json, rounds.csv and replay.json (per metric, which share of the calls came
    /// from the recording and which from the fallback).
    Replay {
        /// Trace file (from `memlink run --record` or `memlink import-trace`).
        trace: PathBuf,
        /// The arm to replay: a name in the trace's scenario, a scenario file (its arms; its
        /// world must be the trace's), or an inline arm `(name: "…", guard: …)`. Default: the
        /// recorded arm.
        #[arg(long)]
        arm: Option<String>,
        /// strict (a call the trace lacks is an error), fallback (the stand-in answers it and
        /// it is logged) or flag (as fallback, and later calls of that task and agent are marked
        /// downstream). Default: strict for the recorded arm, fallback for another.
        #[arg(long)]
        mode: Option<String>,
        /// The fallback stand-in's profile (a backbone name or a .ron file). Default: the
        /// trace's.
        #[arg(long)]
        fallback: Option<PathBuf>,
        /// Output folder (default: runs/replay/<trace file stem>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the summary JSON instead of the tables.
        #[arg(long)]
        json: bool,
    },
    /// Answer a threat-model what-if (scenarios/whatif/*.ron): the settings, topologies,
    /// seeds and arms under each attacker condition, compared paired with the reference
    /// condition (95% bootstrap intervals); writes <name>.md, <name>.json and the figures.
    Whatif {
        /// What-if file (RON).
        file: PathBuf,
        /// Where runs are stored (default: runs/whatif/<name>); a rerun resumes.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Where the report and figures go (default: reports/what-if).
        #[arg(long)]
        report: Option<PathBuf>,
        /// Also run every cell at the first N posterior draws of its backbone's stand-in
        /// (`models/<backbone>.ensemble.ron`; all draws without N), on the same seeds: the
        /// report adds each difference's 95% predictive interval and the calibration's share.
        #[arg(long, value_name = "N")]
        ensemble: Option<Option<usize>>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Import a reference-harness trace as a memlink trace: the MMLU/AppWorld stream trace
    /// (trace.jsonl, with --summary trace.summary.json for the attacker ids) or an INFA
    /// per-method trace (<method>.trace.jsonl); prints the paper metrics it carries.
    ImportTrace {
        /// The reference trace file.
        file: PathBuf,
        /// `stream` (run_mmlu.py, run_appworld.py) or `infa` (infa_memlink_eval.py).
        #[arg(long, default_value = "stream")]
        format: String,
        /// The stream run's trace.summary.json (config.attacker_ids, agents, warm-up).
        #[arg(long)]
        summary: Option<PathBuf>,
        /// The INFA method name (default: the file name before `.trace.jsonl`).
        #[arg(long)]
        method: Option<String>,
        /// Where to write the memlink trace.
        #[arg(long)]
        out: PathBuf,
    },
    /// Check any file memlink reads without running it: a scenario (with its backbone profile
    /// and the run's estimated memory), grid, calibration, backbone profile, explain item, grid
    /// results or calibration checkpoint. Says which kind it took the file for.
    Validate {
        /// The file.
        scenario: PathBuf,
    },
    /// Score one memory item through MAPLE-Guard and print each signal and gate decision.
    Explain {
        /// Item file (RON, see scenarios/explain/); flags below override or replace it.
        item: Option<PathBuf>,
        /// Intent text (without a file).
        #[arg(long)]
        intent: Option<String>,
        /// Experience text (without a file).
        #[arg(long)]
        experience: Option<String>,
        /// Source route.
        #[arg(long, default_value = "agent_self_outcome_consolidation")]
        source_type: String,
        /// Memory type.
        #[arg(long, default_value = "agent_outcome_experience")]
        memory_type: String,
        /// Requested scope: private or team.
        #[arg(long, default_value = "private")]
        scope: String,
        /// Taint: clean, unverified, external or poisoned.
        #[arg(long, default_value = "unverified")]
        taint: String,
        /// Q.
        #[arg(long, default_value_t = 0.0)]
        q: f64,
        /// Query to score a read against.
        #[arg(long)]
        query: Option<String>,
        /// Similarity of that read.
        #[arg(long, default_value_t = 0.5)]
        sim: f64,
        /// Reader agent of that read.
        #[arg(long, default_value_t = 0)]
        reader: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Expand a grid file (settings × backbones × seeds × topologies × attacker sets), run every
    /// cell on all cores, write one result line per run and arm, and print the table.
    Grid {
        /// Grid file (RON).
        grid: PathBuf,
        /// Output folder (default: runs/<grid name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Round of the table (default: 3, the paper's round; the last if runs have fewer).
        #[arg(long)]
        round: Option<usize>,
        /// Run only shard i of N (`i/N`; default: Slurm's array variables when set). Merge the
        /// shards' folders with `memlink merge`.
        #[arg(long)]
        shard: Option<String>,
        /// Also run every cell at the first N posterior draws of its backbone's stand-in
        /// (`models/<backbone>.ensemble.ron`; all draws without N), on the same seeds: the
        /// table adds each cell's seed-only and 95% predictive intervals and the calibration's
        /// share of the variance.
        #[arg(long, value_name = "N")]
        ensemble: Option<Option<usize>>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Run a parameter-sensitivity sweep: a design (OAT, factorial, Latin hypercube, Morris,
    /// Sobol, or a CSV) over factors of a scenario or its profile, crossed with settings,
    /// topologies and seeds. Each run is stored as it finishes; a rerun (or `--resume`) skips
    /// finished runs. Writes runs.csv, runs.jsonl, problem.json, analysis.json, summary.md and
    /// the figures.
    Sweep {
        /// Sweep file (RON).
        sweep: PathBuf,
        /// Output folder (default: runs/sweeps/<name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Continue a killed sweep (finished runs are always kept; this is the default too).
        #[arg(long)]
        resume: bool,
        /// Also run the design at the first N posterior draws of each base's stand-in
        /// (`models/<backbone>.ensemble.ron`; all draws without N), on the same seeds: the
        /// analysis is the fit's, and ensemble.json and summary.md add each quantity's 95%
        /// predictive interval and the calibration's share.
        #[arg(long, value_name = "N")]
        ensemble: Option<Option<usize>>,
        /// Run only shard i of N (`i/N`; default: Slurm's array variables when set).
        #[arg(long)]
        shard: Option<String>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// The fidelity report: the paper's grid as bundled and with each routing switch in its
    /// other state (fixes reverted to memlink's earlier routing, undetermined details switched),
    /// row beside row. Runs are stored by content hash under OUT (a rerun skips them).
    Fidelity {
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
    },
    /// Merge shard folders of one sweep into OUT: every run must be present exactly once; the
    /// outputs are byte-identical to an unsharded run's.
    Merge {
        /// Shard folders.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
    },
    /// Draw a figure from results: a sweep folder (`tornado`, `morris`, `sobol`, `rounds`,
    /// `cdf`) or a grid's results.jsonl (`rounds`, `topology`).
    Plot {
        /// A sweep output folder, or a grid's results.jsonl.
        results: PathBuf,
        /// tornado | morris | sobol | rounds | cdf | topology.
        #[arg(long)]
        kind: String,
        /// Metric (`rda@3`; for `rounds`, `mdsr` or `rda`).
        #[arg(long)]
        metric: Option<String>,
        /// Setting (default: the first).
        #[arg(long)]
        setting: Option<String>,
        /// Arm (default: the sweep's focus arm).
        #[arg(long)]
        arm: Option<String>,
        /// Output file (.svg, or .png for PNG; default next to the results).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Fit chosen stand-in parameters of a backbone profile to published numbers (Nelder–Mead
    /// over simulated runs with fixed seeds); checkpoints every iteration, writes the fitted
    /// profile and a fit report.
    Calibrate {
        /// Calibration file (RON).
        calibration: PathBuf,
        /// Folder for the checkpoint and the report (default: runs/calibrate-<name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Where to write the fitted profile (default: the profile file itself).
        #[arg(long)]
        profile_out: Option<PathBuf>,
        /// Continue from the checkpoint in the output folder instead of starting afresh.
        #[arg(long)]
        resume: bool,
        /// Also write the fit report here (e.g. reports/calibration-qwen.md).
        #[arg(long)]
        report: Option<PathBuf>,
        /// Instead of fitting: leave-one-setting-out validation (each setting's attack rows
        /// predicted from the other settings; with --resume, the fit's stage A checkpoint in
        /// the output folder is reused). Writes `<name>.loso.md` and `.json`; the profile is
        /// not touched.
        #[arg(long, conflicts_with = "slices")]
        leave_one_out: bool,
        /// With --leave-one-out: start from the calibration's stored result (its `loso` file)
        /// and compute only the folds it lacks, at its folds' model values (stages A and B
        /// are not run again; valid while the simulator's bytes are those it was computed
        /// with). Writes the stored folds and the new ones.
        #[arg(long, requires = "leave_one_out")]
        refold: bool,
        /// Instead of fitting: the objective's slice along each parameter at N evenly spaced
        /// values across its bounds, at the committed profile. Writes `<name>.slices.md`.
        #[arg(long, value_name = "N")]
        slices: Option<usize>,
        /// Instead of fitting: which parameters the targets leave undetermined, from the
        /// objective's profile over each at N evenly spaced values across its bounds (N >= 2;
        /// the Jacobian's Gauss–Newton model gives the other parameters' path; see
        /// sim/calibrate/identify.rs). Writes `<name>.identify.md` and `.json` (the file a
        /// calibration's `identify` names).
        #[arg(long, value_name = "N", conflicts_with_all = ["slices", "leave_one_out"])]
        identify: Option<usize>,
        /// With --identify: refine each profile point by up to K Nelder–Mead evaluations over the
        /// search's other parameters (0: the linearised path alone; each evaluation costs what
        /// one of the fit's does).
        #[arg(long, value_name = "K", requires = "identify", default_value_t = 0)]
        refine: u32,
        /// Instead of fitting: an ensemble of N draws (default 32, at least 16 advised) from the
        /// calibration's approximate posterior, built on its stored identifiability analysis
        /// (its `identify` file, which must be at the committed profile): a Laplace proposal,
        /// importance-weighted by simulation (sim/calibrate/ensemble.rs). Writes
        /// `<profile>.ensemble.ron` beside the profile and `<name>.ensemble.md`; each
        /// proposal's χ² is journalled in the output folder (`--resume` reuses it).
        #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "32",
              conflicts_with_all = ["slices", "leave_one_out", "identify"])]
        ensemble: Option<usize>,
        /// With --ensemble: proposals evaluated per search (each costs one of the fit's
        /// evaluations of that search).
        #[arg(long, value_name = "M", requires = "ensemble", default_value_t = memlink::calibrate::ensemble::DEFAULT_PROPOSALS)]
        proposals: usize,
        /// With --ensemble: the weight of a defensive wide component in the proposal (a
        /// Student t of a quarter of each parameter's range), which covers a target wider than
        /// the Laplace shape, such as a plateau of a discrete objective (0: the Laplace t alone).
        #[arg(long, value_name = "A", requires = "ensemble", default_value_t = 0.0)]
        defensive: f64,
    },
    /// Assess the committed profiles (and arms) on every row of calibration files, without
    /// fitting: the calibration report, regenerated from the code.
    Assess {
        /// Calibration files (RON), one section each.
        #[arg(required = true)]
        calibrations: Vec<PathBuf>,
        /// Write the report here (else print it).
        #[arg(long)]
        report: Option<PathBuf>,
    },
    /// Compare each baseline's published effect (method − No Defense) in Table 2 with its
    /// effect in the round-level table of the same setting and backbone (markdown).
    Effects {
        /// Targets CSV (models/calibration-targets.csv).
        targets: PathBuf,
        /// Mark effects that differ by more than this many points.
        #[arg(long, default_value_t = 10.0)]
        threshold: f64,
    },
    /// Render the table of a grid's results (markdown; `--csv` for CSV).
    Report {
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
    },
    /// Run a scenario twice and in 1- and 2-thread pools; name the first divergent event if any.
    CheckDeterminism {
        /// Scenario file (RON).
        scenario: PathBuf,
        /// Master seed (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
    },
}

fn main() -> ExitCode {
    memlink::allocator::keep_freed_pages();
    let cli = Cli::parse();
    for dir in &cli.allow_root {
        if let Err(e) = memlink::files::allow_root(dir) {
            eprintln!(
                "error: <command line>: invalid `--allow-root`: expected an existing folder, got {} ({e})",
                dir.display()
            );
            return ExitCode::from(2);
        }
    }
    if let Some(path) = &cli.records {
        let mode = memlink::records::Mode::parse(&cli.records_mode).expect("clap checked the value");
        if let Err(e) = memlink::records::install(path, mode) {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let done = dispatch(cli.cmd);
    // The store is written (Fill) or checked (Render, Verify) even when the command failed,
    // so runs simulated before the failure are kept.
    let finished = memlink::records::finish();
    if let (Ok(Some(f)), Some(path)) = (&finished, &cli.records) {
        eprintln!("{}", f.line(path));
    }
    match done.and(finished.map(|_| ())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            if e.is_input_error() { ExitCode::from(2) } else { ExitCode::FAILURE }
        }
    }
}

fn invalid(field: &str, expected: &str) -> Error {
    Error::Invalid {
        path: PathBuf::from("<command line>"),
        pos: memlink::error::Pos { line: 1, col: 1 },
        field: field.into(),
        expected: expected.into(),
    }
}

fn shard_of(arg: Option<String>) -> Result<Option<memlink::sweep::exec::Shard>> {
    use memlink::sweep::exec::Shard;
    match arg {
        Some(a) => Shard::parse(&a).map(Some).map_err(|e| invalid("--shard", &e)),
        None => Shard::from_slurm().transpose().map_err(|e| invalid("SLURM_ARRAY_TASK_ID", &e)),
    }
}

fn shard_label(s: Option<memlink::sweep::exec::Shard>) -> String {
    s.map(|s| format!("{}/{}", s.index, s.count)).unwrap_or_default()
}

fn dispatch(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Run { scenario, seed, out, json, invariants, fail_on_violation, record, ensemble } => {
            let ls = load(&scenario)?;
            let seed = seed.unwrap_or(ls.scenario.seed);
            let dir = out.unwrap_or_else(|| PathBuf::from("runs").join(&ls.scenario.name).join(format!("seed-{seed}")));
            // One writer per output folder: a second memlink waits instead of interleaving.
            let _lock = memlink::files::lock_folder(&dir)?;
            if let Some(n) = ensemble {
                if record.is_some() || !ls.scenario.invariants.is_empty() || !invariants.is_empty() {
                    return Err(invalid(
                        "--ensemble",
                        "a run without --record and without invariant monitors (run those at the fit)",
                    ));
                }
                let e = memlink::predictive::EnsembleRun::run(&ls, seed, &mut memlink::predictive::Ensembles::new(n))?;
                e.fit.write(&dir)?;
                memlink::run::write_atomic(&dir.join("ensemble.csv"), &e.csv())?;
                if json {
                    print!("{}", e.fit.to_json());
                } else {
                    print!("{}", e.fit.table());
                    print!("{}", e.table());
                    println!("\nwrote {}/summary.json, rounds.csv and ensemble.csv", dir.display());
                }
                return Ok(());
            }
            if let Some(file) = record {
                if !ls.scenario.invariants.is_empty() || !invariants.is_empty() {
                    return Err(invalid(
                        "--record",
                        "a run without invariant monitors (record first, then monitor a replay-free run)",
                    ));
                }
                let (result, traces) = memlink::trace::replay::record_scenario(&ls, seed);
                result.write(&dir)?;
                let paths = memlink::trace::replay::trace_paths(&file, &ls.scenario.arms);
                for (t, p) in traces.iter().zip(&paths) {
                    t.write(p)?;
                }
                if json {
                    print!("{}", result.to_json());
                } else {
                    print!("{}", result.table());
                    println!("\nwrote {}/summary.json and rounds.csv", dir.display());
                    for (t, p) in traces.iter().zip(&paths) {
                        println!("recorded {} calls of `{}` to {}", t.calls.len(), t.header.arm, p.display());
                    }
                }
                return Ok(());
            }
            if ls.scenario.invariants.is_empty() && invariants.is_empty() {
                let result = run_scenario(&ls, seed);
                result.write(&dir)?;
                if json {
                    print!("{}", result.to_json());
                } else {
                    print!("{}", result.table());
                    println!("\nwrote {}/summary.json and rounds.csv", dir.display());
                }
                return Ok(());
            }
            let run = memlink::run::run_monitored(&ls, seed, &invariants)?;
            run.result.write(&dir)?;
            memlink::run::write_atomic(&dir.join("invariants.json"), &run.to_json())?;
            if json {
                print!("{}", run.result.to_json());
            } else {
                print!("{}", run.result.table());
                print!("{}", run.table());
                println!("\nwrote {}/summary.json, rounds.csv and invariants.json", dir.display());
            }
            if fail_on_violation && !run.holds() {
                let (arm, v) = run.violations().next().expect("a violation");
                return Err(memlink::error::Error::Violated(format!(
                    "{} in arm `{arm}` of {}: {}",
                    v.invariant,
                    scenario.display(),
                    memlink::run::describe_violation(v)
                )));
            }
            Ok(())
        }
        Cmd::Replay { trace, arm, mode, fallback, out, json } => {
            use memlink::trace::replay::{ArmChoice, ReplayOptions};
            let t = memlink::trace::Trace::read(&trace)?;
            let arm = match arm {
                None => ArmChoice::Recorded,
                Some(a) if a.trim_start().starts_with('(') => ArmChoice::Inline(a),
                Some(a) if a.ends_with(".ron") => ArmChoice::File(PathBuf::from(a)),
                Some(a) => ArmChoice::Named(a),
            };
            let mode = match mode.as_deref() {
                None => None,
                Some(m) => Some(
                    memlink::agent::ReplayMode::parse(m)
                        .ok_or_else(|| invalid("--mode", "strict, fallback or flag"))?,
                ),
            };
            let outcome = memlink::trace::replay::replay(&t, &ReplayOptions { arm, mode, fallback })?;
            let stem = trace.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
            let dir = out.unwrap_or_else(|| PathBuf::from("runs").join("replay").join(stem));
            // One writer per output folder: a second memlink waits instead of interleaving.
            let _lock = memlink::files::lock_folder(&dir)?;
            outcome.result.write(&dir)?;
            memlink::run::write_atomic(&dir.join("replay.json"), &outcome.to_json())?;
            if json {
                print!("{}", outcome.result.to_json());
            } else {
                print!("{}", outcome.result.table());
                print!("{}", outcome.table());
                println!("\nwrote {}/summary.json, rounds.csv and replay.json", dir.display());
            }
            Ok(())
        }
        Cmd::Whatif { file, out, report, ensemble, quiet } => {
            let mut w = memlink::whatif::WhatIf::load(&file)?;
            if let Some(n) = ensemble {
                w = w.with_ensemble(&mut memlink::predictive::Ensembles::new(n))?;
            }
            let dir = out.unwrap_or_else(|| PathBuf::from("runs").join("whatif").join(&w.spec.name));
            // One writer per output folder: a second memlink waits instead of interleaving.
            let _lock = memlink::files::lock_folder(&dir)?;
            let results = w.run(&dir, quiet)?;
            let analysis = w.analyse(&results);
            let md = w.report(&analysis, &report.unwrap_or_else(|| PathBuf::from("reports/what-if")))?;
            print!("{}", memlink::error::read_file(&md)?);
            println!("\nwrote {}", md.display());
            Ok(())
        }
        Cmd::ImportTrace { file, format, summary, method, out } => {
            let t = match format.as_str() {
                "stream" => memlink::trace::import::stream(&file, summary.as_deref())?,
                "infa" => memlink::trace::import::infa(&file, method.as_deref())?,
                _ => return Err(invalid("--format", "stream or infa")),
            };
            t.write(&out)?;
            let m = memlink::trace::metrics(&t);
            print!("{}", memlink::trace::import::metrics_table(&t, &m));
            println!("\nwrote {} ({} calls)", out.display(), t.calls.len() + t.unparsed.len());
            Ok(())
        }
        Cmd::Check { file, invariants, cases, out, resume, list, ensemble, quiet } => {
            if list {
                for e in memlink::monitor::REGISTRY {
                    println!("{:<28} {}{}", e.name, e.about, if e.truth { " [reads evaluator truth]" } else { "" });
                }
                return Ok(());
            }
            let Some(file) = file else {
                return Err(invalid("file", "a check file or a scenario (or --list)"));
            };
            let mut check = memlink::check::Check::load_any(&file)?;
            let mut name = check.spec.name.clone();
            if let Some(n) = ensemble {
                check = check.with_ensemble(&mut memlink::predictive::Ensembles::new(n))?;
                name.push_str("-ensemble");
            }
            let dir = out.unwrap_or_else(|| PathBuf::from("runs").join("check").join(name));
            // One writer per output folder: a second memlink waits instead of interleaving.
            let _lock = memlink::files::lock_folder(&dir)?;
            let outcomes = check.run(&dir, cases, &invariants, resume, quiet)?;
            print!("{}", check.report(&outcomes));
            println!("\nwrote {}/check.md and check.json", dir.display());
            if let Some(o) = outcomes.iter().find(|o| !o.as_expected()) {
                return Err(memlink::error::Error::Violated(format!(
                    "`{}` on `{}` was expected to {} but {} ({})",
                    o.invariant,
                    o.arm,
                    if o.expect == memlink::check::Expect::Holds { "hold" } else { "fail" },
                    if o.counterexample.is_some() { "a counterexample was found" } else { "held" },
                    o.counterexample
                        .as_ref()
                        .map_or(format!("{} cases", o.cases), |c| c.scenario.display().to_string())
                )));
            }
            Ok(())
        }
        Cmd::Validate { scenario } => {
            let (kind, summary) = memlink::inputs::validate(&scenario)?;
            println!("{}: ok — {}: {summary}", scenario.display(), kind.name());
            Ok(())
        }
        Cmd::Explain {
            item,
            intent,
            experience,
            source_type,
            memory_type,
            scope,
            taint,
            q,
            query,
            sim,
            reader,
            json,
        } => {
            let mut input: ExplainInput = match &item {
                Some(path) => ExplainInput::load(path)?,
                None => {
                    let (Some(intent), Some(experience)) = (intent.clone(), experience.clone()) else {
                        return Err(invalid("item", "an item file, or both --intent and --experience"));
                    };
                    let scope = match scope.as_str() {
                        "private" => Scope::Private,
                        "team" => Scope::Team,
                        _ => return Err(invalid("scope", "private or team")),
                    };
                    let taint = match taint.as_str() {
                        "clean" => Taint::Clean,
                        "unverified" => Taint::Unverified,
                        "external" => Taint::External,
                        "poisoned" => Taint::Poisoned,
                        _ => return Err(invalid("taint", "clean, unverified, external or poisoned")),
                    };
                    ExplainInput {
                        intent,
                        experience,
                        utility_q: q,
                        source_type,
                        memory_type,
                        scope,
                        allowed_agents: if scope == Scope::Private { vec![reader] } else { Vec::new() },
                        allowed_task_classes: Vec::new(),
                        trust: 0.5,
                        hazard: 0.0,
                        taint,
                        source_agent_trust: 0.5,
                        parents: Vec::new(),
                        success_count: 0,
                        failure_count: 0,
                        strict: None,
                        reads: Vec::new(),
                        config: None,
                        memory_topology: Default::default(),
                        agents: 8,
                    }
                }
            };
            if let Some(q) = query {
                input.reads.push(ReadInput {
                    query: q,
                    sim,
                    reader,
                    task_class: "mmlu".into(),
                    cluster_share: 0.0,
                    state: ReadState::Stored,
                });
            }
            // The file was checked as it was read; what fails now came from a flag.
            input.check().map_err(|(field, expected)| invalid(&format!("--{field}"), &expected))?;
            let e = explain(&input);
            if json {
                println!("{}", serde_json::to_string_pretty(&e).expect("serializable"));
            } else {
                print!("{}", render(&input, &e));
            }
            Ok(())
        }
        Cmd::Grid { grid, out, round, shard, ensemble, quiet } => {
            let (spec, mut runs) = memlink::grid::expand(&grid)?;
            if let Some(n) = ensemble {
                runs = memlink::grid::with_ensemble(runs, &mut memlink::predictive::Ensembles::new(n))?;
            }
            let fewest = runs.iter().map(|r| r.scenario.scenario.protocol.rounds as usize).min().unwrap_or(3);
            if round.is_some_and(|k| k == 0 || k > fewest) {
                return Err(invalid("round", &format!("a round every run has, 1 to {fewest}")));
            }
            let k = round.unwrap_or(3.min(fewest));
            let shard = shard_of(shard)?;
            eprintln!("{}: {} runs", spec.name, runs.len());
            let dir = out.unwrap_or_else(|| PathBuf::from("runs").join(&spec.name));
            // One writer per output folder: a second memlink waits instead of interleaving.
            let _lock = memlink::files::lock_folder(&dir)?;
            let bar = memlink::sweep::exec::progress_bar(runs.len() as u64, quiet, &spec.name);
            let Some(records) = memlink::grid::run_stored(&spec, &runs, &dir, shard, &bar, "")? else {
                println!(
                    "shard {}: finished runs are in {}/runs; merge the shards' folders with `memlink merge`",
                    shard_label(shard),
                    dir.display()
                );
                return Ok(());
            };
            memlink::grid::write_records(&dir.join("results.jsonl"), &records)?;
            let rows = memlink::grid::table(&records, k);
            memlink::run::write_atomic(&dir.join("table.md"), &memlink::grid::markdown(&rows, k))?;
            memlink::run::write_atomic(&dir.join("table.csv"), &memlink::grid::csv(&rows, k))?;
            // The grid's default figures, next to its table: per setting, MDSR and RDA per round
            // and at round k by topology.
            let results = dir.join("results.jsonl");
            let mut settings: Vec<&str> = Vec::new();
            for r in &records {
                if !settings.contains(&r.setting.as_str()) {
                    settings.push(&r.setting);
                }
            }
            let mut figures = 0;
            for setting in settings {
                for (kind, metric) in [("rounds", "mdsr"), ("rounds", "rda"), ("topology", "mdsr"), ("topology", "rda")]
                {
                    let m = format!("{metric}@{k}");
                    memlink::sweep::plot_command(&results, kind, Some(&m), Some(setting), None, None)?;
                    figures += 1;
                }
            }
            print!("{}", memlink::grid::markdown(&rows, k));
            println!("\nwrote {}/results.jsonl, table.md, table.csv and {figures} figures", dir.display());
            Ok(())
        }
        Cmd::Fidelity { file, out, report, quiet } => {
            let spec = memlink::fidelity::load(&file)?;
            let dir = out.unwrap_or_else(|| PathBuf::from("runs/fidelity"));
            // One writer per output folder: a second memlink waits instead of interleaving.
            let _lock = memlink::files::lock_folder(&dir)?;
            let text = memlink::fidelity::run(&spec, &file, &dir, quiet)?;
            match report {
                Some(p) => {
                    memlink::run::write_atomic(&p, &text)?;
                    eprintln!("wrote {}", p.display());
                }
                None => print!("{text}"),
            }
            Ok(())
        }
        Cmd::Sweep { sweep, out, resume: _, ensemble, shard, quiet } => {
            let sw = match ensemble {
                Some(n) => memlink::sweep::Sweep::load_ensemble(&sweep, &mut memlink::predictive::Ensembles::new(n))?,
                None => memlink::sweep::Sweep::load(&sweep)?,
            };
            let plan = &sw.plan;
            let dir = out.unwrap_or_else(|| PathBuf::from("runs/sweeps").join(&plan.spec.name));
            // One writer per output folder: a second memlink waits instead of interleaving.
            let _lock = memlink::files::lock_folder(&dir)?;
            let shard = shard_of(shard)?;
            memlink::sweep::write_plan(plan, &dir)?;
            let distinct: std::collections::BTreeSet<&str> = sw.jobs.iter().map(|j| j.hash.as_str()).collect();
            eprintln!(
                "{}: {} design points, {} runs ({} distinct){}",
                plan.spec.name,
                plan.points.len(),
                plan.runs.len(),
                distinct.len(),
                shard.map(|s| format!(", shard {}/{}", s.index, s.count)).unwrap_or_default()
            );
            let bar = memlink::sweep::exec::progress_bar(distinct.len() as u64, quiet, &plan.spec.name);
            let done = memlink::sweep::exec::execute(&sw.jobs, &dir, shard, &bar)?;
            eprintln!("{}: {}", plan.spec.name, done.describe());
            if shard.is_some_and(|s| s.count > 1) {
                println!(
                    "shard {}: finished runs are in {}/runs; merge the shards' folders with `memlink merge`",
                    shard_label(shard),
                    dir.display()
                );
                return Ok(());
            }
            let results = memlink::sweep::collect_plan(plan, &dir)?;
            memlink::sweep::ensemble::finalize_with_draws(plan, &results, &dir)?;
            println!(
                "wrote {}/summary.md, runs.csv, runs.jsonl, problem.json, analysis.json and the figures",
                dir.display()
            );
            Ok(())
        }
        Cmd::Merge { dirs, out } => {
            memlink::sweep::merge(&dirs, &out)?;
            println!("merged {} folders into {}", dirs.len(), out.display());
            Ok(())
        }
        Cmd::Plot { results, kind, metric, setting, arm, out } => {
            let file = memlink::sweep::plot_command(
                &results,
                &kind,
                metric.as_deref(),
                setting.as_deref(),
                arm.as_deref(),
                out.as_deref(),
            )?;
            println!("wrote {}", file.display());
            Ok(())
        }
        Cmd::Calibrate {
            calibration,
            out,
            profile_out,
            resume,
            report: report_out,
            leave_one_out,
            refold,
            slices,
            identify,
            refine,
            ensemble,
            proposals,
            defensive,
        } => {
            let cal = memlink::calibrate::Calibration::load(&calibration)?;
            let name = cal.spec().name.clone();
            let dir = out.unwrap_or_else(|| PathBuf::from("runs").join(format!("calibrate-{name}")));
            // One writer per output folder: a second memlink waits instead of interleaving.
            let _lock = memlink::files::lock_folder(&dir)?;
            if let Some(n) = ensemble {
                let opts =
                    memlink::calibrate::ensemble::EnsembleOptions { draws: n, proposals, dir: &dir, resume, defensive };
                return calibrate_ensemble(&cal, opts, report_out.as_deref());
            }
            if leave_one_out || slices.is_some() || identify.is_some() {
                let v = Validation { resume, leave_one_out, refold, slices, identify, refine };
                return calibrate_validation(&cal, &dir, v, report_out.as_deref());
            }
            eprintln!(
                "{name}: fitting {} parameters to {} target rows ({} more rows checked, not fitted)",
                cal.spec().parameters.len(),
                cal.rows().len(),
                cal.checks().len()
            );
            let fit = cal.fit(&dir, resume, &mut search_progress)?;
            let mut wrote = Vec::new();
            if cal.spec().parameters.iter().any(|p| p.guard.is_none()) {
                let target = profile_out.unwrap_or_else(|| cal.profile_path().to_path_buf());
                cal.write_profile(&fit, &target)?;
                wrote.push(target.display().to_string());
            }
            let guards = cal.fitted_guards(&fit);
            if !guards.is_empty() {
                let g = dir.join(format!("{name}.guards.ron"));
                memlink::run::write_atomic(
                    &g,
                    &format!("// Fitted arms of `{name}`, to paste into scenarios.\n{guards}"),
                )?;
                wrote.push(g.display().to_string());
            }
            let report = memlink::calibrate::report(&cal, &fit);
            let r = dir.join(format!("{name}.md"));
            memlink::run::write_atomic(&r, &report)?;
            wrote.push(r.display().to_string());
            if let Some(r) = report_out {
                memlink::run::write_atomic(&r, &report)?;
                wrote.push(r.display().to_string());
            }
            print!("{report}");
            println!("\nwrote {}", wrote.join(", "));
            Ok(())
        }
        Cmd::Assess { calibrations, report } => {
            let mut text = String::from(
                "<!-- Generated by memlink; do not edit. Regenerate with the command each section names. -->\n",
            );
            for file in &calibrations {
                let cal = memlink::calibrate::Calibration::load(file)?;
                eprintln!(
                    "{}: assessing {} fitted rows and {} checks",
                    cal.spec().name,
                    cal.rows().len(),
                    cal.checks().len()
                );
                text.push('\n');
                let fit = cal.evaluate();
                text.push_str(&memlink::calibrate::report(&cal, &fit));
                if let Some(l) = cal.assess_loso(&fit)? {
                    text.push('\n');
                    text.push_str(&memlink::calibrate::loso::loso_report(&cal, &l));
                }
                if let Some(id) = cal.assess_identification()? {
                    text.push('\n');
                    text.push_str(&memlink::calibrate::identify::identify_report(&cal, &id));
                }
                // The committed posterior ensemble of this calibration (`--ensemble`), if any.
                let ens = cal.ensemble_path();
                if ens.exists() {
                    let e = memlink::calibrate::ensemble::Ensemble::load(&ens)?;
                    if e.calibration == cal.spec().name {
                        text.push('\n');
                        text.push_str(&format!(
                            "`memlink calibrate {} --ensemble {} --proposals {}` (stored in `{}`):\n\n",
                            file.display(),
                            e.draws.len(),
                            e.proposals,
                            ens.display()
                        ));
                        text.push_str(&memlink::calibrate::ensemble::ensemble_report(&e).replacen("# ", "## ", 1));
                    }
                }
            }
            match report {
                Some(path) => {
                    memlink::run::write_atomic(&path, &text)?;
                    println!("wrote {}", path.display());
                }
                None => print!("{text}"),
            }
            Ok(())
        }
        Cmd::Effects { targets, threshold } => {
            if !(threshold.is_finite() && threshold >= 0.0) {
                return Err(invalid("threshold", "a non-negative number of points"));
            }
            let targets = memlink::calibrate::read_targets(&targets)?;
            let effects = memlink::calibrate::effects::effects(&targets);
            print!("{}", memlink::calibrate::effects::markdown(&effects, threshold));
            Ok(())
        }
        Cmd::Report { results, round, csv, targets } => {
            let records = memlink::grid::read_records(&results)?;
            if round == 0 || records.iter().any(|r| r.mdsr.len() < round) {
                return Err(invalid("round", "a round that every result has (1-based)"));
            }
            let rows = memlink::grid::table(&records, round);
            if let Some(t) = targets {
                let targets = memlink::calibrate::read_targets(&t)?;
                print!("{}", memlink::grid::versus_paper(&rows, &targets, round));
            } else if csv {
                print!("{}", memlink::grid::csv(&rows, round));
            } else {
                print!("{}", memlink::grid::markdown(&rows, round));
            }
            Ok(())
        }
        Cmd::CheckDeterminism { scenario, seed } => {
            let ls = load(&scenario)?;
            let seed = seed.unwrap_or(ls.scenario.seed);
            let report = check_determinism(&ls, seed)?;
            println!("deterministic: {} identical summaries ({})", report.runs.len(), report.runs.join(", "));
            for (arm, h) in report.hashes {
                println!("  {arm:<24} trace hash {h}");
            }
            Ok(())
        }
    }
}

/// One line of a calibration's progress: search `c`'s iteration.
fn search_progress(c: usize, s: &memlink::calibrate::Simplex) {
    let (x, v) = s.best();
    eprintln!(
        "  search {} · iteration {:>3} · {:>4} evaluations · objective {v:.4} · {x:.4?}",
        c + 1,
        s.iterations,
        s.evaluations
    );
}

/// What `memlink calibrate` validates instead of fitting.
struct Validation {
    resume: bool,
    leave_one_out: bool,
    refold: bool,
    slices: Option<usize>,
    identify: Option<usize>,
    refine: u32,
}

/// `memlink calibrate --ensemble N`: the calibration's posterior ensemble, written beside the
/// profile (`<profile>.ensemble.ron`) with its summary `<dir>/<name>.ensemble.md` (and `report`).
fn calibrate_ensemble(
    cal: &memlink::calibrate::Calibration,
    opts: memlink::calibrate::ensemble::EnsembleOptions<'_>,
    report: Option<&std::path::Path>,
) -> Result<()> {
    let memlink::calibrate::ensemble::EnsembleOptions { draws, proposals, dir, .. } = opts;
    if draws == 0 {
        return Err(invalid("ensemble", "at least one draw (default 32)"));
    }
    if proposals < 2 {
        return Err(invalid("proposals", "at least 2 proposals per search (the fit and one draw)"));
    }
    let name = cal.spec().name.clone();
    let Some(id_path) = cal.identify_path() else {
        return Err(memlink::error::Error::Invalid {
            path: cal.file().to_path_buf(),
            pos: memlink::error::Pos { line: 1, col: 1 },
            field: "identify".into(),
            expected: "the stored identifiability analysis the ensemble's proposal is built on (`memlink calibrate FILE --identify N`)".into(),
        });
    };
    let id = cal.stored_identification()?.expect("a calibration with an identify file");
    eprintln!("{name}: ensemble of {draws} draws from {proposals} proposals per search ({})", id_path.display());
    let e = cal.ensemble(&id, &id_path, opts, &mut |s, k, chi2| {
        if k % 16 == 0 || k + 1 == proposals {
            eprintln!("  search {} · proposal {k} · χ² {chi2:.2}", s + 1);
        }
    })?;
    let text = memlink::calibrate::ensemble::ensemble_report(&e);
    let path = cal.ensemble_path();
    memlink::run::write_atomic(&path, &e.to_ron())?;
    let md = dir.join(format!("{name}.ensemble.md"));
    memlink::run::write_atomic(&md, &text)?;
    if let Some(r) = report {
        memlink::run::write_atomic(r, &text)?;
    }
    print!("{text}");
    println!("\nwrote {} and {}", path.display(), md.display());
    Ok(())
}

/// `memlink calibrate --leave-one-out [--refold]` or `--slices N`: validation of a calibration,
/// written to `<dir>/<name>.{loso,slices}.{md,json}` (and `report`), the profile untouched.
fn calibrate_validation(
    cal: &memlink::calibrate::Calibration,
    dir: &std::path::Path,
    v: Validation,
    report: Option<&std::path::Path>,
) -> Result<()> {
    use memlink::calibrate::loso;
    let Validation { resume, leave_one_out, refold, slices, identify, refine } = v;
    let name = cal.spec().name.clone();
    std::fs::create_dir_all(dir).map_err(|source| memlink::error::Error::Io { path: dir.to_path_buf(), source })?;
    let (kind, text, json) = if leave_one_out {
        eprintln!("{name}: leave-one-setting-out validation over {} settings", cal.spec().settings.len());
        let l = if refold {
            let Some(stored) = cal.stored_loso()? else {
                return Err(memlink::error::Error::Invalid {
                    path: cal.file().to_path_buf(),
                    pos: memlink::error::Pos { line: 1, col: 1 },
                    field: "loso".into(),
                    expected: "the stored leave-one-setting-out result that --refold starts from".into(),
                });
            };
            cal.refold(&stored, dir, resume, &mut search_progress)?
        } else {
            cal.leave_one_out(dir, resume, &mut search_progress)?
        };
        ("loso", loso::loso_report(cal, &l), serde_json::to_string_pretty(&l).expect("serializable"))
    } else if let Some(n) = identify {
        if n < 2 {
            return Err(invalid("identify", "at least 2 points (the bounds) per parameter"));
        }
        eprintln!(
            "{name}: identifiability of {} parameters, {n} profile points each, {refine} refining evaluations per point",
            cal.spec().parameters.len()
        );
        let id = cal.identify(n, refine, &mut |p| eprintln!("  {p} · profile traced"));
        (
            "identify",
            memlink::calibrate::identify::identify_report(cal, &id),
            serde_json::to_string_pretty(&id).expect("serializable"),
        )
    } else {
        let n = slices.unwrap_or(5);
        eprintln!("{name}: slices of {} parameters at {n} points", cal.spec().parameters.len());
        let s = cal.slices(n, &mut |s| eprintln!("  {} · χ² range {:.2}", s.name, s.range()));
        ("slices", loso::slices_report(cal, &s), serde_json::to_string_pretty(&s).expect("serializable"))
    };
    let md = dir.join(format!("{name}.{kind}.md"));
    memlink::run::write_atomic(&md, &text)?;
    memlink::run::write_atomic(&dir.join(format!("{name}.{kind}.json")), &json)?;
    if let Some(r) = report {
        memlink::run::write_atomic(r, &text)?;
    }
    print!("{text}");
    println!("\nwrote {}", md.display());
    Ok(())
}
