//! The words every guard decides in: a gate's [`Action`] and [`Decision`] (the action with
//! the reason string of the rule that fired) and the [`Reader`] of a retrieval. MAPLE-Guard's
//! gates coined them (its reason strings are the reference's), and every guard, the world's
//! retrieval and the metrics speak them; they are guard-neutral and live here, below every
//! guard. `guard::maple` re-exports them.

use serde::Serialize;

/// What a gate decided.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Let it through.
    Allow,
    /// Drop it.
    Reject,
    /// Keep it in quarantine (never retrievable).
    Quarantine,
    /// Store it as a low-trust, unverified note.
    Rewrite,
    /// Keep it out of this read.
    Block,
}

/// A gate's action and the reference's reason string for the rule that fired.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The action.
    pub action: Action,
    /// The rule that fired.
    pub reason: &'static str,
}

impl Decision {
    pub(crate) const fn new(action: Action, reason: &'static str) -> Self {
        Decision { action, reason }
    }
}

/// The reader's side of a retrieval.
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    /// Reading agent.
    pub agent: u32,
    /// Task class of the current task.
    pub task_class: &'a str,
}
