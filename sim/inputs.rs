//! Every kind of file memlink reads, recognised and checked by one entry point, so that
//! `memlink validate` accepts any of them and says which kind it took a file for.
//!
//! The kind is read from the file: a name (`*.jsonl` results or, with a trace header on its
//! first line, a trace; `*.state.json` checkpoints) or,
//! for RON, the top-level fields only one kind has (a scenario's `arms` and `workload`, a
//! grid's `settings` or `base`, a calibration's `parameters`, a profile's `workloads`, an
//! explain item's `experience`, an ensemble's `draws` and `searches`). Each kind is then loaded exactly as the command that reads it
//! loads it, so validation and use cannot disagree.

use crate::error::{Error, Pos, Result, read_file};
pub use crate::files::{FileKind, detect};
use crate::study::calibrate::Simplex;
use std::path::Path;

/// Loads and checks the file at `path` as its kind's command would; returns the kind and a
/// one-line summary of what it holds.
pub fn validate(path: &Path) -> Result<(FileKind, String)> {
    let text = read_file(path)?;
    let kind = detect(path, &text);
    let summary = match kind {
        FileKind::Scenario => {
            let ls = crate::scenario::load_str(&text, path)?;
            let s = &ls.scenario;
            format!(
                "{} agents, {} arm(s), workload {}, backbone {}; {}; {}",
                s.agents,
                s.arms.len(),
                s.workload.class(),
                ls.profile.name,
                crate::scenario::estimate::Estimate::of(s).describe(),
                s.switch_summary()
            )
        }
        FileKind::Grid => {
            let (spec, runs) = crate::study::grid::expand(path)?;
            let arms: usize = runs.iter().map(|r| r.scenario.scenario.arms.len()).sum();
            format!("{}: {} runs, {arms} arm runs", spec.name, runs.len())
        }
        FileKind::Calibration => {
            let cal = crate::study::calibrate::Calibration::load(path)?;
            format!(
                "{}: {} parameters, {} fitted rows, {} checks",
                cal.spec().name,
                cal.spec().parameters.len(),
                cal.rows().len(),
                cal.checks().len()
            )
        }
        FileKind::Ensemble => {
            let e = crate::study::calibrate::ensemble::Ensemble::load(path)?;
            format!(
                "of `{}` from calibration `{}`: {} draws of {} parameters in {} searches",
                e.profile,
                e.calibration,
                e.draws.len(),
                e.searches.iter().map(|s| s.parameters.len()).sum::<usize>(),
                e.searches.len()
            )
        }
        FileKind::Profile => {
            let p = crate::agent::load_profile(path)?;
            format!("{}: workloads {}", p.name, p.workloads.keys().cloned().collect::<Vec<_>>().join(", "))
        }
        FileKind::Explain => {
            let e = crate::study::explain::ExplainInput::load(path)?;
            format!("{:?} scope, {} read(s)", e.scope, e.reads.len())
        }
        FileKind::Results => {
            let r = crate::study::grid::read_records(path)?;
            format!("{} result records", r.len())
        }
        FileKind::WhatIf => {
            let w = crate::study::whatif::WhatIf::load_str(&text, path)?;
            format!(
                "{}: {} settings × {} conditions × {} topologies × {} seeds = {} runs of {} arms",
                w.spec.name,
                w.spec.settings.len(),
                w.spec.conditions.len(),
                w.spec.topologies.len(),
                w.spec.replicates,
                w.jobs.len(),
                w.spec.arms.len()
            )
        }
        FileKind::Trace => {
            let t = crate::study::trace::Trace::parse(&text, path)?;
            let world = match crate::study::trace::replay::recorded_scenario(&t)? {
                Some(ls) => format!("scenario `{}` embedded", ls.scenario.name),
                None => "no scenario (replays with --arm <scenario.ron>)".into(),
            };
            let h = &t.header;
            format!(
                "{} trace of `{}`: {} calls, {} agents (attackers {:?}), {} tasks × {} rounds, seed {}; {world}",
                h.source, h.arm, h.calls, h.agents, h.attackers, h.tasks, h.rounds, h.seed
            )
        }
        FileKind::Fidelity => {
            // Loading checks every switch against the settings it names.
            let spec = crate::study::fidelity::load_str(&text, path)?;
            let (_, runs) =
                crate::files::load_referenced(path, Some(&text), "grid", &spec.grid, crate::study::grid::expand)?;
            format!(
                "{}: grid {} ({} runs), {} fixes, {} undetermined details",
                spec.name,
                spec.grid.display(),
                runs.len(),
                spec.fixes.len(),
                spec.undetermined.len()
            )
        }
        FileKind::Sweep => {
            let sw = crate::study::sweep::Sweep::load_str(&text, path)?;
            let distinct: std::collections::BTreeSet<&str> = sw.jobs.iter().map(|j| j.hash.as_str()).collect();
            format!(
                "{}: design {} over {} factors, {} points, {} runs ({} distinct)",
                sw.plan.spec.name,
                sw.plan.spec.design.name(),
                sw.plan.factors.len(),
                sw.plan.points.len(),
                sw.plan.runs.len(),
                distinct.len()
            )
        }
        FileKind::Check => {
            let c = crate::study::check::Check::load_str(&text, path)?;
            format!(
                "{}: {} invariant(s) over {} cases each, base {}",
                c.spec.name,
                c.invariants().len(),
                c.spec.cases,
                c.spec.base.display()
            )
        }
        FileKind::StoredRun => {
            let hash = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            let r = crate::study::sweep::exec::parse_result(path, &text, hash)?;
            format!("run {} (seed {}), {} arms, digest intact", r.hash, r.seed, r.arms.len())
        }
        FileKind::Checkpoint => {
            let s = read_checkpoint(path, &text)?;
            format!(
                "{} search(es), {} evaluations (its bounds are checked by `calibrate --resume`)",
                s.len(),
                s.iter().map(|x| x.evaluations).sum::<u32>()
            )
        }
    };
    Ok((kind, summary))
}

/// A checkpoint's structure without its calibration: each simplex checked against unbounded
/// parameters of its own dimension.
fn read_checkpoint(path: &Path, text: &str) -> Result<Vec<Simplex>> {
    let s: Vec<Simplex> = serde_json::from_str(text).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        pos: Pos { line: e.line(), col: e.column() },
        message: format!("expected a calibration checkpoint: {e}"),
    })?;
    for (i, x) in s.iter().enumerate() {
        let n = x.vertices.first().map_or(0, |v| v.0.len());
        let open = crate::study::calibrate::Bounds { lo: vec![f64::MIN; n], hi: vec![f64::MAX; n] };
        x.check(&open, u32::MAX / 4).map_err(|m| Error::Parse {
            path: path.to_path_buf(),
            pos: Pos { line: 1, col: 1 },
            message: format!("search {}: {m}", i + 1),
        })?;
    }
    Ok(s)
}
