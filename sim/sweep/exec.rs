//! The run engine shared by sweeps and grids: each run is keyed by a content hash of its
//! expanded configuration (scenario, profile, seed, memlink version), its result is written
//! atomically to `<dir>/runs/<hash>.json` the moment it finishes, and a run whose file is there
//! is never run again. So a killed sweep loses at most the runs in flight, `--resume` (or a
//! plain rerun) continues it, and shards of one plan, run anywhere, merge into the bytes of an
//! unsharded run.

use crate::error::{Error, Pos, Result};
use crate::metrics::ArmSummary;
use crate::run::write_atomic;
use crate::scenario::LoadedScenario;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
        Job { scenario, seed, hash: h.finalize().to_hex()[..32].to_string() }
    }
}

/// What is kept of one arm of a run: every per-round metric, the scalar metrics, the trace hash
/// and the time-to-exposure deciles.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArmResult {
    /// Arm name.
    pub arm: String,
    /// Guard name.
    pub guard: String,
    /// Per round: metric name → value.
    pub rounds: Vec<BTreeMap<String, f64>>,
    /// Whole-run metrics.
    pub scalars: BTreeMap<String, f64>,
    /// Ticks from a benign agent's first exposure, at the 10th … 100th percentiles (empty when
    /// no benign agent was exposed).
    pub exposure_deciles: Vec<u64>,
    /// Trace hash.
    pub trace_hash: String,
}

impl ArmResult {
    /// The result of one arm's summary.
    pub fn of(a: &ArmSummary) -> Self {
        let rounds = a
            .rounds
            .iter()
            .map(|r| {
                BTreeMap::from([
                    ("mdsr".to_string(), r.mdsr_strict),
                    ("mdsr_half".to_string(), r.mdsr_half),
                    ("rda".to_string(), r.table_rda),
                    ("retrieval_rda".to_string(), r.rda),
                    ("asr".to_string(), r.asr_exposure),
                    ("pmur_agent".to_string(), r.pmur_agent),
                    ("target_hit".to_string(), r.target_hit),
                    ("accuracy".to_string(), r.accuracy),
                    ("mdsr_upper".to_string(), r.mdsr_upper),
                    ("rda_lower".to_string(), r.rda_lower),
                ])
            })
            .collect();
        let scalars = BTreeMap::from([
            ("sr".to_string(), a.sr),
            ("pmur".to_string(), a.pmur),
            ("cpr".to_string(), a.cpr),
            ("pmwr".to_string(), a.pmwr),
            ("ppr".to_string(), a.ppr),
            ("write_quarantine_rate".to_string(), a.write_quarantine_rate),
            ("write_rewrite_rate".to_string(), a.write_rewrite_rate),
        ]);
        let mut scalars = scalars;
        let evasion = if a.poison_direct_written == 0 {
            0.0
        } else {
            a.poison_direct_stored as f64 / a.poison_direct_written as f64
        };
        scalars.insert("evasion".into(), evasion);
        let undetected = if a.poison_direct_written == 0 {
            0.0
        } else {
            a.poison_direct_stored.saturating_sub(a.poison_direct_read_blocked) as f64 / a.poison_direct_written as f64
        };
        scalars.insert("undetected".into(), undetected);
        if let Some(l) = &a.ledger {
            for (k, v) in [
                ("ledger_signed", l.signed),
                ("ledger_write_checks", l.write_checks),
                ("ledger_read_checks", l.read_checks),
                ("ledger_distrusted", l.distrusted),
                ("ledger_rejected", l.rejected),
            ] {
                scalars.insert(k.to_string(), v as f64);
            }
        }
        if let Some(c) = &a.capability {
            scalars.insert("cap_writes".into(), c.writes as f64);
            scalars.insert("cap_laundered".into(), c.laundered as f64);
            scalars.insert("cap_compromised_summaries".into(), c.compromised_summaries as f64);
            if c.planted_task.is_some() {
                scalars.insert("cap_promoted".into(), f64::from(u8::from(c.promoted)));
            }
            for (k, v) in [
                ("cap_dormant_window", c.dormant_window.map(f64::from)),
                ("cap_promoted_after", c.promoted_after.map(f64::from)),
                ("cap_q_at_activation", c.q_at_activation),
                ("cap_damage_after_activation", c.damage_after_activation),
            ] {
                if let Some(v) = v {
                    scalars.insert(k.into(), v);
                }
            }
        }
        ArmResult {
            arm: a.arm.clone(),
            guard: a.guard.clone(),
            rounds,
            scalars,
            exposure_deciles: a.time_to_first_exposure_agent.deciles.clone(),
            trace_hash: a.trace_hash.clone(),
        }
    }

    /// A metric by name: `mdsr@3` (round 3, 1-based) or a scalar (`pmur`).
    pub fn metric(&self, name: &str) -> Option<f64> {
        match name.split_once('@') {
            Some((m, k)) => {
                let k: usize = k.parse().ok()?;
                self.rounds.get(k.checked_sub(1)?)?.get(m).copied()
            }
            None => self.scalars.get(name).copied(),
        }
    }
}

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
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(Error::Io { path: p, source }),
    };
    let r: RunResult = serde_json::from_str(&text).map_err(|e| Error::Parse {
        path: p.clone(),
        pos: Pos { line: e.line(), col: e.column() },
        message: format!("expected a finished run's result (delete the file to rerun it): {e}"),
    })?;
    if r.hash != hash {
        return Err(Error::Parse {
            path: p,
            pos: Pos { line: 1, col: 1 },
            message: format!("the result of run {hash}, found {}", r.hash),
        });
    }
    Ok(Some(r))
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
/// many ran. Jobs of one hash run once.
pub fn execute(jobs: &[Job], dir: &Path, shard: Option<Shard>, bar: &indicatif::ProgressBar) -> Result<usize> {
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
            let r = crate::run::run_scenario(&j.scenario, j.seed);
            let out = RunResult {
                hash: j.hash.clone(),
                seed: j.seed,
                memlink: env!("CARGO_PKG_VERSION").into(),
                arms: r.arms.iter().map(ArmResult::of).collect(),
            };
            let text = serde_json::to_string(&out).expect("serializable") + "\n";
            let res = write_atomic(&result_path(dir, &j.hash), &text);
            bar.inc(1);
            res
        })
        .collect();
    bar.finish_and_clear();
    written.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(pending.len())
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
