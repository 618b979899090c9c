//! Threat-model capabilities of issue 17 beyond forgery: accumulation, laundering, sleepers,
//! the adaptive attacker, attacker fraction and a compromised summarizer. Each is off unless a
//! scenario lists it, does what it says when listed, and bad parameters are positioned errors.

mod common;

use memlink::attack::capability::{Accumulation, Sleeper};
use memlink::eval::metrics::ArmSummary;

/// The small MMLU scenario with `caps` as the MINJA attacker's capabilities and a third arm
/// running MAPLE-Guard with a verify-and-reject ledger.
fn with_caps(caps: &str, tasks: u32) -> memlink::scenario::LoadedScenario {
    let text = common::small("", tasks)
        .replace("attack: Minja(())", &format!("attack: Minja((capabilities: [{caps}]))"))
        .replace(
            r#"(name: "MAPLE-Guard", guard: Maple(()))"#,
            r#"(name: "MAPLE-Guard", guard: Maple(())), (name: "Ledger", guard: Maple(()), ledger: Some((verify: VerifyRejectUnsigned, keys: PerAgent)))"#,
        );
    common::load(&text)
}

fn arm<'a>(r: &'a memlink::run::ScenarioResult, name: &str) -> &'a ArmSummary {
    r.arms.iter().find(|a| a.arm == name).expect("arm")
}

fn asr3(a: &ArmSummary) -> f64 {
    a.rounds[2].asr_exposure
}

#[test]
fn an_empty_capability_list_is_todays_attack_for_every_memory_attack() {
    for attack in ["Minja(())", "Explicit(())", "MemoryGraft(())", "AgentPoison(())"] {
        let plain_text = common::small("", 12).replace("attack: Minja(())", &format!("attack: {attack}"));
        let listed_text = plain_text.replace(attack, &attack.replace("(())", "((capabilities: []))"));
        assert_ne!(plain_text, listed_text, "{attack}: the texts differ");
        let (plain, listed) = (common::load(&plain_text), common::load(&listed_text));
        let (a, b) = (memlink::run::run_scenario(&plain, 3), memlink::run::run_scenario(&listed, 3));
        assert_eq!(a.to_json(), b.to_json(), "{attack}");
        assert!(a.arms.iter().all(|x| x.capability.is_none()));
    }
}

#[test]
fn every_capability_changes_the_run_and_reproduces_it() {
    let base = memlink::run::run_scenario(&with_caps("", 24), 5);
    for caps in [
        "Accumulate(())",
        "Launder(())",
        "Sleep((dormant_tasks: 4))",
        "Adapt(())",
        "Adapt((mode: BlackBox))",
        "Summarizer(())",
    ] {
        let ls = with_caps(caps, 24);
        let (a, b) = (memlink::run::run_scenario(&ls, 5), memlink::run::run_scenario(&ls, 5));
        assert_eq!(a.to_json(), b.to_json(), "{caps}: deterministic");
        // Undefended, the black-box attacker is never blocked and stays on the paper's payload:
        // every capability changes some arm's run.
        let changed = a.arms.iter().zip(&base.arms).any(|(x, y)| x.trace_hash != y.trace_hash);
        assert!(changed, "{caps} changes the run");
        assert!(a.arms.iter().all(|x| x.capability.is_some()), "{caps}: the summary reports it");
    }
}

#[test]
fn fragments_stay_under_every_per_event_signal_and_keep_the_target() {
    let ls = common::load(&common::small("", 6));
    let wl = ls.scenario.workload.generate(&memlink::engine::Streams::new(7));
    let mut lex = memlink::text::Lexicon::new();
    for task in wl.tasks().iter().take(6) {
        for target in 0..task.options.len() as u8 {
            let a = Accumulation { fragments: 4 };
            let options: Vec<Vec<_>> =
                task.options.iter().map(|o| memlink::text::tokens_of(&o.to_lowercase(), &mut lex)).collect();
            for i in 0..4 {
                let f = memlink::text::analyze("Prior experience", &a.fragment_text(task, target, i), &mut lex);
                assert_eq!((f.self_claim_hits, f.soft_instruction_hits, f.answer_binding_hits), (0, 0, 0));
                assert!(!f.forbidden_fixed && !f.forbidden_quirk && f.rare_trigger == 0.0);
                // Options that share every keyword with another cannot be told apart by anyone.
                if let Some((opt, _)) = memlink::agent::stance(&f, &options) {
                    assert_eq!(opt, target, "{}", a.fragment_text(task, target, i));
                }
            }
        }
    }
}

#[test]
fn a_white_box_attacker_never_does_worse_than_the_paper_attacker_against_maple_guard() {
    let (mut paper, mut white) = (0.0, 0.0);
    for seed in 1..=4 {
        paper += asr3(arm(&memlink::run::run_scenario(&with_caps("", 40), seed), "MAPLE-Guard"));
        white += asr3(arm(&memlink::run::run_scenario(&with_caps("Adapt(())", 40), seed), "MAPLE-Guard"));
    }
    assert!(white >= paper, "white-box {white} against non-adaptive {paper}");
    assert!(white > 0.0, "the white-box attacker finds a way through on some seed");
}

#[test]
fn the_black_box_attacker_learns_from_blocked_writes() {
    let r = memlink::run::run_scenario(&with_caps("Adapt((mode: BlackBox))", 30), 2);
    let m = arm(&r, "MAPLE-Guard").capability.as_ref().unwrap();
    let n = arm(&r, "No Defense").capability.as_ref().unwrap();
    // Undefended, nothing is blocked: it never leaves the most persuasive variant.
    assert_eq!(n.variants.len(), 1, "{:?}", n.variants);
    assert!(m.variants.len() > 1, "blocked writes move it down the ladder: {:?}", m.variants);
}

#[test]
fn laundered_and_compromised_summaries_carry_honest_signatures() {
    // A direct write has no manager signature: verify-and-reject keeps it out.
    let direct = memlink::run::run_scenario(&with_caps("", 20), 4);
    let l = arm(&direct, "Ledger");
    assert_eq!(l.poison_direct_stored, 0);
    assert!(l.poison_direct_written > 0);
    // Laundered through benign relays, the last relay's manager signs it: the ledger lets it in.
    let laundered = memlink::run::run_scenario(&with_caps("Launder((hops: 1, parent_retention: 0.0))", 20), 4);
    let l = arm(&laundered, "Ledger");
    assert!(l.capability.as_ref().unwrap().laundered > 0);
    assert!(l.poison_direct_stored > 0, "signatures prove the writer, not the truth");
    assert_eq!(l.ledger.as_ref().unwrap().rejected, 0);
    // A compromised summarizer writes no direct poison, and the ledger rejects nothing.
    let s = memlink::run::run_scenario(&with_caps("Summarizer(())", 20), 4);
    let l = arm(&s, "Ledger");
    assert!(l.capability.as_ref().unwrap().compromised_summaries > 0);
    assert_eq!(l.ledger.as_ref().unwrap().rejected, 0);
}

#[test]
fn sleepers_wait_their_window_earn_q_and_then_activate() {
    let r = memlink::run::run_scenario(&with_caps("Sleep((dormant_tasks: 6))", 30), 3);
    let c = arm(&r, "No Defense").capability.as_ref().unwrap();
    let planted = c.planted_task.expect("planted");
    let activated = c.activated_task.expect("activated");
    assert!(activated - planted >= 6 && c.dormant_window == Some(activated - planted));
    assert!(c.edits > 0 && c.q_at_activation.is_some() && c.damage_after_activation.is_some());
    assert!(Sleeper { dormant_tasks: 6 }.active(planted, activated));
    // Against the ledger the dormant copies are unsigned direct writes: none is planted live.
    let l = arm(&r, "Ledger").capability.as_ref().unwrap();
    assert_eq!((l.stored, l.edits), (0, 0));
}

#[test]
fn no_attackers_write_no_poison() {
    let mut ls = with_caps("", 12);
    ls.scenario.attackers = memlink::scenario::Attackers::Count(0);
    let r = memlink::run::run_scenario(&ls, 1);
    assert!(r.arms.iter().all(|a| a.poison_direct_written == 0 && a.rounds[2].rda == 0.0));
}

#[test]
fn bad_capability_parameters_are_positioned_errors() {
    let root = common::root();
    for (caps, needle) in [
        ("Accumulate((fragments: 1))", "2..=16 fragments"),
        ("Launder((hops: 0))", "1..=8 hops"),
        ("Launder((parent_retention: 1.5))", "a probability in [0, 1]"),
        ("Sleep((dormant_tasks: 0))", "1..=10000 tasks"),
        ("Adapt((persuasion_floor: 9))", "1..=7"),
        ("Adapt((mode: GreyBox))", "GreyBox"),
        ("Summarizer((share: 2.0))", "a probability in [0, 1]"),
        ("Forge((fields: []))", "at least one field"),
    ] {
        let text =
            common::small("", 4).replace("attack: Minja(())", &format!("attack: Minja((capabilities: [{caps}]))"));
        let e = memlink::scenario::load_str(&text, &root.join("scenarios/test.ron")).expect_err(caps).to_string();
        assert!(e.contains("scenarios/test.ron:") && e.contains(needle), "{caps}: {e}");
    }
    let dir = std::env::temp_dir().join(format!("memlink-caps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read_to_string(root.join("scenarios/whatif/fraction.ron"))
        .unwrap()
        .replace("../paper/", &format!("{}/scenarios/paper/", root.display()));
    for (edit, needle) in [
        (
            good.replace("Some(Count(4)), placement: Some(Random)", "Some(Count(8)), placement: Some(Random)"),
            "fewer attackers",
        ),
        (good.replace("figures: [\"rda@3\", \"mdsr@3\"]", "figures: [\"pmur\"]"), "invalid `figures`"),
    ] {
        assert_ne!(edit, good, "{needle}: the edit applies");
        let p = dir.join("w.ron");
        std::fs::write(&p, &edit).unwrap();
        let e = memlink::study::whatif::WhatIf::load(&p).err().expect(needle).to_string();
        assert!(e.starts_with(&format!("{}:", p.display())) && e.contains(needle), "{e}");
    }
}

#[test]
fn a_ledger_key_file_is_read_and_a_bad_one_is_a_positioned_error() {
    let dir = std::env::temp_dir().join(format!("memlink-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scn = |file: &str| {
        common::small("", 6).replace(
            r#"(name: "MAPLE-Guard", guard: Maple(()))"#,
            &format!(
                r#"(name: "MAPLE-Guard", guard: Maple(()), ledger: Some((verify: Verify, key_file: Some("{file}"))))"#
            ),
        )
    };
    let good = "# the lab's ledger master key\n00112233445566778899aabbccddeeff\n00112233445566778899aabbccddeeff\n";
    std::fs::write(dir.join("good.key"), good).unwrap();
    std::fs::write(dir.join("short.key"), "0011").unwrap();
    std::fs::write(dir.join("bad.key"), "zz".repeat(32)).unwrap();
    let at = dir.join("s.ron");
    let ls = memlink::scenario::load_str(&scn("good.key"), &at).expect("a good key file loads");
    let key = ls.scenario.arms[1].ledger.as_ref().unwrap().key.clone().expect("read");
    assert_eq!(key.secret().expect("the key itself")[..4], [0x00, 0x11, 0x22, 0x33]);
    let r = memlink::run::run_scenario(&ls, 1);
    assert!(r.arms[1].ledger.as_ref().unwrap().signed > 0);
    for (file, needle) in [
        ("short.key", "64 hex digits, got 4 digits"),
        ("bad.key", "64 hex digits, got a character that is not one at digit 1"),
        ("none.key", "a readable key file"),
    ] {
        let e = memlink::scenario::load_str(&scn(file), &at).expect_err(file).to_string();
        assert!(!e.contains("zz"), "a key file's contents are never quoted: {e}");
        assert!(e.starts_with(&format!("{}:1:", at.display())) || e.contains("s.ron:"), "{e}");
        assert!(e.contains("key_file") && e.contains(needle), "{file}: {e}");
    }
}
