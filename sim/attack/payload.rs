//! What every memory-injection attack shares (spec §6): per poisoning task one base memory is
//! built, stealth-rewritten (§2.4) and copied — a private copy into each attacker's store
//! (`…_private_a{att}`, readable by that attacker) and one shared copy (`…_shared`, readable by
//! all). Each attack supplies a [`Payload`]: its texts, its metadata, its disguise.

use super::stealth::Stealth;
use super::{PoisonScope, PoisonWrite};
use crate::memory::{MemoryItem, Scope, Taint, Writer};
use crate::text::TextFeatures;
use crate::workload::{Task, letter};

/// One attack's base memory for one task, before copies.
#[derive(Clone, Debug)]
pub struct Payload {
    /// Attack family as the reference names it (results and id hashing).
    pub family: &'static str,
    /// Intent text (already scrubbed unless the stealth mode is `Obvious`).
    pub intent: String,
    /// Experience text (same).
    pub experience: String,
    /// Utility Q the writer claims.
    pub q: f64,
    /// Provenance trust τ the writer sets.
    pub trust: f64,
    /// Content hazard h the writer sets.
    pub hazard: f64,
    /// Taint before stealth.
    pub taint: Taint,
    /// Source and memory type of the undisguised attack.
    pub route: (&'static str, &'static str),
    /// Source and memory type under stealth (`_private` / `_shared` is appended to the source).
    pub disguise: (&'static str, &'static str),
    /// Lineage before scrubbing.
    pub parents: Vec<String>,
}

/// How an option is written into a payload: "option B (text)".
pub fn option_phrase(task: &Task, option: u8) -> String {
    format!("option {} ({})", letter(option), task.options[option as usize])
}

/// "A: text; B: text; …", the options a payload says it observed.
pub fn options_observed(task: &Task) -> String {
    let parts: Vec<String> =
        task.options.iter().enumerate().map(|(i, o)| format!("{}: {o}", letter(i as u8))).collect();
    parts.join("; ")
}

/// The first `n` cue keywords, comma-separated.
pub fn cue_list(task: &Task, n: usize) -> String {
    task.cues.iter().take(n).map(String::as_str).collect::<Vec<_>>().join(", ")
}

/// What a plan needs from the world: text features of (intent, experience), and the build-time
/// derive of the provenance scores (spec C9: attack items are derived at build, after stealth
/// and at commit; a no-op under the strict ledger).
pub struct PlanHooks<'a> {
    /// Features of (intent, experience).
    pub features: &'a mut dyn FnMut(&str, &str) -> TextFeatures,
    /// Recomputes τ and h of an item from its metadata.
    pub derive: &'a mut dyn FnMut(&mut MemoryItem),
    /// One shared copy per task (true) or one per attacker (LongMemEval).
    pub dedupe_shared: bool,
}

/// The copies of `payload` for `task` (targeting `target`) written by `attackers` in a system of
/// `agents` agents: built with the attack's own route, derived, then disguised by `stealth`;
/// features computed once (copies share their texts).
#[allow(clippy::too_many_arguments)]
pub fn plan(
    payload: &Payload,
    task: &Task,
    target: u8,
    attackers: &[u32],
    agents: u32,
    stealth: Stealth,
    scope: PoisonScope,
    hooks: &mut PlanHooks<'_>,
) -> Vec<PoisonWrite> {
    let mut copies: Vec<(Scope, u32)> = Vec::new();
    if scope != PoisonScope::SharedOnly {
        copies.extend(attackers.iter().map(|a| (Scope::Private, *a)));
    }
    if scope != PoisonScope::PrivateOnly {
        let sharers = if hooks.dedupe_shared { &attackers[..attackers.len().min(1)] } else { attackers };
        copies.extend(sharers.iter().map(|a| (Scope::Team, *a)));
    }
    let parents: Vec<std::sync::Arc<str>> = payload.parents.iter().map(|p| p.as_str().into()).collect();
    let parents = if stealth == Stealth::Obvious { parents } else { super::sanitize_parents(&parents) };
    let text_features = (hooks.features)(&payload.intent, &payload.experience);
    let mut out = Vec::with_capacity(copies.len());
    for (scope, att) in copies {
        // MINJA keeps the id hash it always had, so its runs stay byte-identical.
        let key = if payload.family == "minja_query" {
            format!("{}:{att}:{target}", task.id)
        } else {
            format!("{}:{}:{att}:{target}", payload.family, task.id)
        };
        let hash = crate::embed::Embedder::text_key(&key) & 0xff_ffff_ffff;
        let suffix = match scope {
            Scope::Private => format!("_private_a{att}"),
            Scope::Team => "_shared".into(),
        };
        let name = format!("mem_seed_pep_{}_a{att}_{hash:010x}{suffix}", task.id);
        // The reference builds each attacker's base memory as its private copy, derives it
        // (build), disguises and derives it again (stealth), and only then copies it; the shared
        // copy keeps the private base's τ and h until its commit-time derive (spec C9).
        let mut item =
            MemoryItem::new(name, payload.intent.as_str().into(), payload.experience.clone(), text_features.clone());
        item.utility_q = payload.q;
        item.backend_q = item.utility_q;
        item.hazard = payload.hazard;
        item.trust = payload.trust;
        item.taint = payload.taint;
        item.source_type = payload.route.0.into();
        item.memory_type = payload.route.1.into();
        item.origin_task = task.index;
        item.writer = Writer::External;
        item.scope = Scope::Private;
        item.allowed_agents = vec![att];
        item.allowed_task_classes = vec![task.class.to_string()];
        item.source_agent_trust = 0.5;
        item.set_parents(parents.clone());
        (hooks.derive)(&mut item);
        let side = if scope == Scope::Team { "_shared" } else { "_private" };
        if stealth != Stealth::Obvious {
            item.source_type = format!("{}{side}", payload.disguise.0).into();
            item.memory_type = payload.disguise.1.into();
        }
        stealth.apply_metadata(&mut item);
        (hooks.derive)(&mut item);
        if scope == Scope::Team {
            item.scope = Scope::Team;
            item.allowed_agents = (0..agents).collect();
        }
        out.push(PoisonWrite { item, scope, owner: att });
    }
    out
}

/// Applies `stealth`'s text scrub to a template (the scrub never touches workload words, so
/// scrubbing the template equals scrubbing the filled text).
pub fn scrub(stealth: Stealth, text: &str) -> String {
    if stealth == Stealth::Obvious { text.to_string() } else { super::sanitize_text(text) }
}
