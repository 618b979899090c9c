//! Property tests of MAPLE-Guard's gate invariants over randomly generated memory items,
//! queries and readers, and of the engine's ordering contract.

use memlink::engine::{EventQueue, Time};
use memlink::guard::maple::{
    Action, MapleConfig, MapleVariant, QueryContext, Reader, broker_decision, commit_gates, lifecycle_risk,
    promotion_gate, read_score, write_gate,
};
use memlink::memory::{MemoryTopology, Status, Taint};
use memlink::study::explain::{build_item, metadata_step};
use memlink::text::{Lexicon, analyze_query};
use proptest::prelude::*;

use memlink::testkit::props::{self, item as input, text};

fn in01(x: f64) -> bool {
    (0.0..=1.0).contains(&x)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every signal and the total risk lie in [0, 1], with or without a query.
    #[test]
    fn signals_and_total_are_in_unit_interval(inp in input(), query in text(), sim in -1.0f64..1.0, share in 0.0f64..1.0) {
        let cfg = MapleConfig::default();
        let mut lex = Lexicon::new();
        let mut item = build_item(&inp, &mut lex);
        metadata_step(&mut item, &inp, &cfg);
        prop_assert!(in01(item.trust) && in01(item.hazard));
        let q = analyze_query(&query, &mut lex);
        for r in [lifecycle_risk(&item, None, share, &cfg), lifecycle_risk(&item, Some(QueryContext { query: &q, sim }), share, &cfg)] {
            for v in [r.total, r.provenance, r.lineage, r.self_claim_success, r.instruction_like, r.answer_binding,
                      r.trigger_sensitivity, r.cluster_dominance, r.agent_trust] {
                prop_assert!(in01(v), "{r:?}");
            }
        }
    }

    /// A rewrite never raises Q or trust (and never lowers hazard).
    #[test]
    fn a_rewrite_never_raises_q_or_trust(inp in input(), fix in any::<bool>()) {
        let cfg = MapleConfig { fix_forbidden_case_quirk: fix, ..MapleConfig::default() };
        let mut lex = Lexicon::new();
        let mut item = build_item(&inp, &mut lex);
        metadata_step(&mut item, &inp, &cfg);
        let before = item.clone();
        let v = commit_gates(&mut item, inp.scope, &cfg);
        if v.rewritten {
            prop_assert!(item.utility_q <= before.utility_q);
            prop_assert!(item.trust <= before.trust);
            prop_assert!(item.hazard >= before.hazard);
            prop_assert!(item.taint != Taint::Clean);
        }
    }

    /// Nothing quarantined or rejected leaves the commit active, so it can never be promoted
    /// or retrieved; the read firewall blocks any inactive item.
    #[test]
    fn stopped_items_are_inactive_and_blocked_at_read(inp in input(), query in text(), sim in -1.0f64..1.0) {
        let cfg = MapleConfig::default();
        let mut lex = Lexicon::new();
        let mut item = build_item(&inp, &mut lex);
        metadata_step(&mut item, &inp, &cfg);
        let v = commit_gates(&mut item, inp.scope, &cfg);
        if v.stopped_by().is_some() {
            prop_assert!(item.status != Status::Active);
            let q = analyze_query(&query, &mut lex);
            let r = read_score(&item, &q, sim, 0.0, Reader { agent: 0, task_class: "mmlu" }, &cfg);
            prop_assert_eq!(r.decision.action, Action::Block);
            prop_assert_eq!(r.decision.reason, "read_firewall_inactive_memory");
        } else {
            prop_assert_eq!(item.status, Status::Active);
        }
    }

    /// Under brokered (or role-isolated) memory an item outside a reader's ACL never passes the
    /// broker, with either class semantics.
    #[test]
    fn the_broker_enforces_acls(inp in input(), reader in 0u32..8, fix in any::<bool>(), role in any::<bool>()) {
        let cfg = MapleConfig { fix_broker_default_class: fix, ..MapleConfig::default() };
        let mut lex = Lexicon::new();
        let item = build_item(&inp, &mut lex);
        let topo = if role { MemoryTopology::RoleIsolated } else { MemoryTopology::BrokeredShared };
        let d = broker_decision(&item, Reader { agent: reader, task_class: "mmlu" }, topo, &cfg);
        if !item.allowed_agents.is_empty() && !item.allowed_agents.contains(&reader) {
            prop_assert_eq!(d.action, Action::Block);
        }
    }

    /// Turning a gate off never changes another gate's decision on the same item.
    #[test]
    fn gate_ablations_do_not_touch_other_gates(inp in input(), query in text(), sim in -1.0f64..1.0, reader in 0u32..8, share in 0.0f64..1.0) {
        let full = MapleConfig::default();
        let mut lex = Lexicon::new();
        let mut item = build_item(&inp, &mut lex);
        metadata_step(&mut item, &inp, &full);
        let q = analyze_query(&query, &mut lex);
        let rd = Reader { agent: reader, task_class: "mmlu" };
        let r = lifecycle_risk(&item, None, 0.0, &full);
        for variant in [MapleVariant::NoWrite, MapleVariant::NoRetrieval, MapleVariant::NoPromotion, MapleVariant::NoCrossAgent] {
            let abl = MapleConfig { variant, ..MapleConfig::default() };
            if variant.write_gate() {
                prop_assert_eq!(write_gate(&item, &r, &abl), write_gate(&item, &r, &full));
            }
            if variant.promotion_gate() {
                prop_assert_eq!(promotion_gate(&item, inp.scope, &r, &abl), promotion_gate(&item, inp.scope, &r, &full));
            }
            if variant.retrieval_gate() {
                let (a, b) = (read_score(&item, &q, sim, share, rd, &abl), read_score(&item, &q, sim, share, rd, &full));
                prop_assert_eq!(a.decision, b.decision);
                prop_assert_eq!(a.score.to_bits(), b.score.to_bits());
            }
            if variant.cross_agent_gate() {
                for topo in [MemoryTopology::BrokeredShared, MemoryTopology::GlobalShared] {
                    prop_assert_eq!(broker_decision(&item, rd, topo, &abl), broker_decision(&item, rd, topo, &full));
                }
            }
            // And the whole commit: the write decision is the same whether promotion is on or off.
            if variant == MapleVariant::NoPromotion {
                let (mut a, mut b) = (item.clone(), item.clone());
                prop_assert_eq!(commit_gates(&mut a, inp.scope, &abl).write, commit_gates(&mut b, inp.scope, &full).write);
            }
        }
    }

    /// Raising hazard never turns a block into an allow (write, promotion or read), under
    /// every MAPLE variant and quirk setting.
    #[test]
    fn raising_hazard_never_unblocks(inp in input(), query in text(), sim in -1.0f64..1.0, bump in 0.0f64..1.0, cfg in props::maple_config()) {
        let r = props::hazard_monotone(&inp, &query, sim, bump, &cfg);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// Lowering trust never turns a block into an allow.
    #[test]
    fn lowering_trust_never_unblocks(inp in input(), query in text(), sim in -1.0f64..1.0, drop in 0.0f64..1.0, cfg in props::maple_config()) {
        let r = props::trust_monotone(&inp, &query, sim, drop, &cfg);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// The library's rewrite property under every variant and quirk setting.
    #[test]
    fn library_rewrite_property(inp in input(), cfg in props::maple_config()) {
        let r = props::rewrite_never_raises(&inp, &cfg);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// The library's ablation property (the same as `gate_ablations_do_not_touch_other_gates`,
    /// through the public API).
    #[test]
    fn library_ablation_property(inp in input(), query in text(), sim in -1.0f64..1.0, reader in 0u32..8, share in 0.0f64..1.0) {
        let r = props::ablations_independent(&inp, &query, sim, reader, share);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// A clean item from a trusted source without risky wording is never stopped at the
    /// commit and never blocked at read for a risk reason.
    #[test]
    fn no_overblocking_of_clean_trusted_items(inp in props::clean_item(), query in text(), sim in 0.0f64..1.0, cfg in props::maple_config()) {
        let r = props::no_overblocking(&inp, &query, sim, &cfg);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// A stack of two memory guards stops at least what either member stops alone.
    #[test]
    fn a_stack_blocks_what_each_member_blocks(inp in input(), query in text(), sim in -1.0f64..1.0, a in props::memory_guard(), b in props::memory_guard()) {
        let r = props::stack_covers_members(&inp, &query, sim, &a, &b);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    /// The queue delivers in (time, seq) order and the clock never runs backwards.
    #[test]
    fn simulated_time_never_decreases(ops in prop::collection::vec((0u64..50, any::<bool>()), 1..200)) {
        let mut q = EventQueue::new();
        let mut last = (Time::ZERO, 0u64);
        for (n, (dt, pop)) in ops.into_iter().enumerate() {
            q.schedule_in(dt, n);
            if pop && let Some(e) = q.pop() {
                prop_assert!((e.time, e.seq) >= last);
                last = (e.time, e.seq);
            }
        }
        while let Some(e) = q.pop() {
            prop_assert!((e.time, e.seq) >= last);
            last = (e.time, e.seq);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Same seed, same trace hash (small runs at random seeds).
    #[test]
    fn same_seed_same_trace_hash(seed in any::<u64>()) {
        let text = r#"(name: "p", agents: 5, attackers: Count(2), topology: Random(None), workload: Mmlu((tasks: 6, pool: 40)),
            attack: Minja(()), backbone: "qwen3.5-122b-a10b", arms: [(name: "m", guard: Maple(()))])"#;
        let ls = memlink::scenario::load_str(text, &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/p.ron")).unwrap();
        let a = memlink::world::run_arm(&ls.scenario, &ls.profile, &ls.scenario.arms[0], seed, false).summary;
        let b = memlink::world::run_arm(&ls.scenario, &ls.profile, &ls.scenario.arms[0], seed, false).summary;
        prop_assert_eq!(&a.trace_hash, &b.trace_hash);
        prop_assert_eq!(a, b);
    }
}

/// The item generator reaches every write-gate outcome, so the properties above are not
/// vacuous.
#[test]
fn the_generator_reaches_every_gate_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let cfg = MapleConfig::default();
    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..3000 {
        let inp = input().new_tree(&mut runner).unwrap().current();
        let mut lex = Lexicon::new();
        let mut item = build_item(&inp, &mut lex);
        metadata_step(&mut item, &inp, &cfg);
        let v = commit_gates(&mut item, inp.scope, &cfg);
        seen.insert(format!("{:?}", v.write.map(|d| d.action)));
        if let Some(p) = v.promotion {
            seen.insert(format!("promotion {:?}", p.action));
        }
    }
    for want in
        ["Some(Allow)", "Some(Reject)", "Some(Quarantine)", "Some(Rewrite)", "promotion Allow", "promotion Quarantine"]
    {
        assert!(seen.contains(want), "never saw {want}: {seen:?}");
    }
}

/// Characters that trip byte-offset and case-folding assumptions: lower-casing changes their
/// byte length (K Kelvin, Ω Ohm, Å Ångström, İ), they fold onto ASCII letters under Python's re.I
/// (ſ, ı, K), context-dependent lower case (Σ), combining marks, Python-only whitespace and
/// word characters of one regex engine but not the other.
const TRICKY: &[char] = &[
    'K', 'Ω', 'Å', 'İ', 'ı', 'ſ', 'Σ', 'ς', 'ß', 'ﬁ', '\u{301}', '\u{345}', '\u{1c}', '\u{1f}', '\u{a0}', '\u{2000}',
    '²', '½', 'Ⅷ', '‿', '\u{200d}', 'é', '日', '\n', '#', '_', ' ', 'a', 'S', 'K', 'i',
];

fn unicode_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(props::PHRASES).prop_map(String::from),
        prop::collection::vec(prop::sample::select(TRICKY), 1..6).prop_map(|v| v.into_iter().collect()),
        any::<String>(),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any Unicode intent, experience, query and parent scores without a panic, and every
    /// signal, τ, h and read term stays finite with the signals in [0, 1].
    #[test]
    fn any_unicode_text_scores_without_panic(
        mut inp in input(),
        intent in unicode_text(),
        experience in unicode_text(),
        query in unicode_text(),
        parent in unicode_text(),
        sim in -1.0f64..1.0,
    ) {
        inp.intent = intent;
        inp.experience = experience;
        inp.parents.push(parent);
        inp.reads.push(memlink::study::explain::ReadInput {
            query, sim, reader: 0, task_class: "mmlu".into(), cluster_share: 0.0, state: Default::default(),
        });
        let e = memlink::study::explain::explain(&inp);
        prop_assert!(in01(e.trust) && in01(e.hazard));
        let s = e.signals;
        for v in [s.total, s.provenance, s.lineage, s.self_claim_success, s.instruction_like, s.answer_binding,
                  s.trigger_sensitivity, s.cluster_dominance, s.agent_trust] {
            prop_assert!(in01(v), "{s:?}");
        }
        for r in &e.reads {
            prop_assert!(r.score.is_finite() && in01(r.h_q) && in01(r.t_q) && in01(r.overlap) && in01(r.risk.total));
        }
    }
}

/// The regex-engine differences the text view bridges, each on its smallest text.
#[test]
fn python_re_semantics_on_non_ascii_text() {
    use memlink::text::analyze;
    let mut lex = Lexicon::new();
    // Python's re.I matches ı and İ to i; Rust's simple case folding does not.
    assert_eq!(analyze("x", "valıdated", &mut lex).self_claim_hits, 1);
    assert!(analyze("x", "trİgger phrase", &mut lex).rare_trigger > 0.0);
    // ... and the FORBIDDEN patterns, which run without re.I, keep ı distinct.
    assert!(!analyze("x", "do not verıfy", &mut lex).forbidden_quirk);
    // ſ and the Kelvin sign fold onto s and k in both engines.
    assert!(analyze("x", "ſuffix", &mut lex).rare_trigger > 0.0);
    assert!(analyze("x", "the api \u{212a}ey", &mut lex).credential);
    assert!(analyze("x", "ſecret", &mut lex).credential);
    // A combining mark is a word character for Rust's \b, not for Python's.
    assert_eq!(analyze("x", "validated\u{301}", &mut lex).self_claim_hits, 1);
    // '²' is a word character for Python's \b, not for Rust's.
    assert_eq!(analyze("x", "validated²", &mut lex).self_claim_hits, 0);
    // U+001C is whitespace for Python's \s only.
    assert_eq!(analyze("x", "option\u{1c}B", &mut lex).answer_binding_hits, 1);
    // Lower-casing that changes the byte length no longer shifts the experience's slice.
    let f = analyze("\u{212a}\u{212a}\u{212a}", "the password", &mut lex);
    assert!(f.credential);
}

/// The over-blocking property holds for the routes' own scopes, but not for an outcome memory
/// an agent asks to put straight into the team store: the reference's derive scores the route
/// `agent_self_outcome_consolidation` at τ 0.28 and h 0.50 whatever the text, under the
/// promotion gate's trust floor, so even a plain, clean, trusted-writer item is quarantined.
/// MAPLE-Guard as the reference defines it; the counterexample is pinned here.
#[test]
fn over_blocking_counterexample_team_scoped_outcome_memory() {
    let mut inp = memlink::testkit::props::clean_item_example();
    inp.scope = memlink::memory::Scope::Team;
    let r = props::no_overblocking(&inp, "why does photosynthesis need light", 0.5, &MapleConfig::default());
    let e = r.expect_err("a team-scoped outcome memory is quarantined");
    assert!(e.contains("promotion (unsafe_lifecycle_team_memory_promotion)"), "{e}");
    // The same item in the scope its route writes passes.
    inp.scope = memlink::memory::Scope::Private;
    assert!(props::no_overblocking(&inp, "why does photosynthesis need light", 0.5, &MapleConfig::default()).is_ok());
}
