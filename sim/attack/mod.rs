//! Attacks: what the attacker plants, how it disguises it (stealth, spec §2.4) and what it
//! targets. The attack knows the workload's public view and its own role; it never sees guard
//! internals.

mod minja;
mod stealth;

pub use minja::{MinjaConfig, Strength, choose_target};
pub use stealth::{Stealth, sanitize_parents, sanitize_text};

use crate::memory::{MemoryItem, Scope};
use serde::{Deserialize, Serialize};

/// How the poisoned target answer is chosen (spec §6).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum TargetStrategy {
    /// The most plausible wrong option (the attacker LLM's lookahead).
    #[default]
    LookaheadWrong,
    /// The first wrong option.
    FirstWrong,
    /// A uniformly random wrong option.
    RandomWrong,
}

/// Which copies of a payload are written.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum PoisonScope {
    /// Each attacker's private copy plus one shared copy per task (the paper's setting).
    #[default]
    PrivateAndShared,
    /// Private copies only.
    PrivateOnly,
    /// The shared copy only.
    SharedOnly,
}

/// An attack as a scenario names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum AttackConfig {
    /// No attack (attack-free baseline).
    None,
    /// MINJA: query-only memory injection (spec §6).
    Minja(MinjaConfig),
}

impl AttackConfig {
    /// (field, expected) on the first problem.
    pub fn validate(&self) -> Result<(), (String, String)> {
        Ok(())
    }

    /// The attack family name used in results.
    pub fn family(&self) -> &'static str {
        match self {
            AttackConfig::None => "none",
            AttackConfig::Minja(_) => "minja_query",
        }
    }
}

/// One poison write the attack wants to commit.
#[derive(Clone, Debug)]
pub struct PoisonWrite {
    /// The item before its commit-time derive (stealth already applied).
    pub item: MemoryItem,
    /// Requested scope.
    pub scope: Scope,
    /// Store owner for private copies.
    pub owner: u32,
}
