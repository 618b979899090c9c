//! The `Guard` seam fits guards that act on messages instead of memory: a guard written
//! outside the crate plugs into a run, sees only speakers and texts, and its removals change
//! the vote without the guard touching any store.

mod common;

use memlink::engine::SimRng;
use memlink::guard::{Guard, GuardStage, MessageAction, MessageView};
use memlink::world::World;
use std::sync::Mutex;

/// Removes the outputs of some agents every round.
struct SilenceAgents {
    agents: Vec<u32>,
}

impl Guard for SilenceAgents {
    fn name(&self) -> &str {
        "silence_agents"
    }
    fn stage(&self) -> GuardStage {
        GuardStage::Message
    }
    fn review_messages(&self, _round: &mut [MessageView], _rng: &mut SimRng) -> Vec<MessageAction> {
        self.agents.iter().map(|a| MessageAction::Remove(*a)).collect()
    }
}

#[test]
fn a_message_guard_plugs_in_and_changes_the_vote_only_through_outputs() {
    let ls = common::load(&common::small("", 12));
    let s = &ls.scenario;
    let guard = SilenceAgents { agents: vec![0, 1, 2, 3, 4, 5] };
    let (run, insp) = World::with_guard(s, &ls.profile, "silence", Box::new(guard), 7, false).run_inspected();
    assert_eq!(run.summary.guard, "silence_agents");
    // The undefended run on the same seed differs: only agents 6 and 7 still vote.
    let (base, base_insp) = World::new(s, &ls.profile, &s.arms[0], 7, false).run_inspected();
    assert_ne!(run.summary.trace_hash, base.summary.trace_hash);
    // The guard has no way to write: every stored item comes from the world's own writers.
    let writers = ["mem_seed_", "round_dialogue_", "benign_stream_"];
    assert!(insp.bank.items().iter().all(|it| writers.iter().any(|w| it.name.starts_with(w))));
    // Memories that do not depend on the vote are the same in both runs for the first task
    // (the attack's payloads, the handoffs, each agent's own outcome memory).
    let first_task = |b: &memlink::memory::MemoryBank| -> Vec<(String, String)> {
        b.items()
            .iter()
            .filter(|it| it.origin_task == 0 && !it.name.starts_with("benign_stream_team_"))
            .map(|it| (it.name.clone(), it.experience.clone()))
            .collect()
    };
    assert!(!first_task(&insp.bank).is_empty());
    assert_eq!(first_task(&insp.bank), first_task(&base_insp.bank));
}

#[test]
fn the_guard_sees_every_round_and_only_speakers_and_texts() {
    let ls = common::load(&common::small("", 5));
    let s = &ls.scenario;
    let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
    struct Spy(std::sync::Arc<Mutex<Vec<(u32, usize)>>>);
    impl Guard for Spy {
        fn name(&self) -> &str {
            "spy"
        }
        fn stage(&self) -> GuardStage {
            GuardStage::Message
        }
        fn review_messages(&self, round: &mut [MessageView], _rng: &mut SimRng) -> Vec<MessageAction> {
            self.0
                .lock()
                .unwrap()
                .push((round.len() as u32, round.iter().filter(|m| m.text.contains("Final answer:")).count()));
            Vec::new()
        }
    }
    let (run, _) = World::with_guard(s, &ls.profile, "spy", Box::new(Spy(seen.clone())), 7, false).run_inspected();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 5 * 3, "once per task and round");
    assert!(seen.iter().all(|&(n, with_answer)| n == 8 && with_answer == 8));
    // A guard that does nothing leaves the run identical to No Defense.
    let base = memlink::world::run_arm(s, &ls.profile, &s.arms[0], 7, false);
    assert_eq!(run.summary.trace_hash, base.summary.trace_hash);
}
