//! `memlink explain`: scores one memory item through MAPLE-Guard and reports every signal, the
//! total, trust and hazard after the commit-time metadata step, each gate's decision with the
//! rule that fired, and (given a query) the read score and firewall decision.

use crate::guard::maple::{
    Action, Decision, MapleConfig, ReadScore, Reader, RiskSignals, StrictChannel, apply_strict_view, baseline_read,
    broker_decision, commit_gates, derive_provenance, lifecycle_risk, read_score,
};
use crate::memory::{MemoryItem, MemoryTopology, Scope, Status, Taint};
use crate::text::{Lexicon, analyze, analyze_query};
use serde::{Deserialize, Serialize};

/// Which state of the item a read is scored on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ReadState {
    /// The item as stored after the gates (rewrites applied; quarantined items are inactive).
    #[default]
    Stored,
    /// The item after the metadata step but before the gates.
    PreGate,
}

/// The strict ledger view to apply instead of derive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrictView {
    /// Ingress channel.
    pub channel: StrictChannel,
    /// Taint from the ledger.
    pub taint: Taint,
    /// Readers.
    pub readers: Vec<u32>,
    /// Dependency memory ids.
    #[serde(default)]
    pub parent_ids: Vec<String>,
}

/// A read to score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadInput {
    /// Query text.
    pub query: String,
    /// Cosine similarity of query and memory.
    pub sim: f64,
    /// Reading agent.
    pub reader: u32,
    /// Task class of the reader's task.
    pub task_class: String,
    /// Answer-key share among the read's candidates.
    #[serde(default)]
    pub cluster_share: f64,
    /// Which state is read.
    #[serde(default)]
    pub state: ReadState,
}

/// One memory item and what to do with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplainInput {
    /// Short task description.
    pub intent: String,
    /// Memory text.
    pub experience: String,
    /// Q.
    #[serde(default)]
    pub utility_q: f64,
    /// Source route.
    pub source_type: String,
    /// Memory type.
    pub memory_type: String,
    /// Requested scope.
    pub scope: Scope,
    /// ACL.
    #[serde(default)]
    pub allowed_agents: Vec<u32>,
    /// Allowed task classes.
    #[serde(default)]
    pub allowed_task_classes: Vec<String>,
    /// τ before the commit.
    #[serde(default = "half")]
    pub trust: f64,
    /// h before the commit.
    #[serde(default)]
    pub hazard: f64,
    /// Taint.
    pub taint: Taint,
    /// Writer reputation.
    #[serde(default = "half")]
    pub source_agent_trust: f64,
    /// Lineage strings.
    #[serde(default)]
    pub parents: Vec<String>,
    /// Outcome counts.
    #[serde(default)]
    pub success_count: u32,
    /// Outcome counts.
    #[serde(default)]
    pub failure_count: u32,
    /// Strict ledger view instead of derive.
    #[serde(default)]
    pub strict: Option<StrictView>,
    /// Reads to score.
    #[serde(default)]
    pub reads: Vec<ReadInput>,
    /// MAPLE configuration (paper defaults when absent).
    #[serde(default)]
    pub config: Option<MapleConfig>,
    /// Memory topology for the broker check.
    #[serde(default)]
    pub memory_topology: MemoryTopology,
    /// Agents in the team (ids 0 … agents−1): readers and ACL entries must name one of them.
    #[serde(default = "paper_team")]
    pub agents: u32,
}

fn half() -> f64 {
    0.5
}

fn paper_team() -> u32 {
    8
}

impl ExplainInput {
    /// The explain input of a stored item: its texts and metadata as the bank holds them, its
    /// requested scope Team when it is `shared`, no reads, paper defaults for the rest (what
    /// `memlink check` writes beside a counterexample).
    pub fn of_item(it: &crate::memory::MemoryItem, shared: bool) -> Self {
        ExplainInput {
            intent: it.intent.to_string(),
            experience: it.experience.clone(),
            utility_q: it.utility_q,
            source_type: it.source_type.to_string(),
            memory_type: it.memory_type.to_string(),
            scope: if shared { Scope::Team } else { it.scope },
            allowed_agents: it.allowed_agents.clone(),
            allowed_task_classes: it.allowed_task_classes.clone(),
            trust: it.trust.clamp(0.0, 1.0),
            hazard: it.hazard.clamp(0.0, 1.0),
            taint: it.taint,
            source_agent_trust: it.source_agent_trust,
            parents: it.parents().iter().map(|p| p.to_string()).collect(),
            success_count: it.success_count,
            failure_count: it.failure_count,
            strict: None,
            reads: Vec::new(),
            config: None,
            memory_topology: MemoryTopology::default(),
            agents: it.allowed_agents.iter().max().map_or(8, |m| (m + 1).max(2)),
        }
    }

    /// Semantic checks; returns (field, expected) on the first problem. Writer trust may lie
    /// outside [0, 1] (the reference clamps it, and its vectors test that); every other number
    /// must lie in its domain.
    pub fn check(&self) -> std::result::Result<(), (String, String)> {
        let bad = |f: &str, e: String| Err((f.to_string(), e));
        if self.agents == 0 || self.agents > 1_000_000 {
            return bad("agents", format!("a team of 1 to 1000000 agents, got {}", self.agents));
        }
        let in01 = |x: f64| (0.0..=1.0).contains(&x);
        if !in01(self.trust) {
            return bad("trust", format!("a trust in [0, 1], got {}", self.trust));
        }
        if !in01(self.hazard) {
            return bad("hazard", format!("a hazard in [0, 1], got {}", self.hazard));
        }
        if !(-1.0..=1.0).contains(&self.utility_q) {
            return bad("utility_q", format!("a utility Q in [-1, 1], got {}", self.utility_q));
        }
        if !self.source_agent_trust.is_finite() || self.source_agent_trust.abs() > 1e9 {
            return bad("source_agent_trust", format!("a finite writer trust, got {}", self.source_agent_trust));
        }
        let team = self.agents;
        let outside = |ids: &[u32]| ids.iter().copied().find(|&a| a >= team);
        if let Some(a) = outside(&self.allowed_agents) {
            return bad("allowed_agents", format!("agent ids below the team size {team}, got {a}"));
        }
        if let Some(v) = &self.strict
            && let Some(a) = outside(&v.readers)
        {
            return bad("readers", format!("agent ids below the team size {team}, got {a}"));
        }
        for r in &self.reads {
            if !(-1.0..=1.0).contains(&r.sim) {
                return bad("sim", format!("a cosine similarity in [-1, 1], got {}", r.sim));
            }
            if !in01(r.cluster_share) {
                return bad("cluster_share", format!("a share in [0, 1], got {}", r.cluster_share));
            }
            if r.reader >= team {
                return bad("reader", format!("an agent id below the team size {team}, got {}", r.reader));
            }
        }
        if let Some(cfg) = &self.config {
            cfg.validate()?;
            if let Some((field, v)) = crate::error::oversized_float(cfg, crate::scenario::MAX_FLOAT) {
                return bad(&field, format!("a magnitude of at most {:e}, got {v:e}", crate::scenario::MAX_FLOAT));
            }
        }
        Ok(())
    }

    /// Reads and checks an item file, with positioned errors.
    pub fn load(path: &std::path::Path) -> crate::error::Result<ExplainInput> {
        Self::load_str(&crate::error::read_file(path)?, path)
    }

    /// [`Self::load`] of `text` as if read from `path`.
    pub fn load_str(text: &str, path: &std::path::Path) -> crate::error::Result<ExplainInput> {
        let input: ExplainInput = crate::error::parse_ron(path, text)?;
        input.check().map_err(|(field, expected)| crate::error::Error::Invalid {
            path: path.to_path_buf(),
            pos: crate::error::locate_field(text, &field),
            field,
            expected,
        })?;
        Ok(input)
    }
}

/// Everything explain reports.
#[derive(Clone, Debug, Serialize)]
pub struct Explanation {
    /// τ after the metadata step.
    pub trust: f64,
    /// h after the metadata step.
    pub hazard: f64,
    /// The eight signals and total without a query, after the metadata step.
    pub signals: RiskSignals,
    /// Write gate decision (None when the gate is off).
    pub write: Option<Decision>,
    /// Promotion gate decision (None when not reached).
    pub promotion: Option<Decision>,
    /// Whether the item is stored (active or rewritten).
    pub stored: bool,
    /// The item's lifecycle status after the gates.
    pub status_after: Status,
    /// Read scores, one per read input.
    pub reads: Vec<ReadScore>,
    /// Broker decisions for each read (shared items only).
    pub broker: Vec<Decision>,
}

/// Builds the item an input describes (before the metadata step).
pub fn build_item(input: &ExplainInput, lex: &mut Lexicon) -> MemoryItem {
    let features = analyze(&input.intent, &input.experience, lex);
    let mut m = MemoryItem::new("explain".into(), input.intent.as_str().into(), input.experience.clone(), features);
    m.utility_q = input.utility_q;
    m.source_type = input.source_type.clone().into();
    m.memory_type = input.memory_type.clone().into();
    m.scope = input.scope;
    m.allowed_agents = input.allowed_agents.clone();
    m.allowed_task_classes = input.allowed_task_classes.clone();
    m.trust = input.trust;
    m.hazard = input.hazard;
    m.taint = input.taint;
    m.source_agent_trust = input.source_agent_trust;
    m.set_parents(input.parents.iter().map(|p| p.as_str().into()).collect());
    m.success_count = input.success_count;
    m.failure_count = input.failure_count;
    m
}

/// Applies the commit-time metadata step (strict view or derive).
pub fn metadata_step(item: &mut MemoryItem, input: &ExplainInput, cfg: &MapleConfig) {
    match &input.strict {
        Some(v) => apply_strict_view(item, v.channel, v.taint, v.readers.clone(), v.parent_ids.clone(), input.scope),
        None => derive_provenance(item, cfg),
    }
}

/// Explains one item.
pub fn explain(input: &ExplainInput) -> Explanation {
    let cfg = input.config.clone().unwrap_or_default();
    let mut lex = Lexicon::new();
    let mut item = build_item(input, &mut lex);
    metadata_step(&mut item, input, &cfg);
    let pre_gate = item.clone();
    let signals = lifecycle_risk(&item, None, 0.0, &cfg);
    let verdict = commit_gates(&mut item, input.scope, &cfg);
    if verdict.rewritten {
        item.features = analyze(&item.intent, &item.experience, &mut lex);
    }
    let stored = item.is_active();
    let mut reads = Vec::new();
    let mut broker = Vec::new();
    for r in &input.reads {
        let q = analyze_query(&r.query, &mut lex);
        let target = match r.state {
            ReadState::Stored => &item,
            ReadState::PreGate => &pre_gate,
        };
        let reader = Reader { agent: r.reader, task_class: &r.task_class };
        reads.push(if cfg.variant.retrieval_gate() {
            read_score(target, &q, r.sim, r.cluster_share, reader, &cfg)
        } else {
            // The ablation scores reads as the simulator's `Maple::score` does: the baseline.
            baseline_read(target, &q, r.sim, reader, &cfg)
        });
        broker.push(broker_decision(target, reader, input.memory_topology, &cfg));
    }
    Explanation {
        trust: pre_gate.trust,
        hazard: pre_gate.hazard,
        signals,
        write: verdict.write,
        promotion: verdict.promotion,
        stored,
        status_after: item.status,
        reads,
        broker,
    }
}

fn action(a: Action) -> &'static str {
    match a {
        Action::Allow => "allow",
        Action::Reject => "reject",
        Action::Quarantine => "quarantine",
        Action::Rewrite => "rewrite",
        Action::Block => "block",
    }
}

/// A human-readable report.
pub fn render(input: &ExplainInput, e: &Explanation) -> String {
    let cfg = input.config.clone().unwrap_or_default();
    let w = cfg.weights.as_array();
    let s = &e.signals;
    let rows = [
        ("provenance", s.provenance),
        ("lineage", s.lineage),
        ("self_claim_success", s.self_claim_success),
        ("instruction_like", s.instruction_like),
        ("answer_binding", s.answer_binding),
        ("trigger_sensitivity", s.trigger_sensitivity),
        ("cluster_dominance", s.cluster_dominance),
        ("agent_trust", s.agent_trust),
    ];
    let mut out = format!(
        "metadata ({}): trust τ = {:.4}  hazard h = {:.4}\n\nsignal                 value   weight  contribution\n",
        if input.strict.is_some() { "strict ledger view" } else { "derive_provenance_scores" },
        e.trust,
        e.hazard
    );
    for (i, (name, v)) in rows.iter().enumerate() {
        out.push_str(&format!("{name:<22} {v:>6.4}  {:>6.2}  {:>8.4}\n", w[i], w[i] * v));
    }
    out.push_str(&format!("{:<22} {:>6.4}\n\n", "total risk R", s.total));
    let dec = |d: &Option<Decision>| match d {
        Some(d) => format!("{} ({})", action(d.action), d.reason),
        None => "not reached".into(),
    };
    out.push_str(&format!("write gate:      {}\n", dec(&e.write)));
    out.push_str(&format!("promotion gate:  {}\n", dec(&e.promotion)));
    out.push_str(&format!("stored:          {}\n", if e.stored { "yes" } else { "no" }));
    for (r, (score, b)) in input.reads.iter().zip(e.reads.iter().zip(&e.broker)) {
        out.push_str(&format!(
            "\nread by agent {} ({}, {:?} state) at sim {:.2}: \"{}\"\n",
            r.reader, r.task_class, r.state, r.sim, r.query
        ));
        out.push_str(&format!(
            "  S = {:.5}  h_q = {:.5}  T_q = {:.5}  R_q = {:.5}  tr_q = {:.3}  overlap = {:.4}\n",
            score.score, score.h_q, score.t_q, score.risk.total, score.risk.trigger_sensitivity, score.overlap
        ));
        out.push_str(&format!("  read firewall:  {} ({})\n", action(score.decision.action), score.decision.reason));
        out.push_str(&format!("  broker:         {} ({})\n", action(b.action), b.reason));
    }
    out
}
