//! A bounded fuzz campaign in CI (`memlink::testkit::fuzz`): mutations of every bundled scenario, grid,
//! calibration, explain item and profile, of a results file and of a calibration checkpoint, put
//! through the command that reads each. Every case must be accepted with finite outputs or
//! refused with a positioned input error; a panic fails the test with the case's input. Long
//! campaigns: `cargo run --release --example fuzz -- --cases 100000`.

use memlink::inputs::FileKind;
use memlink::testkit::fuzz::{Config, Corpus, Outcome, exercise, run};
use std::path::Path;

fn corpus() -> Corpus {
    Corpus::load(Path::new(env!("CARGO_MANIFEST_DIR"))).expect("the bundled corpus loads")
}

#[test]
fn a_bounded_campaign_keeps_the_rule() {
    let corpus = corpus();
    let cfg = Config { cases: 1000, seed: 11, max_decisions: 3_000.0, max_items: 10_000.0 };
    let report = run(&corpus, &cfg, &mut |_, _, _| {}, &mut |_, _| {});
    let shown: Vec<String> = report
        .failures
        .iter()
        .take(5)
        .map(|f| format!("case {} ({:?} {}): {}\n{}", f.case, f.kind, f.path.display(), f.what, f.input))
        .collect();
    assert!(report.failures.is_empty(), "{} failures:\n{}", report.failures.len(), shown.join("\n---\n"));
    assert_eq!(report.cases, 1000);
    // The mutations reach both sides of the rule, and the hostile classes are exercised.
    assert!(report.refused > 20 && report.ran + report.accepted > 20, "{report:?}");
    assert!(report.hostile > 150, "{report:?}");
}

#[test]
fn concurrent_writers_to_one_folder_keep_the_rule() {
    let dir = std::env::temp_dir().join(format!("memlink-fuzz-writers-{}", std::process::id()));
    let problems = memlink::testkit::fuzz::concurrent_writers(&dir, 30);
    assert!(problems.is_empty(), "{problems:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every kind of seed is in the corpus and passes its own pipeline unmutated (so the campaign
/// starts from inputs that work), except the large paper runs, which are validated only.
#[test]
fn every_seed_kind_is_present_and_accepted() {
    let corpus = corpus();
    let cfg = Config { max_decisions: 2_000.0, max_items: 10_000.0, ..Config::default() };
    for kind in [
        FileKind::Scenario,
        FileKind::Grid,
        FileKind::Calibration,
        FileKind::Profile,
        FileKind::Explain,
        FileKind::Results,
        FileKind::Checkpoint,
    ] {
        let seeds: Vec<_> = corpus.seeds.iter().filter(|s| s.kind == kind).collect();
        assert!(!seeds.is_empty(), "no {kind:?} seed");
        let s = seeds[0];
        let got = exercise(&corpus, s, &s.text, &cfg);
        assert!(matches!(got, Ok(o) if o != Outcome::Refused), "{kind:?} {}: {got:?}", s.path.display());
    }
}

/// The fuzzer's findings, each on its smallest input: they must be refused with a positioned
/// error (the rule), not crash a run or print normal-looking numbers.
#[test]
fn the_fuzzers_findings_are_refused_where_they_are() {
    let corpus = corpus();
    let cfg = Config::default();
    let quick = corpus.seeds.iter().find(|s| s.path.ends_with("scenarios/quickstart.ron")).expect("quickstart");
    let cases = [
        ("top_k: 3", "top_k: 65535", "top_k"),
        ("top_k: 3", "top_k: 3, backend_k: Some(0)", "backend_k"),
        ("timing: Lockstep", "timing: Async(llm: Fixed(5), message: Uniform(0, 18446744073709551615))", "message"),
        ("timing: Lockstep", "timing: Async(llm: LogNormal(1e308, 0.5), message: Fixed(5))", "llm"),
        ("tasks: 60", "tasks: 4294967295", "agents"),
        ("agents: 8", "agents: 100000", "agents"),
        ("rounds: 3", "rounds: 1000000", "agents"),
        ("tasks: 60", "tasks: 60, pool: 4294967295", "pool"),
    ];
    for (from, to, field) in cases {
        assert!(quick.text.contains(from), "{from}");
        let text = quick.text.replacen(from, to, 1);
        match memlink::scenario::load_str(&text, &quick.path) {
            Ok(_) => panic!("{to}: accepted"),
            Err(e) => {
                let msg = e.to_string();
                assert!(e.is_input_error(), "{to}: {msg}");
                assert!(msg.contains(&format!("`{field}`")), "{to}: {msg}");
                assert!(!msg.contains(":1:1:"), "{to}: an unpositioned error: {msg}");
            }
        }
        assert_eq!(exercise(&corpus, quick, &text, &cfg), Ok(Outcome::Refused), "{to}");
    }
    // Duplicate arm names would merge two arms' results.
    let dup = quick.text.replacen("name: \"MAPLE-Guard\"", "name: \"No Defense\"", 1);
    let e = memlink::scenario::load_str(&dup, &quick.path).expect_err("duplicate arms refused");
    assert!(e.to_string().contains("distinct arm names"), "{e}");
}

/// The output check sees a rendered non-finite number, not a name that happens to contain one
/// (the 100,000-case campaign's only flag was a mutated backbone named `qwen3.5-inf-a10b`).
#[test]
fn the_output_check_reads_words_not_names() {
    use memlink::testkit::fuzz::non_finite_word;
    assert_eq!(non_finite_word("| qwen3.5-inf-a10b | 42.0 |"), None);
    assert_eq!(non_finite_word("information, infinite, NaNo"), None);
    assert_eq!(non_finite_word("| 12.0 ± NaN |"), Some("NaN"));
    assert_eq!(non_finite_word("mean -inf"), Some("inf"));
    assert_eq!(non_finite_word("inf ± 3"), Some("inf"));
}
