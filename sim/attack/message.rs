//! Attacks that travel through messages rather than planted memories (spec §6): PromptInject
//! (CSQA) — attackers are told a wrong answer "provided by the user" and argue for it — and
//! ToolAttack (InjecAgent) — attackers extract the instruction hidden in a tool observation and
//! pass it on. Neither writes memory itself; their messages reach memory only through the
//! protocol's round memories.

use super::TargetStrategy;
use serde::{Deserialize, Serialize};

/// PromptInject parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromptInjectConfig {
    /// How the wrong letter attackers defend is chosen (the reference: random per task).
    pub target: TargetStrategy,
}

impl Default for PromptInjectConfig {
    fn default() -> Self {
        PromptInjectConfig { target: TargetStrategy::RandomWrong }
    }
}

/// ToolAttack parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolAttackConfig {
    /// The attacker's goal (the reference: the injected instruction, the workload's risky step).
    pub target: TargetStrategy,
}

impl Default for ToolAttackConfig {
    fn default() -> Self {
        ToolAttackConfig { target: TargetStrategy::WorkloadRisk }
    }
}

/// How a steered attacker output is worded.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SteerStyle {
    /// Cites a stored preference note (memory attacks).
    StoredNote,
    /// Relays the answer "provided by the user" and urges agreement (PromptInject).
    UserProvided,
    /// Relays the instruction found in the tool observation (ToolAttack).
    RelayInstruction,
}
