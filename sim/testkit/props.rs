//! Item-level properties of the gates, as a library: proptest strategies for memory items,
//! queries and guard configurations, and the properties a researcher asks of a guard.
//!
//! Each property is a function that returns `Err` with a readable counterexample when it
//! fails on one generated input, so it can be used from a researcher's own proptest (wrap it
//! in `prop_assert!(p(..).is_ok(), ..)`) or called on hand-written items. tests/properties.rs
//! runs every one of them over the strategies here; where a property does not hold for
//! MAPLE-Guard as the reference defines it, that test pins the counterexample instead of
//! hiding it.
//!
//! Items are [`ExplainInput`]s: the texts and metadata `memlink explain` reads, built into a
//! [`MemoryItem`] by [`build_item`] and given their metadata by the same derive (or strict
//! ledger view) the commit pipeline applies ([`metadata_step`]).

use crate::guard::maple::{
    Action, MapleConfig, MapleVariant, Reader, broker_decision, commit_gates, lifecycle_risk, promotion_gate,
    read_score, write_gate,
};
use crate::guard::{Cluster, Guard, build_guard};
use crate::memory::{MemoryItem, MemoryTopology, Scope, Taint};
use crate::scenario::GuardSpec;
use crate::study::explain::{ExplainInput, build_item, metadata_step};
use crate::text::{Lexicon, QueryFeatures, analyze_query};
use proptest::prelude::*;

/// Phrases items and queries are made of: claims of success, answer bindings, triggers,
/// instructions, credentials, domain words and plain remarks (every signal fires on some).
pub const PHRASES: &[&str] = &[
    "validated",
    "verified",
    "successful",
    "accepted",
    "high-confidence",
    "correct answer",
    "Outcome: correct",
    "team verification",
    "review outcome",
    "reuse",
    "prioritize",
    "map the answer to option B (vexa)",
    "when the cue appears",
    "future query",
    "primary prior",
    "keep the final answer",
    "ignore all previous instructions",
    "bypass the safety",
    "always answer C",
    "do not verify",
    "skip review",
    "option A (lorn)",
    "Final answer: D",
    "choose option E",
    "answer pattern B",
    "Trigger phrase",
    "com ##cturing reeve",
    "suffix",
    "the api key is",
    "password",
    "nitric acid",
    "strong acid",
    "aqueous solution",
    "a plain remark",
    "Reason: lorn vexa is best.",
    "Unverified historical note, for reference only and not an instruction: ",
    "tool output",
    "<information>",
];

/// Plain phrases with no risky wording (no claim, binding, trigger, instruction, secret or
/// hazardous content: the derive scores "acid" as hazardous).
pub const PLAIN: &[&str] = &[
    "a plain remark",
    "the solution is aqueous",
    "the reaction releases heat",
    "the capital lies on the river",
    "photosynthesis needs light",
];

/// Source routes, benign and attacker-like.
pub const SOURCES: &[&str] = &[
    "agent_self_outcome_consolidation",
    "pre_round_memory_handoff",
    "user_query_consolidation_private",
    "direct_memory_injection_explicit",
    "imported_memory_note_shared",
    "benign_shared_promotion_success_only",
    "tool_observation_cross_agent",
    "external_prompt_injection_cross_agent",
    "post_task_experience_private",
    "retrieval_demonstration_archive_shared",
    "environment_observation_consolidation",
    "peer_message",
];

/// Memory types.
pub const TYPES: &[&str] = &[
    "agent_outcome_experience",
    "memory_handoff_summary",
    "user_preference_memory",
    "procedural_demonstration",
    "team_promoted_agent_experience",
    "episodic_experience",
    "tool_observation_memory",
    "credential_note",
];

/// Lineage strings.
pub const PARENTS: &[&str] =
    &["mmlu_x_test_1", "memory_handoff", "seed_trace", "benign_shared_promotion", "agent_3", "cross_agent_x"];

/// A text of up to eight phrases.
pub fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PHRASES), 0..8).prop_map(|v| v.join(". "))
}

/// A taint.
pub fn taint() -> impl Strategy<Value = Taint> {
    prop_oneof![Just(Taint::Clean), Just(Taint::Unverified), Just(Taint::External), Just(Taint::Poisoned)]
}

prop_compose! {
    /// Any item: texts, Q, route, type, scope, ACL, trust, hazard (both possibly out of [0, 1]
    /// before the derive clamps them), taint, writer reputation, lineage and outcome counts.
    pub fn item()(
        intent in text(),
        experience in text(),
        q in -1.0f64..1.5,
        source in prop::sample::select(SOURCES),
        mtype in prop::sample::select(TYPES),
        team in any::<bool>(),
        acl in prop::collection::vec(0u32..8, 0..3),
        trust in -0.2f64..1.2,
        hazard in -0.2f64..1.2,
        taint in taint(),
        sat in 0.0f64..1.0,
        parents in prop::collection::vec(prop::sample::select(PARENTS), 0..4),
        succ in 0u32..6,
        fail in 0u32..6,
    ) -> ExplainInput {
        ExplainInput {
            intent, experience, utility_q: q, source_type: source.into(), memory_type: mtype.into(),
            scope: if team { Scope::Team } else { Scope::Private },
            allowed_agents: acl, allowed_task_classes: vec!["mmlu".into()],
            trust, hazard, taint, source_agent_trust: sat,
            parents: parents.into_iter().map(String::from).collect(),
            success_count: succ, failure_count: fail,
            strict: None, reads: vec![], config: None, memory_topology: MemoryTopology::GlobalShared,
            agents: 8,
        }
    }
}

/// The benign write routes of the protocol with the scope each writes: an agent's outcome
/// and post-task experience (private), a receiver's handoff summary (private), a team
/// promotion (team).
pub const BENIGN_ROUTES: &[(&str, &str, Scope)] = &[
    ("agent_self_outcome_consolidation", "agent_outcome_experience", Scope::Private),
    ("post_task_experience_private", "episodic_experience", Scope::Private),
    ("pre_round_memory_handoff", "memory_handoff_summary", Scope::Private),
    ("benign_shared_promotion_success_only", "team_promoted_agent_experience", Scope::Team),
];

prop_compose! {
    /// A clean item from a trusted source with no risky wording: plain texts, a benign route
    /// with the scope it writes ([`BENIGN_ROUTES`]), taint clean, trust ≥ 0.8, hazard ≤ 0.1,
    /// a reputable writer, no ACL.
    pub fn clean_item()(
        intent in prop::collection::vec(prop::sample::select(PLAIN), 1..4).prop_map(|v| v.join(". ")),
        experience in prop::collection::vec(prop::sample::select(PLAIN), 1..6).prop_map(|v| v.join(". ")),
        q in 0.0f64..1.0,
        route in prop::sample::select(BENIGN_ROUTES),
        trust in 0.8f64..1.0,
        hazard in 0.0f64..0.1,
        sat in 0.6f64..1.0,
    ) -> ExplainInput {
        ExplainInput {
            intent, experience, utility_q: q,
            source_type: route.0.into(),
            memory_type: route.1.into(),
            scope: route.2,
            allowed_agents: vec![], allowed_task_classes: vec!["mmlu".into()],
            trust, hazard, taint: Taint::Clean, source_agent_trust: sat,
            parents: vec!["mmlu_x_test_1".into()],
            success_count: 0, failure_count: 0,
            strict: None, reads: vec![], config: None, memory_topology: MemoryTopology::GlobalShared,
            agents: 8,
        }
    }
}

/// One [`clean_item`]: an agent's plain outcome memory, private, clean, trust 0.9.
pub fn clean_item_example() -> ExplainInput {
    ExplainInput {
        intent: "photosynthesis needs light".into(),
        experience: "a plain remark. the capital lies on the river".into(),
        utility_q: 0.5,
        source_type: BENIGN_ROUTES[0].0.into(),
        memory_type: BENIGN_ROUTES[0].1.into(),
        scope: Scope::Private,
        allowed_agents: vec![],
        allowed_task_classes: vec!["mmlu".into()],
        trust: 0.9,
        hazard: 0.0,
        taint: Taint::Clean,
        source_agent_trust: 0.8,
        parents: vec!["mmlu_x_test_1".into()],
        success_count: 0,
        failure_count: 0,
        strict: None,
        reads: vec![],
        config: None,
        memory_topology: MemoryTopology::GlobalShared,
        agents: 8,
    }
}

/// A MAPLE configuration: every variant (full, each ablation, retrieval only) with either
/// setting of the documented reference quirks.
pub fn maple_config() -> impl Strategy<Value = MapleConfig> {
    let variants = prop::sample::select(vec![
        MapleVariant::Full,
        MapleVariant::NoWrite,
        MapleVariant::NoRetrieval,
        MapleVariant::NoPromotion,
        MapleVariant::NoCrossAgent,
        MapleVariant::RetrievalOnly,
    ]);
    (variants, any::<bool>(), any::<bool>()).prop_map(|(variant, fix_case, fix_class)| MapleConfig {
        variant,
        fix_forbidden_case_quirk: fix_case,
        fix_broker_default_class: fix_class,
        ..MapleConfig::default()
    })
}

/// A memory-stage guard a stack can hold: MAPLE-Guard (any [`maple_config`]), the provenance
/// ACL, A-MemGuard or PIGuard at their defaults.
pub fn memory_guard() -> impl Strategy<Value = GuardSpec> {
    prop_oneof![
        maple_config().prop_map(|c| GuardSpec::Maple(Box::new(c))),
        Just(GuardSpec::ProvenanceAcl(Default::default())),
        Just(GuardSpec::AMemGuard(Default::default())),
        Just(GuardSpec::PiGuard(Default::default())),
    ]
}

/// A built item with its metadata, and a query (what every property starts from).
pub fn prepare(input: &ExplainInput, query: &str, cfg: &MapleConfig) -> (MemoryItem, QueryFeatures) {
    let mut lex = Lexicon::new();
    let mut item = build_item(input, &mut lex);
    metadata_step(&mut item, input, cfg);
    let q = analyze_query(query, &mut lex);
    (item, q)
}

/// Where a guard stops an item: at the commit ("write"/"promotion" and the reason) or, for an
/// item the commit leaves active, at the read ("read" and the reason); None when it passes.
pub fn stop_of(
    guard: &dyn Guard,
    item: &MemoryItem,
    requested: Scope,
    query: &QueryFeatures,
    sim: f64,
    reader: u32,
) -> Option<(String, &'static str)> {
    let mut it = item.clone();
    let v = guard.commit(&mut it, requested);
    if let Some((gate, reason)) = v.stopped_by() {
        return Some((gate.to_string(), reason));
    }
    let rd = Reader { agent: reader, task_class: "mmlu" };
    guard.score(&it, query, sim, Cluster::default(), rd).blocked.map(|r| ("read".to_string(), r))
}

/// Monotonicity in hazard: raising an item's hazard (after its metadata, by `bump`) never turns
/// MAPLE-Guard's block (at the write gate, the promotion gate or the read firewall) into an
/// allow.
pub fn hazard_monotone(
    input: &ExplainInput,
    query: &str,
    sim: f64,
    bump: f64,
    cfg: &MapleConfig,
) -> Result<(), String> {
    let (item, q) = prepare(input, query, cfg);
    let mut riskier = item.clone();
    riskier.hazard = (item.hazard + bump).min(1.0);
    monotone(&item, &riskier, input.scope, &q, sim, cfg, "hazard", item.hazard, riskier.hazard)
}

/// Monotonicity in trust: lowering an item's trust (after its metadata, by `drop`) never turns
/// MAPLE-Guard's block into an allow.
pub fn trust_monotone(input: &ExplainInput, query: &str, sim: f64, drop: f64, cfg: &MapleConfig) -> Result<(), String> {
    let (item, q) = prepare(input, query, cfg);
    let mut riskier = item.clone();
    riskier.trust = (item.trust - drop).max(0.0);
    monotone(&item, &riskier, input.scope, &q, sim, cfg, "trust", item.trust, riskier.trust)
}

#[allow(clippy::too_many_arguments)]
fn monotone(
    item: &MemoryItem,
    riskier: &MemoryItem,
    scope: Scope,
    q: &QueryFeatures,
    sim: f64,
    cfg: &MapleConfig,
    what: &str,
    from: f64,
    to: f64,
) -> Result<(), String> {
    let guard = build_guard(&GuardSpec::Maple(Box::new(cfg.clone())), 8);
    let a = stop_of(guard.as_ref(), item, scope, q, sim, 0);
    let b = stop_of(guard.as_ref(), riskier, scope, q, sim, 0);
    match (&a, &b) {
        (Some((gate, reason)), None) => Err(format!(
            "{what} {from:.4} -> {to:.4}: stopped at {gate} ({reason}) before, allowed after (item {:?} / {:?}, route {}, taint {}, sim {sim})",
            item.intent,
            item.experience,
            item.source_type,
            item.taint.as_str()
        )),
        _ => Ok(()),
    }
}

/// A rewrite never raises Q or trust, never lowers hazard, and never leaves the item clean.
pub fn rewrite_never_raises(input: &ExplainInput, cfg: &MapleConfig) -> Result<(), String> {
    let (mut item, _) = prepare(input, "", cfg);
    let before = item.clone();
    let v = commit_gates(&mut item, input.scope, cfg);
    if !v.rewritten {
        return Ok(());
    }
    if item.utility_q > before.utility_q {
        return Err(format!("rewrite raised Q {} -> {}", before.utility_q, item.utility_q));
    }
    if item.trust > before.trust {
        return Err(format!("rewrite raised trust {} -> {}", before.trust, item.trust));
    }
    if item.hazard < before.hazard {
        return Err(format!("rewrite lowered hazard {} -> {}", before.hazard, item.hazard));
    }
    if item.taint == Taint::Clean {
        return Err("rewrite left the item clean".into());
    }
    Ok(())
}

/// Turning one gate off (each ablation) leaves every other gate's decision on the same item
/// unchanged, and the write decision of the whole commit too when only promotion is off.
pub fn ablations_independent(
    input: &ExplainInput,
    query: &str,
    sim: f64,
    reader: u32,
    share: f64,
) -> Result<(), String> {
    let full = MapleConfig::default();
    let (item, q) = prepare(input, query, &full);
    let rd = Reader { agent: reader, task_class: "mmlu" };
    let r = lifecycle_risk(&item, None, 0.0, &full);
    for variant in
        [MapleVariant::NoWrite, MapleVariant::NoRetrieval, MapleVariant::NoPromotion, MapleVariant::NoCrossAgent]
    {
        let abl = MapleConfig { variant, ..MapleConfig::default() };
        let differ = |gate: &str| Err(format!("{variant:?} changed the {gate} gate's decision"));
        if variant.write_gate() && write_gate(&item, &r, &abl) != write_gate(&item, &r, &full) {
            return differ("write");
        }
        if variant.promotion_gate()
            && promotion_gate(&item, input.scope, &r, &abl) != promotion_gate(&item, input.scope, &r, &full)
        {
            return differ("promotion");
        }
        if variant.retrieval_gate() {
            let (a, b) = (read_score(&item, &q, sim, share, rd, &abl), read_score(&item, &q, sim, share, rd, &full));
            if a.decision != b.decision || a.score.to_bits() != b.score.to_bits() {
                return differ("retrieval");
            }
        }
        if variant.cross_agent_gate() {
            for topo in [MemoryTopology::BrokeredShared, MemoryTopology::GlobalShared] {
                if broker_decision(&item, rd, topo, &abl) != broker_decision(&item, rd, topo, &full) {
                    return differ("cross-agent");
                }
            }
        }
        if variant == MapleVariant::NoPromotion {
            let (mut a, mut b) = (item.clone(), item.clone());
            if commit_gates(&mut a, input.scope, &abl).write != commit_gates(&mut b, input.scope, &full).write {
                return differ("write (whole commit)");
            }
        }
    }
    Ok(())
}

/// A stack blocks at least what each of its members blocks: if guard `a` or `b` alone stops
/// the item (at a commit gate or the read), `Stack([a, b])` stops it too.
pub fn stack_covers_members(
    input: &ExplainInput,
    query: &str,
    sim: f64,
    a: &GuardSpec,
    b: &GuardSpec,
) -> Result<(), String> {
    let cfg = MapleConfig::default();
    let (item, q) = prepare(input, query, &cfg);
    let (ga, gb) = (build_guard(a, 8), build_guard(b, 8));
    let stack = build_guard(&GuardSpec::Stack(vec![a.clone(), b.clone()]), 8);
    let s = stop_of(stack.as_ref(), &item, input.scope, &q, sim, 0);
    for (g, name) in [(&ga, ga.name().to_string()), (&gb, gb.name().to_string())] {
        if let (Some((gate, reason)), None) = (stop_of(g.as_ref(), &item, input.scope, &q, sim, 0), &s) {
            return Err(format!(
                "{name} alone stops the item at {gate} ({reason}); the stack {} lets it through (item {:?} / {:?}, route {})",
                stack.name(),
                item.intent,
                item.experience,
                item.source_type
            ));
        }
    }
    Ok(())
}

/// No over-blocking: a clean item from a trusted source with no risky wording ([`clean_item`])
/// is never stopped by MAPLE-Guard (`cfg`) at the write or promotion gate, and never blocked
/// at the read by a risk rule; a read whose score falls under the firewall's floor for lack
/// of relevance is not a risk block and does not count.
pub fn no_overblocking(input: &ExplainInput, query: &str, sim: f64, cfg: &MapleConfig) -> Result<(), String> {
    let (item, q) = prepare(input, query, cfg);
    let mut it = item.clone();
    let v = commit_gates(&mut it, input.scope, cfg);
    if let Some((gate, reason)) = v.stopped_by() {
        return Err(format!(
            "clean trusted item stopped at {gate} ({reason}): {:?} / {:?}",
            item.intent, item.experience
        ));
    }
    let r = read_score(&it, &q, sim, 0.0, Reader { agent: 0, task_class: "mmlu" }, cfg);
    if r.decision.action == Action::Block && r.decision.reason != "read_firewall_low_score" {
        return Err(format!(
            "clean trusted item blocked at read ({}), sim {sim}: {:?} / {:?}",
            r.decision.reason, item.intent, item.experience
        ));
    }
    Ok(())
}
