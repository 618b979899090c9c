//! Determinism as a feature: same scenario and seed give byte-identical results, whatever the
//! thread count, in lockstep and async timing.

mod common;

use memlink::run::{check_determinism, run_scenario};
use memlink::world::{World, run_arm};

#[test]
fn same_seed_same_bytes_and_different_seed_different_bytes() {
    let ls = common::load(&common::small("", 12));
    let a = run_scenario(&ls, 7).to_json();
    let b = run_scenario(&ls, 7).to_json();
    assert_eq!(a, b);
    let c = run_scenario(&ls, 8).to_json();
    assert_ne!(a, c, "a different seed must change the run");
}

#[test]
fn one_and_two_threads_give_identical_bytes() {
    let ls = common::load(&common::small("", 12));
    let run = |n: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap();
        pool.install(|| run_scenario(&ls, 7).to_json())
    };
    assert_eq!(run(1), run(2));
}

#[test]
fn check_determinism_passes_on_the_quickstart() {
    let ls = common::bundled("scenarios/quickstart.ron");
    let report = check_determinism(&ls, ls.scenario.seed).expect("deterministic");
    assert_eq!(report.runs.len(), 4);
}

#[test]
fn async_timing_is_deterministic_and_differs_from_lockstep() {
    let timing = "timing: Async(llm: LogNormal(800.0, 0.5), message: Uniform(5, 50)),";
    let asy = common::load(&common::small(timing, 12));
    let lock = common::load(&common::small("", 12));
    let a1 = run_scenario(&asy, 7);
    let a2 = run_scenario(&asy, 7);
    assert_eq!(a1.to_json(), a2.to_json());
    let l = run_scenario(&lock, 7);
    assert_ne!(a1.arms[0].trace_hash, l.arms[0].trace_hash);
    assert!(a1.arms[0].end_time > l.arms[0].end_time, "latencies advance the clock");
}

#[test]
fn the_trace_log_matches_the_hash_and_time_never_decreases() {
    for timing in ["", "timing: Async(llm: Uniform(100, 900), message: Fixed(20)),"] {
        let ls = common::load(&common::small(timing, 8));
        let s = &ls.scenario;
        let arm = &s.arms[1];
        let logged = run_arm(s, &ls.profile, arm, 3, true);
        let plain = run_arm(s, &ls.profile, arm, 3, false);
        let log = logged.trace.expect("log");
        assert_eq!(format!("{:016x}", log.last().unwrap().hash), plain.summary.trace_hash);
        assert!(log.windows(2).all(|w| w[0].time <= w[1].time));
        let (_, insp) = World::new(s, &ls.profile, arm, 3, false).run_inspected();
        assert!(insp.times.windows(2).all(|w| w[0] <= w[1]), "simulated time never decreases");
    }
}

/// Every paper setting's Table-2 base with its task count reduced (to keep debug runs quick).
fn reduced_settings() -> Vec<(&'static str, memlink::scenario::LoadedScenario)> {
    [
        ("scenarios/paper/table2/mmlu-minja.ron", 8),
        ("scenarios/paper/table2/longmemeval-memorygraft.ron", 4),
        ("scenarios/paper/table2/appworld-agentpoison.ron", 30),
        ("scenarios/paper/table2/csqa-promptinject.ron", 4),
        ("scenarios/paper/table2/injectagent-toolattack.ron", 6),
    ]
    .into_iter()
    .map(|(path, tasks)| {
        let mut ls = common::bundled(path);
        use memlink::workload::WorkloadConfig as W;
        match &mut ls.scenario.workload {
            W::Mmlu(c) | W::Csqa(c) => c.tasks = tasks,
            W::LongMemEval(c) => c.tasks = tasks,
            W::AppWorld(c) => c.tasks = tasks,
            W::InjectAgent(c) => c.tasks = tasks,
        }
        (path, ls)
    })
    .collect()
}

/// Every setting of the paper, every guard: the same seed gives the same bytes, twice and in 1-
/// and 2-thread pools (reduced task counts keep it quick).
#[test]
fn every_setting_and_guard_is_deterministic() {
    for (path, ls) in reduced_settings() {
        let report = check_determinism(&ls, 11).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(report.runs.len(), 4, "{path}");
        assert_eq!(ls.scenario.arms.len(), 9);
    }
}

/// `run_scenario` generates the task stream once and its arms share it: each arm's summary is
/// the one the arm gets alone, generating its own.
#[test]
fn arms_sharing_a_task_stream_run_as_alone() {
    for (path, ls) in reduced_settings() {
        let shared = run_scenario(&ls, 5);
        for (arm, summary) in ls.scenario.arms.iter().zip(&shared.arms) {
            let alone = run_arm(&ls.scenario, &ls.profile, arm, 5, false).summary;
            assert_eq!(
                serde_json::to_string(&alone).unwrap(),
                serde_json::to_string(summary).unwrap(),
                "{path}: {}",
                arm.name
            );
        }
    }
}

/// Arms that each fit the machine but not side by side wait for each other: with room for one
/// and a half arms, two threads never hold two arms at once, and the results are the bytes of
/// an unbounded run. (With room for two, they do run side by side: the check can fail.)
#[test]
fn a_memory_budget_serialises_arms_that_do_not_fit_together() {
    use memlink::run::run_scenario_within;
    use memlink::scenario::estimate::{Estimate, MemoryBudget};
    let ls = common::load(&common::small("", 12));
    let bytes = Estimate::of(&ls.scenario).bytes;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let tight = MemoryBudget::new(1.5 * bytes);
    let bounded = pool.install(|| run_scenario_within(&ls, 7, &tight).to_json());
    assert!(tight.peak() <= 1.5 * bytes, "peak {} of a budget of {}", tight.peak(), 1.5 * bytes);
    assert_eq!(tight.peak(), bytes, "one arm at a time");
    let unbounded = pool.install(|| run_scenario(&ls, 7).to_json());
    assert_eq!(bounded, unbounded);
    // Room for every arm: on two threads some arms overlap (the budget does not serialise).
    let roomy = MemoryBudget::new(100.0 * bytes);
    for _ in 0..5 {
        pool.install(|| run_scenario_within(&ls, 7, &roomy));
    }
    assert!(roomy.peak() > bytes, "two arms side by side at some point");
}

/// A lockstep round's calls are planned together, on several threads once the team is large
/// enough, and applied in agent order. The bytes (summaries, with the trace hash over every
/// event, block and selection in order) are those of calls made one at a time, which a
/// recording backbone forces, for 1 to 4 threads. The settings cover group-ranked stores
/// (MMLU, a shared store), keyed round memories (CSQA) and a per-task haystack whose keys are
/// tokenised as they are first retrieved (LongMemEval), each with more agents than one worker
/// plans. It fails if a call reads what an earlier call of its round wrote, or if planning
/// depends on which worker plans which agent.
#[test]
fn planned_rounds_give_the_bytes_of_calls_made_one_at_a_time() {
    use memlink::agent::Recording;
    let mmlu = common::load(
        r#"(
    name: "wide",
    seed: 3,
    agents: 200,
    attackers: Count(20),
    placement: HighestDegree,
    topology: BarabasiAlbert(2),
    workload: Mmlu((tasks: 4, pool: 100)),
    attack: Minja(()),
    protocol: (rounds: 3, top_k: 3, handoffs: true),
    backbone: "qwen3.5-122b-a10b",
    arms: [
        (name: "No Defense", guard: NoDefense),
        (name: "MAPLE-Guard", guard: Maple(())),
        (name: "A-MemGuard", guard: AMemGuard(())),
    ],
)"#,
    );
    let mut settings = vec![("wide MMLU".to_string(), mmlu)];
    for (path, mut ls) in reduced_settings() {
        if path.contains("csqa") || path.contains("longmemeval") {
            ls.scenario.agents = 140;
            ls.scenario.topology = memlink::topology::Topology::BarabasiAlbert(2);
            ls.scenario.arms.retain(|a| a.name == "No Defense" || a.name == "MAPLE-Guard");
            settings.push((path.to_string(), ls));
        }
    }
    for (name, ls) in &settings {
        let s = &ls.scenario;
        for arm in &s.arms {
            let one_at_a_time = World::new(s, &ls.profile, arm, 3, false)
                .with_backbone(|b| Box::new(Recording::new(b).0))
                .run()
                .summary;
            let want = serde_json::to_string(&one_at_a_time).unwrap();
            for threads in 1..=4 {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let got = pool.install(|| World::new(s, &ls.profile, arm, 3, false).run().summary);
                assert_eq!(serde_json::to_string(&got).unwrap(), want, "{name}, {}, {threads} threads", arm.name);
            }
        }
    }
}
