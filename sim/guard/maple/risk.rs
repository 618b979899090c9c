//! The eight lifecycle risk signals (spec §2.1) and provenance-derived trust and hazard
//! (spec §2.3), in the reference's arithmetic order so results match it bit for bit.

use super::config::MapleConfig;
use crate::memory::{LINEAGE_MARKERS, MemoryItem, Scope, Taint};
use crate::text::QueryFeatures;
use serde::Serialize;

const DIRECT_SOURCES: [&str; 5] = ["direct_memory", "imported", "external", "tool", "environment"];
const BRIDGE_SOURCES: [&str; 3] = ["query_only", "bridge", "post_task_successful_experience"];

/// What the (lowercased) source route and memory type say, computed once per distinct pair.
#[derive(Clone, Copy, Debug, Default)]
struct Route {
    direct: bool,
    bridge: bool,
    lineage_bits: u8,
    post_task_or_benign: bool,
    dmi: bool,
    query_only_or_external: bool,
    cross_agent: bool,
    tool_web_env: bool,
    procedural_type: bool,
}

fn route_of(source_type: &str, memory_type: &str) -> Route {
    thread_local! {
        static CACHE: std::cell::RefCell<rustc_hash::FxHashMap<u64, (String, String, Route)>> = Default::default();
    }
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    (source_type, memory_type).hash(&mut h);
    let key = h.finish();
    CACHE.with(|c| {
        if let Some((s, m, r)) = c.borrow().get(&key)
            && s == source_type
            && m == memory_type
        {
            return *r;
        }
        let source = source_type.to_lowercase();
        let mtype = memory_type.to_lowercase();
        let mut lineage_bits = 0u8;
        for (i, m) in LINEAGE_MARKERS.iter().enumerate() {
            if source.contains(m) || mtype.contains(m) {
                lineage_bits |= 1 << i;
            }
        }
        let r = Route {
            direct: DIRECT_SOURCES.iter().any(|m| source.contains(m)),
            bridge: BRIDGE_SOURCES.iter().any(|m| source.contains(m)),
            lineage_bits,
            post_task_or_benign: source.contains("post_task") || source.contains("benign"),
            dmi: source.contains("direct_memory_injection"),
            query_only_or_external: source.contains("query_only") || source.contains("external"),
            cross_agent: source.contains("cross_agent")
                || (source.contains("agent") && source.contains("consolidation")),
            tool_web_env: ["tool", "web", "environment"].iter().any(|m| source.contains(m)),
            procedural_type: ["procedural", "policy", "permission", "tool", "credential"]
                .iter()
                .any(|m| mtype.contains(m)),
        };
        c.borrow_mut().insert(key, (source_type.to_string(), memory_type.to_string(), r));
        r
    })
}

pub(crate) fn clamp01(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}

/// The writer's trust as the reference reads it in the agent-trust signal and in derive:
/// `clamp01(float(s or 0.5))`. Python's `or` replaces exactly 0.0 by 0.5, so a writer whose
/// reputation fell to 0 is read as neutral (vector `C4a_agent_trust_zero_gate_flip`); the value
/// is clamped only after that, so a negative one reads as 0. With
/// [`MapleConfig::fix_writer_trust_zero_quirk`] 0.0 stays 0.0.
pub fn writer_trust(raw: f64, cfg: &MapleConfig) -> f64 {
    if raw == 0.0 && !cfg.fix_writer_trust_zero_quirk { 0.5 } else { clamp01(raw) }
}

/// The eight signals and their weighted total.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RiskSignals {
    /// Weighted total R in `[0, 1]`.
    pub total: f64,
    /// p.
    pub provenance: f64,
    /// ℓ.
    pub lineage: f64,
    /// sc.
    pub self_claim_success: f64,
    /// il.
    pub instruction_like: f64,
    /// ab.
    pub answer_binding: f64,
    /// tr.
    pub trigger_sensitivity: f64,
    /// cd.
    pub cluster_dominance: f64,
    /// at (distrust of the writer).
    pub agent_trust: f64,
}

/// The query side of a scored read.
#[derive(Clone, Copy, Debug)]
pub struct QueryContext<'a> {
    /// Features of the query text.
    pub query: &'a QueryFeatures,
    /// Cosine similarity of query and memory.
    pub sim: f64,
}

/// `memory_lifecycle_risk(entry, query, sim, cluster_share)`.
pub fn lifecycle_risk(
    item: &MemoryItem,
    query: Option<QueryContext<'_>>,
    cluster_share: f64,
    cfg: &MapleConfig,
) -> RiskSignals {
    let s = &cfg.signals;
    let f = &item.features;
    let route = route_of(&item.source_type, &item.memory_type);

    let mut p = 0.0;
    if route.direct {
        p += s.p_direct_source;
    }
    if route.bridge {
        p += s.p_bridge_source;
    }
    match item.taint {
        Taint::External => p += s.p_taint_external,
        Taint::Unverified => p += s.p_taint_unverified,
        Taint::Poisoned => p += s.p_taint_poisoned,
        Taint::Clean => {}
    }
    if item.scope == Scope::Team && item.trust < s.p_team_trust_below {
        p += s.p_team_low_trust;
    }
    let p = clamp01(p);

    let markers = (route.lineage_bits | item.parent_markers()).count_ones();
    let l = clamp01(s.lineage_per_marker * markers as f64);

    let mut sc = clamp01(s.self_claim_per_hit * f.self_claim_hits as f64);
    if sc > 0.0 && !(item.taint == Taint::Clean && item.trust >= s.p_team_trust_below) {
        sc = clamp01(sc + s.self_claim_boost);
    }

    let il = if f.instruction_like(cfg.fix_forbidden_case_quirk) {
        1.0
    } else {
        clamp01(s.instruction_per_hit * f.soft_instruction_hits as f64)
    };

    let ab = clamp01(s.answer_binding_per_hit * f.answer_binding_hits as f64);

    let mut tr = f.rare_trigger;
    if let Some(q) = query {
        // The cheap conditions first: the overlap only matters when one of them holds.
        if (tr > 0.0 || q.query.rare_trigger > 0.0)
            && !q.query.tokens.is_empty()
            && q.query.overlap(f.tokens.get()) >= s.trigger_overlap_min
        {
            tr += s.trigger_query_overlap;
        }
        if q.query.mentions_trigger && q.sim >= s.trigger_query_sim_min {
            tr += s.trigger_query_word;
        }
        tr = clamp01(tr);
    }

    let cd = clamp01((cluster_share - s.cluster_share_floor).max(0.0));
    let at = clamp01(1.0 - writer_trust(item.source_agent_trust, cfg));

    let w = &cfg.weights;
    let total = clamp01(
        w.provenance * p
            + w.lineage * l
            + w.self_claim * sc
            + w.instruction * il
            + w.answer_binding * ab
            + w.trigger * tr
            + w.cluster * cd
            + w.agent_trust * at,
    );
    RiskSignals {
        total,
        provenance: p,
        lineage: l,
        self_claim_success: sc,
        instruction_like: il,
        answer_binding: ab,
        trigger_sensitivity: tr,
        cluster_dominance: cd,
        agent_trust: at,
    }
}

/// `derive_provenance_scores`: recomputes τ and h from observable metadata (spec §2.3).
/// The lifecycle term reads the incoming τ (spec C2), then τ and h are overwritten.
pub fn derive_provenance(item: &mut MemoryItem, cfg: &MapleConfig) {
    let d = &cfg.derive;
    let route = route_of(&item.source_type, &item.memory_type);
    let mut trust = d.base_trust;
    let mut risk = d.base_risk;
    let mut add = |(t, r): (f64, f64)| {
        trust += t;
        risk += r;
    };
    if route.post_task_or_benign {
        add(d.post_task_or_benign);
    }
    if route.dmi {
        add(d.direct_memory_injection);
    }
    if route.query_only_or_external || item.taint == Taint::External {
        add(d.query_only_or_external);
    }
    if route.cross_agent {
        add(d.cross_agent);
    }
    if route.tool_web_env {
        add(d.tool_web_environment);
    }
    if item.scope == Scope::Team {
        add((0.0, d.team_scope_risk));
    }
    if item.allowed_agents.len() == 1 {
        add((0.0, d.single_reader_risk));
    }
    if route.procedural_type {
        add((0.0, d.procedural_type_risk));
    }
    match item.taint {
        Taint::Unverified => add(d.taint_unverified),
        Taint::Poisoned => add(d.taint_poisoned),
        _ => {}
    }
    if item.features.instruction_like(cfg.fix_forbidden_case_quirk) {
        add(d.instruction_like);
    }
    let (succ, fail) = (item.success_count, item.failure_count);
    if succ > fail {
        let diff = f64::from(succ - fail);
        add((
            (d.success_trust_per * diff).min(d.success_trust_cap),
            -(d.success_risk_per * diff).min(d.success_risk_cap),
        ));
    } else if fail > succ {
        let diff = f64::from(fail - succ);
        let x = (d.failure_per * diff).min(d.failure_cap);
        add((-x, x));
    }
    let s = writer_trust(item.source_agent_trust, cfg);
    let t_adj = (d.agent_trust_slope * (s - 0.5)).clamp(-d.agent_trust_cap, d.agent_trust_cap);
    add((t_adj, if s < d.agent_trust_low { d.agent_trust_low_risk } else { 0.0 }));
    let r = lifecycle_risk(item, None, 0.0, cfg);
    trust -= d.lifecycle_trust * r.provenance.max(r.lineage);
    risk += d.lifecycle_risk * r.total;
    item.trust = clamp01(trust);
    item.hazard = clamp01(risk);
}
