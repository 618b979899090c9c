//! The spread figure and its tracer (`memlink plot <scenario> --kind spread`): the tracer reads
//! the run without changing it, finds no exposure without an attack, and the figure is drawn.

mod common;

use memlink::run::{run_scenario, run_spread};

#[test]
fn the_tracer_leaves_the_run_unchanged_and_sees_the_attack() {
    let ls = common::bundled("scenarios/quickstart.ron");
    let (with, spreads) = run_spread(&ls, 42);
    assert_eq!(with.to_json(), run_scenario(&ls, 42).to_json(), "the tracer changed the run");
    assert_eq!(spreads.len(), 2);
    for (arm, t) in &spreads {
        let exposed = t.first_exposure.iter().filter(|e| e.is_some()).count();
        assert!(exposed > 0, "{arm}: MINJA on the quickstart reaches some prompt");
        assert_eq!(t.first_exposure.len(), 8);
        assert!(t.poisoned_prompts.iter().sum::<u64>() >= exposed as u64);
        for &(a, b) in t.edges.keys() {
            assert!(a < 8 && b < 8 && a != b, "{arm}: edge {a} → {b}");
        }
    }
}

#[test]
fn without_an_attack_no_prompt_is_poisoned() {
    let text = std::fs::read_to_string(common::path("scenarios/quickstart.ron")).unwrap();
    let start = text.find("attack: Minja").unwrap();
    let end = start + text[start..].find('\n').unwrap();
    // No attack and no attacker (an attacker agent's own handoffs are poison by themselves).
    let text = format!("{}attack: None,{}", &text[..start], &text[end..])
        .replace("attackers: Ids([0, 1, 5])", "attackers: Ids([])");
    let ls = common::load(&text);
    let (_, spreads) = run_spread(&ls, 42);
    for (arm, t) in &spreads {
        assert!(t.first_exposure.iter().all(|e| e.is_none()), "{arm}: {:?}", t.first_exposure);
        assert!(t.edges.is_empty(), "{arm}: {:?}", t.edges);
    }
}

#[test]
fn the_figure_is_drawn_for_small_and_large_teams() {
    let dir = common::scratch("spread", "figure");
    let ls = common::bundled("scenarios/quickstart.ron");
    let png = memlink::study::spread::draw(&ls, 42, Some(&dir.join("q.png"))).unwrap();
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    let svg = memlink::study::spread::draw(&ls, 42, Some(&dir.join("q.svg"))).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("No Defense") && text.contains("MAPLE-Guard") && text.contains("never exposed"), "{text}");
    // A team too large to draw agent by agent: exposure by hop distance from the attackers.
    let big = std::fs::read_to_string(common::path("scenarios/quickstart.ron"))
        .unwrap()
        .replace("agents: 8,", "agents: 70,")
        .replace("topology: Wheel,", "topology: BarabasiAlbert(2),")
        .replace("tasks: 60", "tasks: 6");
    let ls = common::load(&big);
    let svg = memlink::study::spread::draw(&ls, 42, Some(&dir.join("big.svg"))).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("hops from an attacker") && text.contains("1 hop ("), "{text}");
}

#[test]
fn hop_distances_follow_the_edges() {
    use memlink::engine::Streams;
    use memlink::topology::{CommGraph, Topology};
    let g = CommGraph::build(&Topology::Chain, 5, &Streams::new(1));
    let h = memlink::study::spread::hops_from(&g, &[0]);
    assert_eq!(h, vec![Some(0), Some(1), Some(2), Some(3), Some(4)]);
}
