//! How poison spread in one run: when it first reached each agent's prompt, and which edges of
//! the communication graph it crossed. The tracer is an observer in the monitors' seat (it
//! reads the evaluator's truth through the same [`Cx`] and never breaches), so the run's bytes
//! are those of a run without it.

use crate::eval::monitor::{Breach, Cx, Invariant, Observation, Route};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// What the tracer saw of one arm's run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SpreadTrace {
    /// Per agent, the first (task, round) at which a poison item was in its prompt, if ever.
    pub first_exposure: Vec<Option<(u32, u32)>>,
    /// Per agent, in how many of its prompts a poison item was.
    pub poisoned_prompts: Vec<u64>,
    /// Poison items carried over an edge (sender, receiver) and stored active, counted.
    pub edges: BTreeMap<(u32, u32), u64>,
}

/// The observer that fills a [`SpreadTrace`]; the caller keeps the other handle of `trace`.
pub struct SpreadTracer {
    trace: Arc<Mutex<SpreadTrace>>,
}

impl SpreadTracer {
    /// A tracer of a run of `agents` agents, and the handle its trace is read from after the run.
    pub fn new(agents: u32) -> (Self, Arc<Mutex<SpreadTrace>>) {
        let trace = Arc::new(Mutex::new(SpreadTrace {
            first_exposure: vec![None; agents as usize],
            poisoned_prompts: vec![0; agents as usize],
            edges: BTreeMap::new(),
        }));
        (SpreadTracer { trace: trace.clone() }, trace)
    }
}

impl Invariant for SpreadTracer {
    fn observe(&mut self, obs: &Observation<'_>, cx: &Cx<'_>) -> Vec<Breach> {
        let mut t = self.trace.lock().expect("the tracer's trace");
        match *obs {
            Observation::Prompt { task, round, agent, items } if items.iter().any(|id| cx.truth.is_poison(*id)) => {
                let a = agent as usize;
                if a < t.first_exposure.len() {
                    t.poisoned_prompts[a] += 1;
                    if t.first_exposure[a].is_none() {
                        t.first_exposure[a] = Some((task, round));
                    }
                }
            }
            Observation::Commit { route: Route::Handoff, owner, from: Some(from), id, .. }
                if cx.truth.is_poison(id) && cx.bank.get(id).is_active() =>
            {
                *t.edges.entry((from, owner)).or_default() += 1;
            }
            _ => {}
        }
        Vec::new()
    }
}
