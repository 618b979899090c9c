//! The INFA-harness settings (spec §5.6, §7.4): CSQA / PromptInject and InjecAgent / ToolAttack
//! — message attacks, four native turns, every turn's outputs stored as team memories.

mod common;

use memlink::memory::Scope;
use memlink::run::run_scenario;
use memlink::world::World;

fn small(path: &str, tasks: u32) -> memlink::scenario::LoadedScenario {
    let mut ls = common::bundled(path);
    match &mut ls.scenario.workload {
        memlink::workload::WorkloadConfig::Csqa(c) => c.tasks = tasks,
        memlink::workload::WorkloadConfig::InjectAgent(c) => c.tasks = tasks,
        _ => unreachable!(),
    }
    ls
}

#[test]
fn message_attacks_plant_nothing_and_reach_memory_only_through_round_memories() {
    for path in ["scenarios/paper/csqa-promptinject-chain.ron", "scenarios/paper/injectagent-toolattack-tree.ron"] {
        let ls = small(path, 6);
        let r = run_scenario(&ls, 3);
        for a in &r.arms {
            assert_eq!(a.rounds.len(), 4, "four native turns");
            assert_eq!(a.poison_direct_written, 0, "{path}: the attack writes no memory itself");
            assert_eq!(a.poison_handoffs_written, 0, "no handoffs in the INFA harness");
            // Attackers 0, 1, 2 speak every turn of every task; each output is stored.
            assert_eq!(a.poison_messages_written, 6 * 4 * 3, "{path}");
        }
        let (_, insp) = World::new(&ls.scenario, &ls.profile, &ls.scenario.arms[0], 3, false).run_inspected();
        let stored: Vec<_> = insp.bank.items().iter().filter(|it| it.memory_type == "round_dialogue_memory").collect();
        assert_eq!(stored.len(), 6 * 4 * 8, "every agent's output, every turn");
        assert!(stored.iter().all(|it| it.scope == Scope::Team && it.allowed_agents.is_empty()));
    }
}

#[test]
fn round_memory_metadata_follows_the_text_unless_the_reference_leak_is_asked_for() {
    let ls = small("scenarios/paper/csqa-promptinject-wheel.ron", 6);
    let meta = |leak: bool| {
        let mut s = ls.clone();
        s.scenario.protocol.reference_attacker_metadata = leak;
        let (_, insp) = World::new(&s.scenario, &s.profile, &s.scenario.arms[0], 3, false).run_inspected();
        insp.bank
            .items()
            .iter()
            .filter(|it| it.memory_type == "round_dialogue_memory")
            .map(|it| (it.name.clone(), it.source_type.clone(), it.experience.clone()))
            .collect::<Vec<_>>()
    };
    let attacker = |name: &str| ["_a0", "_a1", "_a2"].iter().any(|a| name.ends_with(a));
    // Without the leak, two outputs with the same cue get the same metadata whoever wrote them.
    let plain = meta(false);
    for (name, source, text) in &plain {
        let cue = text.contains("provided by the user");
        assert_eq!(source == "external_prompt_injection_cross_agent", cue, "{name}");
    }
    // Attackers that did not comply wrote plain outputs, which only the leak marks.
    assert!(plain.iter().any(|m| attacker(&m.0) && m.1 == "benign_peer_reasoning"));
    // With it, every attacker output is marked as an injection, cue or not (the reference).
    let leaked = meta(true);
    assert!(leaked.iter().filter(|m| attacker(&m.0)).all(|m| m.1 == "external_prompt_injection_cross_agent"));
}

#[test]
fn csqa_has_five_options_and_injectagent_aims_at_the_injected_call() {
    let ls = small("scenarios/paper/csqa-promptinject-tree.ron", 5);
    let stream = ls.scenario.workload.generate(&memlink::engine::Streams::new(42));
    assert!(stream.tasks().iter().all(|t| t.options.len() == 5 && t.class == "csqa"));
    let ia = small("scenarios/paper/injectagent-toolattack-wheel.ron", 20);
    let stream = ia.scenario.workload.generate(&memlink::engine::Streams::new(42));
    for (i, t) in stream.tasks().iter().enumerate() {
        let truth = stream.truth(i as u32);
        assert_eq!((truth.gold, truth.risk), (0, Some(1)));
        assert!(t.options[1].starts_with("Call "));
        assert!(t.query.contains("Observation:"));
    }
}
