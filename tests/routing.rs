//! Routing: which memories reach the gates and the top-k, as the reference harness routes them
//! (`memory_backend.retrieve_entries`, `comparison_runtime.observe_ingress` / `route`,
//! `run_longmemeval.rerank_trusted_haystack_candidates`, `run_mmlu.create_team_promotion_memory`),
//! and the switches that keep memlink's earlier routing for comparison.

mod common;

use memlink::memory::{MemoryItem, Writer};
use memlink::scenario::{Arm, CandidatePool, LedgerInputs, LoadedScenario};
use memlink::workload::{HaystackLayout, WorkloadConfig};
use memlink::world::{Inspection, World};

fn with_tasks(mut ls: LoadedScenario, tasks: u32) -> LoadedScenario {
    match &mut ls.scenario.workload {
        WorkloadConfig::Mmlu(c) | WorkloadConfig::Csqa(c) => c.tasks = tasks,
        WorkloadConfig::AppWorld(c) => c.tasks = tasks,
        WorkloadConfig::InjectAgent(c) => c.tasks = tasks,
        WorkloadConfig::LongMemEval(c) => c.tasks = tasks,
    }
    ls
}

fn arm<'a>(ls: &'a LoadedScenario, name: &str) -> &'a Arm {
    ls.scenario.arms.iter().find(|a| a.name == name).expect("arm")
}

fn inspect(ls: &LoadedScenario, arm_name: &str) -> Inspection {
    World::new(&ls.scenario, &ls.profile, arm(ls, arm_name), 5, false).run_inspected().1
}

/// Candidates handed to scoring, over the whole run (each retrieval adds its pool).
fn scored(insp: &Inspection) -> u64 {
    insp.bank.live_items().map(|it| u64::from(it.retrieved_count)).sum()
}

fn retrievals(insp: &Inspection) -> u64 {
    let mut keys: Vec<(u32, u32, u32)> = insp.selections.iter().map(|s| (s.0, s.1, s.2)).collect();
    keys.dedup();
    keys.len() as u64
}

/// Candidates handed to scoring per retrieval, with the bundled routing and with the union pool.
fn pool_sizes(path: &str, tasks: u32, arm: &str) -> (f64, f64) {
    let ls = with_tasks(common::bundled(path), tasks);
    let per = |insp: &Inspection| scored(insp) as f64 / retrievals(insp) as f64;
    let mut old = ls.clone();
    old.scenario.protocol.routing.candidate_pool = CandidatePool::UnionResorted;
    (per(&inspect(&ls, arm)), per(&inspect(&old, arm)))
}

/// Under the strict ledger every arm receives the backend's candidates in backend order, 12 per
/// store, where the baselines used to get the "selected" three per store.
#[test]
fn strict_arms_receive_twelve_candidates_per_store() {
    let (a, b) = pool_sizes("scenarios/paper/rounds/mmlu-minja.ron", 12, "No Defense");
    assert!(b <= 6.0, "the selected set holds at most 3 per store: {b}");
    assert!(a > 6.0 && a <= 24.0, "backend order gives up to 12 per store: {a}");
}

/// Non-strict MAPLE-Guard takes the first 12 of each store by its pre-score (private, then
/// shared), not the best 12 of both stores together.
#[test]
fn maple_receives_twelve_per_store() {
    let (a, b) = pool_sizes("scenarios/paper/table2/mmlu-minja.ron", 40, "MAPLE-Guard");
    assert!(b <= 12.0, "the union pool holds 12: {b}");
    assert!(a > 12.0 && a <= 24.0, "12 per store: {a}");
}

/// A strict-ledger memory depends on everything its writer read during the task, not only on
/// its last round: an outcome memory's lineage names the writer's round-1 reads too.
#[test]
fn strict_outcome_memories_depend_on_every_round_read() {
    let ls = with_tasks(common::bundled("scenarios/paper/rounds/mmlu-minja.ron"), 10);
    let lineage_covers_all_rounds = |ls: &LoadedScenario| {
        let insp = inspect(ls, "No Defense");
        let name = |id: u32| insp.bank.get(id).name.clone();
        let mut covered = 0;
        let mut total = 0;
        for it in
            insp.bank.live_items().filter(|it| it.name.starts_with("benign_stream_") && !it.name.contains("_team_"))
        {
            let Writer::Agent(a) = it.writer else { continue };
            let read: Vec<String> =
                insp.selections.iter().filter(|s| s.0 == it.origin_task && s.2 == a).map(|s| name(s.3)).collect();
            total += 1;
            if read.iter().all(|r| it.parents().iter().any(|p| **p == **r)) {
                covered += 1;
            }
        }
        (covered, total)
    };
    let (covered, total) = lineage_covers_all_rounds(&ls);
    assert!(total > 0 && covered == total, "{covered}/{total}");
    let mut old = ls.clone();
    old.scenario.protocol.routing.ledger_inputs = LedgerInputs::LastRound;
    let (covered, total) = lineage_covers_all_rounds(&old);
    assert!(covered < total, "the last round alone misses earlier reads: {covered}/{total}");
}

/// Taint reaches a strict memory through what its writer received over routed messages, so
/// the reference ledger taints at least as many memories as the last-round rule, and more.
#[test]
fn received_labels_spread_taint() {
    // AppWorld's strict matrix poisons few tasks, so taint does not saturate the stores.
    let ls = with_tasks(common::bundled("scenarios/paper/rounds/appworld-agentpoison.ron"), 60);
    let tainted = |ls: &LoadedScenario| {
        let insp = inspect(ls, "No Defense");
        insp.bank
            .live_items()
            .filter(|it| it.writer != Writer::External && it.taint != memlink::memory::Taint::Clean)
            .count()
    };
    let mut old = ls.clone();
    old.scenario.protocol.routing.ledger_inputs = LedgerInputs::LastRound;
    let (now, before) = (tainted(&ls), tainted(&old));
    assert!(now > before, "received labels taint more agent memories: {now} vs {before}");
}

/// The promotion text names the task class and at most five retrieved ids; the lineage keeps
/// eight, in sorted order, from every round.
#[test]
fn promotion_text_names_the_class_and_five_ids() {
    let mut ls = with_tasks(common::bundled("scenarios/paper/table2/appworld-agentpoison.ron"), 60);
    ls.scenario.protocol.promotion.rate = 1.0;
    let insp = inspect(&ls, "No Defense");
    let promoted: Vec<&MemoryItem> =
        insp.bank.live_items().filter(|it| it.memory_type == "team_promoted_agent_experience").collect();
    assert!(!promoted.is_empty());
    for it in promoted {
        assert!(it.experience.contains("similar APPWORLD tasks"), "{}", it.experience);
        assert!(!it.experience.contains("MMLU"));
        let listed = it.experience.split("memories [").nth(1).and_then(|s| s.split(']').next()).unwrap_or("");
        assert!(listed == "none" || listed.split(", ").count() <= 5, "{listed}");
        let ids: Vec<&str> = it.parents().iter().skip(3).map(|p| &**p).collect();
        assert!(ids.len() <= 8 && ids.windows(2).all(|w| w[0] <= w[1]), "{ids:?}");
    }
}

/// LongMemEval under the reference layout: one intent for a task's haystack, Q 0.97 on every
/// unit, the fact key as retrieval key, and the runner's rerank putting the history units that
/// overlap the query ahead of everything else in every prompt.
#[test]
fn haystack_units_share_an_intent_and_lead_the_prompt() {
    let ls = with_tasks(common::bundled("scenarios/paper/table2/longmemeval-memorygraft.ron"), 6);
    let insp = inspect(&ls, "No Defense");
    let hay: Vec<&MemoryItem> = insp.bank.live_items().filter(|it| it.writer == Writer::User).collect();
    assert!(!hay.is_empty());
    for t in 0..6 {
        let units: Vec<&&MemoryItem> = hay.iter().filter(|it| it.origin_task == t).collect();
        assert!(units.len() > 16, "more history than a prompt holds");
        assert!(units.windows(2).all(|w| w[0].intent == w[1].intent), "one intent per task");
        assert!(units[0].intent.starts_with("LongMemEval user history round relevant to question: "));
        assert!(units.iter().all(|u| u.utility_q == 0.97 && u.retrieval_key.is_some()));
    }
    let mut prompts = 0;
    let mut run: Option<(u32, u32, u32)> = None;
    let mut seen_other = false;
    for s in &insp.selections {
        let key = (s.0, s.1, s.2);
        if run != Some(key) {
            run = Some(key);
            seen_other = false;
            prompts += 1;
        }
        let user = insp.bank.get(s.3).writer == Writer::User;
        assert!(!(user && seen_other), "a history unit after another memory in prompt {key:?}");
        seen_other |= !user;
    }
    assert!(prompts > 0);
    // The layout before the fidelity pass keeps per-unit intents.
    let mut old = ls.clone();
    if let WorkloadConfig::LongMemEval(c) = &mut old.scenario.workload {
        c.layout = HaystackLayout::PerUnit;
    }
    let insp = inspect(&old, "No Defense");
    let hay: Vec<&MemoryItem> =
        insp.bank.live_items().filter(|it| it.writer == Writer::User && it.origin_task == 0).collect();
    assert!(hay.windows(2).any(|w| w[0].intent != w[1].intent));
}

/// The similarity model's defaults: unrelated pairs as the reference's MemRL normalisation
/// records its embedder (mean 0.186, sd 0.094), and a related-minus-unrelated gap inside the
/// 0.44–0.75 that published measurements of sentence embedders report.
#[test]
fn similarity_defaults_match_the_recorded_and_published_figures() {
    use memlink::embed::SimilarityModel;
    use memlink::workload::McqConfig;
    let mean_sd = |xs: &[f64]| {
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        (m, (xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64).sqrt())
    };
    for w in [
        WorkloadConfig::Mmlu(McqConfig { tasks: 150, ..McqConfig::default() }),
        WorkloadConfig::AppWorld(Default::default()),
    ] {
        let (related, siblings, unrelated) =
            memlink::study::fidelity::measure_similarity(&w, &SimilarityModel::default());
        let ((r, _), (s, _), (u, su)) = (mean_sd(&related), mean_sd(&siblings), mean_sd(&unrelated));
        assert!((u - 0.186).abs() < 0.03 && (su - 0.094).abs() < 0.03, "{}: unrelated {u} ± {su}", w.class());
        assert!((0.44..=0.75).contains(&(r - u)), "{}: contrast {}", w.class(), r - u);
        assert!(u < s && s <= r, "{}: siblings sit between ({u}, {s}, {r})", w.class());
        // The earlier contrast is below the published range on AppWorld.
        let (related, _, unrelated) =
            memlink::study::fidelity::measure_similarity(&w, &SimilarityModel::before_fidelity());
        let gap = mean_sd(&related).0 - mean_sd(&unrelated).0;
        assert!(gap < r - u, "{}: lower contrast before ({gap})", w.class());
    }
}
