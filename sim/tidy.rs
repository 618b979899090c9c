//! The tidy long format every study writes beside its wide files (`tidy.csv`): one row per
//! observation, `study,run,setting,backbone,topology,seed,draw,arm,metric,round,value,unit`,
//! with one vocabulary of metric names and units across `run`, `grid` and `sweep`
//! ([`METRICS`], the glossary docs/outputs.md prints). Rates are in percent; counts, ticks and
//! tasks in their own unit. `round` is empty for a per-run metric and `draw` for the fitted
//! profile's run.
//!
//! It imports nothing from the simulation: a study passes each arm's per-round and per-run
//! numbers by the names below.

/// The header line.
pub const HEADER: &str = "study,run,setting,backbone,topology,seed,draw,arm,metric,round,value,unit\n";

/// Every metric name the tidy files use, its unit, whether the simulation gives it as a
/// fraction (written ×100 as percent), and what it measures.
pub const METRICS: &[(&str, &str, bool, &str)] = &[
    ("mdsr", "percent", true, "tasks where strictly more than half of the benign outputs are correct"),
    ("mdsr_half", "percent", true, "tasks where at least half of the benign outputs are correct"),
    ("mdsr_upper", "percent", true, "MDSR with unreadable (unknown) outputs counted correct: its upper bound"),
    (
        "rda",
        "percent",
        true,
        "the paper's RDA column: exposed-and-wrong benign outputs (stream harnesses) or 1 − accuracy (INFA harness)",
    ),
    ("retrieval_rda", "percent", true, "benign outputs that selected poison and were wrong, over all benign slots"),
    ("rda_lower", "percent", true, "RDA with unknown outputs counted harmless: its lower bound"),
    (
        "asr",
        "percent",
        true,
        "tasks where at least one benign prompt carried the poison payload verbatim (exposure ASR)",
    ),
    ("pmur_agent", "percent", true, "benign outputs that selected poison, over benign slots"),
    ("target_hit", "percent", true, "benign outputs exposed, wrong and on a poison target"),
    ("accuracy", "percent", true, "benign outputs that are correct"),
    ("sr", "percent", true, "tasks whose team answer is correct (team success rate, all tasks)"),
    ("pmur", "percent", true, "metric tasks where at least one benign agent selected poison"),
    ("cpr", "percent", true, "benign poison users over metric tasks × benign agents"),
    ("pmwr", "percent", true, "poisoning tasks with at least one poison item stored active"),
    ("ppr", "percent", true, "poison items active at the end over poison items ever written"),
    ("write_quarantine_rate", "percent", true, "commit decisions that quarantined"),
    ("write_rewrite_rate", "percent", true, "commit decisions that rewrote the memory as evidence"),
    ("evasion", "percent", true, "direct poison writes stored active"),
    ("undetected", "percent", true, "direct poison writes stored active and never blocked at a read"),
    ("ledger_signed", "count", false, "records the signed ledger's memory manager signed"),
    ("ledger_write_checks", "count", false, "tags the ledger checked at the write gate"),
    ("ledger_read_checks", "count", false, "tags the ledger checked at reads"),
    ("ledger_distrusted", "count", false, "direct writes whose tag did not verify"),
    ("ledger_rejected", "count", false, "direct writes the ledger refused"),
    ("cap_writes", "count", false, "writes an attack capability made"),
    ("cap_laundered", "count", false, "payloads laundered through relays"),
    ("cap_compromised_summaries", "count", false, "summaries a compromised memory manager wrote"),
    ("cap_promoted", "count", false, "1 when the sleeper was promoted, else 0"),
    ("cap_dormant_window", "tasks", false, "tasks between a sleeper's planting and its activation"),
    ("cap_promoted_after", "tasks", false, "tasks until the sleeper's promotion (censored at the run's end)"),
    ("cap_q_at_activation", "value", false, "the live sleepers' mean utility Q at activation"),
    (
        "cap_damage_after_activation",
        "percent",
        true,
        "after activation, benign final answers that read a sleeper and were wrong",
    ),
];

/// A metric's name as a figure's axis reads it: `rda@3` → `RDA@3`,
/// `cap_damage_after_activation` → `damage after activation`; a name it does not know, as it is.
pub fn human(metric: &str) -> String {
    let (base, at) = match metric.split_once('@') {
        Some((b, k)) => (b, format!("@{k}")),
        None => (metric, String::new()),
    };
    let name = match base {
        "mdsr" => "MDSR".to_string(),
        "mdsr_half" => "MDSR (≥ half)".to_string(),
        "rda" => "RDA".to_string(),
        "retrieval_rda" => "retrieval RDA".to_string(),
        "asr" => "ASR".to_string(),
        "pmur_agent" => "PMUR (per output)".to_string(),
        "pmur" => "PMUR".to_string(),
        "sr" | "cpr" | "pmwr" | "ppr" => base.to_uppercase(),
        other => other.strip_prefix("cap_").unwrap_or(other).replace('_', " "),
    };
    format!("{name}{at}")
}

/// Where one arm's numbers come from.
#[derive(Clone, Debug, Default)]
pub struct Key<'a> {
    /// The study (`run`, `grid`, `sweep`).
    pub study: &'a str,
    /// The run's id within the study.
    pub run: &'a str,
    /// The setting (a grid's or sweep's; a scenario's name for `run`).
    pub setting: &'a str,
    /// The backbone.
    pub backbone: &'a str,
    /// The topology's label.
    pub topology: &'a str,
    /// The seed.
    pub seed: u64,
    /// The posterior draw, if not the fit.
    pub draw: Option<usize>,
    /// The arm.
    pub arm: &'a str,
}

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// The rows of one arm: each per-round metric at each round (1-based), then each per-run
/// metric, in the order given. A metric not in [`METRICS`] is written as it is, unit `value`.
pub fn rows<'m>(key: &Key<'_>, rounds: &[Vec<(&'m str, f64)>], per_run: &[(&'m str, f64)]) -> String {
    let head = format!(
        "{},{},{},{},{},{},{},{}",
        field(key.study),
        field(key.run),
        field(key.setting),
        field(key.backbone),
        field(key.topology),
        key.seed,
        key.draw.map(|d| d.to_string()).unwrap_or_default(),
        field(key.arm)
    );
    let mut s = String::new();
    let mut one = |name: &str, round: Option<usize>, v: f64| {
        let (unit, rate) = METRICS.iter().find(|m| m.0 == name).map_or(("value", false), |m| (m.1, m.2));
        let v = if rate { 100.0 * v } else { v };
        s.push_str(&format!(
            "{head},{},{},{v},{unit}\n",
            field(name),
            round.map(|r| r.to_string()).unwrap_or_default()
        ));
    };
    for (k, r) in rounds.iter().enumerate() {
        for (name, v) in r {
            one(name, Some(k + 1), *v);
        }
    }
    for (name, v) in per_run {
        one(name, None, *v);
    }
    s
}
