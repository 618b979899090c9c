//! LongMemEval / MemoryGraft (spec §5.5): the trusted haystack bypasses every gate, retrieval
//! stays within the current task, six poison copies per task, open-ended answers.

mod common;

use memlink::memory::{Status, StoreKind, Writer};
use memlink::run::run_scenario;
use memlink::world::World;

fn small(tasks: u32) -> memlink::scenario::LoadedScenario {
    let mut ls = common::bundled("scenarios/paper/longmemeval-memorygraft-chain.ron");
    if let memlink::workload::WorkloadConfig::LongMemEval(c) = &mut ls.scenario.workload {
        c.tasks = tasks;
        c.haystack_units = 12;
    }
    ls
}

#[test]
fn the_haystack_is_trusted_shared_memory_that_no_gate_touches() {
    let ls = small(6);
    for arm in &ls.scenario.arms {
        let (run, insp) = World::new(&ls.scenario, &ls.profile, arm, 3, false).run_inspected();
        let hay: Vec<_> = insp.bank.live_items().filter(|it| it.writer == Writer::User).collect();
        assert_eq!(hay.len(), 6 * 12);
        assert!(hay.iter().all(|it| it.status == Status::Active && insp.bank.location(it.id) == StoreKind::Shared));
        assert!(hay.iter().all(|it| it.source_type == "longmemeval_user_history_seed" && it.trust == 0.90));
        // 3 attackers × {private, shared}, no dedupe.
        assert_eq!(run.summary.poison_direct_written, 6 * 6, "{}", arm.name);
    }
}

#[test]
fn retrieval_never_crosses_tasks() {
    let ls = small(8);
    let (_, insp) = World::new(&ls.scenario, &ls.profile, &ls.scenario.arms[0], 3, false).run_inspected();
    assert!(!insp.selections.is_empty());
    for (task, _, _, id, _) in &insp.selections {
        assert_eq!(insp.bank.get(*id).origin_task, *task, "item {id} from another task");
    }
    // Up to 16 memories per prompt.
    let per_call = insp.selections.iter().filter(|s| s.0 == 0 && s.1 == 0 && s.2 == 3).count();
    assert!(per_call > 3 && per_call <= 16, "{per_call}");
}

#[test]
fn answers_are_strings_and_the_target_follows_the_heuristic() {
    use memlink::workload::heuristic_target;
    assert_eq!(heuristic_target("where", "Portland", "Seattle"), "Seattle");
    assert_eq!(heuristic_target("numeric", "12", ""), "13");
    assert_eq!(heuristic_target("numeric", "twelve", ""), "thirteen");
    assert_eq!(heuristic_target("other", "Marketing", ""), "a blue sedan");
    let ls = small(30);
    let stream = ls.scenario.workload.generate(&memlink::engine::Streams::new(42));
    for (i, t) in stream.tasks().iter().enumerate() {
        assert!(t.open_ended && t.class == format!("longmemeval:{}", t.id));
        let gold = &t.options[stream.truth(i as u32).gold as usize];
        // The evidence is in the haystack, once.
        let evidence = stream.haystack(i as u32).iter().filter(|h| h.text.contains(gold.as_str())).count();
        assert!(evidence >= 1, "task {i}: no evidence for {gold}");
    }
    let r = run_scenario(&ls, 5);
    assert!(r.arms.iter().all(|a| a.rounds.len() == 3 && a.metric_tasks == 30));
}
