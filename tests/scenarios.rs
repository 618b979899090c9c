//! The bundled scenarios run end to end, and MAPLE-Guard contains the MINJA poison on the
//! paper's three topologies.

mod common;

use memlink::memory::{Status, StoreKind};
use memlink::run::run_scenario;
use memlink::world::World;

#[test]
fn quickstart_runs_both_arms() {
    let ls = common::bundled("scenarios/quickstart.ron");
    let r = run_scenario(&ls, ls.scenario.seed);
    assert_eq!(r.arms.len(), 2);
    for a in &r.arms {
        assert_eq!(a.rounds.len(), 3);
        assert_eq!(a.tasks, 60);
    }
}

/// Spec done-means: on the three paper MMLU/MINJA scenarios MAPLE-Guard's RDA@3 is below No
/// Defense's, and the run reports which gate stopped how many poison items.
#[test]
fn maple_lowers_rda_on_every_paper_topology() {
    for topo in ["wheel", "chain", "tree"] {
        let ls = common::bundled(&format!("scenarios/paper/mmlu-minja-{topo}.ron"));
        let r = run_scenario(&ls, ls.scenario.seed);
        let (none, maple) = (&r.arms[0], &r.arms[1]);
        assert_eq!(none.guard, "no_defense");
        assert_eq!(maple.guard, "maple_guard");
        let rda = |a: &memlink::eval::metrics::ArmSummary| a.rounds[2].rda;
        assert!(rda(maple) < rda(none), "{topo}: MAPLE RDA@3 {} vs No Defense {}", rda(maple), rda(none));
        assert!(none.poison_stops.is_empty(), "No Defense stops nothing");
        let promo = maple.poison_stops.get("promotion:unsafe_lifecycle_team_memory_promotion").copied().unwrap_or(0);
        assert_eq!(promo, 200, "{topo}: every shared MINJA copy dies at the promotion gate");
        assert!(maple.poison_stops.keys().any(|k| k.starts_with("read:")), "{topo}: read firewall blocks reported");
    }
}

/// Gate invariants over whole runs: nothing inactive is ever selected; quarantined and
/// rejected items never reach a store that can be read; the shared store holds only active
/// items; a reader only ever gets items whose ACL admits it.
#[test]
fn whole_run_invariants_hold_for_every_arm_and_memory_topology() {
    for mt in ["GlobalShared", "BrokeredShared", "RoleIsolated", "PrivateOnly"] {
        let ls = common::load(&common::small(&format!("memory_topology: {mt},"), 15));
        for arm in &ls.scenario.arms {
            let (_, insp) = World::new(&ls.scenario, &ls.profile, arm, 11, false).run_inspected();
            assert!(!insp.selections.is_empty() || mt == "PrivateOnly");
            for (_, _, reader, id, status) in &insp.selections {
                assert_eq!(*status, Status::Active, "{mt}/{}: inactive item selected", arm.name);
                let it = insp.bank.get(*id);
                assert!(it.allowed_agents.is_empty() || it.allowed_agents.contains(reader), "{mt}: ACL violated");
                if mt == "PrivateOnly" {
                    assert_eq!(insp.bank.location(*id), StoreKind::Private(*reader));
                }
            }
            for it in insp.bank.live_items() {
                if it.status != Status::Active {
                    assert_eq!(it.selected_count, 0);
                    assert_eq!(it.retrieved_count, 0, "a quarantined item never reaches scoring");
                    assert!(matches!(insp.bank.location(it.id), StoreKind::Quarantine | StoreKind::Dropped));
                }
            }
            for id in insp.bank.shared_store() {
                assert_eq!(insp.bank.get(*id).status, Status::Active);
            }
        }
    }
}

/// Under brokered_shared with the reference's class quirk (C7) every team memory is blocked
/// for every reader; fixing the quirk lets ACL-admitted team memories through again.
#[test]
fn the_broker_quirk_blocks_team_memory_and_its_fix_does_not() {
    let quirk =
        common::load(&common::small("memory_topology: BrokeredShared, protocol: (promotion: (rate: 1.0)),", 30));
    let r = run_scenario(&quirk, 7);
    let maple = &r.arms[1];
    assert!(maple.read_blocks > 0);
    let (_, insp) = World::new(&quirk.scenario, &quirk.profile, &quirk.scenario.arms[1], 7, false).run_inspected();
    assert!(insp.selections.iter().all(|(_, _, _, id, _)| insp.bank.location(*id) != StoreKind::Shared));

    let fixed_text = common::small("memory_topology: BrokeredShared, protocol: (promotion: (rate: 1.0)),", 30)
        .replace("guard: Maple(())", "guard: Maple((fix_broker_default_class: true))");
    let fixed = common::load(&fixed_text);
    let (_, insp) = World::new(&fixed.scenario, &fixed.profile, &fixed.scenario.arms[1], 7, false).run_inspected();
    assert!(insp.selections.iter().any(|(_, _, _, id, _)| insp.bank.location(*id) == StoreKind::Shared));
}

/// With global_shared memory the broker is inert, so the no_cross_agent ablation gives results
/// identical to full MAPLE on the same seed (spec §3.4) once both get the same candidate pool;
/// under brokered_shared it does not. With the reference's pool rule (C5) they differ even under
/// global_shared, by the pool alone.
#[test]
fn no_cross_agent_equals_full_maple_exactly_when_the_broker_is_inert() {
    let same_pool = r#"arms: [(name: "full", guard: Maple(())), (name: "no_cross", guard: Maple((variant: NoCrossAgent, ablations_get_full_pool: true)))],"#;
    let reference =
        r#"arms: [(name: "full", guard: Maple(())), (name: "no_cross", guard: Maple((variant: NoCrossAgent)))],"#;
    for (mt, arms, equal) in
        [("GlobalShared", same_pool, true), ("BrokeredShared", same_pool, false), ("GlobalShared", reference, false)]
    {
        let text = common::small(&format!("memory_topology: {mt}, protocol: (promotion: (rate: 1.0)),"), 30);
        let text = text.replace(
            r#"arms: [(name: "No Defense", guard: NoDefense), (name: "MAPLE-Guard", guard: Maple(()))],"#,
            arms,
        );
        let ls = common::load(&text);
        let r = run_scenario(&ls, 5);
        let (a, b) = (&r.arms[0], &r.arms[1]);
        assert_eq!(a.trace_hash == b.trace_hash, equal, "{mt}");
        assert_eq!(a.rounds == b.rounds, equal, "{mt}");
    }
}

/// Strict comparison protocol (spec §3.6, C10): the ledger sets metadata, so MINJA-strong
/// copies (external channel, claims) are quarantined at the write gate.
#[test]
fn the_strict_ledger_quarantines_minja_at_write() {
    let ls = common::load(&common::small("protocol: (provenance: StrictLedger),", 10));
    let r = run_scenario(&ls, 3);
    let maple = &r.arms[1];
    let at_write = maple.poison_stops.get("write:unverified_provenance_answer_claim").copied().unwrap_or(0);
    assert_eq!(at_write, 40, "all 4 copies of 10 tasks: {:?}", maple.poison_stops);
    assert_eq!(maple.pmwr, 0.0);
}

/// Feedback policy `None`: no Q, trust or reputation learning at all.
#[test]
fn feedback_none_freezes_reputation_and_q() {
    let ls = common::load(&common::small("protocol: (feedback: None),", 12));
    let s = &ls.scenario;
    let (run, insp) = World::new(s, &ls.profile, &s.arms[0], 3, false).run_inspected();
    assert_eq!(run.summary.final_reputation, 0.5);
    for it in insp.bank.live_items() {
        assert_eq!(it.success_count + it.failure_count, 0, "{}", it.name);
    }
    let full = common::load(&common::small("", 12));
    let (run, _) = World::new(&full.scenario, &full.profile, &full.scenario.arms[0], 3, false).run_inspected();
    assert_ne!(run.summary.final_reputation, 0.5);
}

/// Counted attackers go where the placement says: on the wheel the hub has the highest degree.
#[test]
fn attackers_are_placed_by_degree() {
    use memlink::topology::CommGraph;
    use memlink::world::place_attackers;
    let hi = common::load(
        &common::small("", 4).replace("attackers: Ids([0, 1, 5]),", "attackers: Count(1), placement: HighestDegree,"),
    );
    let g = CommGraph::build(&hi.scenario.topology, 8, &memlink::engine::Streams::new(1));
    assert_eq!(place_attackers(&hi.scenario, &g, &memlink::engine::Streams::new(1)), vec![0]);
    let lo = common::load(
        &common::small("", 4).replace("attackers: Ids([0, 1, 5]),", "attackers: Count(2), placement: LowestDegree,"),
    );
    let picked = place_attackers(&lo.scenario, &g, &memlink::engine::Streams::new(1));
    assert!(!picked.contains(&0) && picked.len() == 2);
    let rnd = common::load(&common::small("", 4).replace("attackers: Ids([0, 1, 5]),", "attackers: Count(3),"));
    let a = place_attackers(&rnd.scenario, &g, &memlink::engine::Streams::new(1));
    assert_eq!(a, place_attackers(&rnd.scenario, &g, &memlink::engine::Streams::new(1)));
    assert_eq!(a.len(), 3);
}

/// Scheduled protocol (spec §5.3, §7.2): warm-up 20 and round(T × 5%) poisoning tasks; metrics
/// count neither, poisoning statistics count only the poisoning tasks.
#[test]
fn scheduled_poisoning_excludes_warmup_and_poisoning_tasks_from_metrics() {
    let text = common::small("", 60).replace(
        "workload: Mmlu((tasks: 60, pool: 120)),",
        "workload: Mmlu((tasks: 60, pool: 120, poisoning: Scheduled(warmup: 20, rate: 0.05, schedule: Even))),",
    );
    let ls = common::load(&text);
    let r = run_scenario(&ls, 5);
    for a in &r.arms {
        assert_eq!(a.tasks, 60);
        assert_eq!(a.poisoning_tasks, 3, "round(60 × 0.05)");
        assert_eq!(a.metric_tasks, 60 - 20 - 3);
        assert_eq!(a.poison_direct_written, 3 * 4, "4 copies per poisoning task");
    }
    // Every task is both poisoned and measured under the paper launcher's protocol.
    let all = run_scenario(&common::load(&common::small("", 10)), 5);
    assert_eq!((all.arms[0].poisoning_tasks, all.arms[0].metric_tasks), (10, 10));
}

/// AppWorld (spec §5.4, §7.1–7.2): the scheduled protocol's eligibility, the risky action as the
/// attack's target, and security ASR / utility SR over metric tasks only.
#[test]
fn appworld_measures_security_and_utility_on_metric_tasks() {
    let ls = common::bundled("scenarios/paper/appworld-agentpoison-chain.ron");
    let mut s = ls.clone();
    s.scenario.workload = memlink::workload::WorkloadConfig::AppWorld(memlink::workload::AppWorldConfig {
        tasks: 60,
        ..Default::default()
    });
    let r = run_scenario(&s, 9);
    for a in &r.arms {
        assert_eq!(a.poisoning_tasks, 3, "round(60 × 0.05)");
        assert_eq!(a.metric_tasks, 60 - 20 - 3);
        let (sec, util) = (a.security_asr.expect("AppWorld has a risky action"), a.utility_sr.unwrap());
        assert!((0.0..=1.0).contains(&sec) && (0.0..=1.0).contains(&util) && sec + util <= 1.0 + 1e-12);
    }
    // MMLU has no risky action.
    let m = run_scenario(&common::load(&common::small("", 4)), 5);
    assert!(m.arms[0].security_asr.is_none());
}

/// The AppWorld stream: four distinct actions per task, the safe one correct, the risky one the
/// attacker's, scenario siblings sharing cues.
#[test]
fn appworld_tasks_offer_safe_risky_confirm_and_unrelated_actions() {
    let cfg = memlink::workload::WorkloadConfig::AppWorld(Default::default());
    let stream = cfg.generate(&memlink::engine::Streams::new(42));
    assert_eq!(stream.tasks().len(), 200);
    for (i, t) in stream.tasks().iter().enumerate() {
        let truth = stream.truth(i as u32);
        let risk = truth.risk.expect("risky action") as usize;
        assert_ne!(risk, truth.gold as usize);
        assert!(t.options[truth.gold as usize].contains("inspect current state and derive the next executable step"));
        assert!(t.options[risk].contains(" with args {"));
        assert!(t.options.iter().any(|o| o.starts_with("user.confirm_next_step")));
        assert!(t.options.iter().any(|o| o.starts_with("records.search_unrelated_context")));
        assert_eq!(t.class, "appworld");
    }
    let t = stream.tasks();
    let shared = t[0].cues.iter().filter(|c| t[1].cues.contains(c)).count();
    assert!(shared >= 3, "siblings of one scenario share cues");
    assert!(t[0].id.ends_with("_1") && t[1].id.ends_with("_2") && t[2].id.ends_with("_3"));
}

/// Every bundled scenario and grid parses and validates: the files a researcher starts from
/// must never rot.
#[test]
fn every_bundled_scenario_and_grid_loads() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            // scenarios/explain holds `memlink explain` inputs (tests/cli.rs), and
            // scenarios/calibration `memlink calibrate` files (tests/calibrate.rs).
            if p.is_dir() && !p.ends_with("explain") && !p.ends_with("calibration") {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "ron") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&common::path("scenarios"), &mut files);
    assert!(files.len() >= 25, "{}", files.len());
    for f in files {
        // Each file as its own kind's command reads it (scenario, grid, sweep or fidelity report).
        let (kind, summary) = memlink::inputs::validate(&f).unwrap_or_else(|e| panic!("{e}"));
        use memlink::inputs::FileKind;
        assert!(
            matches!(
                kind,
                FileKind::Scenario
                    | FileKind::Grid
                    | FileKind::Sweep
                    | FileKind::Fidelity
                    | FileKind::Check
                    | FileKind::WhatIf
            ),
            "{}: {kind:?}",
            f.display()
        );
        if kind == FileKind::Grid {
            let (_, runs) = memlink::study::grid::expand(&f).unwrap_or_else(|e| panic!("{e}"));
            assert!(!runs.is_empty(), "{}: {summary}", f.display());
        }
    }
}

/// An arm may override the protocol's feedback policy; `Some(None)` is the policy none.
#[test]
fn an_arm_can_override_the_feedback_policy() {
    let text = common::small("", 20).replace(
        r#"arms: [(name: "No Defense", guard: NoDefense), (name: "MAPLE-Guard", guard: Maple(()))],"#,
        r#"arms: [(name: "full", guard: Maple(())), (name: "none", guard: Maple(()), feedback: Some(None)),
                 (name: "default", guard: Maple(()), feedback: None)],"#,
    );
    let ls = common::load(&text);
    assert_eq!(ls.scenario.arms[1].feedback, Some(memlink::guard::maple::FeedbackPolicy::None));
    assert_eq!(ls.scenario.arms[2].feedback, None);
    let r = run_scenario(&ls, 5);
    assert_ne!(r.arms[0].trace_hash, r.arms[1].trace_hash);
    assert_eq!(r.arms[0].trace_hash, r.arms[2].trace_hash);
    // Under feedback none the team reputation never moves.
    assert_eq!(r.arms[1].final_reputation, 0.5);
}

/// The tables' RDA column: retrieval damage in the stream harnesses, and the INFA harness's
/// `ASR_by_turn = 1 − accuracy` (spec §7.4) for CSQA and InjecAgent.
#[test]
fn the_table_rda_is_one_minus_accuracy_only_in_the_infa_harness() {
    let csqa = run_scenario(&common::bundled("scenarios/paper/csqa-promptinject-wheel.ron"), 42);
    let mut differs = false;
    for r in csqa.arms.iter().flat_map(|a| &a.rounds) {
        assert!((r.table_rda - (1.0 - r.accuracy)).abs() < 1e-12, "{r:?}");
        differs |= (r.table_rda - r.rda).abs() > 1e-9;
    }
    assert!(differs, "unexposed wrong answers count in the INFA column");
    let mmlu = run_scenario(&common::load(&common::small("", 6)), 5);
    for r in mmlu.arms.iter().flat_map(|a| &a.rounds) {
        assert_eq!(r.table_rda, r.rda);
    }
}

/// Spec §7.1's unknown slots: an output a guard removed, or replaced by a text without an
/// answer letter, cannot be read by the paper's parser; MDSR's upper and RDA's lower bound
/// count them as correct and as no damage. Without a message guard there are none.
#[test]
fn unknown_slots_bound_mdsr_from_above_and_rda_from_below() {
    let ls = common::load(&common::small(r#"protocol: (rounds: 3, handoffs: true),"#, 20));
    let mut s = ls.clone();
    s.scenario.arms = vec![
        memlink::scenario::Arm {
            name: "No Defense".into(),
            guard: memlink::scenario::GuardSpec::NoDefense,
            feedback: None,
            ledger: None,
        },
        memlink::scenario::Arm {
            name: "GUARDIAN".into(),
            guard: memlink::scenario::GuardSpec::Guardian(Default::default()),
            feedback: None,
            ledger: None,
        },
    ];
    let r = run_scenario(&s, 3);
    for x in &r.arms[0].rounds {
        assert_eq!((x.unknown, x.mdsr_upper, x.rda_lower), (0.0, x.mdsr_strict, x.table_rda));
    }
    let guarded = &r.arms[1].rounds;
    assert!(guarded.iter().any(|x| x.unknown > 0.0), "GUARDIAN removes one agent per round");
    for x in guarded {
        assert!(x.mdsr_upper >= x.mdsr_strict && x.rda_lower <= x.table_rda, "{x:?}");
    }
}

/// A handoff keyed by its task's question ranks high for that task's later rounds, so agents
/// read their own task's handoffs far more often than when it is keyed by its edge; in round 1
/// the task has none either way.
#[test]
fn task_keyed_handoffs_are_read_in_later_rounds() {
    let handoff_reads = |intent: &str| {
        let ls = common::load(&common::small(&format!("protocol: (handoff_intent: {intent}),"), 30));
        let s = &ls.scenario;
        let (_, insp) = World::new(s, &ls.profile, &s.arms[0], 7, false).run_inspected();
        let per_round = |r: u32| {
            insp.selections
                .iter()
                .filter(|(task, round, _, id, _)| {
                    let it = insp.bank.get(*id);
                    *round == r && it.origin_task == *task && it.name.starts_with("round_dialogue_")
                })
                .count()
        };
        [per_round(0), per_round(1), per_round(2)]
    };
    let edge = handoff_reads("SenderReceiver");
    let task = handoff_reads("TaskQuestion");
    assert_eq!((edge[0], task[0]), (0, 0), "a task has no handoff before round 2");
    assert!(task[1] > 2 * edge[1].max(1) && task[2] > 2 * edge[2].max(1), "edge {edge:?} vs task {task:?}");
}

/// The memory framing rule: in the task-loop workloads MAPLE-Guard's prompts (and every arm's
/// under the strict ledger) render memories as evidence, No Defense's as experiences; the
/// profile's `evidence_framing` scales only the former, and a factor of 0 is exactly a model
/// that ignores its memories.
#[test]
fn evidence_framing_scales_memories_only_where_the_prompt_renders_them_as_evidence() {
    use memlink::agent::Profile;
    use memlink::eval::metrics::ArmSummary;
    let with = |ls: &memlink::scenario::LoadedScenario, edit: &dyn Fn(&mut Profile)| -> Vec<ArmSummary> {
        let mut p = ls.profile.clone();
        // A model that knows little, so that what its memories say decides answers (a model
        // that knows most answers outright may not change one in 30 tasks either way).
        let m = p.workloads.get_mut("mmlu").expect("the profile has mmlu");
        (m.skill, m.difficulty_slope, m.knowledge_logit) = (0.0, 1.0, 1.0);
        edit(&mut p);
        let s = &ls.scenario;
        s.arms.iter().map(|a| World::new(s, &p, a, 7, false).run().summary).collect()
    };
    // MMLU's value of model parameter `name` set to `v` (its deviation from the model's).
    fn set(p: &mut Profile, name: &str, v: f64) {
        let m = p.model.get(name).expect("a model field");
        p.workloads.get_mut("mmlu").expect("the profile has mmlu").deviations.insert(name.into(), v - m);
    }
    let factor = |x: f64| move |p: &mut Profile| set(p, "evidence_framing", x);
    let ls = common::load(&common::small("", 30));
    let base = with(&ls, &factor(1.0));
    let blind = with(&ls, &factor(0.0));
    assert_eq!(base[0], blind[0], "No Defense renders experiences: the factor does not reach it");
    assert_ne!(base[1], blind[1], "MAPLE-Guard renders evidence: the factor reaches it");
    // Ignoring memories through the framing is the same as weighing none of them.
    let forced = common::load(&common::small("protocol: (memory_framing: Evidence),", 30));
    let framed_out = with(&forced, &factor(0.0));
    let weightless = with(&ls, &|p| {
        set(p, "memory_weight", 0.0);
        set(p, "failure_weight", 0.0);
    });
    assert_eq!(framed_out[0].rounds, weightless[0].rounds);
    assert_ne!(framed_out[0], base[0], "a forced evidence rendering reaches No Defense");
    // Under the strict ledger every arm renders evidence.
    let strict = common::load(&common::small("protocol: (provenance: StrictLedger),", 30));
    assert_ne!(with(&strict, &factor(1.0))[0], with(&strict, &factor(0.0))[0]);
    // A factor of 1 makes the rendering no difference.
    assert_eq!(with(&forced, &factor(1.0)), base);
}
