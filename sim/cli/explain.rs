//! `memlink explain`: one memory item through MAPLE-Guard's signals and gates.

use super::invalid;
use clap::ValueEnum;
use memlink::error::Result;
use memlink::memory::{Scope, Taint};
use memlink::study::explain::{ExplainInput, ReadInput, ReadState};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Item file (RON, see scenarios/explain/); flags below override or replace it.
    item: Option<PathBuf>,
    /// Intent text (without a file).
    #[arg(long)]
    intent: Option<String>,
    /// Experience text (without a file).
    #[arg(long)]
    experience: Option<String>,
    /// Source route.
    #[arg(long, default_value = "agent_self_outcome_consolidation")]
    source_type: String,
    /// Memory type.
    #[arg(long, default_value = "agent_outcome_experience")]
    memory_type: String,
    /// Requested scope.
    #[arg(long, value_enum, default_value_t = ScopeArg::Private)]
    scope: ScopeArg,
    /// Taint.
    #[arg(long, value_enum, default_value_t = TaintArg::Unverified)]
    taint: TaintArg,
    /// Q.
    #[arg(long, default_value_t = 0.0)]
    q: f64,
    /// Query to score a read against.
    #[arg(long)]
    query: Option<String>,
    /// Similarity of that read.
    #[arg(long, default_value_t = 0.5)]
    sim: f64,
    /// Reader agent of that read.
    #[arg(long, default_value_t = 0)]
    reader: u32,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `--scope`.
#[derive(Clone, Copy, ValueEnum)]
enum ScopeArg {
    Private,
    Team,
}

/// `--taint`.
#[derive(Clone, Copy, ValueEnum)]
enum TaintArg {
    Clean,
    Unverified,
    External,
    Poisoned,
}

pub fn exec(a: Args) -> Result<()> {
    let mut input: ExplainInput = match &a.item {
        Some(path) => ExplainInput::load(path)?,
        None => {
            let (Some(intent), Some(experience)) = (a.intent.clone(), a.experience.clone()) else {
                return Err(invalid("item", "an item file, or both --intent and --experience"));
            };
            let scope = match a.scope {
                ScopeArg::Private => Scope::Private,
                ScopeArg::Team => Scope::Team,
            };
            let taint = match a.taint {
                TaintArg::Clean => Taint::Clean,
                TaintArg::Unverified => Taint::Unverified,
                TaintArg::External => Taint::External,
                TaintArg::Poisoned => Taint::Poisoned,
            };
            ExplainInput {
                intent,
                experience,
                utility_q: a.q,
                source_type: a.source_type,
                memory_type: a.memory_type,
                scope,
                allowed_agents: if scope == Scope::Private { vec![a.reader] } else { Vec::new() },
                allowed_task_classes: Vec::new(),
                trust: 0.5,
                hazard: 0.0,
                taint,
                source_agent_trust: 0.5,
                parents: Vec::new(),
                success_count: 0,
                failure_count: 0,
                strict: None,
                reads: Vec::new(),
                config: None,
                memory_topology: Default::default(),
                agents: 8,
            }
        }
    };
    if let Some(q) = a.query {
        input.reads.push(ReadInput {
            query: q,
            sim: a.sim,
            reader: a.reader,
            task_class: "mmlu".into(),
            cluster_share: 0.0,
            state: ReadState::Stored,
        });
    }
    // The file was checked as it was read; what fails now came from a flag.
    input.check().map_err(|(field, expected)| invalid(&format!("--{field}"), &expected))?;
    let e = memlink::study::explain::explain(&input);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&e).expect("serializable"));
    } else {
        print!("{}", memlink::study::explain::render(&input, &e));
    }
    Ok(())
}
