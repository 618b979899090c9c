//! Attacks: what the attacker plants, how it disguises it (stealth, spec §2.4) and what it
//! targets. The attack knows the workload's public view and its own role; it never sees guard
//! internals.

pub mod capability;
mod explicit;
mod graft;
mod message;
mod minja;
pub mod payload;
mod stealth;
mod trigger;

pub use explicit::ExplicitConfig;
pub use graft::{GraftConfig, GraftMode};
pub use message::{PromptInjectConfig, SteerStyle, ToolAttackConfig};
pub use minja::{MinjaConfig, Strength, choose_target};
pub use stealth::{Stealth, sanitize_parents, sanitize_text};
pub use trigger::{QueryActivation, REFERENCE_TRIGGER, TriggerConfig};

use crate::memory::{MemoryItem, Scope};
use crate::workload::Task;
pub use payload::PlanHooks;
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
    /// The option the workload marks as the risky action (AppWorld's y*); the lookahead choice
    /// on workloads without one.
    WorkloadRisk,
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
    /// Explicit direct memory injection (DMI).
    Explicit(ExplicitConfig),
    /// MemoryGraft: a poisoned successful experience.
    MemoryGraft(GraftConfig),
    /// AgentPoison: a trigger-conditioned retrieval demonstration.
    AgentPoison(TriggerConfig),
    /// PromptInject: attackers argue for a wrong answer "provided by the user" (messages only).
    PromptInject(PromptInjectConfig),
    /// ToolAttack: attackers relay an instruction injected into a tool observation.
    ToolAttack(ToolAttackConfig),
}

impl AttackConfig {
    /// (field, expected) on the first problem.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let caps = self.capabilities();
        if let Some(c) = caps.iter().enumerate().find(|(i, c)| caps[..*i].contains(c)).map(|x| x.1) {
            return Err(("capabilities".into(), format!("distinct capabilities, {c:?} twice")));
        }
        caps.iter().try_for_each(|c| c.validate())
    }

    /// The attack family name used in results.
    pub fn family(&self) -> &'static str {
        match self {
            AttackConfig::None => "none",
            AttackConfig::Minja(_) => "minja_query",
            AttackConfig::Explicit(_) => "explicit",
            AttackConfig::MemoryGraft(_) => "memory_graft",
            AttackConfig::AgentPoison(_) => "trigger_backdoor",
            AttackConfig::PromptInject(_) => "prompt_inject",
            AttackConfig::ToolAttack(_) => "tool_attack",
        }
    }

    /// How attackers word a steered output.
    pub fn steer_style(&self) -> SteerStyle {
        match self {
            AttackConfig::PromptInject(_) => SteerStyle::UserProvided,
            AttackConfig::ToolAttack(_) => SteerStyle::RelayInstruction,
            _ => SteerStyle::StoredNote,
        }
    }

    /// Whether the attack travels through messages (and round memories) instead of planting
    /// memories.
    pub fn through_messages(&self) -> bool {
        matches!(self, AttackConfig::PromptInject(_) | AttackConfig::ToolAttack(_))
    }

    /// How the attack picks its target on a poisoning task (None: no attack).
    pub fn target_strategy(&self) -> Option<TargetStrategy> {
        match self {
            AttackConfig::None => None,
            AttackConfig::PromptInject(c) => Some(c.target),
            AttackConfig::ToolAttack(c) => Some(c.target),
            AttackConfig::Minja(c) => Some(c.target),
            AttackConfig::Explicit(c) => Some(c.target),
            AttackConfig::MemoryGraft(c) => Some(c.target),
            AttackConfig::AgentPoison(c) => Some(c.target),
        }
    }

    /// The trigger later retrieval queries carry, if the attack activates one (AgentPoison).
    pub fn retrieval_trigger(&self) -> Option<&str> {
        match self {
            AttackConfig::AgentPoison(c) if c.activation.retrieval() => Some(&c.trigger),
            _ => None,
        }
    }

    /// The poison writes of one poisoning task targeting `target` (empty for attacks that
    /// write no memory), each built, derived and disguised (see [`payload::plan`]).
    pub fn plan(
        &self,
        task: &Task,
        target: u8,
        attackers: &[u32],
        agents: u32,
        hooks: &mut PlanHooks<'_>,
    ) -> Vec<PoisonWrite> {
        let (p, stealth, scope) = match self {
            AttackConfig::None | AttackConfig::PromptInject(_) | AttackConfig::ToolAttack(_) => return Vec::new(),
            AttackConfig::Minja(c) => (c.payload(task, target), c.stealth, c.scope),
            AttackConfig::Explicit(c) => (c.payload(task, target), c.stealth, c.scope),
            AttackConfig::MemoryGraft(c) => (c.payload(task, target), c.stealth, c.scope),
            AttackConfig::AgentPoison(c) => (c.payload(task, target), c.stealth, c.scope),
        };
        payload::plan(&p, task, target, attackers, agents, stealth, scope, hooks)
    }

    /// The attacker's capabilities ([`capability`]); empty for message attacks.
    pub fn capabilities(&self) -> &[capability::Capability] {
        match self {
            AttackConfig::Minja(c) => &c.capabilities,
            AttackConfig::Explicit(c) => &c.capabilities,
            AttackConfig::MemoryGraft(c) => &c.capabilities,
            AttackConfig::AgentPoison(c) => &c.capabilities,
            _ => &[],
        }
    }

    /// The capability list to edit; `None` for attacks that write no memory.
    pub fn capabilities_mut(&mut self) -> Option<&mut Vec<capability::Capability>> {
        match self {
            AttackConfig::Minja(c) => Some(&mut c.capabilities),
            AttackConfig::Explicit(c) => Some(&mut c.capabilities),
            AttackConfig::MemoryGraft(c) => Some(&mut c.capabilities),
            AttackConfig::AgentPoison(c) => Some(&mut c.capabilities),
            _ => None,
        }
    }

    /// Post-stealth clamps (spec C9: MINJA strong only).
    pub fn clamp(&self, item: &mut MemoryItem) {
        match self {
            AttackConfig::Minja(c) => c.clamp(item),
            AttackConfig::MemoryGraft(c) if c.strong_clamp => {
                item.utility_q = item.utility_q.max(1.0);
                item.trust = item.trust.max(0.60);
                item.hazard = item.hazard.min(0.42);
            }
            _ => {}
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
