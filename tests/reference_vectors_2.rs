//! MAPLE-Guard against the reference harness, second set: the 19 vectors of spec
//! `reference-vectors-2.json` (copied to tests/fixtures). They are the smallest items on which a
//! randomized differential test of memlink against the reference scorer and gates disagreed —
//! parent-marker case, trigger-phrase case, the `##` wordpiece pattern, writer trust 0 and out of
//! range, texts whose lower case has another byte length, the reference's reason strings — plus
//! controls. Every τ, h, signal, decision with its reason string, status and read term must match.

use memlink::guard::maple::{Action, Decision, MapleConfig, StrictChannel};
use memlink::memory::{MemoryTopology, Scope, Status, Taint};
use memlink::study::explain::{ExplainInput, ReadInput, ReadState, StrictView, explain};
use serde_json::Value;

const TOL: f64 = 1e-9;

fn vectors() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/reference-vectors-2.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json");
    v["vectors"].as_array().expect("vectors").clone()
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
    v.as_f64().unwrap_or_else(|| panic!("number, got {v}"))
}

fn strs(x: &Value) -> Vec<String> {
    x.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

fn ids(x: &Value) -> Vec<u32> {
    x.as_array().unwrap().iter().map(|s| s.as_u64().unwrap() as u32).collect()
}

fn input_of(v: &Value) -> ExplainInput {
    let i = &v["input"];
    let strict = i.get("strict").map(|s| StrictView {
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
    let reads = i["reads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| ReadInput {
            query: r["query"].as_str().unwrap().into(),
            sim: f(&r["sim"]),
            reader: r["reader"].as_u64().unwrap() as u32,
            task_class: r["task_class"].as_str().unwrap().into(),
            cluster_share: f(&r["cluster_share"]),
            state: if r["state"] == "pre_gate" { ReadState::PreGate } else { ReadState::Stored },
        })
        .collect();
    ExplainInput {
        intent: i["intent"].as_str().unwrap().into(),
        experience: i["experience"].as_str().unwrap().into(),
        utility_q: f(&i["utility_q"]),
        source_type: i["source_type"].as_str().unwrap().into(),
        memory_type: i["memory_type"].as_str().unwrap().into(),
        scope: if i["scope"] == "team" { Scope::Team } else { Scope::Private },
        allowed_agents: ids(&i["allowed_agents"]),
        allowed_task_classes: strs(&i["allowed_task_classes"]),
        trust: f(&i["trust"]),
        hazard: f(&i["hazard"]),
        taint: taint(i["taint"].as_str().unwrap()),
        source_agent_trust: f(&i["source_agent_trust"]),
        parents: strs(&i["parents"]),
        success_count: i["success_count"].as_u64().unwrap() as u32,
        failure_count: i["failure_count"].as_u64().unwrap() as u32,
        strict,
        reads,
        config: None,
        memory_topology: match i["memory_topology"].as_str().unwrap() {
            "global-shared" => MemoryTopology::GlobalShared,
            "brokered-shared" => MemoryTopology::BrokeredShared,
            "role-isolated" => MemoryTopology::RoleIsolated,
            "private-only" => MemoryTopology::PrivateOnly,
            t => panic!("memory topology {t}"),
        },
        agents: 8,
    }
}

const SIGNALS: [&str; 9] = [
    "total",
    "provenance",
    "lineage",
    "self_claim_success",
    "instruction_like",
    "answer_binding",
    "trigger_sensitivity",
    "cluster_dominance",
    "agent_trust",
];

fn decision(d: &Decision) -> Value {
    serde_json::json!({"action": serde_json::to_value(d.action).unwrap(), "reason": d.reason})
}

fn check(v: &Value, failures: &mut Vec<String>) {
    let id = v["id"].as_str().unwrap();
    let input = input_of(v);
    let e = explain(&input);
    let x = &v["expected"];
    let close = |failures: &mut Vec<String>, what: &str, got: f64, want: f64| {
        if (got - want).abs() > TOL {
            failures.push(format!("{id} {what}: got {got}, want {want}"));
        }
    };
    close(failures, "trust", e.trust, f(&x["trust"]));
    close(failures, "hazard", e.hazard, f(&x["hazard"]));
    let sig = serde_json::to_value(e.signals).unwrap();
    for k in SIGNALS {
        close(failures, k, f(&sig[k]), f(&x["signals"][k]));
    }
    for (what, got, want) in [
        ("write", e.write.as_ref().map(decision).unwrap_or(Value::Null), &x["write"]),
        ("promotion", e.promotion.as_ref().map(decision).unwrap_or(Value::Null), &x["promotion"]),
        ("stored", Value::Bool(e.stored), &x["stored"]),
        ("status_after", serde_json::to_value(e.status_after).unwrap(), &x["status_after"]),
    ] {
        let got = match (what, &got) {
            ("status_after", Value::String(s)) => Value::String(s.to_lowercase()),
            _ => got,
        };
        if &got != want {
            failures.push(format!("{id} {what}: got {got}, want {want}"));
        }
    }
    let want_reads = x["reads"].as_array().unwrap();
    assert_eq!(want_reads.len(), e.reads.len(), "{id}: every read is scored");
    for (n, (w, got)) in want_reads.iter().zip(&e.reads).enumerate() {
        let tag = format!("read {n}");
        close(failures, &format!("{tag} S"), got.score, f(&w["score"]));
        close(failures, &format!("{tag} h_q"), got.h_q, f(&w["h_q"]));
        close(failures, &format!("{tag} T_q"), got.t_q, f(&w["t_q"]));
        close(failures, &format!("{tag} overlap"), got.overlap, f(&w["overlap"]));
        close(failures, &format!("{tag} qctx"), got.qctx, f(&w["qctx"]));
        let r = serde_json::to_value(got.risk).unwrap();
        for k in SIGNALS {
            close(failures, &format!("{tag} R_q.{k}"), f(&r[k]), f(&w["risk"][k]));
        }
        if Value::Bool(got.scope_violation) != w["scope_violation"] {
            failures.push(format!("{id} {tag} scope violation: got {}", got.scope_violation));
        }
        if decision(&got.decision) != w["decision"] {
            failures.push(format!("{id} {tag} firewall: got {}, want {}", decision(&got.decision), w["decision"]));
        }
    }
    let want_broker = x["broker"].as_array().unwrap();
    assert_eq!(want_broker.len(), e.broker.len(), "{id}: a broker decision per read");
    for (w, got) in want_broker.iter().zip(&e.broker) {
        if &decision(got) != w {
            failures.push(format!("{id} broker: got {}, want {w}", decision(got)));
        }
    }
}

#[test]
fn every_second_set_vector_matches_with_the_reference_reason_strings() {
    let all = vectors();
    assert_eq!(all.len(), 19);
    let mut failures = Vec::new();
    for v in &all {
        check(v, &mut failures);
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// The writer-trust quirk is the reference's default; the documented switch fixes it, and then
/// a writer at reputation 0 is read as fully distrusted, which flips the vector's promotion.
#[test]
fn the_writer_trust_zero_quirk_is_a_documented_switch() {
    let v = vectors().into_iter().find(|v| v["id"] == "C4a_agent_trust_zero_gate_flip").expect("vector");
    let mut input = input_of(&v);
    let quirk = explain(&input);
    assert_eq!(quirk.signals.agent_trust, 0.5);
    assert_eq!(quirk.promotion.unwrap().reason, "verified_team_memory");
    input.config = Some(MapleConfig { fix_writer_trust_zero_quirk: true, ..MapleConfig::default() });
    let fixed = explain(&input);
    assert_eq!(fixed.signals.agent_trust, 1.0);
    assert_eq!(fixed.promotion.unwrap().action, Action::Quarantine, "trust {}", fixed.trust);
    assert_eq!(fixed.status_after, Status::Quarantined);
}

/// `explain` under the NoRetrieval ablation scores reads as the ablation does (the baseline score
/// sim + β·Q, no read firewall), not with MAPLE's read score.
#[test]
fn the_no_retrieval_ablation_explains_the_baseline_read() {
    let v = vectors().into_iter().find(|v| v["id"] == "C1_label_read_lifecycle").expect("vector");
    let mut input = input_of(&v);
    input.utility_q = 0.4;
    let full = explain(&input);
    assert_eq!(full.reads[0].decision.reason, "read_firewall_memory_lifecycle_high_risk");
    input.config =
        Some(MapleConfig { variant: memlink::guard::maple::MapleVariant::NoRetrieval, ..MapleConfig::default() });
    let ablated = explain(&input);
    let r = &ablated.reads[0];
    assert_eq!(r.decision, Decision { action: Action::Allow, reason: "baseline_no_read_firewall" });
    assert!((r.score - (input.reads[0].sim + 0.8 * 0.0)).abs() < TOL, "pre-gate Q is the ledger's 0: {}", r.score);
    assert_eq!(r.risk.total, 0.0, "no risk profile under the baseline score");
}
