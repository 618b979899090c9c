//! Grids: one or more base scenarios (the paper's benchmark–attack settings) expanded over
//! backbones, seeds, topologies and attacker sets (the paper's 15 fixed attacker triples), run in
//! parallel with results in expansion order, and the table those results make: per backbone,
//! setting and arm, the mean of the per-topology means with the across-topology standard
//! deviation, as the paper's Table 2 reports.

use crate::error::{Error, Pos, Result, parse_ron, read_file};
use crate::eval::metrics::ArmSummary;
use crate::files::write_atomic;
use crate::run::run_scenario;
use crate::scenario::{Attackers, LoadedScenario, load};
use crate::topology::Topology;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub mod figures;
mod table;
pub use table::{TableRow, csv, markdown, table, versus_paper};

/// A grid file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridSpec {
    /// Grid name.
    pub name: String,
    /// Base scenario, relative to the grid file (a one-setting grid).
    #[serde(default)]
    pub base: Option<PathBuf>,
    /// Settings, each a named base scenario relative to the grid file (Table 2's columns).
    #[serde(default)]
    pub settings: Vec<GridSetting>,
    /// Backbone profiles (omitted: each base scenario's; an empty list is an error).
    #[serde(default)]
    pub backbones: Option<Vec<String>>,
    /// Master seeds (omitted: the base scenario's; an empty list is an error).
    #[serde(default)]
    pub seeds: Option<Vec<u64>>,
    /// Topologies (omitted: the base scenario's; an empty list is an error).
    #[serde(default)]
    pub topologies: Option<Vec<Topology>>,
    /// Explicit attacker sets (default: the base scenario's attackers).
    #[serde(default)]
    pub attacker_sets: Vec<Vec<u32>>,
}

/// One setting of a grid: a name for the table and its base scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridSetting {
    /// Column name ("mmlu_minja").
    pub name: String,
    /// Base scenario, relative to the grid file.
    pub base: PathBuf,
    /// Attacker sets for this setting, replacing the grid's (the INFA settings fix attackers
    /// 0, 1, 2); `[]` keeps the base scenario's attackers.
    #[serde(default)]
    pub attacker_sets: Option<Vec<Vec<u32>>>,
    /// Backbones for this entry, replacing the grid's. With `arms` and `topologies` this lets
    /// one cell of a table run another protocol than its neighbours (two entries of one
    /// setting name then make one column).
    #[serde(default)]
    pub backbones: Option<Vec<String>>,
    /// The base scenario's arms to run, by name (default: all of them).
    #[serde(default)]
    pub arms: Option<Vec<String>>,
    /// Topologies for this entry, replacing the grid's.
    #[serde(default)]
    pub topologies: Option<Vec<Topology>>,
}

/// One expanded run.
#[derive(Clone, Debug)]
pub struct GridRun {
    /// Position in expansion order.
    pub index: usize,
    /// Setting name.
    pub setting: String,
    /// Backbone profile.
    pub backbone: String,
    /// Seed.
    pub seed: u64,
    /// Topology label.
    pub topology: String,
    /// Attacker set label ("0,1,5" or the base's).
    pub attackers: String,
    /// The scenario to run.
    pub scenario: LoadedScenario,
    /// The posterior draw its profile is at (`None`: the fitted profile).
    pub draw: Option<usize>,
}

/// One result line: a run's labels and one arm's summary.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GridRecord {
    /// Grid name.
    pub grid: String,
    /// Run index.
    pub run: usize,
    /// Setting name (the base scenario's name for one-setting grids).
    #[serde(default)]
    pub setting: String,
    /// Backbone profile.
    #[serde(default)]
    pub backbone: String,
    /// Seed.
    pub seed: u64,
    /// Topology label.
    pub topology: String,
    /// Attacker set label.
    pub attackers: String,
    /// Arm name.
    pub arm: String,
    /// Guard name.
    pub guard: String,
    /// MDSR@k (strict) per round.
    pub mdsr: Vec<f64>,
    /// The tables' RDA@k column per round (`RoundMetrics::table_rda`: retrieval damage, or
    /// 1 − accuracy in the INFA harness).
    pub rda: Vec<f64>,
    /// Exposure ASR@k per round.
    pub asr: Vec<f64>,
    /// MDSR@k's upper bound over unknown slots per round (spec §7.1).
    #[serde(default)]
    pub mdsr_upper: Vec<f64>,
    /// RDA@k's lower bound over unknown slots per round (spec §7.1).
    #[serde(default)]
    pub rda_lower: Vec<f64>,
    /// Trace hash of the arm.
    pub trace_hash: String,
    /// The posterior draw of the backbone's stand-in the run used (`--ensemble`; absent: the
    /// fitted profile, the table's point estimate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<usize>,
}

impl GridRecord {
    fn of(grid: &str, r: &GridRun, a: &ArmSummary) -> Self {
        Self::from_result(grid, r, &crate::study::sweep::exec::ArmResult::of(a))
    }
}

impl GridRecord {
    /// The record of one arm's stored result.
    pub fn from_result(grid: &str, r: &GridRun, a: &crate::study::sweep::exec::ArmResult) -> Self {
        let series = |k: &str| a.rounds.iter().map(|m| m.get(k).copied().unwrap_or(0.0)).collect::<Vec<f64>>();
        GridRecord {
            grid: grid.to_string(),
            run: r.index,
            setting: r.setting.clone(),
            backbone: r.backbone.clone(),
            seed: r.seed,
            topology: r.topology.clone(),
            attackers: r.attackers.clone(),
            arm: a.arm.clone(),
            guard: a.guard.clone(),
            mdsr: series("mdsr"),
            rda: series("rda"),
            asr: series("asr"),
            mdsr_upper: series("mdsr_upper"),
            rda_lower: series("rda_lower"),
            trace_hash: a.trace_hash.clone(),
            draw: r.draw,
        }
    }
}

/// The per-round metrics a grid record reads (what a run at an ensemble draw keeps).
pub const KEPT: &[&str] = &["mdsr", "rda", "asr", "mdsr_upper", "rda_lower"];

/// Runs a grid through the sweep engine: each run's result is stored in `<dir>/runs/` as it
/// finishes, so a killed grid resumes and a rerun skips what is done; with `shard`, only that
/// share of the runs. `label` is the study's condition for report records (empty for a plain
/// grid). Returns the records in expansion order (None when sharded: merge first).
pub fn run_stored(
    spec: &GridSpec,
    runs: &[GridRun],
    dir: &Path,
    shard: Option<crate::study::sweep::exec::Shard>,
    bar: &indicatif::ProgressBar,
    label: &str,
) -> Result<Option<Vec<GridRecord>>> {
    let jobs: Vec<crate::study::sweep::exec::Job> = runs
        .iter()
        .map(|r| {
            let job = crate::study::sweep::exec::Job::new(r.scenario.clone(), r.seed);
            match r.draw {
                // A draw's runs keep what the table reads: its records are half the size.
                Some(_) => job.labelled(crate::study::predictive::LABEL).keeping(KEPT),
                None => job.labelled(label),
            }
        })
        .collect();
    crate::study::sweep::exec::execute(&jobs, dir, shard, bar)?;
    if shard.is_some_and(|s| s.count > 1) {
        return Ok(None);
    }
    let results = crate::study::sweep::exec::collect(&jobs, &[dir.to_path_buf()])?;
    Ok(Some(
        runs.iter()
            .zip(&results)
            .flat_map(|(r, res)| res.arms.iter().map(|a| GridRecord::from_result(&spec.name, r, a)).collect::<Vec<_>>())
            .collect(),
    ))
}

/// Loads a grid file and expands it, in the order settings × backbones × seeds × topologies ×
/// attacker sets.
pub fn expand(path: &Path) -> Result<(GridSpec, Vec<GridRun>)> {
    expand_str(&read_file(path)?, path)
}

/// [`expand`] of grid `text` as if read from `path` (base scenarios resolve relative to it).
pub fn expand_str(text: &str, path: &Path) -> Result<(GridSpec, Vec<GridRun>)> {
    let text = text.to_string();
    let spec: GridSpec = parse_ron(path, &text)?;
    let invalid = |field: &str, expected: String| Error::Invalid {
        path: path.to_path_buf(),
        pos: crate::error::locate_field(&text, field),
        field: field.to_string(),
        expected,
    };
    for (field, empty) in [
        ("backbones", spec.backbones.as_ref().is_some_and(Vec::is_empty)),
        ("seeds", spec.seeds.as_ref().is_some_and(Vec::is_empty)),
        ("topologies", spec.topologies.as_ref().is_some_and(Vec::is_empty)),
    ] {
        if empty {
            return Err(invalid(field, format!("at least one entry (omit `{field}` to use each base scenario's)")));
        }
    }
    let mut settings: Vec<(Option<String>, GridSetting)> =
        spec.settings.iter().map(|s| (Some(s.name.clone()), s.clone())).collect();
    match (&spec.base, settings.is_empty()) {
        (Some(b), true) => settings.push((
            None,
            GridSetting {
                name: String::new(),
                base: b.clone(),
                attacker_sets: None,
                backbones: None,
                arms: None,
                topologies: None,
            },
        )),
        (None, false) => {}
        (Some(_), false) => return Err(invalid("base", "either `base` or `settings`, not both".into())),
        (None, true) => return Err(invalid("settings", "a `base` scenario or at least one setting".into())),
    }
    let mut runs = Vec::new();
    for (name, entry) in &settings {
        // An error of this entry points at the entry (its name, else the grid's `base`).
        let at = |field: &str, expected: String| {
            let pos = match name {
                Some(n) => locate_in_setting(&text, n, field),
                None => crate::error::locate_field(&text, field),
            };
            Error::Invalid { path: path.to_path_buf(), pos, field: field.to_string(), expected }
        };
        for (field, empty) in [
            ("backbones", entry.backbones.as_ref().is_some_and(Vec::is_empty)),
            ("topologies", entry.topologies.as_ref().is_some_and(Vec::is_empty)),
            ("arms", entry.arms.as_ref().is_some_and(Vec::is_empty)),
        ] {
            if empty {
                return Err(at(field, format!("at least one entry (omit `{field}` to use the grid's)")));
            }
        }
        let base_path = crate::files::referenced(path, &entry.base).map_err(|e| at("base", e))?;
        let mut base = load(&base_path).map_err(|e| match crate::files::unreadable(&e, &base_path) {
            Some(expected) => at("base", format!("a base scenario: {expected}")),
            None => crate::files::unquoted(e),
        })?;
        let setting = name.clone().unwrap_or_else(|| base.scenario.name.clone());
        if let Some(wanted) = &entry.arms {
            let known: Vec<String> = base.scenario.arms.iter().map(|a| a.name.clone()).collect();
            if let Some(unknown) = wanted.iter().find(|w| !known.contains(w)) {
                return Err(at(
                    "arms",
                    format!("arm names of {} ({}), not {unknown:?}", base_path.display(), known.join(", ")),
                ));
            }
            base.scenario.arms.retain(|a| wanted.contains(&a.name));
        }
        let backbones: Vec<Option<String>> = match entry.backbones.as_ref().or(spec.backbones.as_ref()) {
            Some(b) => b.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        let seeds = spec.seeds.clone().unwrap_or_else(|| vec![base.scenario.seed]);
        let topologies = entry
            .topologies
            .clone()
            .or_else(|| spec.topologies.clone())
            .unwrap_or_else(|| vec![base.scenario.topology.clone()]);
        let chosen = entry.attacker_sets.as_ref().unwrap_or(&spec.attacker_sets);
        let sets: Vec<Option<Vec<u32>>> =
            if chosen.is_empty() { vec![None] } else { chosen.iter().cloned().map(Some).collect() };
        for backbone in &backbones {
            let with_backbone = match backbone {
                None => base.clone(),
                Some(b) => {
                    let mut s = base.scenario.clone();
                    s.backbone = b.clone();
                    crate::scenario::with_profile(s, &base_path).map_err(|e| match e {
                        Error::Io { path: profile, source } => {
                            at("backbones", format!("a backbone profile: cannot read {} ({source})", profile.display()))
                        }
                        e => e,
                    })?
                }
            };
            for &seed in &seeds {
                for topo in &topologies {
                    for set in &sets {
                        let mut s = with_backbone.clone();
                        s.scenario.seed = seed;
                        s.scenario.topology = topo.clone();
                        if let Some(ids) = set {
                            s.scenario.attackers = Attackers::Ids(ids.clone());
                        }
                        let field_in_grid = |field: &str| match field {
                            "attackers" => "attacker_sets".to_string(),
                            "topology" | "k" | "m" | "p" => "topologies".to_string(),
                            f => f.to_string(),
                        };
                        s.scenario.check().map_err(|(field, expected)| at(&field_in_grid(&field), expected))?;
                        crate::scenario::check_size(&s.scenario).map_err(|e| at(&field_in_grid("topology"), e))?;
                        let attackers = match set {
                            Some(ids) => ids.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
                            None => "base".into(),
                        };
                        runs.push(GridRun {
                            index: runs.len(),
                            setting: setting.clone(),
                            backbone: s.scenario.backbone.clone(),
                            seed,
                            topology: topo.label(),
                            attackers,
                            scenario: s,
                            draw: None,
                        });
                    }
                }
            }
        }
    }
    Ok((spec, runs))
}

/// `runs` followed by each of them at each posterior draw of its backbone's stand-in
/// ([`crate::study::predictive`]), draw by draw; the draws' runs continue the run indices.
pub fn with_ensemble(runs: Vec<GridRun>, ensembles: &mut crate::study::predictive::Ensembles) -> Result<Vec<GridRun>> {
    let mut per_run = Vec::with_capacity(runs.len());
    for r in &runs {
        per_run.push(ensembles.draws_of(&r.scenario)?);
    }
    let draws = per_run.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = runs.clone();
    for d in 0..draws {
        for (r, at) in runs.iter().zip(&per_run) {
            if let Some(s) = at.get(d) {
                out.push(GridRun { index: out.len(), scenario: s.clone(), draw: Some(d), ..r.clone() });
            }
        }
    }
    Ok(out)
}

/// Where an entry's error points: the entry's `field` when the entry names it, else the
/// grid's `field`, else the entry's `name`, else 1:1.
fn locate_in_setting(text: &str, name: &str, field: &str) -> Pos {
    let quoted = format!("\"{name}\"");
    let Some(at) = text.find(&format!("name: {quoted}")).or_else(|| text.find(&quoted)) else {
        return crate::error::locate_field(text, field);
    };
    // The entry runs from its name to the next entry's `name:` (or the end).
    let end = text[at + 1..].find("name:").map_or(text.len(), |e| at + 1 + e);
    let line0 = text[..at].matches('\n').count();
    let inner = crate::error::locate_field(&text[at..end], field);
    let found = inner != Pos { line: 1, col: 1 } || text[at..end].starts_with(field);
    if found {
        let col = if inner.line == 1 {
            text[..at].rsplit('\n').next().map_or(0, |l| l.chars().count()) + inner.col
        } else {
            inner.col
        };
        return Pos { line: line0 + inner.line, col };
    }
    let grid = crate::error::locate_field(text, field);
    if grid != (Pos { line: 1, col: 1 }) {
        return grid;
    }
    Pos { line: line0 + 1, col: text[..at].rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1 }
}

/// Runs every expanded run (in parallel; results in expansion order, so the bytes do not
/// depend on the thread count) and returns one record per run and arm.
pub fn run_grid(spec: &GridSpec, runs: &[GridRun]) -> Vec<GridRecord> {
    let per_run: Vec<Vec<GridRecord>> = runs
        .par_iter()
        .map(|r| {
            let res = run_scenario(&r.scenario, r.seed);
            res.arms.iter().map(|a| GridRecord::of(&spec.name, r, a)).collect()
        })
        .collect();
    per_run.into_iter().flatten().collect()
}

/// Writes records as JSON lines (atomically).
pub fn write_records(path: &Path, records: &[GridRecord]) -> Result<()> {
    let mut s = String::new();
    for r in records {
        s.push_str(&serde_json::to_string(r).expect("serializable"));
        s.push('\n');
    }
    write_atomic(path, &s)
}

/// The records in the tidy long format ([`crate::tidy`]): per run and arm, MDSR, its upper
/// bound, the table's RDA and the exposure ASR at every round.
pub fn tidy(records: &[GridRecord]) -> String {
    let mut s = String::from(crate::tidy::HEADER);
    for r in records {
        let run = r.run.to_string();
        let key = crate::tidy::Key {
            study: "grid",
            run: &run,
            setting: &r.setting,
            backbone: &r.backbone,
            topology: &r.topology,
            seed: r.seed,
            draw: r.draw,
            arm: &r.arm,
        };
        let n = r.mdsr.len();
        let rounds: Vec<Vec<(&str, f64)>> = (0..n)
            .map(|k| {
                let mut v = vec![("mdsr", r.mdsr[k]), ("rda", r.rda[k])];
                if let Some(x) = r.asr.get(k) {
                    v.push(("asr", *x));
                }
                if let Some(x) = r.mdsr_upper.get(k) {
                    v.push(("mdsr_upper", *x));
                }
                v
            })
            .collect();
        s.push_str(&crate::tidy::rows(&key, &rounds, &[]));
    }
    s
}

/// Reads records written by [`write_records`]. A malformed line, a metric outside [0, 1] or
/// not a number, per-round series of different lengths, a record of a run and arm seen before,
/// an arm whose records have different round counts, or a file without records is an error
/// naming the line: a corrupted results file never silently changes a table cell.
pub fn read_records(path: &Path) -> Result<Vec<GridRecord>> {
    read_records_str(&read_file(path)?, path)
}

/// [`read_records`] of `text` as if read from `path`.
pub fn read_records_str(text: &str, path: &Path) -> Result<Vec<GridRecord>> {
    let bad =
        |line: usize, message: String| Error::Parse { path: path.to_path_buf(), pos: Pos { line, col: 1 }, message };
    let mut records: Vec<(usize, GridRecord)> = Vec::new();
    for (i, l) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let r = serde_json::from_str::<GridRecord>(l).map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            pos: Pos { line: i + 1, col: e.column() },
            message: format!("expected one grid result record per line: {e}"),
        })?;
        check_record(&r).map_err(|m| bad(i + 1, m))?;
        if let Some((j, _)) = records.iter().find(|(_, o)| o.grid == r.grid && o.run == r.run && o.arm == r.arm) {
            return Err(bad(
                i + 1,
                format!("one record per run and arm; run {} arm {:?} is also on line {j}", r.run, r.arm),
            ));
        }
        if let Some((j, o)) = records.iter().find(|(_, o)| {
            o.backbone == r.backbone && o.setting == r.setting && o.arm == r.arm && o.mdsr.len() != r.mdsr.len()
        }) {
            return Err(bad(
                i + 1,
                format!(
                    "{} rounds, as every record of its arm and setting has ({} on line {j})",
                    o.mdsr.len(),
                    o.mdsr.len()
                ),
            ));
        }
        records.push((i + 1, r));
    }
    if records.is_empty() {
        return Err(bad(1, "at least one grid result record (the file is empty)".into()));
    }
    Ok(records.into_iter().map(|(_, r)| r).collect())
}

fn check_record(r: &GridRecord) -> std::result::Result<(), String> {
    let rounds = r.mdsr.len();
    if rounds == 0 {
        return Err("per-round metrics for at least one round".into());
    }
    let series: [(&str, &[f64], bool); 5] = [
        ("mdsr", &r.mdsr, true),
        ("rda", &r.rda, true),
        ("asr", &r.asr, true),
        ("mdsr_upper", &r.mdsr_upper, false),
        ("rda_lower", &r.rda_lower, false),
    ];
    for (name, xs, required) in series {
        if (required || !xs.is_empty()) && xs.len() != rounds {
            return Err(format!("`{name}` with one value per round ({rounds}, as `mdsr`), got {}", xs.len()));
        }
        if let Some(x) = xs.iter().find(|x| !(0.0..=1.0).contains(*x)) {
            return Err(format!("`{name}` values that are rates in [0, 1], got {x}"));
        }
    }
    Ok(())
}
