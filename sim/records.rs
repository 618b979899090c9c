//! Report records: what a committed report is rendered from, one line per arm run.
//!
//! Every study (grid, sweep, what-if, fidelity, calibration) reaches the simulator through one
//! call, [`arm_result`], asking for one arm of one scenario at one seed. When a record store is
//! installed ([`install`], the command line's `--records FILE --records-mode MODE`), that call is
//! answered from the store:
//!
//! - [`Mode::Fill`]: a stored record is used; a missing one is simulated, kept, and appended to
//!   `FILE.journal` the moment it finishes, so a killed regeneration resumes where it stopped.
//!   [`finish`] writes the store (sorted, atomically) and removes the journal.
//! - [`Mode::Render`]: every answer comes from the store; a run it lacks is simulated so the
//!   study still completes, and [`finish`] fails naming it. Re-rendering a report this way takes
//!   seconds instead of the simulations' minutes.
//! - [`Mode::Verify`]: as Render, and [`finish`] then re-simulates a deterministic, stratified
//!   sample of the runs the study asked for and compares each record byte for byte: at least
//!   one run of every stratum (backbone, scenario, arm, topology, attack-free or attacked, and
//!   the study's condition label) and at least one run in [`SAMPLE_ONE_IN`] overall. This is
//!   what `reports/regenerate --check` (CI) runs.
//!
//! A record's key is a BLAKE3 hash of everything the run depends on: the scenario (without its
//! other arms) and profile as serialised (every default filled in), the arm, the seed and
//! [`RECORD_VERSION`]. It does not
//! include the build, so records outlive builds; a change to the code that moves results while
//! keeping every configuration is what the re-simulated sample is there to catch, and a change
//! of any configured constant changes the key, so the run is missing from the store.
//!
//! The store is a text file of JSON lines, `{"stratum":…,"key":…,"result":…}`, sorted by stratum
//! and key so that a diff of two regenerations reads as which runs moved. Nothing else is kept:
//! the keys are hashes and the strata are names, so a ledger key in a scenario never reaches it.

use crate::agent::Profile;
use crate::error::{Error, Pos, Result};
use crate::eval::metrics::ArmSummary;
use crate::scenario::{Arm, Scenario};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Part of every record's key: bump it when the meaning of a record changes without any
/// configuration changing (a new field in [`ArmResult`], a metric's definition).
pub const RECORD_VERSION: &str = "memlink-record-1";

/// [`Mode::Verify`] re-simulates at least one run in this many (and one per stratum).
pub const SAMPLE_ONE_IN: usize = 20;

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
    /// This arm's rows of the tidy long format ([`crate::tidy`]): every per-round metric at
    /// every round, then every per-run metric, by the names this result keeps them under.
    pub fn tidy(&self, key: &crate::tidy::Key<'_>) -> String {
        let rounds: Vec<Vec<(&str, f64)>> =
            self.rounds.iter().map(|r| r.iter().map(|(k, v)| (k.as_str(), *v)).collect()).collect();
        let per_run: Vec<(&str, f64)> = self.scalars.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        crate::tidy::rows(key, &rounds, &per_run)
    }
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
        let mut scalars = BTreeMap::from([
            ("sr".to_string(), a.sr),
            ("pmur".to_string(), a.pmur),
            ("cpr".to_string(), a.cpr),
            ("pmwr".to_string(), a.pmwr),
            ("ppr".to_string(), a.ppr),
            ("write_quarantine_rate".to_string(), a.write_quarantine_rate),
            ("write_rewrite_rate".to_string(), a.write_rewrite_rate),
        ]);
        let share = |n: u64| if a.poison_direct_written == 0 { 0.0 } else { n as f64 / a.poison_direct_written as f64 };
        scalars.insert("evasion".into(), share(a.poison_direct_stored));
        scalars.insert("undetected".into(), share(a.poison_direct_stored.saturating_sub(a.poison_direct_read_blocked)));
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
            for (k, v) in &c.counts {
                scalars.insert(format!("cap_{k}"), *v as f64);
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

    /// The result with only the metrics `keep` (per-round metrics and whole-run scalars, by
    /// name) and the trace hash: what a study that reads nothing else (a calibration reads
    /// MDSR and RDA) keeps, a quarter of the bytes.
    pub fn project(mut self, keep: &[&str]) -> Self {
        for r in &mut self.rounds {
            r.retain(|k, _| keep.contains(&k.as_str()));
        }
        self.scalars.retain(|k, _| keep.contains(&k.as_str()));
        self.exposure_deciles.clear();
        self
    }

    /// The record's text (the `result` of a store line): serde_json's shortest round-trip
    /// floats, so a parsed record prints to the same bytes.
    pub fn to_record(&self) -> String {
        serde_json::to_string(self).expect("serializable")
    }
}

/// How an installed store answers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Use stored records, simulate and keep missing ones.
    Fill,
    /// Answer from the store only (a missing record fails [`finish`]).
    Render,
    /// Render, then re-simulate a stratified sample and compare every byte.
    Verify,
}

impl Mode {
    /// Parses `fill`, `render` or `verify`.
    pub fn parse(s: &str) -> std::result::Result<Mode, String> {
        match s {
            "fill" => Ok(Mode::Fill),
            "render" => Ok(Mode::Render),
            "verify" => Ok(Mode::Verify),
            _ => Err(format!("one of fill, render, verify; got `{s}`")),
        }
    }
}

/// One line of the store.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Line {
    stratum: String,
    key: String,
    result: ArmResult,
}

/// A run the study asked for, with what it takes to simulate it again (kept in Verify mode).
struct Asked {
    stratum: String,
    keep: Option<&'static [&'static str]>,
    scenario: Scenario,
    profile: Profile,
    arm: Arm,
    seed: u64,
}

/// An installed store.
pub struct Store {
    path: PathBuf,
    mode: Mode,
    /// key → (stratum, record text).
    records: Mutex<BTreeMap<String, (String, String)>>,
    /// Records simulated by this process (Fill).
    added: Mutex<usize>,
    journal: Mutex<Option<std::fs::File>>,
    /// Render and Verify: (stratum, key) of every run the store lacked.
    missing: Mutex<BTreeSet<(String, String)>>,
    /// Verify: every distinct run asked for.
    asked: Mutex<BTreeMap<String, Asked>>,
}

static STORE: OnceLock<Store> = OnceLock::new();

fn journal_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".journal");
    PathBuf::from(p)
}

/// Reads store lines from `text` (of `path`) into `into`; with `torn_tail`, an unparsable last
/// line (a journal cut off by a kill) is skipped instead of refused.
fn read_lines(
    path: &Path,
    text: &str,
    torn_tail: bool,
    into: &mut BTreeMap<String, (String, String)>,
) -> Result<usize> {
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let line: Line = match serde_json::from_str(l) {
            Ok(x) => x,
            Err(_) if torn_tail && i + 1 == lines.len() && !text.ends_with('\n') => break,
            Err(e) => {
                return Err(Error::Parse {
                    path: path.to_path_buf(),
                    pos: Pos { line: i + 1, col: e.column() },
                    message: format!(
                        "expected a report record {{\"stratum\", \"key\", \"result\"}} (regenerate the \
                         report with reports/regenerate): {e}"
                    ),
                });
            }
        };
        let text = line.result.to_record();
        into.insert(line.key, (line.stratum, text));
    }
    Ok(into.len())
}

/// Installs the process's store at `path` in `mode` (once per process). Fill creates the file
/// at [`finish`] if it does not exist; Render and Verify need it.
pub fn install(path: &Path, mode: Mode) -> Result<()> {
    let mut records = BTreeMap::new();
    // Read as every input is (a regular file, within the size limit).
    if mode != Mode::Fill || path.exists() {
        let text = crate::error::read_file(path)?;
        read_lines(path, &text, false, &mut records)?;
    }
    let mut journal = None;
    if mode == Mode::Fill {
        let jp = journal_path(path);
        if jp.exists() {
            let text = crate::error::read_file(&jp)?;
            read_lines(&jp, &text, true, &mut records)?;
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_path_buf(), source })?;
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&jp)
            .map_err(|source| Error::Write { path: jp.clone(), source })?;
        journal = Some(f);
    }
    let store = Store {
        path: path.to_path_buf(),
        mode,
        records: Mutex::new(records),
        added: Mutex::new(0),
        journal: Mutex::new(journal),
        missing: Mutex::new(BTreeSet::new()),
        asked: Mutex::new(BTreeMap::new()),
    };
    STORE.set(store).map_err(|_| Error::Invalid {
        path: path.to_path_buf(),
        pos: Pos { line: 1, col: 1 },
        field: "--records".into(),
        expected: "one record store per process".into(),
    })
}

/// The key of one arm run (see the module documentation).
pub fn key(scn: &Scenario, profile: &Profile, arm: &Arm, seed: u64, keep: Option<&[&str]>) -> String {
    let mut h = blake3::Hasher::new();
    h.update(RECORD_VERSION.as_bytes());
    h.update(b"\0");
    if let Some(keep) = keep {
        h.update(format!("projected to {keep:?}").as_bytes());
        h.update(b"\0");
    }
    // The scenario without its arms: an arm's run reads only its own arm (the world never
    // looks at the others), so adding or changing one arm keeps every other arm's records.
    let alone = Scenario { arms: Vec::new(), ..scn.clone() };
    h.update(serde_json::to_string(&alone).expect("serializable").as_bytes());
    h.update(b"\0");
    h.update(serde_json::to_string(profile).expect("serializable").as_bytes());
    h.update(b"\0");
    h.update(serde_json::to_string(arm).expect("serializable").as_bytes());
    h.update(b"\0");
    h.update(&seed.to_le_bytes());
    h.finalize().to_hex()[..32].to_string()
}

/// The stratum of one arm run: backbone, scenario, arm, topology, attacked or not, and the
/// study's condition `label` (empty when the study has none).
pub fn stratum(scn: &Scenario, profile: &Profile, arm: &Arm, label: &str) -> String {
    let attack = if matches!(scn.attack, crate::attack::AttackConfig::None) { "attack-free" } else { "attacked" };
    let mut s = format!("{} | {} | {} | {} | {attack}", profile.name, scn.name, arm.name, scn.topology.label());
    if !label.is_empty() {
        s.push_str(" | ");
        s.push_str(label);
    }
    s
}

/// Whether a store is installed.
pub fn active() -> bool {
    STORE.get().is_some()
}

/// One arm of `scn` at `seed`: from the installed store when it holds the run, otherwise
/// `simulate()` (kept in Fill mode). `label` names the study's condition (see [`stratum`]).
pub fn arm_result(
    scn: &Scenario,
    profile: &Profile,
    arm: &Arm,
    seed: u64,
    label: &str,
    simulate: impl FnOnce() -> ArmResult,
) -> ArmResult {
    arm_result_kept(scn, profile, arm, seed, label, None, simulate)
}

/// [`arm_result`] of a study that reads only the per-round metrics `keep` (see
/// [`ArmResult::project`]): its records hold those alone, under keys of their own.
pub fn arm_result_kept(
    scn: &Scenario,
    profile: &Profile,
    arm: &Arm,
    seed: u64,
    label: &str,
    keep: Option<&'static [&'static str]>,
    simulate: impl FnOnce() -> ArmResult,
) -> ArmResult {
    let simulate = || {
        let r = simulate();
        match keep {
            Some(k) => r.project(k),
            None => r,
        }
    };
    let Some(store) = STORE.get() else {
        return simulate();
    };
    let key = key(scn, profile, arm, seed, keep);
    let found = store.records.lock().expect("records").get(&key).map(|(_, t)| t.clone());
    let stratum = || stratum(scn, profile, arm, label);
    // A run asked for under several strata (two conditions that configure the same run) keeps
    // the least of them, so which thread asks first never shows in a file or a sample.
    if store.mode == Mode::Verify {
        let s = stratum();
        let mut asked = store.asked.lock().expect("asked");
        match asked.get_mut(&key) {
            Some(a) => {
                if s < a.stratum {
                    a.stratum = s;
                }
            }
            None => {
                asked.insert(
                    key.clone(),
                    Asked { stratum: s, keep, scenario: scn.clone(), profile: profile.clone(), arm: arm.clone(), seed },
                );
            }
        }
    }
    if let Some(text) = found {
        if store.mode == Mode::Fill {
            let s = stratum();
            if let Some(e) = store.records.lock().expect("records").get_mut(&key).filter(|e| s < e.0) {
                e.0 = s;
            }
        }
        return serde_json::from_str(&text).expect("checked when the store was read");
    }
    if store.mode != Mode::Fill {
        store.missing.lock().expect("missing").insert((stratum(), key));
        return simulate();
    }
    let result = simulate();
    let text = result.to_record();
    let s = stratum();
    let line = serde_json::to_string(&Line { stratum: s.clone(), key: key.clone(), result: result.clone() })
        .expect("serializable");
    {
        let mut records = store.records.lock().expect("records");
        match records.get_mut(&key) {
            Some(e) => {
                if s < e.0 {
                    e.0 = s;
                }
            }
            None => {
                records.insert(key, (s, text));
                *store.added.lock().expect("added") += 1;
            }
        }
    }
    if let Some(f) = store.journal.lock().expect("journal").as_mut() {
        // A journal line lost to a full disk costs a re-simulation on resume, nothing more.
        let _ = writeln!(f, "{line}");
    }
    result
}

/// What [`finish`] did.
#[derive(Clone, Debug, Default)]
pub struct Finished {
    /// Records in the store.
    pub records: usize,
    /// Records simulated and added (Fill).
    pub added: usize,
    /// Runs the study asked for (Verify).
    pub asked: usize,
    /// Strata among them (Verify).
    pub strata: usize,
    /// Runs re-simulated and found identical (Verify).
    pub verified: usize,
}

impl Finished {
    /// One line for a log.
    pub fn line(&self, path: &Path) -> String {
        if self.asked > 0 {
            format!(
                "records {}: {} runs asked for in {} strata, all present; {} re-simulated \
                 (every stratum and ≥ 1 in {SAMPLE_ONE_IN}), every byte identical",
                path.display(),
                self.asked,
                self.strata,
                self.verified
            )
        } else {
            format!("records {}: {} records ({} simulated and added)", path.display(), self.records, self.added)
        }
    }
}

/// The stratified sample of Verify mode: per stratum the run with the smallest key, and the
/// `ceil(n / SAMPLE_ONE_IN)` runs first in an order keyed by a second hash (so the overall
/// share does not favour the strata's picks); deterministic in the runs asked for alone.
pub fn sample<'a>(runs: impl IntoIterator<Item = (&'a str, &'a str)>) -> BTreeSet<String> {
    let runs: Vec<(&str, &str)> = runs.into_iter().collect();
    let mut first: BTreeMap<&str, &str> = BTreeMap::new();
    for &(key, stratum) in &runs {
        let e = first.entry(stratum).or_insert(key);
        if key < *e {
            *e = key;
        }
    }
    let mut out: BTreeSet<String> = first.values().map(|k| k.to_string()).collect();
    let mut order: Vec<(String, &str)> = runs
        .iter()
        .map(|&(key, _)| (blake3::hash(format!("sample\0{key}").as_bytes()).to_hex().to_string(), key))
        .collect();
    order.sort();
    order.dedup();
    for (_, key) in order.iter().take(runs.len().div_ceil(SAMPLE_ONE_IN)) {
        out.insert(key.to_string());
    }
    out
}

/// Ends the process's use of the store: Fill writes it (sorted by stratum and key, atomically)
/// and removes the journal; Render fails on any missing run; Verify also re-simulates the
/// stratified [`sample`] and fails on any record that differs. Without a store, does nothing.
pub fn finish() -> Result<Option<Finished>> {
    let Some(store) = STORE.get() else {
        return Ok(None);
    };
    let records = store.records.lock().expect("records");
    let mut done = Finished { records: records.len(), ..Finished::default() };
    match store.mode {
        Mode::Fill => {
            done.added = *store.added.lock().expect("added");
            let mut lines: Vec<(&str, &str, &str)> =
                records.iter().map(|(k, (s, t))| (s.as_str(), k.as_str(), t.as_str())).collect();
            lines.sort();
            let mut text = String::with_capacity(lines.len() * 900);
            for (s, k, t) in lines {
                let line = serde_json::json!({ "stratum": s, "key": k });
                // The result is spliced in as stored, so its bytes are the record's own.
                let head = serde_json::to_string(&line).expect("serializable");
                text.push_str(&head[..head.len() - 1]);
                text.push_str(",\"result\":");
                text.push_str(t);
                text.push_str("}\n");
            }
            crate::files::write_atomic(&store.path, &text)?;
            *store.journal.lock().expect("journal") = None;
            let _ = std::fs::remove_file(journal_path(&store.path));
        }
        Mode::Render | Mode::Verify => {
            let missing = store.missing.lock().expect("missing");
            if let Some((stratum, key)) = missing.iter().next() {
                return Err(Error::Records(format!(
                    "{}: {} run{} the study asked for {} not stored (first: {stratum}, key {key}); the \
                     configuration or a default changed since the report was made — regenerate it with \
                     reports/regenerate",
                    store.path.display(),
                    missing.len(),
                    if missing.len() == 1 { "" } else { "s" },
                    if missing.len() == 1 { "is" } else { "are" },
                )));
            }
        }
    }
    if store.mode != Mode::Verify {
        return Ok(Some(done));
    }
    let asked = store.asked.lock().expect("asked");
    done.asked = asked.len();
    done.strata = asked.values().map(|a| a.stratum.as_str()).collect::<BTreeSet<_>>().len();
    let chosen = sample(asked.iter().map(|(k, a)| (k.as_str(), a.stratum.as_str())));
    let chosen: Vec<(&String, &Asked)> = asked.iter().filter(|(k, _)| chosen.contains(*k)).collect();
    let differ: Vec<String> = chosen
        .par_iter()
        .filter_map(|(key, a)| {
            let bytes = crate::scenario::estimate::Estimate::of(&a.scenario).bytes;
            let summary = crate::scenario::estimate::MemoryBudget::global()
                .run(bytes, || crate::world::run_arm(&a.scenario, &a.profile, &a.arm, a.seed, false).summary);
            let now = ArmResult::of(&summary);
            let now = match a.keep {
                Some(k) => now.project(k),
                None => now,
            }
            .to_record();
            let stored = &records[*key].1;
            (now != *stored).then(|| {
                let at =
                    now.bytes().zip(stored.bytes()).position(|(x, y)| x != y).unwrap_or(now.len().min(stored.len()));
                let from = at.saturating_sub(40);
                format!(
                    "{} (seed {}, key {key}): stored …{}… simulated now …{}…",
                    a.stratum,
                    a.seed,
                    &stored[floor(stored, from)..floor(stored, (at + 40).min(stored.len()))],
                    &now[floor(&now, from)..floor(&now, (at + 40).min(now.len()))],
                )
            })
        })
        .collect();
    done.verified = chosen.len();
    if let Some(first) = differ.first() {
        return Err(Error::Records(format!(
            "{}: {} of {} re-simulated runs differ from their records (first: {first}); the code's \
             results moved — regenerate the reports with reports/regenerate",
            store.path.display(),
            differ.len(),
            chosen.len()
        )));
    }
    Ok(Some(done))
}

/// The largest char boundary of `s` at or below `i`.
fn floor(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_holds_every_stratum_and_one_in_twenty() {
        let keys: Vec<String> =
            (0..400).map(|i| format!("{:032x}", blake3::hash(&[i as u8, 7]).as_bytes()[0] as u32 * 1000 + i)).collect();
        let strata = ["a", "b", "c"];
        let runs: Vec<(&str, &str)> = keys.iter().enumerate().map(|(i, k)| (k.as_str(), strata[i % 3])).collect();
        let s = sample(runs.iter().copied());
        assert!(s.len() >= 400usize.div_ceil(SAMPLE_ONE_IN));
        for st in strata {
            assert!(runs.iter().any(|(k, x)| *x == st && s.contains(*k)), "stratum {st} sampled");
        }
        // Deterministic in the set of runs, whatever their order.
        let mut rev = runs.clone();
        rev.reverse();
        assert_eq!(s, sample(rev));
    }

    #[test]
    fn modes_parse_and_refuse_others() {
        assert_eq!(Mode::parse("verify"), Ok(Mode::Verify));
        assert!(Mode::parse("Verify").unwrap_err().contains("fill, render, verify"));
    }
}
