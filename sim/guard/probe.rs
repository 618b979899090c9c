//! A test-only guard: it exists to show that adding a guard is this one file plus one line of
//! the registry in `spec.rs` (`TestProbe(ProbeConfig) = probe::KIND;`). It blocks every read of
//! a memory whose trust τ is below `min_trust`, and otherwise ranks as No Defense does.

use super::decision::Reader;
use super::{Cluster, Guard, GuardStage, ReadVerdict, baseline_score};
use crate::memory::MemoryItem;
use crate::text::QueryFeatures;
use serde::{Deserialize, Serialize};

/// The probe's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProbeConfig {
    /// Reads of memories with a lower trust τ are blocked.
    pub min_trust: f64,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig { min_trust: 0.5 }
    }
}

/// The probe in the guard registry.
pub const KIND: super::Kind<ProbeConfig> = super::Kind {
    name: |_| "test_probe",
    validate: |c| {
        if c.min_trust.is_finite() && c.min_trust >= 0.0 {
            Ok(())
        } else {
            Err(("min_trust".into(), "a finite trust floor ≥ 0".into()))
        }
    },
    build: |c, _, _| Box::new(Probe { min_trust: c.min_trust }),
    judge: None,
};

/// The probe guard.
struct Probe {
    min_trust: f64,
}

impl Guard for Probe {
    fn name(&self) -> &str {
        "test_probe"
    }

    fn stage(&self) -> GuardStage {
        GuardStage::Memory
    }

    fn score(&self, item: &MemoryItem, _: &QueryFeatures, sim: f64, _: Cluster, _: Reader<'_>) -> ReadVerdict {
        let mut v = baseline_score(item, sim, 0.8);
        if item.trust < self.min_trust {
            v.blocked = Some("trust below the probe's floor");
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use crate::guard::spec::{GuardSpec, registry};
    use std::path::Path;

    const SCENARIO: &str = r#"(
        name: "probe", seed: 7, agents: 6, attackers: Ids([0]), topology: Wheel,
        workload: Mmlu((tasks: 24)),
        attack: Minja((strength: Strong, stealth: MetadataClean, target: LookaheadWrong)),
        protocol: (rounds: 3, top_k: 3), backbone: "qwen3.5-122b-a10b",
        arms: [(name: "No Defense", guard: NoDefense), (name: "probe", guard: TestProbe((min_trust: MIN)))],
    )"#;

    fn load(min: &str) -> crate::error::Result<crate::scenario::LoadedScenario> {
        crate::scenario::load_str(&SCENARIO.replace("MIN", min), Path::new("scenarios/probe.ron"))
    }

    /// The one registry line makes the variant, its name, its validation (with the scenario's
    /// error position) and its construction, and a run uses it.
    #[test]
    fn a_registered_guard_is_parsed_validated_built_and_run() {
        assert!(registry().contains(&"TestProbe"));
        let ls = load("2.0").expect("a valid probe scenario");
        assert_eq!(ls.scenario.arms[1].guard, GuardSpec::TestProbe(super::ProbeConfig { min_trust: 2.0 }));
        assert_eq!(ls.scenario.arms[1].guard.method_name(), "test_probe");
        let result = crate::run::run_scenario(&ls, ls.scenario.seed);
        let (open, probe) = (&result.arms[0], &result.arms[1]);
        assert_eq!(probe.guard, "test_probe");
        // Every memory's trust is below 2, so every read is blocked and no poison reaches a
        // prompt; without the guard it does.
        assert!(probe.read_blocks > 0);
        assert!(probe.rounds.iter().all(|r| r.asr_exposure == 0.0), "{:?}", probe.rounds);
        assert!(open.rounds.iter().any(|r| r.asr_exposure > 0.0));

        let err = load("-1.0").expect_err("a negative floor is refused").to_string();
        assert!(
            err.contains("scenarios/probe.ron") && err.contains("min_trust") && err.contains("finite trust floor"),
            "{err}"
        );
    }
}
