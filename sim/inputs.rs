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
use crate::study::calibrate::Simplex;
use std::path::Path;

/// The kinds of input file.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A scenario (`memlink run`).
    Scenario,
    /// A grid (`memlink grid`).
    Grid,
    /// A calibration (`memlink calibrate`, `memlink assess`).
    Calibration,
    /// A backbone profile (`models/*.ron`).
    Profile,
    /// An explain item (`memlink explain`).
    Explain,
    /// Grid results (`results.jsonl`, `memlink report`).
    Results,
    /// A calibration checkpoint (`<name>.state.json`, `memlink calibrate --resume`).
    Checkpoint,
    /// A sensitivity sweep (`memlink sweep`).
    Sweep,
    /// A fidelity report's switches (`memlink fidelity`).
    Fidelity,
    /// An invariant check over a space of scenarios (`memlink check`).
    Check,
    /// A recorded or imported trace (`memlink replay`).
    Trace,
    /// A threat-model what-if (`memlink whatif`).
    WhatIf,
    /// A stored run (`<out>/runs/<hash>.json` of a sweep, grid or what-if).
    StoredRun,
    /// A calibration's posterior ensemble (`models/<profile>.ensemble.ron`, `memlink calibrate
    /// --ensemble`).
    Ensemble,
}

impl FileKind {
    /// The kind's name as `validate` prints it.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Scenario => "scenario",
            FileKind::Grid => "grid",
            FileKind::Calibration => "calibration",
            FileKind::Profile => "backbone profile",
            FileKind::Explain => "explain item",
            FileKind::Results => "grid results",
            FileKind::Checkpoint => "calibration checkpoint",
            FileKind::Sweep => "sweep",
            FileKind::Fidelity => "fidelity report",
            FileKind::Check => "invariant check",
            FileKind::Trace => "trace",
            FileKind::WhatIf => "what-if",
            FileKind::StoredRun => "stored run",
            FileKind::Ensemble => "posterior ensemble",
        }
    }
}

/// Top-level field names of a RON text: `name:` at nesting depth 1, outside strings and comments.
fn top_level_fields(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let (mut depth, mut i) = (0i32, 0usize);
    let mut out = Vec::new();
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            c if depth == 1 && (c.is_ascii_alphabetic() || c == b'_') => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let rest = text[i..].trim_start();
                if rest.starts_with(':') && !rest.starts_with("::") {
                    out.push(text[start..i].to_string());
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The kind of the file at `path` with contents `text`.
pub fn detect(path: &Path, text: &str) -> FileKind {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with(".jsonl") {
        // By what the first line parses to, not by its bytes: a trace written with other
        // spacing is still a trace.
        let first = text.lines().next().unwrap_or("");
        let format = serde_json::from_str::<serde_json::Value>(first)
            .ok()
            .and_then(|v| v.get("format").and_then(|f| f.as_str()).map(String::from));
        return if format.as_deref() == Some(crate::study::trace::FORMAT) {
            FileKind::Trace
        } else {
            FileKind::Results
        };
    }
    if name.ends_with(".json") {
        let stored = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .is_some_and(|v| v.get("hash").is_some() && v.get("arms").is_some() && v.get("digest").is_some());
        if stored {
            return FileKind::StoredRun;
        }
        return if text.trim_start().starts_with('[') || name.ends_with(".state.json") {
            FileKind::Checkpoint
        } else {
            FileKind::Results
        };
    }
    let fields = top_level_fields(text);
    let has = |f: &str| fields.iter().any(|x| x == f);
    if has("draws") && has("searches") {
        FileKind::Ensemble
    } else if has("fixes") || has("undetermined") {
        FileKind::Fidelity
    } else if has("conditions") {
        FileKind::WhatIf
    } else if has("space") {
        FileKind::Check
    } else if has("factors") || has("design") {
        FileKind::Sweep
    } else if has("parameters") || has("targets") {
        FileKind::Calibration
    } else if has("settings") || (has("base") && !has("arms")) {
        FileKind::Grid
    } else if has("workloads") {
        FileKind::Profile
    } else if has("experience") || has("intent") {
        FileKind::Explain
    } else {
        FileKind::Scenario
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_apart_by_their_fields() {
        let p = Path::new("x.ron");
        assert_eq!(detect(p, "(name: \"a\", agents: 8, arms: [], workload: Mmlu(()))"), FileKind::Scenario);
        assert_eq!(detect(p, "(name: \"g\", settings: [(name: \"a\", base: \"b.ron\")])"), FileKind::Grid);
        assert_eq!(detect(p, "(name: \"g\", base: \"b.ron\", seeds: [1])"), FileKind::Grid);
        assert_eq!(detect(p, "(name: \"c\", profile: \"q\", parameters: [])"), FileKind::Calibration);
        assert_eq!(detect(p, "(name: \"q\", workloads: { \"mmlu\": () })"), FileKind::Profile);
        assert_eq!(detect(p, "(intent: \"a\", experience: \"b\")"), FileKind::Explain);
        assert_eq!(
            detect(p, "(name: \"s\", base: \"b.ron\", factors: [], design: Oat(steps: [0.8]))"),
            FileKind::Sweep
        );
        assert_eq!(detect(Path::new("r/results.jsonl"), "{}"), FileKind::Results);
        assert_eq!(detect(Path::new("c.state.json"), "[]"), FileKind::Checkpoint);
        // Nested fields do not count: a scenario's arms hold a `name` and a `guard`.
        assert_eq!(top_level_fields("(a: (b: 1), c: \"d: e\") // f: 1"), vec!["a", "c"]);
    }
}
