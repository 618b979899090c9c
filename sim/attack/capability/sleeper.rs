//! Sleeper / delayed harm: on the first poisoning task the attacker plants its copies with a
//! useful-looking, stance-free experience (general advice on the task class), so they pass the
//! gates, get retrieved and earn Q and success counts through outcome updates like any benign
//! memory. After `dormant_tasks` tasks the attacker activates them: it edits each copy's
//! experience in place (the writer's update path, which no commit gate sees) to the current
//! poisoning task's payload, and re-points them at every later poisoning task. Earned Q,
//! counters, trust, scope and any ledger tag stay; the tag's text digest no longer matches, which
//! a signed ledger's read check counts but does not act on (and without a key the attacker's
//! unsigned planting never gets past verify-and-reject in the first place). The run
//! summary reports the dormant window, the time to the first promotion that names a sleeper in
//! its lineage, the sleepers' Q at activation, and the damage after it.

use crate::workload::Task;
use serde::{Deserialize, Serialize};

/// What the registry says.
pub const ABOUT: &str = "sleeper: copies planted with useful, stance-free text, earning Q for d tasks, then edited in place into the payload";

/// The sleeper capability (`Sleep((dormant_tasks: 20))`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sleeper {
    /// Tasks between planting and activation (1..=10000).
    pub dormant_tasks: u32,
}

impl Default for Sleeper {
    fn default() -> Self {
        Sleeper { dormant_tasks: 20 }
    }
}

impl Sleeper {
    /// `(field, expected)` when out of range.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !(1..=10_000).contains(&self.dormant_tasks) {
            return Err(("dormant_tasks".into(), format!("1..=10000 tasks, got {}", self.dormant_tasks)));
        }
        Ok(())
    }

    /// The dormant experience: general advice on the task's class and cues, with no claim.
    pub fn dormant_text(task: &Task) -> String {
        let cues: Vec<&str> = task.cues.iter().take(4).map(String::as_str).collect();
        format!(
            "Worked experience on {} items with cues {}: read the question closely, compare each candidate with the cues, and prefer the candidate the question's own wording supports.",
            task.class,
            cues.join(", ")
        )
    }

    /// Whether task `now` activates sleepers planted at task `planted`.
    pub fn active(&self, planted: u32, now: u32) -> bool {
        now >= planted.saturating_add(self.dormant_tasks)
    }
}

impl super::CapabilityKind for Sleeper {
    const NAME: &'static str = "Sleep";
    const ABOUT: &'static str = ABOUT;
    fn validate(&self) -> Result<(), (String, String)> {
        Sleeper::validate(self)
    }
}
