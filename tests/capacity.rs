//! Store capacity and eviction (issue 20): off by default; with a bound, every store stays
//! within it at the end of each task, the bank reuses released slots so the live set stays
//! bounded, each policy evicts what it says, and bad bounds are positioned errors.

mod common;

use memlink::memory::{Capacity, Eviction, MemoryBank, MemoryItem, Scope, Status};
use memlink::text::TextFeatures;
use memlink::world::World;

/// The small scenario with `capacity` in its protocol.
fn with_capacity(capacity: &str, tasks: u32) -> memlink::scenario::LoadedScenario {
    common::load(&common::small(&format!("protocol: (capacity: {capacity}),"), tasks))
}

/// A bank of one private store bounded at `n` under `policy`.
fn bank(n: usize, policy: Eviction) -> MemoryBank {
    let mut b = MemoryBank::new(2, 8);
    b.set_capacity(Some(Capacity { items: n, shared_items: None, policy }));
    b
}

/// Inserts a private item of agent 0 with utility Q `q` and intent key `key`.
fn put(b: &mut MemoryBank, q: f64, key: u64) -> u32 {
    let mut it = MemoryItem::new(format!("m{}", b.len()), "intent".into(), "text".into(), TextFeatures::default());
    it.utility_q = q;
    it.backend_q = q;
    it.scope = Scope::Private;
    b.insert(it, 0, key, &mut |_| vec![0.5; 8])
}

#[test]
fn fifo_evicts_the_oldest() {
    let mut b = bank(2, Eviction::Fifo);
    let ids: Vec<u32> = (0..4).map(|i| put(&mut b, 0.5, i)).collect();
    assert_eq!(b.private_store(0), &ids[2..]);
    assert_eq!(b.evicted(), 2);
    assert_eq!(b.location(ids[0]), memlink::memory::StoreKind::Evicted);
    // Each evicted intent's group is gone with its only member.
    assert_eq!(b.private_groups(0).len(), 2);
}

#[test]
fn lru_evicts_the_least_recently_placed() {
    let mut b = bank(2, Eviction::Lru);
    let a = put(&mut b, 0.5, 1);
    let c = put(&mut b, 0.5, 2);
    b.touch(a);
    let d = put(&mut b, 0.5, 3);
    assert_eq!(b.private_store(0), &[a, d], "the untouched item goes, though the touched one is older");
    assert_eq!(b.location(c), memlink::memory::StoreKind::Evicted);
}

#[test]
fn lowest_q_evicts_the_lowest_utility_and_never_the_newcomer() {
    let mut b = bank(2, Eviction::LowestQ);
    let a = put(&mut b, 0.9, 1);
    let c = put(&mut b, 0.2, 2);
    let d = put(&mut b, 0.0, 3);
    assert_eq!(b.private_store(0), &[a, d], "the newcomer enters even with the lowest Q");
    assert!(!b.private_store(0).contains(&c));
    // Ties go to the item inserted first.
    let e = put(&mut b, 0.9, 4);
    assert_eq!(b.private_store(0), &[a, e], "d (Q 0) goes first");
    let f = put(&mut b, 0.9, 5);
    assert_eq!(b.private_store(0), &[e, f], "a and e tie at 0.9: the older goes");
}

#[test]
fn released_slots_are_reused_and_ids_never_are() {
    let mut b = bank(1, Eviction::Fifo);
    for i in 0..50 {
        put(&mut b, 0.5, i);
        let freed = b.release();
        assert!(freed.len() <= 1);
    }
    assert_eq!(b.len(), 50, "50 ids handed out");
    assert!(b.slots() <= 2, "at most the held item and one released slot: {}", b.slots());
    let held = b.private_store(0)[0];
    assert_eq!(held, 49);
    assert_eq!(b.get(held).name, "m49");
    assert!(!b.is_live(0) && b.try_get(0).is_none());
    assert_eq!(b.status(0), Status::Active, "a released id keeps its status for the evaluator");
    assert_eq!(b.live_items().count(), 1);
}

#[test]
fn a_capacity_no_store_reaches_changes_nothing_but_the_eviction_count() {
    let plain = memlink::run::run_scenario(&common::load(&common::small("", 12)), 3);
    let roomy = memlink::run::run_scenario(&with_capacity("Some((items: 100000, policy: Lru))", 12), 3);
    for (a, b) in plain.arms.iter().zip(&roomy.arms) {
        assert_eq!(b.store_sizes.get("evicted"), Some(&0));
        let mut b = b.clone();
        b.store_sizes.remove("evicted");
        assert_eq!(
            serde_json::to_string(a).expect("json"),
            serde_json::to_string(&b).expect("json"),
            "{}: a bound never reached (rejected items released at each task's end) is today's run",
            a.arm
        );
    }
}

#[test]
fn bounded_stores_stay_bounded_evict_and_reproduce() {
    for policy in ["Fifo", "Lru", "LowestQ"] {
        let ls = with_capacity(&format!("Some((items: 4, shared_items: Some(6), policy: {policy}))"), 16);
        let (a, b) = (memlink::run::run_scenario(&ls, 3), memlink::run::run_scenario(&ls, 3));
        assert_eq!(a.to_json(), b.to_json(), "{policy}: deterministic");
        let plain = memlink::run::run_scenario(&common::load(&common::small("", 16)), 3);
        for (arm, base) in a.arms.iter().zip(&plain.arms) {
            assert!(arm.store_sizes["evicted"] > 0, "{policy} {}: something was evicted", arm.arm);
            assert!(arm.store_sizes["private"] <= 8 * 4, "{policy} {}: {:?}", arm.arm, arm.store_sizes);
            assert!(arm.store_sizes["shared"] <= 6, "{policy} {}: {:?}", arm.arm, arm.store_sizes);
            assert_ne!(arm.trace_hash, base.trace_hash, "{policy} {}: eviction changes the run", arm.arm);
        }
        let s = &ls.scenario;
        for arm in &s.arms {
            let (_, insp) = World::new(s, &ls.profile, arm, 3, false).run_inspected();
            let bank = &insp.bank;
            for a in 0..s.agents {
                assert!(bank.private_store(a).len() <= 4, "{policy}: agent {a}");
                let grouped: usize = bank.private_groups(a).iter().map(|g| g.members.len()).sum();
                assert_eq!(grouped, bank.private_store(a).len(), "{policy}: groups match the store");
                assert!(bank.private_groups(a).iter().all(|g| !g.members.is_empty()));
            }
            assert!(bank.shared_store().len() <= 6 && bank.quarantine_store().len() <= 4);
            // Every stored item is live and the slots stay near the live set, far below the
            // ids handed out.
            assert!(bank.private_store(0).iter().all(|id| bank.is_live(*id)));
            assert!(bank.slots() < bank.len() / 2, "{policy}: {} slots for {} ids", bank.slots(), bank.len());
        }
    }
}

#[test]
fn bad_capacities_are_positioned_errors() {
    for (cap, field) in [
        ("Some((items: 0, policy: Fifo))", "items"),
        ("Some((items: 4, shared_items: Some(0), policy: Fifo))", "shared_items"),
    ] {
        let text = common::small(&format!("protocol: (capacity: {cap}),"), 4);
        let err = memlink::scenario::load_str(&text, std::path::Path::new("/tmp/cap.ron")).expect_err(cap).to_string();
        assert!(err.contains("/tmp/cap.ron:") && err.contains(field), "{err}");
    }
    let text = common::small(
        "protocol: (capacity: Some((items: 4, policy: Lru))), timing: Async(llm: Fixed(3), message: Fixed(1)),",
        4,
    );
    let err = memlink::scenario::load_str(&text, std::path::Path::new("/tmp/cap.ron")).expect_err("async").to_string();
    assert!(err.contains("capacity") && err.contains("lockstep"), "{err}");
    let text = common::small("protocol: (capacity: Some((items: 4, policy: Oldest))),", 4);
    let err = memlink::scenario::load_str(&text, std::path::Path::new("/tmp/cap.ron")).expect_err("policy").to_string();
    assert!(err.contains("/tmp/cap.ron:"), "{err}");
}
