//! MAPLE-Guard against the reference harness: the 29 vectors of spec `reference-vectors.json`
//! (copied to tests/fixtures; produced by running the reference scorer and gates on the §12
//! items). Every τ, h, signal, gate decision with its reason, outcome update and read score
//! must match.

use memlink::guard::maple::{
    BackendQCache, FeedbackPolicy, MapleConfig, OutcomeParams, ProvenanceMode, StrictChannel, apply_outcome,
};
use memlink::memory::{Scope, Taint};
use memlink::study::explain::{ExplainInput, ReadInput, ReadState, StrictView, build_item, explain, metadata_step};
use memlink::text::Lexicon;
use serde_json::Value;

const TOL: f64 = 1e-9;

fn vectors() -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/reference-vectors.json"))
        .expect("fixture");
    serde_json::from_str::<Value>(&text).expect("json").as_array().expect("array").clone()
}

fn taint(s: &str) -> Taint {
    match s {
        "clean" => Taint::Clean,
        "unverified" => Taint::Unverified,
        "external" => Taint::External,
        "poisoned" => Taint::Poisoned,
        _ => panic!("taint {s}"),
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().expect("number")
}

fn input_of(v: &Value) -> ExplainInput {
    let e = &v["entry_before_commit"];
    let strs = |x: &Value| x.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect::<Vec<_>>();
    let ids = |x: &Value| x.as_array().unwrap().iter().map(|s| s.as_u64().unwrap() as u32).collect::<Vec<_>>();
    let strict = v.get("strict_view").map(|s| StrictView {
        channel: match s["channel"].as_str().unwrap() {
            "external" => StrictChannel::External,
            "peer_message" => StrictChannel::PeerMessage,
            "agent_output" => StrictChannel::AgentOutput,
            "user_history" => StrictChannel::UserHistory,
            _ => StrictChannel::Unknown,
        },
        taint: taint(s["taint"].as_str().unwrap()),
        readers: ids(&s["readers"]),
        parent_ids: s.get("parent_ids").map(strs).unwrap_or_default(),
    });
    let reads = v
        .get("reads")
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .map(|r| ReadInput {
                    query: r["query"].as_str().unwrap().into(),
                    sim: f(&r["sim"]),
                    reader: r["agent_id"].as_u64().unwrap() as u32,
                    task_class: r["task_class"].as_str().unwrap().into(),
                    cluster_share: f(&r["cluster_share"]),
                    state: if r["read_state"] == "pre_gate" { ReadState::PreGate } else { ReadState::Stored },
                })
                .collect()
        })
        .unwrap_or_default();
    ExplainInput {
        intent: e["intent"].as_str().unwrap().into(),
        experience: e["experience"].as_str().unwrap().into(),
        utility_q: f(&e["utility_q"]),
        source_type: e["source_type"].as_str().unwrap().into(),
        memory_type: e["memory_type"].as_str().unwrap().into(),
        scope: if v["requested_scope"] == "team" { Scope::Team } else { Scope::Private },
        allowed_agents: ids(&e["allowed_agents"]),
        allowed_task_classes: strs(&e["allowed_task_classes"]),
        trust: f(&e["provenance_trust"]),
        hazard: f(&e["content_hazard"]),
        taint: taint(e["taint"].as_str().unwrap()),
        source_agent_trust: f(&e["source_agent_trust"]),
        parents: strs(&e["parents"]),
        success_count: e["success_count"].as_u64().unwrap() as u32,
        failure_count: e["failure_count"].as_u64().unwrap() as u32,
        strict,
        reads,
        config: None,
        memory_topology: Default::default(),
        agents: 8,
    }
}

fn close(what: &str, got: f64, want: f64, failures: &mut Vec<String>) {
    if (got - want).abs() > TOL {
        failures.push(format!("{what}: got {got}, want {want}"));
    }
}

#[test]
fn every_reference_vector_matches() {
    let mut failures = Vec::new();
    let all = vectors();
    assert_eq!(all.len(), 29);
    for v in &all {
        let id = v["id"].as_str().unwrap();
        let input = input_of(v);
        let e = explain(&input);
        let x = &v["expected"];
        close(&format!("{id} tau"), e.trust, f(&x["tau"]), &mut failures);
        close(&format!("{id} h"), e.hazard, f(&x["h"]), &mut failures);
        let s = &x["signals"];
        let sig = serde_json::to_value(e.signals).unwrap();
        for k in [
            "total",
            "provenance",
            "lineage",
            "self_claim_success",
            "instruction_like",
            "answer_binding",
            "trigger_sensitivity",
            "cluster_dominance",
            "agent_trust",
        ] {
            close(&format!("{id} {k}"), f(&sig[k]), f(&s[k]), &mut failures);
        }
        let dec = |d: &Option<memlink::guard::maple::Decision>| {
            d.map(|d| serde_json::json!({"action": serde_json::to_value(d.action).unwrap(), "reason": d.reason}))
                .unwrap_or(Value::Null)
        };
        if dec(&e.write) != x["write"] {
            failures.push(format!("{id} write: got {}, want {}", dec(&e.write), x["write"]));
        }
        if dec(&e.promotion) != x["promotion"] {
            failures.push(format!("{id} promotion: got {}, want {}", dec(&e.promotion), x["promotion"]));
        }
        if e.stored != x["stored"].as_bool().unwrap() {
            failures.push(format!("{id} stored: got {}", e.stored));
        }
        let reads = v.get("reads").and_then(Value::as_array).cloned().unwrap_or_default();
        assert_eq!(reads.len(), e.reads.len(), "{id}: every read is scored");
        for (i, (r, got)) in reads.iter().zip(&e.reads).enumerate() {
            let w = &r["expected"];
            let tag = format!("{id} read {i}");
            close(&format!("{tag} S"), got.score, f(&w["score"]), &mut failures);
            close(&format!("{tag} h_q"), got.h_q, f(&w["h_q"]), &mut failures);
            close(&format!("{tag} T_q"), got.t_q, f(&w["T_q"]), &mut failures);
            close(&format!("{tag} R_q"), got.risk.total, f(&w["R_q"]), &mut failures);
            close(&format!("{tag} tr_q"), got.risk.trigger_sensitivity, f(&w["tr_q"]), &mut failures);
            close(&format!("{tag} overlap"), got.overlap, f(&w["overlap"]), &mut failures);
            let blocked = got.decision.action == memlink::guard::maple::Action::Block;
            if blocked != w["blocked"].as_bool().unwrap() || got.decision.reason != w["reason"].as_str().unwrap() {
                failures.push(format!("{tag} firewall: got {:?}, want {} {}", got.decision, w["blocked"], w["reason"]));
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// The comparison is sharp: moving one weight by 0.01 breaks vectors.
#[test]
fn a_perturbed_configuration_is_caught() {
    let mut cfg = MapleConfig::default();
    cfg.weights.provenance += 0.01;
    cfg.weights.lineage -= 0.01;
    let mut differing = 0;
    for v in vectors() {
        let mut input = input_of(&v);
        let want = f(&v["expected"]["signals"]["total"]);
        input.config = Some(cfg.clone());
        if (explain(&input).signals.total - want).abs() > TOL {
            differing += 1;
        }
    }
    assert!(differing > 10, "only {differing} vectors noticed the perturbation");
}

#[test]
fn outcome_updates_match_the_reference() {
    let cfg = MapleConfig::default();
    let params = OutcomeParams { backend_update: false, ..OutcomeParams::default() };
    let mut checked = 0;
    for v in vectors() {
        let Some(updates) = v.get("outcome_updates").and_then(Value::as_array) else { continue };
        let input = input_of(&v);
        let mut lex = Lexicon::new();
        let mut item = build_item(&input, &mut lex);
        metadata_step(&mut item, &input, &cfg);
        let after = v["expected"]["after_updates"].as_array().unwrap();
        for (u, want) in updates.iter().zip(after) {
            let success = u.as_bool().unwrap();
            apply_outcome(&mut item, success, FeedbackPolicy::Full, ProvenanceMode::Recomputed, &params, &cfg);
            assert!((item.utility_q - f(&want["q"])).abs() < TOL, "q {} vs {}", item.utility_q, want["q"]);
            assert!((item.trust - f(&want["tau"])).abs() < TOL, "tau {} vs {}", item.trust, want["tau"]);
            assert!((item.hazard - f(&want["h"])).abs() < TOL, "h {} vs {}", item.hazard, want["h"]);
            assert_eq!(u64::from(item.success_count), want["succ"].as_u64().unwrap());
            assert_eq!(u64::from(item.failure_count), want["fail"].as_u64().unwrap());
            checked += 1;
        }
    }
    assert_eq!(checked, 3);
}

/// The backend value update (spec §4 step 3): with a stale cache every update starts from the
/// value the item was indexed with, so rankings keep that value and the entry's Q sits one step
/// from it; with a refreshed cache Q accumulates (0.6 → 0.44 after one failure, the doc's check).
#[test]
fn backend_value_updates_read_the_cache() {
    let cfg = MapleConfig::default();
    let v = vectors().into_iter().find(|v| v.get("outcome_updates").is_some()).expect("a vector with updates");
    let input = input_of(&v);
    let fresh = |mode: BackendQCache| {
        let mut item = build_item(&input, &mut Lexicon::new());
        item.utility_q = 0.6;
        item.backend_q = 0.6;
        (item, OutcomeParams { backend_cache: mode, ..OutcomeParams::default() })
    };
    let (mut stale, params) = fresh(BackendQCache::Stale);
    apply_outcome(&mut stale, false, FeedbackPolicy::Full, ProvenanceMode::Recomputed, &params, &cfg);
    assert!((stale.utility_q - 0.44).abs() < TOL, "one failure: {}", stale.utility_q);
    apply_outcome(&mut stale, false, FeedbackPolicy::Full, ProvenanceMode::Recomputed, &params, &cfg);
    assert!((stale.utility_q - 0.44).abs() < TOL, "a second failure starts from the cache: {}", stale.utility_q);
    apply_outcome(&mut stale, true, FeedbackPolicy::Full, ProvenanceMode::Recomputed, &params, &cfg);
    assert!((stale.utility_q - 0.64).abs() < TOL, "a success: {}", stale.utility_q);
    assert_eq!(stale.backend_q, 0.6, "rankings keep the indexed value");
    assert_eq!(stale.failure_count, 2, "counts still learn");

    let (mut refreshed, params) = fresh(BackendQCache::Refreshed);
    apply_outcome(&mut refreshed, false, FeedbackPolicy::Full, ProvenanceMode::Recomputed, &params, &cfg);
    apply_outcome(&mut refreshed, false, FeedbackPolicy::Full, ProvenanceMode::Recomputed, &params, &cfg);
    assert!((refreshed.utility_q - 0.296).abs() < TOL, "two failures accumulate: {}", refreshed.utility_q);
    assert_eq!(refreshed.backend_q, refreshed.utility_q, "rankings see the current value");
}
