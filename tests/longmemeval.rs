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

/// The rerank's overlap score counts each question term's non-overlapping occurrences in the
/// lower-cased text (at most 3), weighted: 1, +1 for a term with a digit, +0.35 for one of 8
/// characters or more (`run_longmemeval.py`'s query-term score). Worked by hand.
#[test]
fn the_overlap_score_counts_non_overlapping_occurrences_of_each_term() {
    use memlink::workload::query_overlap_score;
    // Terms: "bicycles" (1.35), "2023" (2.0), "aaaa" (1.0); "where" and "did" are no terms.
    let q = "Where did I buy the bicycles in 2023, aaaa?";
    // "aaaaaaaaa" holds "aaaa" twice without overlap (str::matches, not a sliding window).
    assert_eq!(query_overlap_score(q, "aaaaaaaaa"), 2.0);
    assert_eq!(query_overlap_score(q, "Two BICYCLES bought in 2023 and 2023."), 1.35 + 2.0 * 2.0);
    // At most three hits count.
    assert_eq!(query_overlap_score(q, "bicycles bicycles bicycles bicycles"), 1.35 * 3.0);
    assert_eq!(query_overlap_score(q, "nothing here"), 0.0);
}

fn with_confusers(
    path: &str,
    tasks: u32,
    confusers: memlink::workload::Confusers,
) -> memlink::scenario::LoadedScenario {
    let mut ls = common::bundled(path);
    if let memlink::workload::WorkloadConfig::LongMemEval(c) = &mut ls.scenario.workload {
        c.tasks = tasks;
        c.confusers = confusers;
    }
    ls
}

/// `confusers: Unnamed` keeps every task, truth and haystack round where it was and changes
/// only what a confuser round names: no round but the evidence names a candidate answer.
#[test]
fn unnamed_confusers_are_the_same_rounds_naming_no_candidate() {
    use memlink::workload::Confusers;
    let base = "scenarios/ablations/confusers-longmemeval-named.ron";
    let named =
        with_confusers(base, 30, Confusers::Named).scenario.workload.generate(&memlink::engine::Streams::new(9));
    let unnamed =
        with_confusers(base, 30, Confusers::Unnamed).scenario.workload.generate(&memlink::engine::Streams::new(9));
    let mut named_confusers = 0;
    for i in 0..30u32 {
        let (a, b) = (&named.tasks()[i as usize], &unnamed.tasks()[i as usize]);
        assert_eq!((&a.id, &a.options, named.truth(i).gold), (&b.id, &b.options, unnamed.truth(i).gold));
        let gold = &a.options[named.truth(i).gold as usize];
        let wrong: Vec<&String> = a.options.iter().filter(|o| *o != gold).collect();
        let (ha, hb) = (named.haystack(i), unnamed.haystack(i));
        assert_eq!(ha.len(), hb.len());
        for (x, y) in ha.iter().zip(hb) {
            assert_eq!((x.session, x.round, x.query_matching), (y.session, y.round, y.query_matching));
            let confuser = x.text.contains("My cousin mentioned");
            assert_eq!(confuser, y.text.contains("My cousin mentioned"));
            if confuser {
                named_confusers += usize::from(wrong.iter().any(|w| x.text.contains(w.as_str())));
                assert!(!wrong.iter().any(|w| y.text.contains(w.as_str())), "task {i}: {}", y.text);
            } else {
                assert_eq!(x.text, y.text);
            }
        }
    }
    assert!(named_confusers >= 30, "every task has a confuser that names a wrong candidate: {named_confusers}");
}

/// The mechanism behind MAPLE-Guard's attack-free LongMemEval deficit (docs/calibration.md):
/// its retrieval pool and the reference's overlap rerank bring confuser rounds into far more
/// of its prompts than No Defense's backend top-16 does, and with the confusers naming no
/// candidate the deficit turns into a gain.
#[test]
fn maple_guards_pool_brings_the_confusers_into_its_prompts() {
    use memlink::workload::Confusers;
    let base = "scenarios/ablations/confusers-longmemeval-named.ron";
    let mut mdsr = Vec::new();
    for confusers in [Confusers::Named, Confusers::Unnamed] {
        let ls = with_confusers(base, 40, confusers);
        assert_eq!(ls.scenario.attackers, memlink::scenario::Attackers::Ids(vec![0, 1, 5]));
        let mut shares = Vec::new();
        for arm in &ls.scenario.arms {
            let (run, insp) = World::new(&ls.scenario, &ls.profile, arm, 3, false).run_inspected();
            let mut prompts = std::collections::BTreeSet::new();
            let mut with_confuser = std::collections::BTreeSet::new();
            for (task, round, reader, id, _, _) in &insp.evidence {
                if *round == 2 && ![0, 1, 5].contains(reader) {
                    prompts.insert((*task, *reader));
                    if insp.bank.get(*id).experience.contains("My cousin mentioned") {
                        with_confuser.insert((*task, *reader));
                    }
                }
            }
            shares.push(with_confuser.len() as f64 / prompts.len() as f64);
            mdsr.push(run.summary.rounds[2].mdsr_strict);
        }
        assert!(shares[1] > 2.0 * shares[0] && shares[1] > 0.5, "{confusers:?}: No Defense, MAPLE-Guard {shares:?}");
    }
    // [Named ND, Named MAPLE, Unnamed ND, Unnamed MAPLE]
    assert!(mdsr[1] + 0.1 < mdsr[0], "named: MAPLE-Guard below No Defense {mdsr:?}");
    assert!(mdsr[3] >= mdsr[2] && mdsr[3] > mdsr[1] + 0.2, "unnamed: the deficit gone {mdsr:?}");
}

/// `reported_weight` scales the pull of a candidate named in someone else's words: at 1 (every
/// committed profile) the profile serialises as before, so every record key stays (and
/// `reports/regenerate --check` shows every result byte unchanged); at 0 the confusers stop
/// pulling, and MAPLE-Guard's deficit turns as it does with unnamed confusers.
#[test]
fn the_reported_weight_scales_only_the_confusers_pull() {
    use memlink::workload::Confusers;
    let ls = with_confusers("scenarios/ablations/confusers-longmemeval-named.ron", 40, Confusers::Named);
    assert_eq!(ls.profile.model.reported_weight, 1.0);
    let json = serde_json::to_string(&ls.profile).unwrap();
    assert!(!json.contains("reported_weight"), "the neutral value is not serialised");
    let mut zero = ls.profile.clone();
    zero.model.reported_weight = 0.0;
    assert!(serde_json::to_string(&zero).unwrap().contains("\"reported_weight\":0.0"));
    let mut mdsr = Vec::new();
    for profile in [&ls.profile, &zero] {
        for arm in &ls.scenario.arms {
            let run = World::new(&ls.scenario, profile, arm, 3, false).run();
            mdsr.push(run.summary.rounds[2].mdsr_strict);
        }
    }
    // [weight 1: ND, MAPLE; weight 0: ND, MAPLE]
    assert!(mdsr[1] + 0.1 < mdsr[0], "{mdsr:?}");
    assert!(mdsr[3] >= mdsr[2] && mdsr[3] > mdsr[1] + 0.2, "{mdsr:?}");
}
