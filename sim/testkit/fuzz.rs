//! A mutation fuzzer of every input memlink reads, on the stable toolchain.
//!
//! Seeds are the bundled files — scenarios, grids, calibrations, explain items, backbone
//! profiles — plus a results file and a calibration checkpoint of known-good shape. Each case
//! mutates one seed a few times (bytes, lines, number literals replaced by boundary values,
//! identifiers swapped for others of the same file, case-folding-sensitive characters) and puts
//! it through the pipeline of the command that reads that kind of file: `validate` and `run` for
//! scenarios, `grid` for grids, `calibrate`'s loader, `explain`, a run of a bundled scenario under
//! a mutated profile, `report` for results, `calibrate --resume`'s checkpoint reader.
//!
//! Besides these, hostile classes: path fields pointed at `/dev/zero`, a FIFO, a file outside the
//! path policy holding a canary text, a link out of the project and `../` escapes; ledger keys
//! with multi-byte characters, or the canary key itself; list entries duplicated a thousand
//! times; stored runs (`runs/<hash>.json`) edited; and (in the example binary) concurrent
//! writers to one folder.
//!
//! The rule every case must keep: the input is accepted (and its outputs hold no `NaN` or
//! infinity) or refused with a positioned input error (exit code 2 at the command line); never a
//! panic, an abort or a hang; no secret (the canary key) in any output or message; no foreign
//! file's content (the canary text) in any message. Runs whose estimate exceeds a fuzz case's budget are validated and
//! counted, not run (the estimate itself refuses what exceeds the machine). Inputs are passed as
//! text with the seed's path, so files they name resolve as the seed's would and nothing is
//! written but failures.
//!
//! `tests/fuzz.rs` runs a bounded campaign in CI; `cargo run --release --example fuzz -- --cases N`
//! runs long ones.

use crate::engine::SimRng;
use crate::error::{Error, Result, non_finite_literal, read_file};
use crate::inputs::{FileKind, detect};
use crate::scenario::LoadedScenario;
use std::path::{Path, PathBuf};

/// One seed input.
#[derive(Clone, Debug)]
pub struct Seed {
    /// Its kind.
    pub kind: FileKind,
    /// The path it stands for (references resolve from here).
    pub path: PathBuf,
    /// Its text.
    pub text: String,
}

/// The canary key: a ledger key the hostile mutations plant (inline, or in a key file), which
/// no output or message may ever hold.
pub const CANARY_KEY: &str = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";

/// The canary text: the content of a foreign file the hostile mutations point path fields
/// at, which no message may ever quote.
pub const CANARY_TEXT: &str = "memlink-fuzz-canary: root:x:0:0:secret";

/// Files outside the project for the hostile mutations, made once per campaign in a temporary
/// folder (removed when dropped).
pub struct Hostile {
    dir: PathBuf,
    /// Paths to put in a field that names a file.
    pub paths: Vec<String>,
}

impl Hostile {
    fn make() -> std::io::Result<Hostile> {
        let dir = std::env::temp_dir().join(format!("memlink-fuzz-hostile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("secret.key"), CANARY_KEY)?;
        std::fs::write(dir.join("foreign.ron"), format!("{CANARY_TEXT}\n{CANARY_TEXT}\n"))?;
        let fifo = dir.join("fifo.ron");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).expect("no NUL in a temp path");
        // SAFETY: mkfifo reads a NUL-terminated path and creates a file; no memory is shared.
        unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        let _ = std::os::unix::fs::symlink(dir.join("foreign.ron"), dir.join("link.ron"));
        let at = |f: &str| dir.join(f).to_string_lossy().into_owned();
        let paths = vec![
            "/dev/zero".to_string(),
            at("fifo.ron"),
            at("foreign.ron"),
            at("link.ron"),
            at("secret.key"),
            "../../../../../../../../etc/passwd".to_string(),
            "../../../../../../../../dev/zero".to_string(),
        ];
        // Half of the hostile paths are reachable: the folder is an allowed root (as if the
        // user had widened the policy), so its files are read and their contents must still
        // stay out of every message; the `../` escapes stay outside every root.
        crate::files::allow_root(&dir)?;
        Ok(Hostile { dir, paths })
    }

    /// Whether `text` holds the canary key or the canary text.
    pub fn leaks(text: &str) -> Option<&'static str> {
        if text.to_lowercase().contains(CANARY_KEY) {
            Some("the canary key (a secret)")
        } else if text.contains(CANARY_TEXT) || text.contains("memlink-fuzz-canary") {
            Some("the canary text (a foreign file's content)")
        } else {
            None
        }
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The seeds and the fixtures the pipelines need.
pub struct Corpus {
    /// Files for the hostile mutations.
    pub hostile: Hostile,
    /// Seed inputs.
    pub seeds: Vec<Seed>,
    /// One small scenario per workload class, to run mutated profiles on.
    pub profile_runs: Vec<LoadedScenario>,
    /// The calibration whose checkpoints the checkpoint seeds are.
    pub calibration: crate::study::calibrate::Calibration,
    /// Published targets, for `report --targets`.
    pub targets: Vec<crate::study::calibrate::Target>,
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "ron") {
            out.push(p);
        }
    }
}

/// A scenario cut to `tasks` tasks (the fuzzer's runs stay small).
fn shrink(mut ls: LoadedScenario, tasks: u32) -> LoadedScenario {
    use crate::workload::WorkloadConfig as W;
    match &mut ls.scenario.workload {
        W::Mmlu(c) | W::Csqa(c) => c.tasks = c.tasks.min(tasks),
        W::AppWorld(c) => c.tasks = c.tasks.min(tasks),
        W::InjectAgent(c) => c.tasks = c.tasks.min(tasks),
        W::LongMemEval(c) => c.tasks = c.tasks.min(tasks),
    }
    ls
}

impl Corpus {
    /// The seeds of the repository at `root` (its `scenarios/` and `models/`), and a results
    /// file and checkpoint made from bundled runs.
    pub fn load(root: &Path) -> Result<Corpus> {
        let mut files = Vec::new();
        walk(&root.join("scenarios"), &mut files);
        walk(&root.join("models"), &mut files);
        let mut seeds = Vec::new();
        for path in files {
            let text = read_file(&path)?;
            seeds.push(Seed { kind: detect(&path, &text), path, text });
        }
        let mut profile_runs = Vec::new();
        for s in [
            "mmlu-minja",
            "appworld-agentpoison",
            "csqa-promptinject",
            "injectagent-toolattack",
            "longmemeval-memorygraft",
        ] {
            let p = root.join("scenarios/paper").join(format!("{s}-wheel.ron"));
            profile_runs.push(shrink(crate::scenario::load(&p)?, 4));
        }
        // A results file: a small grid's real records.
        let quick = shrink(crate::scenario::load(&root.join("scenarios/quickstart.ron"))?, 6);
        let result = crate::run::run_scenario(&quick, 7);
        let mut results = String::new();
        for (i, a) in result.arms.iter().enumerate() {
            for topo in ["wheel", "chain"] {
                let r = crate::study::grid::GridRecord {
                    grid: "fuzz".into(),
                    run: i,
                    setting: "mmlu_minja".into(),
                    backbone: result.backbone.clone(),
                    seed: 7,
                    topology: topo.into(),
                    attackers: "base".into(),
                    arm: a.arm.clone(),
                    guard: a.guard.clone(),
                    mdsr: a.rounds.iter().map(|x| x.mdsr_strict).collect(),
                    rda: a.rounds.iter().map(|x| x.table_rda).collect(),
                    asr: a.rounds.iter().map(|x| x.asr_exposure).collect(),
                    mdsr_upper: a.rounds.iter().map(|x| x.mdsr_upper).collect(),
                    rda_lower: a.rounds.iter().map(|x| x.rda_lower).collect(),
                    trace_hash: a.trace_hash.clone(),
                    draw: None,
                };
                results.push_str(&serde_json::to_string(&r).expect("serializable"));
                results.push('\n');
            }
        }
        // Distinct runs per topology, so the file passes the one-record-per-run rule.
        let results = results
            .lines()
            .enumerate()
            .map(|(i, l)| l.replacen(&format!("\"run\":{}", i / 2), &format!("\"run\":{i}"), 1))
            .collect::<Vec<_>>()
            .join("\n")
            + "\n";
        // The same records at two posterior draws (`grid --ensemble`): the predictive columns.
        let mut ensemble = results.clone();
        let n = results.lines().count();
        for d in 0..2usize {
            for (i, l) in results.lines().enumerate() {
                let mut r: crate::study::grid::GridRecord = serde_json::from_str(l).expect("a record");
                r.run = n * (d + 1) + i;
                r.draw = Some(d);
                r.mdsr.iter_mut().for_each(|x| *x = (*x * (0.9 + 0.1 * d as f64)).clamp(0.0, 1.0));
                ensemble.push_str(&serde_json::to_string(&r).expect("serializable"));
                ensemble.push('\n');
            }
        }
        seeds.push(Seed { kind: FileKind::Results, path: root.join("runs/fuzz/results.jsonl"), text: results });
        seeds.push(Seed {
            kind: FileKind::Results,
            path: root.join("runs/fuzz/ensemble-results.jsonl"),
            text: ensemble,
        });
        // A trace: the quick run's No Defense arm, recorded.
        let (_, trace) = crate::study::trace::replay::record_arm(&quick, &quick.scenario.arms[0], 7);
        seeds.push(Seed { kind: FileKind::Trace, path: root.join("runs/fuzz/trace.jsonl"), text: trace.to_jsonl() });
        let cal_path = root.join("scenarios/calibration/qwen-table2-nodefense.ron");
        let calibration = crate::study::calibrate::Calibration::load(&cal_path)?;
        let state = serde_json::to_string_pretty(&calibration.example_checkpoint()).expect("serializable");
        seeds.push(Seed {
            kind: FileKind::Checkpoint,
            path: root.join("runs/fuzz/qwen-table2-nodefense.state.json"),
            text: state,
        });
        // A stored run: the quick run as a sweep stores it, under its own hash.
        let job = crate::study::sweep::exec::Job::new(quick.clone(), 7);
        let mut stored = crate::study::sweep::exec::RunResult {
            hash: job.hash.clone(),
            seed: 7,
            memlink: env!("CARGO_PKG_VERSION").into(),
            arms: result.arms.iter().map(crate::records::ArmResult::of).collect(),
            digest: String::new(),
        };
        stored.digest = stored.content_digest();
        seeds.push(Seed {
            kind: FileKind::StoredRun,
            path: root.join(format!("runs/fuzz/runs/{}.json", job.hash)),
            text: serde_json::to_string(&stored).expect("serializable") + "\n",
        });
        let targets = crate::study::calibrate::read_targets(&root.join("models/calibration-targets.csv"))?;
        let hostile = Hostile::make().map_err(|source| Error::Write { path: std::env::temp_dir(), source })?;
        Ok(Corpus { hostile, seeds, profile_runs, calibration, targets })
    }
}

/// Fuzz campaign settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Cases to run.
    pub cases: u64,
    /// Seed of the mutation stream (a campaign is reproducible from it).
    pub seed: u64,
    /// Largest run (agent-decisions per arm) a case executes; larger valid scenarios are
    /// validated and counted, not run.
    pub max_decisions: f64,
    /// Largest run (memory items per arm) a case executes.
    pub max_items: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config { cases: 1000, seed: 1, max_decisions: 20_000.0, max_items: 50_000.0 }
    }
}

/// What a case did.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted, and run where the kind runs.
    Ran,
    /// Accepted; too large for a fuzz case's run.
    AcceptedNotRun,
    /// Accepted (a kind without a run).
    Accepted,
    /// Refused with a positioned input error.
    Refused,
}

/// A case that broke the rule.
#[derive(Clone, Debug)]
pub struct Failure {
    /// Case number.
    pub case: u64,
    /// Kind and seed path.
    pub kind: FileKind,
    /// Seed path.
    pub path: PathBuf,
    /// What went wrong.
    pub what: String,
    /// The mutated input.
    pub input: String,
}

/// Tallies of a campaign.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Cases run.
    pub cases: u64,
    /// Cases that ran a simulation.
    pub ran: u64,
    /// Accepted without a run (too large, or a kind without one).
    pub accepted: u64,
    /// Refused with a positioned error.
    pub refused: u64,
    /// Cases that also had a hostile mutation (device, FIFO or foreign paths, hostile keys,
    /// repeated list entries).
    pub hostile: u64,
    /// Rule breaches.
    pub failures: Vec<Failure>,
    /// Cases and wall seconds per kind of seed (wall time is for the progress line only; it
    /// never enters a result).
    pub per_kind: Vec<(FileKind, u64, f64)>,
}

const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "2",
    "0.0",
    "-0.0",
    "1.5",
    "-1e-9",
    "1e-320",
    "1e308",
    "-1e308",
    "1e400",
    "NaN",
    "inf",
    "-inf",
    "255",
    "65535",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "100000",
    "1000000",
    "3",
    "0.5",
];

const UNICODE: &[&str] =
    &["K", "Ω", "Å", "İ", "ı", "ſ", "Σ", "\u{301}", "\u{1c}", "日本", "\"", "\\", "\n", "(", ")", ","];

fn pick<'a>(rng: &mut SimRng, xs: &'a [&'a str]) -> &'a str {
    xs[rng.below(xs.len() as u64) as usize]
}

/// Byte ranges of tokens.
type Spans = Vec<(usize, usize)>;

/// Spans of number literals and identifiers of `text` (byte ranges).
fn tokens(text: &str) -> (Spans, Spans) {
    let b = text.as_bytes();
    let (mut nums, mut ids) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || (c == b'-' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let s = i;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_') {
                i += 1;
            }
            nums.push((s, i));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            ids.push((s, i));
        } else {
            i += 1;
        }
    }
    (nums, ids)
}

/// Nearest char boundary of `s` at or below `i`.
fn floor(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Byte ranges of the contents of double-quoted string literals of `text`.
fn strings(text: &str) -> Spans {
    let b = text.as_bytes();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < b.len() {
        if b[i] == b'"' {
            let s = i + 1;
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            if i < b.len() && b[i] == b'"' {
                out.push((s, i));
            }
        }
        i += 1;
    }
    out
}

/// One hostile mutation of `text`: a string (a path field's, often) pointed at one of
/// `paths`; a ledger with a multi-byte or canary key, or a hostile key file; or one list
/// entry repeated a thousand times.
fn mutate_hostile(text: &str, rng: &mut SimRng, paths: &[String]) -> String {
    let mut s = text.to_string();
    match rng.below(3) {
        0 => {
            let spans = strings(text);
            if !spans.is_empty() && !paths.is_empty() {
                let (a, b) = spans[rng.below(spans.len() as u64) as usize];
                s.replace_range(a..b, &paths[rng.below(paths.len() as u64) as usize]);
            }
        }
        1 => {
            let key = match rng.below(4) {
                0 => format!("key: Some(\"{}é0\")", &CANARY_KEY[..62]),
                1 => format!("key: Some(\"{CANARY_KEY}\")"),
                2 => format!("key: Some(\"{}\")", "日".repeat(64)),
                _ => format!(
                    "key_file: Some(\"{}\")",
                    paths[rng.below(paths.len().max(1) as u64) as usize % paths.len().max(1)]
                ),
            };
            let ledger = format!("guard: Maple(()), ledger: Some((verify: VerifyRejectUnsigned, {key}))");
            s = text.replacen("guard: Maple(())", &ledger, 1);
        }
        _ => {
            // An entry of a list, repeated: `[x, …]` becomes `[x, x, …, x, …]`.
            let opens: Vec<usize> = text.match_indices('[').map(|(i, _)| i + 1).collect();
            if let Some(&at) = opens.get(rng.below(opens.len().max(1) as u64) as usize) {
                let end = text[at..].find([',', ']']).map_or(at, |e| at + e);
                let entry = text[at..end].trim();
                if !entry.is_empty() && !entry.contains(['[', '(']) {
                    s.insert_str(at, &format!("{entry}, ").repeat(1000));
                }
            }
        }
    }
    s
}

/// One mutation of `text`.
pub fn mutate_once(text: &str, rng: &mut SimRng) -> String {
    let len = text.len().max(1) as u64;
    let at = floor(text, rng.below(len) as usize);
    let mut s = text.to_string();
    match rng.below(10) {
        0..=3 => {
            let (nums, _) = tokens(text);
            if let Some(&(a, b)) = nums.get(rng.below(nums.len().max(1) as u64) as usize) {
                s.replace_range(a..b, pick(rng, NUMBERS));
            }
        }
        4 | 5 => {
            let (_, ids) = tokens(text);
            if ids.len() >= 2 {
                let (a, b) = ids[rng.below(ids.len() as u64) as usize];
                let (c, d) = ids[rng.below(ids.len() as u64) as usize];
                let other = text[c..d].to_string();
                s.replace_range(a..b, &other);
            }
        }
        6 => {
            // Delete a span.
            let end = floor(text, at + 1 + rng.below(40) as usize);
            s.replace_range(at..end, "");
        }
        7 => {
            // Duplicate a line, or drop one.
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            if !lines.is_empty() {
                let k = rng.below(lines.len() as u64) as usize;
                let mut v: Vec<&str> = lines.clone();
                if rng.below(2) == 0 {
                    v.insert(k, lines[k]);
                } else {
                    v.remove(k);
                }
                s = v.concat();
            }
        }
        8 => s.insert_str(at, pick(rng, UNICODE)),
        _ => {
            // Truncate.
            s.truncate(at);
        }
    }
    s
}

/// `text` mutated one to four times; one case in four also gets a hostile mutation (paths
/// from `hostile`).
pub fn mutate(text: &str, rng: &mut SimRng, hostile: &[String]) -> (String, bool) {
    let mut s = text.to_string();
    for _ in 0..1 + rng.below(4) {
        s = mutate_once(&s, rng);
    }
    let h = rng.below(4) == 0;
    if h {
        s = mutate_hostile(&s, rng, hostile);
    }
    (s, h)
}

/// Two writers at once on one output folder, `pairs` times: each takes the folder's lock and
/// writes the same file atomically. Returns what went wrong (empty when nothing did): a failed
/// write, a temporary file left behind, or a file that is neither writer's whole text.
pub fn concurrent_writers(dir: &Path, pairs: usize) -> Vec<String> {
    let mut problems = Vec::new();
    let _ = std::fs::remove_dir_all(dir);
    for i in 0..pairs {
        let texts = [format!("writer A, pair {i}\n").repeat(100), format!("writer B, pair {i}\n").repeat(100)];
        let results: Vec<Result<()>> = std::thread::scope(|sc| {
            let hs: Vec<_> = texts
                .iter()
                .map(|t| {
                    sc.spawn(move || {
                        let _lock = crate::files::lock_folder_saying(dir, false)?;
                        crate::files::write_atomic(&dir.join("summary.json"), t)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or(Ok(()))).collect()
        });
        for r in results {
            if let Err(e) = r {
                problems.push(format!("pair {i}: {e}"));
            }
        }
        let got = std::fs::read_to_string(dir.join("summary.json")).unwrap_or_default();
        if !texts.contains(&got) {
            problems.push(format!("pair {i}: the file is neither writer's text"));
        }
        let left: Vec<String> = std::fs::read_dir(dir)
            .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        if let Some(t) = left.iter().find(|n| n.contains("tmp")) {
            problems.push(format!("pair {i}: a temporary file was left: {t}"));
        }
    }
    problems
}

/// Checks that an output holds no non-finite number: its RON form (where `NaN` and `inf` print
/// as such) and its text renderings.
fn finite_output<T: serde::Serialize>(what: &str, value: &T, texts: &[&str]) -> std::result::Result<(), String> {
    let ron = ron::to_string(value).map_err(|e| format!("{what}: cannot serialise: {e}"))?;
    if let Some((_, lit)) = non_finite_literal(&ron) {
        return Err(format!("{what}: a non-finite number ({lit}) in the output"));
    }
    for t in texts {
        if let Some(w) = non_finite_word(t) {
            return Err(format!("{what}: `{w}` in the rendered output"));
        }
        if let Some(l) = Hostile::leaks(t) {
            return Err(format!("{what}: {l} in the output"));
        }
    }
    if let Some(l) = Hostile::leaks(&ron) {
        return Err(format!("{what}: {l} in the output"));
    }
    Ok(())
}

/// A rendered non-finite number in prose or a table: `NaN`, `inf` or `-inf` standing as a word of
/// its own (a name such as `qwen3.5-inf-a10b` is not one).
pub fn non_finite_word(text: &str) -> Option<&'static str> {
    let b = text.as_bytes();
    let name_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.';
    for word in ["NaN", "inf"] {
        let mut from = 0;
        while let Some(off) = text[from..].find(word) {
            let at = from + off;
            let end = at + word.len();
            let mut before = at;
            if before > 0 && matches!(b[before - 1], b'-' | b'+') {
                before -= 1;
            }
            let free_before = before == 0 || !name_char(b[before - 1]);
            let free_after = end >= b.len() || !name_char(b[end]);
            if free_before && free_after {
                return Some(if word == "NaN" { "NaN" } else { "inf" });
            }
            from = end;
        }
    }
    None
}

/// Whether an error keeps the rule: an input error naming the file, with a position where it
/// has one.
fn positioned(e: &Error) -> std::result::Result<(), String> {
    if !e.is_input_error() {
        return Err(format!("not an input error (exit 1, not 2): {e}"));
    }
    let msg = e.to_string();
    if msg.is_empty() {
        return Err(format!("an unclear error: {msg:?}"));
    }
    if let Some(l) = Hostile::leaks(&msg) {
        return Err(format!("{l} in the message: {msg}"));
    }
    Ok(())
}

fn run_checked(ls: &LoadedScenario, seed: u64) -> std::result::Result<(), String> {
    let r = crate::run::run_scenario(ls, seed);
    finite_output("run", &r, &[&r.table(), &r.rounds_csv()])
}

/// Puts `text` (a mutation of `seed`) through its kind's pipeline.
pub fn exercise(corpus: &Corpus, seed: &Seed, text: &str, cfg: &Config) -> std::result::Result<Outcome, String> {
    let path = &seed.path;
    let small = |s: &crate::scenario::Scenario| {
        let e = crate::scenario::estimate::Estimate::of(s);
        e.decisions <= cfg.max_decisions && e.items <= cfg.max_items
    };
    let refused = |e: Error| positioned(&e).map(|_| Outcome::Refused);
    match seed.kind {
        FileKind::Scenario => match crate::scenario::load_str(text, path) {
            Err(e) => refused(e),
            Ok(ls) if small(&ls.scenario) => run_checked(&ls, ls.scenario.seed).map(|_| Outcome::Ran),
            Ok(_) => Ok(Outcome::AcceptedNotRun),
        },
        FileKind::Grid => match crate::study::grid::expand_str(text, path) {
            Err(e) => refused(e),
            Ok((spec, runs)) => {
                let Some(first) = runs.first().filter(|r| small(&r.scenario.scenario)) else {
                    return Ok(Outcome::AcceptedNotRun);
                };
                let records = crate::study::grid::run_grid(&spec, std::slice::from_ref(first));
                let k = first.scenario.scenario.protocol.rounds.min(3) as usize;
                let rows = crate::study::grid::table(&records, k);
                finite_output("grid", &records, &[&crate::study::grid::markdown(&rows, k)])?;
                Ok(Outcome::Ran)
            }
        },
        FileKind::Calibration => match crate::study::calibrate::Calibration::load_str(text, path) {
            Err(e) => refused(e),
            Ok(_) => Ok(Outcome::Accepted),
        },
        FileKind::Ensemble => match crate::study::calibrate::ensemble::Ensemble::load_str(text, path) {
            Err(e) => refused(e),
            Ok(e) => {
                finite_output("ensemble", &e, &[&crate::study::calibrate::ensemble::ensemble_report(&e)])?;
                Ok(Outcome::Accepted)
            }
        },
        FileKind::Profile => match crate::agent::load_profile_str(text, path) {
            Err(e) => refused(e),
            Ok(p) => {
                let mut ran = false;
                for base in &corpus.profile_runs {
                    if p.workload(base.scenario.workload.class()).is_none() {
                        continue;
                    }
                    let ls =
                        LoadedScenario { scenario: base.scenario.clone(), profile: p.clone(), path: base.path.clone() };
                    run_checked(&ls, 3)?;
                    ran = true;
                }
                Ok(if ran { Outcome::Ran } else { Outcome::Accepted })
            }
        },
        FileKind::Explain => match crate::study::explain::ExplainInput::load_str(text, path) {
            Err(e) => refused(e),
            Ok(input) => {
                let e = crate::study::explain::explain(&input);
                finite_output("explain", &e, &[&crate::study::explain::render(&input, &e)])?;
                Ok(Outcome::Accepted)
            }
        },
        FileKind::Results => match crate::study::grid::read_records_str(text, path) {
            Err(e) => refused(e),
            Ok(records) => {
                let rounds = records.iter().map(|r| r.mdsr.len()).min().unwrap_or(0);
                for k in 1..=rounds.min(3) {
                    let rows = crate::study::grid::table(&records, k);
                    let md = crate::study::grid::markdown(&rows, k);
                    let csv = crate::study::grid::csv(&rows, k);
                    let vs = crate::study::grid::versus_paper(&rows, &corpus.targets, k);
                    finite_output("report", &rows, &[&md, &csv, &vs])?;
                }
                Ok(Outcome::Accepted)
            }
        },
        FileKind::Fidelity => match crate::study::fidelity::load_str(text, path) {
            Err(e) => refused(e),
            Ok(_) => Ok(Outcome::Accepted),
        },
        FileKind::WhatIf => match crate::study::whatif::WhatIf::load_str(text, path) {
            Err(e) => refused(e),
            Ok(_) => Ok(Outcome::Accepted),
        },
        FileKind::Check => match crate::study::check::Check::load_str(text, path) {
            Err(e) => refused(e),
            Ok(_) => Ok(Outcome::Accepted),
        },
        FileKind::Sweep => match crate::study::sweep::Sweep::load_str(text, path) {
            Err(e) => refused(e),
            Ok(_) => Ok(Outcome::Accepted),
        },
        FileKind::Trace => match crate::study::trace::Trace::parse(text, path) {
            Err(e) => refused(e),
            Ok(t) => {
                // A mutated trace that still parses replays (fallback: any call may diverge).
                let opts = crate::study::trace::replay::ReplayOptions {
                    arm: crate::study::trace::replay::ArmChoice::Recorded,
                    mode: Some(crate::agent::ReplayMode::Fallback),
                    fallback: None,
                };
                let sized =
                    crate::study::trace::replay::recorded_scenario(&t).map(|ls| ls.map(|ls| small(&ls.scenario)));
                match sized {
                    Err(e) => refused(e),
                    Ok(Some(false)) => Ok(Outcome::AcceptedNotRun),
                    Ok(_) => match crate::study::trace::replay::replay(&t, &opts) {
                        Err(e) => refused(e),
                        Ok(out) => {
                            finite_output("replay", &out.arms, &[&out.table(), &out.to_json(), &out.result.to_json()])
                                .map(|_| Outcome::Ran)
                        }
                    },
                }
            }
        },
        FileKind::StoredRun => {
            let hash = path.file_stem().and_then(|x| x.to_str()).unwrap_or("");
            match crate::study::sweep::exec::parse_result(path, text, hash) {
                Err(e) => refused(e),
                // Accepted only when every byte that matters is the stored run's own.
                Ok(r) if serde_json::to_string(&r).expect("serializable") + "\n" == seed.text => Ok(Outcome::Accepted),
                Ok(r) => {
                    let orig: crate::study::sweep::exec::RunResult =
                        serde_json::from_str(&seed.text).expect("the seed parses");
                    if r == orig { Ok(Outcome::Accepted) } else { Err("an edited stored run was accepted".into()) }
                }
            }
        }
        FileKind::Checkpoint => match corpus.calibration.checkpoint_from_str(text, path) {
            Err(e) => refused(e),
            Ok(_) => Ok(Outcome::Accepted),
        },
    }
}

/// The last panic's message (a panic in a rayon worker reaches the case through here too).
static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Runs a campaign. `progress` sees each finished case number; `on_start` each case before it
/// runs (a watchdog can time it). Panics are caught and reported as failures with their message.
pub fn run(
    corpus: &Corpus,
    cfg: &Config,
    on_start: &mut dyn FnMut(u64, &Seed, &str),
    progress: &mut dyn FnMut(u64, &Report),
) -> Report {
    let mut rng = SimRng::from_seed_u64(cfg.seed);
    let mut report = Report::default();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        let msg = match (info.payload().downcast_ref::<&str>(), info.payload().downcast_ref::<String>()) {
            (Some(s), _) => s.to_string(),
            (_, Some(s)) => s.clone(),
            _ => "panic".to_string(),
        };
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        if let Ok(mut p) = LAST_PANIC.lock() {
            *p = Some(format!("{msg}{at}"));
        }
    }));
    for case in 0..cfg.cases {
        let seed = &corpus.seeds[rng.below(corpus.seeds.len() as u64) as usize];
        let (input, hostile) = mutate(&seed.text, &mut rng, &corpus.hostile.paths);
        report.hostile += u64::from(hostile);
        on_start(case, seed, &input);
        let t0 = std::time::Instant::now();
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| exercise(corpus, seed, &input, cfg)));
        let fail =
            |what: String| Failure { case, kind: seed.kind, path: seed.path.clone(), what, input: input.clone() };
        match got {
            Ok(Ok(Outcome::Ran)) => report.ran += 1,
            Ok(Ok(Outcome::Accepted | Outcome::AcceptedNotRun)) => report.accepted += 1,
            Ok(Ok(Outcome::Refused)) => report.refused += 1,
            Ok(Err(what)) => report.failures.push(fail(what)),
            Err(_) => {
                let msg = LAST_PANIC.lock().ok().and_then(|mut p| p.take()).unwrap_or_else(|| "panic".into());
                report.failures.push(fail(format!("panic: {msg}")));
            }
        }
        let dt = t0.elapsed().as_secs_f64();
        match report.per_kind.iter_mut().find(|k| k.0 == seed.kind) {
            Some(k) => {
                k.1 += 1;
                k.2 += dt;
            }
            None => report.per_kind.push((seed.kind, 1, dt)),
        }
        report.cases += 1;
        progress(case, &report);
    }
    std::panic::set_hook(previous);
    report
}
