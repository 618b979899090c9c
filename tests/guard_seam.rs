//! The `Guard` seam fits guards that act on messages instead of memory: a guard written
//! outside the crate plugs into a run, sees only speakers and texts, and its removals change
//! the vote without the guard touching any store.

mod common;

use memlink::engine::SimRng;
use memlink::guard::{Guard, GuardStage, MessageAction, MessageView};
use memlink::topology::CommGraph;
use memlink::world::World;
use std::sync::{Arc, Mutex};

/// Per round: (outputs shown, outputs carrying a final answer).
type Seen = Arc<Mutex<Vec<(u32, usize)>>>;

/// A message guard for tests: removes the outputs of `remove` every round and records, per
/// round, how many outputs it was shown and how many carried a final answer.
struct Scripted {
    remove: Vec<u32>,
    seen: Seen,
}

impl Guard for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn stage(&self) -> GuardStage {
        GuardStage::Message
    }
    fn review_messages(
        &mut self,
        _round: u32,
        round: &mut [MessageView],
        _graph: &CommGraph,
        _rng: &mut SimRng,
    ) -> Vec<MessageAction> {
        let answered = round.iter().filter(|m| m.text.contains("Final answer:")).count();
        self.seen.lock().unwrap().push((round.len() as u32, answered));
        self.remove.iter().map(|a| MessageAction::Remove(*a)).collect()
    }
}

fn scripted(remove: Vec<u32>) -> (Box<Scripted>, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    (Box::new(Scripted { remove, seen: seen.clone() }), seen)
}

#[test]
fn a_message_guard_plugs_in_and_changes_the_vote_only_through_outputs() {
    let ls = common::load(&common::small("", 12));
    let s = &ls.scenario;
    let (guard, _) = scripted(vec![0, 1, 2, 3, 4, 5]);
    let (run, insp) = World::with_guard(s, &ls.profile, "silence", guard, 7, false).run_inspected();
    assert_eq!(run.summary.guard, "scripted");
    // The undefended run on the same seed differs: only agents 6 and 7 still vote.
    let (base, base_insp) = World::new(s, &ls.profile, &s.arms[0], 7, false).run_inspected();
    assert_ne!(run.summary.trace_hash, base.summary.trace_hash);
    // The guard has no way to write: every stored item comes from the world's own writers.
    let writers = ["mem_seed_", "round_dialogue_", "benign_stream_"];
    assert!(insp.bank.live_items().all(|it| writers.iter().any(|w| it.name.starts_with(w))));
    // Memories that do not depend on the vote are the same in both runs for the first task
    // (the attack's payloads, the handoffs, the outcome memories of agents that still spoke)…
    let silenced =
        |name: &str| (0..6).any(|a| name.starts_with("benign_stream_0_") && name.ends_with(&format!("_agent_{a}")));
    let first_task = |b: &memlink::memory::MemoryBank| -> Vec<(String, String)> {
        b.live_items()
            .filter(|it| it.origin_task == 0 && !it.name.starts_with("benign_stream_team_"))
            .filter(|it| !silenced(&it.name))
            .map(|it| (it.name.clone(), it.experience.clone()))
            .collect()
    };
    assert!(!first_task(&insp.bank).is_empty());
    assert_eq!(first_task(&insp.bank), first_task(&base_insp.bank));
    // …while a removed output leaves no answer to consolidate: silenced benign agents wrote no
    // outcome memory, which they do in the undefended run.
    let outcome = |b: &memlink::memory::MemoryBank| b.live_items().filter(|it| silenced(&it.name)).count();
    assert_eq!(outcome(&insp.bank), 0);
    assert!(outcome(&base_insp.bank) > 0);
}

#[test]
fn the_guard_sees_every_round_and_only_speakers_and_texts() {
    let ls = common::load(&common::small("", 5));
    let s = &ls.scenario;
    let (guard, seen) = scripted(Vec::new());
    let (run, _) = World::with_guard(s, &ls.profile, "spy", guard, 7, false).run_inspected();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 5 * 3, "once per task and round");
    assert!(seen.iter().all(|&(n, with_answer)| n == 8 && with_answer == 8));
    // A guard that does nothing leaves the run identical to No Defense.
    let base = memlink::world::run_arm(s, &ls.profile, &s.arms[0], 7, false);
    assert_eq!(run.summary.trace_hash, base.summary.trace_hash);
}
