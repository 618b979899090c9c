//! The fidelity report (reports/fidelity.md): what each routing fix and each detail the
//! reference's released code leaves open moves in the paper's rows, and the synthetic
//! embedder's similarity model measured.
//!
//! A fidelity file names a grid (the paper's settings, backbones, topologies and attacker
//! sets) and three lists of switches. Each switch is a set of scenario fields (paths as in
//! sweeps: `protocol.routing.candidate_pool`, `workload.haystack_units`; `profile.…` for the
//! backbone's profile) and the value they take in the switch's *other* state: for a fix,
//! memlink's routing before the fidelity pass; for an undetermined detail, the alternative to
//! the default; for a stand-in value few calibration rows decide, where the fit might have
//! landed instead. The grid runs once as bundled
//! and once per switch (on the settings the switch names), every run stored by content hash
//! like a sweep's, so a killed report resumes; the report sets each No Defense, baseline and
//! MAPLE-Guard row (MDSR@3, RDA@3, mean over topologies) beside the switched one.

use crate::embed::{Embedder, SimilarityModel, cosine};
use crate::engine::{StreamKind, Streams};
use crate::error::{Error, Pos, Result};
use crate::guard::maple::FeedbackPolicy;
use crate::scenario::LoadedScenario;
use crate::study::grid::{GridRecord, GridRun, TableRow};
use crate::text::{Lexicon, Sym, analyze, analyze_query};
use crate::workload::{McqConfig, WorkloadConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A value a switch sets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SetValue {
    /// An enum variant or string.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// A number.
    Num(f64),
    /// `None` of an optional field.
    Null,
}

impl SetValue {
    fn json(&self) -> Value {
        match self {
            SetValue::Str(s) => Value::String(s.clone()),
            SetValue::Bool(b) => Value::Bool(*b),
            SetValue::Num(x) => serde_json::Number::from_f64(*x).map(Value::Number).unwrap_or(Value::Null),
            SetValue::Null => Value::Null,
        }
    }

    fn label(&self) -> String {
        match self {
            SetValue::Str(s) => s.clone(),
            SetValue::Bool(b) => b.to_string(),
            SetValue::Num(x) => format!("{x}"),
            SetValue::Null => "None".into(),
        }
    }
}

/// One field a switch sets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Set {
    /// Path into the scenario as serialised.
    pub path: String,
    /// The value in the switch's other state.
    pub to: SetValue,
    /// Skip scenarios that have no such field (a combined switch over settings whose
    /// workloads differ) instead of refusing them.
    #[serde(default)]
    pub optional: bool,
}

/// A switch: a fix (its other state is memlink's earlier routing) or an undetermined detail
/// (its other state is the alternative).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Switch {
    /// Short name.
    pub name: String,
    /// What the reference's code or config says, and the default chosen.
    pub code: String,
    /// The settings it applies to (default: every setting of the grid).
    #[serde(default)]
    pub settings: Option<Vec<String>>,
    /// The fields of the other state.
    pub set: Vec<Set>,
}

/// A fidelity file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FidelitySpec {
    /// Report name.
    pub name: String,
    /// The grid, relative to this file.
    pub grid: PathBuf,
    /// Fixes: where memlink now routes as the reference does.
    pub fixes: Vec<Switch>,
    /// Details the released code does not determine.
    pub undetermined: Vec<Switch>,
    /// Values of the fitted stand-in that few calibration rows decide (paths into the profile,
    /// `profile.model.…`): what the rows would be had the fit landed elsewhere.
    #[serde(default)]
    pub stand_in: Vec<Switch>,
}

/// A scenario with `sets` applied: a path starting `profile.` sets a field of its backbone's
/// profile (`profile.model.evidence_framing`), any other a field of the scenario.
fn patched(ls: &LoadedScenario, sets: &[Set]) -> std::result::Result<LoadedScenario, String> {
    let mut sv = serde_json::to_value(&ls.scenario).expect("serializable");
    let mut pv = serde_json::to_value(&ls.profile).expect("serializable");
    for s in sets {
        let (in_profile, path) = crate::study::sweep::factor::split_root(&s.path);
        let v = if in_profile { &mut pv } else { &mut sv };
        match crate::study::sweep::factor::locate(v, path) {
            // Numbers go through the sweep's writer, which keeps integer fields integers.
            Ok(_) if matches!(s.to, SetValue::Num(_)) => {
                let SetValue::Num(x) = s.to else { unreachable!() };
                crate::study::sweep::factor::write(v, path, x)?;
            }
            Ok(slot) => *slot = s.to.json(),
            Err(_) if s.optional => {}
            Err(e) => return Err(e),
        }
    }
    let scenario: crate::scenario::Scenario =
        serde_json::from_value(sv).map_err(|e| format!("a value the scenario accepts: {e}"))?;
    scenario.check().map_err(|(f, e)| format!("`{f}`: {e}"))?;
    crate::scenario::check_size(&scenario)?;
    let profile: crate::agent::Profile =
        serde_json::from_value(pv).map_err(|e| format!("a value the profile accepts: {e}"))?;
    profile.check().map_err(|(f, e)| format!("`profile.{f}`: {e}"))?;
    Ok(LoadedScenario { scenario, profile, path: ls.path.clone() })
}

/// The grid's rows at round 3 with every run patched by `sets` (on `settings`, or all).
fn rows_of(
    file: &Path,
    spec: &crate::study::grid::GridSpec,
    runs: &[GridRun],
    switch: Option<&Switch>,
    dir: &Path,
    quiet: bool,
) -> Result<Vec<TableRow>> {
    let mut chosen: Vec<GridRun> = Vec::new();
    for r in runs {
        let applies = switch.is_none_or(|s| s.settings.as_ref().is_none_or(|l| l.contains(&r.setting)));
        if !applies {
            continue;
        }
        let mut r = r.clone();
        if let Some(s) = switch {
            r.scenario = patched(&r.scenario, &s.set).map_err(|e| Error::Invalid {
                path: file.to_path_buf(),
                pos: position_of(file, &s.name),
                field: format!("{}.set", s.name),
                expected: format!("fields the {} scenario has, and values it accepts ({e})", r.setting),
            })?;
        }
        chosen.push(r);
    }
    let what = switch.map_or("bundled".to_string(), |s| s.name.clone());
    let bar = crate::study::sweep::exec::progress_bar(chosen.len() as u64, quiet, &what);
    let records: Vec<GridRecord> =
        crate::study::grid::run_stored(spec, &chosen, dir, None, &bar, &what)?.unwrap_or_default();
    bar.finish_and_clear();
    if !quiet {
        eprintln!("fidelity: {what}: {} runs", chosen.len());
    }
    Ok(crate::study::grid::table(&records, 3))
}

/// Where switch `name` is written in `file` (1:1 when it cannot be found).
fn position_of(file: &Path, name: &str) -> Pos {
    let needle = format!("\"{name}\"");
    std::fs::read_to_string(file)
        .ok()
        .and_then(|t| t.lines().enumerate().find_map(|(i, l)| l.find(&needle).map(|c| Pos { line: i + 1, col: c + 1 })))
        .unwrap_or(Pos { line: 1, col: 1 })
}

/// Loads a fidelity file.
pub fn load(path: &Path) -> Result<FidelitySpec> {
    let text = crate::error::read_file(path)?;
    load_str(&text, path)
}

/// Parses fidelity-file text as if read from `path`, and checks every switch against the
/// grid it names.
pub fn load_str(text: &str, path: &Path) -> Result<FidelitySpec> {
    let spec: FidelitySpec = crate::error::parse_ron(path, text)?;
    let (_, runs) = crate::files::load_referenced(path, Some(text), "grid", &spec.grid, crate::study::grid::expand)?;
    check(&spec, path, &runs)?;
    Ok(spec)
}

/// Checks that every switch applies to every run of the settings it names, and names settings
/// the grid has.
pub fn check(spec: &FidelitySpec, path: &Path, runs: &[GridRun]) -> Result<()> {
    for s in spec.fixes.iter().chain(&spec.undetermined).chain(&spec.stand_in) {
        if let Some(list) = &s.settings {
            for name in list {
                if !runs.iter().any(|r| &r.setting == name) {
                    return Err(Error::Invalid {
                        path: path.to_path_buf(),
                        pos: position_of(path, &s.name),
                        field: format!("{}.settings", s.name),
                        expected: format!("settings of the grid, got `{name}`"),
                    });
                }
            }
        }
        for r in runs.iter().filter(|r| s.settings.as_ref().is_none_or(|l| l.contains(&r.setting))) {
            patched(&r.scenario, &s.set).map_err(|e| Error::Invalid {
                path: path.to_path_buf(),
                pos: position_of(path, &s.name),
                field: format!("{}.set", s.name),
                expected: format!("fields the {} scenario has, and values it accepts ({e})", r.setting),
            })?;
        }
    }
    Ok(())
}

/// Runs the report of `spec` (loaded from `path`), storing runs under `dir`; returns markdown.
pub fn run(spec: &FidelitySpec, path: &Path, dir: &Path, quiet: bool) -> Result<String> {
    let (grid, runs) = crate::files::load_referenced(path, None, "grid", &spec.grid, crate::study::grid::expand)?;
    check(spec, path, &runs)?;
    let base = rows_of(path, &grid, &runs, None, &dir.join("runs"), quiet)?;
    let mut out = String::new();
    let _ = writeln!(out, "<!-- Generated by `memlink fidelity {}`; do not edit. -->\n", path.display());
    let _ = writeln!(out, "# Routing fidelity: what each fix and each undetermined detail moves\n");
    let _ = writeln!(
        out,
        "Grid `{}`: {} runs ({} settings); every row is MDSR@3 / RDA@3 in percent, the mean over \
         topologies of each topology's mean over attacker sets and seeds, with the bundled \
         routing (\"now\") beside the switch's other state. MAPLE-Guard rows are predictions \
         (never fitted). The stand-in profiles are the committed ones in both columns (except \
         under the stand-in's own switches, last), so a difference is the routing's alone.\n",
        spec.grid.display(),
        runs.len(),
        {
            let mut s: Vec<&str> = runs.iter().map(|r| r.setting.as_str()).collect();
            s.dedup();
            s.len()
        }
    );
    let _ = writeln!(out, "## The embedder's similarity model\n");
    let _ = writeln!(
        out,
        "Cosine of each task's query to the self-outcome memory of the same task (related), of a \
         task sharing content words with it (siblings) and of an unrelated task, at 64 dimensions \
         (`cargo run --release --example similarity`; `sim/embed.rs` documents the model). The \
         reference records its embedder only through the MemRL normalisation z_sim = (sim − \
         0.18568) / 0.09408, the unrelated-pair distribution; published measurements of sentence \
         embedders put the related-minus-unrelated gap at 0.44–0.75 (clawrxiv 2604.00998). What \
         the contrast moves is under \"Embedder contrast\" and \"Maximum embedder contrast\".\n"
    );
    out.push_str(&similarity_table());
    out.push('\n');
    for (title, list, other) in [
        ("Fixes: memlink now routes as the reference does", &spec.fixes, "before"),
        ("What the released code does not determine", &spec.undetermined, "switched"),
        ("What few calibration rows decide in the stand-in", &spec.stand_in, "switched"),
    ] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(out, "## {title}\n");
        for s in list {
            let rows = rows_of(path, &grid, &runs, Some(s), &dir.join("runs"), quiet)?;
            let sets: Vec<String> = s.set.iter().map(|x| format!("`{} = {}`", x.path, x.to.label())).collect();
            let _ = writeln!(out, "### {}\n\n{}\n\nOther state: {}.\n", s.name, s.code, sets.join(", "));
            out.push_str(&compare(&base, &rows, other));
            out.push('\n');
        }
    }
    Ok(out)
}

/// The rows of `switched` beside the same rows of `base`, and the largest moves.
fn compare(base: &[TableRow], switched: &[TableRow], other: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| backbone | setting | arm | MDSR@3 now | {other} | Δ | RDA@3 now | {other} | Δ |\n|---|---|---|---|---|---|---|---|---|"
    );
    let mut moved = 0usize;
    let mut largest = (0.0f64, String::new());
    for r in switched {
        let Some(b) = base.iter().find(|b| b.backbone == r.backbone && b.setting == r.setting && b.arm == r.arm) else {
            continue;
        };
        let (dm, dr) = (r.mdsr.0 - b.mdsr.0, r.rda.0 - b.rda.0);
        if dm.abs() >= 0.05 || dr.abs() >= 0.05 {
            moved += 1;
        }
        let big = dm.abs().max(dr.abs());
        if big > largest.0 {
            largest = (big, format!("{} / {} / {}", short(&r.backbone), r.setting, r.arm));
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.1} | {:+.1} | {:.1} | {:.1} | {:+.1} |",
            short(&r.backbone),
            r.setting,
            r.arm,
            b.mdsr.0,
            r.mdsr.0,
            -dm,
            b.rda.0,
            r.rda.0,
            -dr
        );
    }
    let _ = writeln!(
        s,
        "\n{moved} of {} rows move by 0.05 points or more{}. (Δ = now − {other}.)",
        switched.len(),
        if largest.0 > 0.0 {
            format!("; the largest move is {:.1} points ({})", largest.0, largest.1)
        } else {
            String::new()
        }
    );
    s
}

fn short(backbone: &str) -> &str {
    backbone.split('-').next().unwrap_or(backbone)
}

fn stats(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
    (m, v.sqrt())
}

/// (related, siblings, unrelated) cosines of `workload`'s first 150 task queries to the
/// self-outcome memories the world writes for each task (scored as the core scorer scores a
/// memory: the embedding of intent and experience), under `model`.
pub fn measure_similarity(workload: &WorkloadConfig, model: &SimilarityModel) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let streams = Streams::new(42);
    let stream = workload.generate(&streams);
    let mut lex = Lexicon::new();
    let mut e = Embedder::with_model(64, streams.seed_of(StreamKind::Embedding, &[]), model.clone());
    for w in stream.vocabulary() {
        let s = lex.intern(w);
        e.mark_content(s);
    }
    let tasks = &stream.tasks()[..stream.tasks().len().min(150)];
    let mut queries: Vec<(Vec<f32>, Vec<Sym>)> = Vec::new();
    let mut memories: Vec<Vec<f32>> = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let q = analyze_query(&t.query, &mut lex);
        let qv = e.embed(&q.tokens, Embedder::text_key(&t.query), &lex);
        let content: Vec<Sym> = q.tokens.iter().copied().filter(|s| e.is_content(*s)).collect();
        queries.push((qv, content));
        let gold = stream.truth(i as u32).gold;
        let (intent, parts) = crate::world::render::outcome_parts(t, 3, gold, gold, FeedbackPolicy::Full);
        let experience: String = parts.iter().map(|p| p.0.as_str()).collect();
        let f = analyze(&intent, &experience, &mut lex);
        memories.push(e.embed(f.tokens.get(), Embedder::text_key(&experience), &lex));
    }
    let (mut related, mut siblings, mut unrelated) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..tasks.len() {
        for j in 0..tasks.len() {
            let c = cosine(&queries[i].0, &memories[j]);
            if i == j {
                related.push(c);
            } else if crate::text::intersection_size(&queries[i].1, &queries[j].1) > 0 {
                siblings.push(c);
            } else {
                unrelated.push(c);
            }
        }
    }
    (related, siblings, unrelated)
}

/// The similarity model measured on the paper's MMLU and AppWorld workloads at a range of
/// template-word weights (markdown).
pub fn similarity_table() -> String {
    let workloads = [
        ("mmlu", WorkloadConfig::Mmlu(McqConfig { tasks: 150, ..McqConfig::default() })),
        ("appworld", WorkloadConfig::AppWorld(Default::default())),
    ];
    let mut out = String::new();
    out.push_str("| workload | boilerplate | related | siblings | unrelated | contrast (related − unrelated) |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    let default = SimilarityModel::default().boilerplate;
    for (name, w) in &workloads {
        for b in [0.3, 0.2, 0.1, 0.05, 0.0] {
            let model = SimilarityModel { boilerplate: b, ..SimilarityModel::default() };
            let (r, s, u) = measure_similarity(w, &model);
            let ((rm, rs), (sm, ss), (um, us)) = (stats(&r), stats(&s), stats(&u));
            let mark = if b == default { " (default)" } else { "" };
            let _ = writeln!(
                out,
                "| {name} | {b:.2}{mark} | {rm:.3} ± {rs:.3} | {sm:.3} ± {ss:.3} | {um:.3} ± {us:.3} | {:.3} |",
                rm - um
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Set, SetValue, patched};

    fn quickstart() -> crate::scenario::LoadedScenario {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        crate::scenario::load(&root.join("scenarios/quickstart.ron")).unwrap()
    }

    fn set(path: &str, to: f64) -> Set {
        Set { path: path.into(), to: SetValue::Num(to), optional: false }
    }

    /// A `profile.` path sets the backbone's profile and leaves the scenario as it was; the
    /// patched profile passes the profile's own checks or is refused.
    #[test]
    fn a_profile_switch_sets_the_profile_alone() {
        let ls = quickstart();
        let before = ls.profile.model.evidence_framing;
        // Upwards: a workload's negative deviation (Qwen's MMLU, issue 43) would make a lower
        // model value negative there, which the profile's check refuses.
        let to = before + 0.25;
        let p = patched(&ls, &[set("profile.model.evidence_framing", to)]).unwrap();
        assert_eq!(p.profile.model.evidence_framing, to);
        assert_eq!(p.scenario, ls.scenario);
        let mut expected = ls.profile.clone();
        expected.model.evidence_framing = to;
        assert_eq!(p.profile, expected, "no other field moves");
        let e = patched(&ls, &[set("profile.model.evidence_framing", -1.0)]).err().unwrap();
        assert!(e.contains("profile.") && e.contains("evidence_framing") && e.contains("non-negative"), "{e}");
        let e = patched(&ls, &[set("profile.model.no_such_field", 1.0)]).err().unwrap();
        assert!(e.contains("no_such_field"), "{e}");
    }
}
