//! The run engine shared by sweeps and grids: each run is keyed by a content hash of its
//! expanded configuration (scenario, profile, seed, memlink version), its result is written
//! atomically to `<dir>/runs/<hash>.json` the moment it finishes, and a run whose file is there
//! is never run again. So a killed sweep loses at most the runs in flight, `--resume` (or a
//! plain rerun) continues it, and shards of one plan, run anywhere, merge into the bytes of an
//! unsharded run.

use crate::error::{Error, Pos, Result};
use crate::files::write_atomic;
use crate::scenario::LoadedScenario;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One run to do.
#[derive(Clone, Debug)]
pub struct Job {
    /// The scenario with every factor applied (shared by the seeds of one design point).
    pub scenario: std::sync::Arc<LoadedScenario>,
    /// Master seed.
    pub seed: u64,
    /// Content hash of the configuration (see [`content_hash`]).
    pub hash: String,
    /// The study's condition, for the stratum of its report records (see
    /// [`crate::records::stratum`]); empty when the study has none.
    pub label: String,
    /// The per-round metrics the study reads, when it reads only some (its stored results and
    /// report records then hold those alone; see [`crate::records::ArmResult::project`]).
    pub keep: Option<&'static [&'static str]>,
}

impl Job {
    /// A job, hashed.
    pub fn new(scenario: LoadedScenario, seed: u64) -> Self {
        let base = scenario_hash(&scenario);
        Job::with_hash(std::sync::Arc::new(scenario), &base, seed)
    }

    /// A job of a scenario whose [`scenario_hash`] is known (the seeds of one point share it).
    pub fn with_hash(scenario: std::sync::Arc<LoadedScenario>, base: &str, seed: u64) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(base.as_bytes());
        h.update(&seed.to_le_bytes());
        Job { scenario, seed, hash: h.finalize().to_hex()[..32].to_string(), label: String::new(), keep: None }
    }

    /// The job with its study's condition label.
    pub fn labelled(mut self, label: &str) -> Self {
        self.label = label.to_string();
        self
    }

    /// The job keeping only the per-round metrics `keep` of its results (its hash says so, so
    /// a stored full result and a projected one never stand for each other).
    pub fn keeping(mut self, keep: &'static [&'static str]) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(self.hash.as_bytes());
        h.update(b"\0keep:");
        h.update(keep.join(",").as_bytes());
        self.hash = h.finalize().to_hex()[..32].to_string();
        self.keep = Some(keep);
        self
    }
}

pub use crate::records::ArmResult;

/// One finished run as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The configuration hash.
    pub hash: String,
    /// Seed.
    pub seed: u64,
    /// memlink version.
    pub memlink: String,
    /// Every arm, in scenario order.
    pub arms: Vec<ArmResult>,
    /// BLAKE3 of the rest of the record (see [`RunResult::content_digest`]): an edited,
    /// truncated or renamed stored run is refused instead of used.
    #[serde(default)]
    pub digest: String,
}

impl RunResult {
    /// The digest of everything but the digest field (the result serialised with it empty),
    /// 32 hex digits. It binds the numbers to the run's configuration hash, so a file edited by
    /// hand or copied under another run's name no longer matches. It is a checksum, not a
    /// signature: whoever can write the folder can also recompute it.
    pub fn content_digest(&self) -> String {
        let mut bare = self.clone();
        bare.digest = String::new();
        blake3::hash(serde_json::to_string(&bare).expect("serializable").as_bytes()).to_hex()[..32].to_string()
    }
}

/// A fingerprint of the running build: the BLAKE3 hash of the executable's bytes (memlink's
/// version where the executable cannot be read). Runs stored by another build of memlink are
/// therefore never taken for this one's, even at the same version number; every process of one
/// build (the shards of a Slurm array) agrees on it.
pub fn build_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| std::fs::read(p).ok())
            .map(|b| blake3::hash(&b).to_hex()[..16].to_string())
            .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string())
    })
}

/// A stable hash of everything a run depends on but its seed: the scenario and the profile as
/// serialised, memlink's version and the build ([`build_id`]) (BLAKE3, hex). A run's hash is this
/// with the seed ([`Job::with_hash`]).
pub fn scenario_hash(ls: &LoadedScenario) -> String {
    let mut h = blake3::Hasher::new();
    h.update(serde_json::to_string(&ls.scenario).expect("serializable").as_bytes());
    h.update(b"\0");
    h.update(serde_json::to_string(&ls.profile).expect("serializable").as_bytes());
    h.update(b"\0");
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    h.update(build_id().as_bytes());
    h.finalize().to_hex().to_string()
}

/// The content hash of one run.
pub fn content_hash(ls: &LoadedScenario, seed: u64) -> String {
    Job::new(ls.clone(), seed).hash
}

/// Which part of a plan to run: shard `index` (1-based) of `count`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 1-based.
    pub index: usize,
    /// Shards.
    pub count: usize,
}

impl Shard {
    /// Parses `i/N`.
    pub fn parse(s: &str) -> std::result::Result<Shard, String> {
        let (i, n) = s.split_once('/').ok_or_else(|| format!("a shard `i/N`, got `{s}`"))?;
        let (index, count) = (i.trim().parse::<usize>(), n.trim().parse::<usize>());
        match (index, count) {
            (Ok(index), Ok(count)) if count >= 1 && (1..=count).contains(&index) => Ok(Shard { index, count }),
            _ => Err(format!("a shard `i/N` with 1 <= i <= N, got `{s}`")),
        }
    }

    /// The shard Slurm's array variables name, if set (`SLURM_ARRAY_TASK_ID` counted from
    /// `SLURM_ARRAY_TASK_MIN`, of `SLURM_ARRAY_TASK_COUNT`).
    pub fn from_slurm() -> Option<std::result::Result<Shard, String>> {
        let id = std::env::var("SLURM_ARRAY_TASK_ID").ok()?;
        let count = std::env::var("SLURM_ARRAY_TASK_COUNT").ok();
        let min = std::env::var("SLURM_ARRAY_TASK_MIN").ok().unwrap_or_else(|| "0".into());
        Some((|| {
            let id: usize = id.parse().map_err(|_| format!("SLURM_ARRAY_TASK_ID: a number, got `{id}`"))?;
            let min: usize = min.parse().map_err(|_| format!("SLURM_ARRAY_TASK_MIN: a number, got `{min}`"))?;
            let count: usize = count
                .ok_or("SLURM_ARRAY_TASK_COUNT is not set")?
                .parse()
                .map_err(|_| "SLURM_ARRAY_TASK_COUNT: a number".to_string())?;
            Shard::parse(&format!("{}/{count}", id.saturating_sub(min) + 1))
        })())
    }

    /// Whether the `k`-th distinct run (0-based) belongs to this shard.
    pub fn owns(&self, k: usize) -> bool {
        k % self.count == self.index - 1
    }
}

/// The folder of finished runs.
pub fn runs_dir(dir: &Path) -> PathBuf {
    dir.join("runs")
}

fn result_path(dir: &Path, hash: &str) -> PathBuf {
    runs_dir(dir).join(format!("{hash}.json"))
}

/// A stored result, if its file is there; a corrupted one is an error naming it.
pub fn load_result(dir: &Path, hash: &str) -> Result<Option<RunResult>> {
    let p = result_path(dir, hash);
    if !p.exists() {
        return Ok(None);
    }
    let text = crate::error::read_file(&p)?;
    parse_result(&p, &text, hash).map(Some)
}

/// A stored run's `text` (of file `p`), checked to be run `hash`'s and to match its digest.
pub fn parse_result(p: &Path, text: &str, hash: &str) -> Result<RunResult> {
    let r: RunResult = serde_json::from_str(text).map_err(|e| Error::Parse {
        path: p.to_path_buf(),
        pos: Pos { line: e.line(), col: e.column() },
        message: format!("expected a finished run's result (delete the file to rerun it): {e}"),
    })?;
    if r.hash != hash {
        return Err(Error::Parse {
            path: p.to_path_buf(),
            pos: Pos { line: 1, col: 1 },
            message: format!("the result of run {hash}, found {} (delete the file to rerun the run)", r.hash),
        });
    }
    if r.digest != r.content_digest() {
        let col = text.find("\"digest\"").map_or(1, |i| text[..i].chars().count() + 1);
        return Err(Error::Parse {
            path: p.to_path_buf(),
            pos: Pos { line: 1, col },
            message: "a stored run whose digest matches its content; this one was edited, truncated or \
                      written by another run — delete the file and rerun the command (it recomputes the \
                      missing runs alone)"
                .into(),
        });
    }
    Ok(r)
}

/// A progress bar on stderr: runs done of total, rate and ETA; hidden when stderr is not a
/// terminal or `quiet`.
pub fn progress_bar(total: u64, quiet: bool, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{what} {{bar:40}} {{pos}}/{{len}} runs · {{per_sec}} · ETA {{eta}}"
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// Runs every job of `jobs` not yet stored in `dir` (those of `shard` only, counted over the
/// distinct hashes in order), on all cores; each result is written as it finishes. Returns how
/// many ran and how many were already stored. Jobs of one hash run once.
pub fn execute(jobs: &[Job], dir: &Path, shard: Option<Shard>, bar: &indicatif::ProgressBar) -> Result<Executed> {
    let runs = runs_dir(dir);
    std::fs::create_dir_all(&runs).map_err(|source| Error::Write { path: runs.clone(), source })?;
    let mut distinct: Vec<&Job> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for j in jobs {
        if seen.insert(j.hash.as_str()) {
            distinct.push(j);
        }
    }
    let mine: Vec<&Job> =
        distinct.iter().enumerate().filter(|(k, _)| shard.is_none_or(|s| s.owns(*k))).map(|(_, j)| *j).collect();
    let mut pending = Vec::new();
    for j in &mine {
        if load_result(dir, &j.hash)?.is_none() {
            pending.push(*j);
        }
    }
    bar.set_length(mine.len() as u64);
    bar.set_position((mine.len() - pending.len()) as u64);
    let written: Vec<Result<()>> = pending
        .par_iter()
        .map(|j| {
            let mut out = RunResult {
                hash: j.hash.clone(),
                seed: j.seed,
                memlink: env!("CARGO_PKG_VERSION").into(),
                arms: crate::run::arm_results(&j.scenario, j.seed, &j.label, j.keep),
                digest: String::new(),
            };
            out.digest = out.content_digest();
            let text = serde_json::to_string(&out).expect("serializable") + "\n";
            let res = write_atomic(&result_path(dir, &j.hash), &text);
            bar.inc(1);
            res
        })
        .collect();
    bar.finish_and_clear();
    written.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(Executed { ran: pending.len(), stored: mine.len() - pending.len() })
}

/// What [`execute`] did with the distinct runs it owned (all, or its shard's).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Executed {
    /// Runs simulated now.
    pub ran: usize,
    /// Runs whose results were already stored in the folder, so not simulated again.
    pub stored: usize,
}

impl Executed {
    /// "ran 28 runs", with "; 4 were already stored" when some were.
    pub fn describe(&self) -> String {
        let runs = |n: usize| if n == 1 { "1 run".to_string() } else { format!("{n} runs") };
        match self.stored {
            0 => format!("ran {}", runs(self.ran)),
            1 => format!("ran {}; 1 was already stored", runs(self.ran)),
            n => format!("ran {}; {n} were already stored", runs(self.ran)),
        }
    }
}

/// The results of `jobs` from `dirs` (the first folder that has each), in job order; a job that
/// no folder has is an error listing how many are missing and the first few.
pub fn collect(jobs: &[Job], dirs: &[PathBuf]) -> Result<Vec<RunResult>> {
    let mut out = Vec::with_capacity(jobs.len());
    let mut missing = Vec::new();
    for j in jobs {
        let mut found = None;
        for d in dirs {
            if let Some(r) = load_result(d, &j.hash)? {
                found = Some(r);
                break;
            }
        }
        match found {
            Some(r) => out.push(r),
            None => missing.push(j.hash.clone()),
        }
    }
    if !missing.is_empty() {
        return Err(Error::Invalid {
            path: dirs.first().cloned().unwrap_or_default(),
            pos: Pos { line: 1, col: 1 },
            field: "runs".into(),
            expected: format!(
                "every run of the plan; {} missing (first: {}) — run the remaining shards, or rerun to finish",
                missing.len(),
                missing.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    Ok(out)
}
