//! Run-time invariant monitors and `memlink check`: monitors never change a run, a broken guard
//! is caught and shrunk to a small scenario, a written counterexample reproduces, and bad check
//! files are refused with positioned errors.

mod common;

use memlink::eval::monitor::{Monitors, REGISTRY, Violation};
use memlink::guard::{CommitVerdict, Guard, GuardStage};
use memlink::memory::{MemoryItem, Scope, Status};
use memlink::run::{run_monitored, run_scenario};
use memlink::scenario::LoadedScenario;
use memlink::study::check::{Check, Expect};
use memlink::world::World;
use std::path::PathBuf;

fn all_invariants() -> Vec<String> {
    REGISTRY.iter().map(|e| e.name.to_string()).collect()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memlink-invariants-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The results (summary bytes, trace hashes included) are the same with every monitor on.
#[test]
fn monitors_do_not_change_results() {
    let mut cases = vec![common::bundled("scenarios/quickstart.ron")];
    let mut strict = common::load(&common::small("protocol: (provenance: StrictLedger, promotion: (rate: 1.0))", 12));
    strict.scenario.memory_topology = memlink::memory::MemoryTopology::BrokeredShared;
    cases.push(strict);
    let mut table2 = common::bundled("scenarios/paper/table2/mmlu-minja.ron");
    if let memlink::workload::WorkloadConfig::Mmlu(c) = &mut table2.scenario.workload {
        c.tasks = 12;
    }
    cases.push(table2);
    for ls in &cases {
        let plain = run_scenario(ls, ls.scenario.seed).to_json();
        let watched = run_monitored(ls, ls.scenario.seed, &all_invariants()).expect("registered names");
        assert_eq!(plain, watched.result.to_json(), "{}", ls.scenario.name);
        // Every arm reports every invariant.
        for (_, r) in &watched.reports {
            assert_eq!(r.checked.len(), REGISTRY.len());
        }
    }
}

/// No Defense on the quickstart writes poison into the shared store: the monitor sees it, at
/// the first task's arrival, with the item and the trace hash at that point.
#[test]
fn a_violation_names_where_it_happened() {
    let ls = common::bundled("scenarios/quickstart.ron");
    let run = run_monitored(&ls, ls.scenario.seed, &["poison-never-shared".into()]).unwrap();
    let (arm, v) = run.violations().next().expect("No Defense shares poison");
    assert_eq!(arm, "No Defense");
    assert_eq!(v.invariant, "poison-never-shared");
    assert_eq!(v.time, 0);
    assert_eq!(v.trace_hash.len(), 16);
    assert!(v.item.as_ref().is_some_and(|(_, name)| name.starts_with("mem_seed_")), "{v:?}");
    // MAPLE-Guard's write and promotion gates keep it out.
    assert!(run.reports.iter().find(|(a, _)| a == "MAPLE-Guard").unwrap().1.holds());
}

/// A guard for tests that promotes everything: every commit goes to the team store, active.
struct PromoteAll;

impl Guard for PromoteAll {
    fn name(&self) -> &str {
        "promote_all"
    }
    fn stage(&self) -> GuardStage {
        GuardStage::Memory
    }
    fn commit(&self, item: &mut MemoryItem, requested: Scope) -> CommitVerdict {
        item.scope = Scope::Team;
        item.status = Status::Active;
        CommitVerdict::allow(requested)
    }
}

fn with_promote_all(ls: &LoadedScenario) -> Result<Option<(String, Violation)>, String> {
    let m = Monitors::new(&ls.scenario.invariants).map_err(|n| format!("unknown invariant {n}"))?;
    let r = World::with_guard(&ls.scenario, &ls.profile, "PromoteAll", Box::new(PromoteAll), ls.scenario.seed, false)
        .with_monitors(m)
        .run();
    Ok(r.monitor.unwrap_or_default().violations.into_iter().next().map(|v| ("PromoteAll".to_string(), v)))
}

/// The promotion invariant catches the broken guard, and shrinking leaves a handful of agents
/// and tasks.
#[test]
fn a_guard_that_promotes_everything_is_caught_and_shrunk() {
    let check = Check::load(&common::path("scenarios/invariants/maple.ron")).unwrap();
    let found = check.search(None, "tainted-never-promoted", 300, &with_promote_all, &|| {}).unwrap();
    let case = found.minimal.expect("the broken guard promotes tainted items");
    assert!(found.failures >= 1);
    assert!(case.agents <= 4, "{case:?}");
    assert!(case.tasks <= 3, "{case:?}");
    assert!(case.rounds <= 2, "{case:?}");
    // The minimal case still fails, and it is a scenario memlink runs.
    let ls = check.scenario(&case, "tainted-never-promoted").unwrap();
    assert!(with_promote_all(&ls).unwrap().is_some());
}

/// A counterexample `memlink check` writes is a scenario that `memlink run` loads and that
/// reports the same violation; its item file is an explain item.
#[test]
fn a_written_counterexample_reproduces() {
    let check = Check::load(&common::path("scenarios/invariants/maple.ron")).unwrap();
    let out = scratch("cx");
    let o = check.check_invariant("MAPLE-Guard", "shared-lineage-clean", 300, &out, &|| {}).unwrap();
    assert_eq!(o.expect, Expect::Violated);
    assert!(o.as_expected());
    let c = o.counterexample.expect("MAPLE-Guard promotes what an agent wrote after reading poison");
    let ls = memlink::scenario::load(&c.scenario).expect("the counterexample loads");
    assert_eq!(ls.scenario.invariants, vec!["shared-lineage-clean".to_string()]);
    let run = run_monitored(&ls, ls.scenario.seed, &[]).unwrap();
    let (_, v) = run.violations().next().expect("it reproduces");
    assert_eq!(v, &c.violation);
    let item = c.item.expect("the violation names an item");
    memlink::study::explain::ExplainInput::load(&item).expect("an explain item");
    let _ = std::fs::remove_dir_all(&out);
}

/// Bad check files get positioned errors naming the field.
#[test]
fn bad_check_files_are_refused_with_positions() {
    let p = common::path("scenarios/invariants/bad.ron");
    let base = |extra: &str, space: &str| {
        format!("(\n    name: \"bad\",\n    base: \"base-mmlu.ron\",\n{extra}    space: ({space}),\n)\n")
    };
    let cases = [
        (base("    invariants: [\"no-such-invariant\"],\n", ""), "invariants", 4),
        (base("", "agents: Some((6, 3))"), "agents", 4),
        (base("    arms: Some([\"Nobody\"]),\n", ""), "arms", 4),
        (base("    cases: 0,\n", ""), "cases", 4),
        (base("", "factors: [(path: \"protocol.nowhere\", range: Some((0.0, 1.0)))]"), "factors", 4),
        (base("", "topologies: Some([])"), "topologies", 4),
    ];
    for (text, field, line) in cases {
        let e = match Check::load_str(&text, &p) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted: {text}"),
        };
        assert!(e.contains(&format!("`{field}`")), "{e}");
        assert!(e.contains(&format!("bad.ron:{line}:")), "{e}\n{text}");
    }
    // A scenario naming an unknown invariant is refused where it names it.
    let text = common::small("invariants: [\"nope\"],", 4);
    let e = memlink::scenario::load_str(&text, &common::path("scenarios/test.ron")).unwrap_err().to_string();
    assert!(e.contains("invalid `invariants`") && e.contains("poison-never-shared"), "{e}");
}

/// `check --ensemble`: cases range over the posterior draws too. A guard that breaks only
/// away from the fitted profile is caught at a draw, the minimal case keeps its draw (it cannot
/// shrink to the fit, where nothing fails), and that case's scenario carries the draw's
/// profile.
#[test]
fn an_ensemble_check_draws_cases_over_the_posterior_draws() {
    use memlink::study::predictive::Ensembles;
    let plain = Check::load(&common::path("scenarios/invariants/maple.ron")).unwrap();
    let fit = plain.scenario(&plain.smallest(), "tainted-never-promoted").unwrap().profile;
    let only_off_fit = |ls: &LoadedScenario| if ls.profile == fit { Ok(None) } else { with_promote_all(ls) };
    // Without an ensemble every case is at the fit: nothing fails.
    assert!(plain.search(None, "tainted-never-promoted", 40, &only_off_fit, &|| {}).unwrap().minimal.is_none());
    let check = Check::load(&common::path("scenarios/invariants/maple.ron"))
        .unwrap()
        .with_ensemble(&mut Ensembles::new(Some(4)))
        .unwrap();
    assert_eq!(check.draws(), 4);
    let found = check.search(None, "tainted-never-promoted", 300, &only_off_fit, &|| {}).unwrap();
    let case = found.minimal.expect("a case at a draw that moves the profile");
    assert!((1..=4).contains(&case.draw), "{case:?}");
    let ls = check.scenario(&case, "tainted-never-promoted").unwrap();
    assert_ne!(ls.profile, fit);
    assert!(only_off_fit(&ls).unwrap().is_some());
}
