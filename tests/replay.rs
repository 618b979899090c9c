//! Record and replay (issue 18): a recorded run replays bit for bit, a counterfactual replay
//! accounts for every call, broken traces get positioned errors, and the reference harness's
//! traces import to the metrics they state.

mod common;

use memlink::agent::ReplayMode;
use memlink::scenario::LoadedScenario;
use memlink::study::trace::Trace;
use memlink::study::trace::replay::{ArmChoice, ReplayOptions, record_arm, record_scenario, replay};
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memlink-replay-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// A bundled scenario with its task count cut to `tasks` (the structure of the run is the
/// scenario's; the debug build keeps CI's time bounded).
fn cut(rel: &str, tasks: u32) -> LoadedScenario {
    let mut ls = common::bundled(rel);
    ls.scenario.workload.set_tasks(tasks);
    ls
}

/// Writes `trace` to a file and reads it back, as a user's replay would.
fn through_file(trace: &Trace, dir: &Path, name: &str) -> Trace {
    let p = dir.join(name);
    trace.write(&p).expect("trace written");
    Trace::read(&p).expect("trace reads back")
}

fn opts(arm: ArmChoice, mode: Option<ReplayMode>) -> ReplayOptions {
    ReplayOptions { arm, mode, fallback: None }
}

fn json<T: serde::Serialize>(x: &T) -> String {
    serde_json::to_string(x).expect("serializable")
}

#[test]
fn every_paper_scenario_and_arm_replays_bit_for_bit() {
    let dir = scratch("paper");
    let mut scenarios: Vec<String> = std::fs::read_dir(common::path("scenarios/paper"))
        .expect("paper scenarios")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "ron") && !p.file_name().unwrap().to_string_lossy().starts_with("grid")
        })
        .map(|p| format!("scenarios/paper/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    // The Table-2 settings carry every baseline arm, the LLM judges' calls among them.
    scenarios.push("scenarios/paper/table2/csqa-promptinject.ron".into());
    scenarios.push("scenarios/paper/table2/mmlu-minja.ron".into());
    scenarios.sort();
    assert!(scenarios.len() >= 17, "{scenarios:?}");
    let mut judged = 0;
    for rel in &scenarios {
        // AppWorld's scheduled poisoning starts after 20 warm-up tasks.
        let tasks = if rel.contains("longmemeval") {
            2
        } else if rel.contains("appworld") {
            24
        } else {
            4
        };
        let ls = cut(rel, tasks);
        let plain = memlink::run::run_scenario(&ls, ls.scenario.seed);
        let (recorded, traces) = record_scenario(&ls, ls.scenario.seed);
        assert_eq!(recorded.to_json(), plain.to_json(), "{rel}: recording changed the results");
        for (arm, trace) in ls.scenario.arms.iter().zip(&traces) {
            let t = through_file(trace, &dir, "t.jsonl");
            assert_eq!(t.calls, trace.calls, "{rel}/{}: the file holds every call", arm.name);
            judged += t.calls.iter().filter(|c| c.site.kind == memlink::agent::CallKind::Judge).count();
            let out =
                replay(&t, &opts(ArmChoice::Recorded, None)).unwrap_or_else(|e| panic!("{rel}/{}: {e}", arm.name));
            let i = ls.scenario.arms.iter().position(|a| a.name == arm.name).unwrap();
            assert_eq!(json(&out.result.arms[0]), json(&plain.arms[i]), "{rel}/{}: replayed summary", arm.name);
            assert_eq!(out.result.arms[0].trace_hash, plain.arms[i].trace_hash);
            assert!(out.arms[0].divergences.is_empty());
            assert_eq!(out.arms[0].calls, t.calls.len() as u64);
        }
    }
    assert!(judged > 0, "the Table-2 arms made judge calls");
}

#[test]
fn a_single_arm_replay_writes_the_same_summary_bytes() {
    let mut ls = cut("scenarios/paper/mmlu-minja-chain.ron", 6);
    ls.scenario.arms.truncate(1);
    let plain = memlink::run::run_scenario(&ls, 11);
    let (_, trace) = record_arm(&ls, &ls.scenario.arms[0], 11);
    let t = through_file(&trace, &scratch("single"), "t.jsonl");
    let out = replay(&t, &opts(ArmChoice::Recorded, None)).expect("strict replay");
    assert_eq!(out.result.to_json(), plain.to_json());
    assert_eq!(out.result.rounds_csv(), plain.rounds_csv());
}

#[test]
fn fallback_replay_under_the_same_guard_has_no_divergence() {
    let ls = cut("scenarios/paper/appworld-agentpoison-wheel.ron", 24);
    for arm in &ls.scenario.arms {
        let (_, trace) = record_arm(&ls, arm, 3);
        for mode in [ReplayMode::Fallback, ReplayMode::Flag] {
            let out = replay(&trace_of(&trace), &opts(ArmChoice::Named(arm.name.clone()), Some(mode))).expect("replay");
            assert!(out.arms[0].divergences.is_empty(), "{}: {:?}", arm.name, out.arms[0].first_divergences);
            let all = out.arms[0].shares.last().unwrap();
            assert_eq!((all.recorded, all.fallback, all.calls), (1.0, 0.0, trace.calls.len() as u64));
        }
    }
}

fn trace_of(t: &Trace) -> Trace {
    let mut t = t.clone();
    t.path = PathBuf::from("in-memory.jsonl");
    t
}

#[test]
fn a_counterfactual_accounts_for_every_call_and_a_guard_that_blocks_nothing_reproduces() {
    let ls = cut("scenarios/quickstart.ron", 12);
    let (plain, traces) = record_scenario(&ls, 42);
    let nd = trace_of(&traces[0]);
    assert_eq!(nd.header.arm, "No Defense");
    // MAPLE-Guard on No Defense's decisions: its blocks and its ranking change the prompts.
    let out = replay(&nd, &opts(ArmChoice::Named("MAPLE-Guard".into()), None)).expect("counterfactual");
    let a = &out.arms[0];
    assert_eq!(a.mode, "fallback");
    assert!(a.divergences.values().sum::<u64>() > 0);
    assert!(a.divergences.contains_key("memory set changed"), "{:?}", a.divergences);
    for s in &a.shares {
        let sum = s.recorded + s.downstream + s.fallback;
        assert!(s.calls == 0 && sum == 0.0 || (sum - 1.0).abs() < 1e-12, "{s:?}");
    }
    let answers: u64 = a.shares[..3].iter().map(|s| s.calls).sum();
    assert!(answers > 0);
    // Flag mode marks what follows a divergence; the shares still add up.
    let flag = replay(&nd, &opts(ArmChoice::Named("MAPLE-Guard".into()), Some(ReplayMode::Flag))).expect("flag");
    for s in &flag.arms[0].shares {
        assert!(s.calls == 0 || (s.recorded + s.downstream + s.fallback - 1.0).abs() < 1e-12);
    }
    // A guard that blocks nothing — No Defense under another name, and a Challenger that never
    // flags — makes the recorded calls, all of them, and lands on the recording's metrics.
    for arm in [
        r#"(name: "No Defense again", guard: NoDefense)"#,
        r#"(name: "Challenger that never flags", guard: Challenger((detector: (bias: -1000.0))))"#,
    ] {
        let out = replay(&nd, &opts(ArmChoice::Inline(arm.into()), None)).expect("inline arm");
        let a = &out.arms[0];
        let non_judge = a.shares.iter().find(|s| s.metric == "all").unwrap().calls
            - a.shares.iter().find(|s| s.metric == "message actions").unwrap().calls;
        assert_eq!(non_judge, nd.calls.len() as u64, "{arm}");
        assert!(a.divergences.keys().all(|k| k == "new call"), "{arm}: {:?}", a.divergences);
        let (r, p) = (&out.result.arms[0], &plain.arms[0]);
        assert_eq!(json(&r.rounds), json(&p.rounds), "{arm}");
        assert_eq!((r.sr, r.pmur, r.cpr, r.ppr), (p.sr, p.pmur, p.cpr, p.ppr), "{arm}");
    }
}

#[test]
fn strict_replay_of_another_arm_names_the_first_divergent_call() {
    let ls = cut("scenarios/quickstart.ron", 8);
    let (_, traces) = record_scenario(&ls, 42);
    let e = replay(&trace_of(&traces[0]), &opts(ArmChoice::Named("MAPLE-Guard".into()), Some(ReplayMode::Strict)))
        .expect_err("diverges");
    let m = e.to_string();
    assert!(m.starts_with("replay diverged: strict replay of"), "{m}");
    assert!(m.contains("the first: memory set changed: task 0"), "{m}");
}

#[test]
fn broken_traces_get_positioned_errors() {
    let ls = cut("scenarios/quickstart.ron", 4);
    let (_, trace) = record_arm(&ls, &ls.scenario.arms[0], 42);
    let dir = scratch("broken");
    let good = trace.to_jsonl();
    let lines: Vec<&str> = good.lines().collect();
    let n = lines.len();
    let check = |name: &str, text: String, needle: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let e = Trace::read(&p).expect_err(name).to_string();
        assert!(e.starts_with(&format!("{}:", p.display())), "{name}: {e}");
        assert!(e.contains(needle), "{name}: `{needle}` not in {e}");
    };
    // Truncated: the header promises more calls.
    check("truncated.jsonl", lines[..n - 5].join("\n") + "\n", "the trace ends after");
    // A line cut mid-way.
    check("cut.jsonl", lines[..n - 1].join("\n") + "\n" + &lines[n - 1][..40], &format!(":{n}:"));
    // Reordered.
    let mut re = lines.clone();
    re.swap(3, 4);
    check("reordered.jsonl", re.join("\n") + "\n", ":4:1: call `memlink.seq` 2");
    // Corrupted bytes inside a line.
    let mut bad = lines.clone();
    let corrupted = bad[6].replacen("\"choice\":", "\"choice\":\"x", 1);
    bad[6] = &corrupted;
    check("corrupted.jsonl", bad.join("\n") + "\n", ":7:");
    // A decision that does not fit its kind.
    let mut wrong = lines.clone();
    let w = wrong[2].replacen("\"memlink.call\":\"answer\"", "\"memlink.call\":\"summary\"", 1);
    wrong[2] = &w;
    check("wrong-kind.jsonl", wrong.join("\n") + "\n", ":3:1:");
    // Out of range.
    let mut far = lines.clone();
    let f = far[2].replacen("\"memlink.round\":0", "\"memlink.round\":9", 1);
    far[2] = &f;
    check("round.jsonl", far.join("\n") + "\n", "`memlink.round` below the header's 3 rounds");
    // A duplicate key.
    let mut dup: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    dup[3] = dup[2].replacen("\"memlink.seq\":1", "\"memlink.seq\":2", 1);
    check("duplicate.jsonl", dup.join("\n") + "\n", "is also on line 3");
    // Another format, an empty file.
    check("other.jsonl", good.replacen("memlink-trace", "other-trace", 1), ":1:1: a `format`");
    check("empty.jsonl", String::new(), ":1:1: an empty file");
    // An edited scenario no longer matches the header's hash.
    let edited = good.replacen("\"agents\":8,\"arms\"", "\"agents\":9,\"arms\"", 1);
    assert_ne!(edited, good);
    let p = dir.join("edited.jsonl");
    std::fs::write(&p, edited).unwrap();
    let t = Trace::read(&p).expect("parses");
    let e = replay(&t, &opts(ArmChoice::Recorded, None)).expect_err("hash").to_string();
    assert!(e.contains("invalid `scenario_hash`"), "{e}");
}

#[test]
fn a_scenario_file_of_another_world_is_refused() {
    let ls = cut("scenarios/quickstart.ron", 4);
    let (_, trace) = record_arm(&ls, &ls.scenario.arms[0], 42);
    let dir = scratch("world");
    let t = through_file(&trace, &dir, "t.jsonl");
    // The quickstart's own file: its world is the trace's (tasks cut to 4 here, so write one).
    let same =
        std::fs::read_to_string(common::path("scenarios/quickstart.ron")).unwrap().replace("tasks: 60", "tasks: 4");
    assert!(same.contains("tasks: 4"));
    let p = common::path("scenarios").join(format!("replay-test-{}.ron", std::process::id()));
    std::fs::write(&p, &same).unwrap();
    let ok = replay(&t, &opts(ArmChoice::File(p.clone()), None));
    let other = same.replace("topology: Wheel", "topology: Chain");
    std::fs::write(&p, &other).unwrap();
    let bad = replay(&t, &opts(ArmChoice::File(p.clone()), None));
    let _ = std::fs::remove_file(&p);
    let ok = ok.expect("same world");
    assert_eq!(ok.arms.len(), 2, "the file's arms");
    let e = bad.expect_err("another world").to_string();
    assert!(e.contains("invalid `arms`") && e.contains("differs from the trace's only in its name, arms"), "{e}");
}

#[test]
fn the_reference_stream_trace_imports_to_the_metrics_it_states() {
    let dir = common::path("tests/fixtures/reference-stream");
    let t = memlink::study::trace::import::stream(&dir.join("trace.jsonl"), Some(&dir.join("trace.summary.json")))
        .expect("imports");
    let t = through_file(&t, &scratch("stream"), "imported.jsonl");
    let m = memlink::study::trace::metrics(&t);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("trace.summary.json")).unwrap()).unwrap();
    let close = |a: Option<f64>, b: &serde_json::Value| (a.expect("known") - b.as_f64().unwrap()).abs() < 1e-12;
    assert!(close(m.rounds[2].rda, &s["rda_at_3"]));
    assert!(close(m.rounds[2].mdsr, &s["mdsr_at_3"]));
    for k in 0..3 {
        assert!(close(m.rounds[k].rda, &s["retrieval_damage_asr_by_round"][k]), "round {k}");
        assert!(close(m.rounds[k].mdsr, &s["mdsr_by_round"][k]), "round {k}");
    }
    assert_eq!((t.header.agents, t.header.attackers.clone(), m.metric_tasks), (4, vec![0], 4));
    assert_eq!(t.unparsed.len(), 1, "the output without an answer letter");
    // The structural key is the reference's: memory ids and the prompt hash.
    let c = t.calls.iter().find(|c| c.site.task == 2 && c.site.round == 2 && c.site.agent == 2).unwrap();
    assert_eq!(c.site.memories, vec!["mem_poison_t1_a0".to_string(), "m_e".to_string()]);
    assert_eq!(c.site.messages.as_deref().map(str::len), Some(64));
    // A replay of an imported trace runs in a memlink world the user names, whose calls the
    // recording does not hold: every call falls back, and says so.
    let world =
        common::load(&common::small("", 5).replace("agents: 8", "agents: 4").replace("Ids([0, 1, 5])", "Ids([0])"));
    let p = common::path("scenarios").join(format!("import-test-{}.ron", std::process::id()));
    std::fs::write(&p, common::small("", 5).replace("agents: 8", "agents: 4").replace("Ids([0, 1, 5])", "Ids([0])"))
        .unwrap();
    let out = replay(&t, &opts(ArmChoice::File(p.clone()), None));
    let _ = std::fs::remove_file(&p);
    let out = out.expect("replays in a named world");
    assert_eq!(out.arms.len(), world.scenario.arms.len());
    assert_eq!(out.arms[0].shares.last().unwrap().fallback, 1.0);
    // Without a world, it is refused.
    let e = replay(&t, &opts(ArmChoice::Recorded, None)).expect_err("no world").to_string();
    assert!(e.contains("an imported trace replays with --arm <scenario.ron>"), "{e}");
}

#[test]
fn the_reference_infa_trace_imports_to_the_metrics_it_states() {
    let dir = common::path("tests/fixtures/reference-infa");
    let t = memlink::study::trace::import::infa(&dir.join("maple_guard.trace.jsonl"), None).expect("imports");
    let t = through_file(&t, &scratch("infa"), "imported.jsonl");
    assert!(t.approximate.iter().all(|a| *a), "memory ids are reconstructed");
    let m = memlink::study::trace::metrics(&t);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let want = &s["methods"]["maple_guard"]["metrics"];
    for k in 0..4 {
        let acc = m.rounds[k].accuracy.expect("known");
        assert!((acc - want["acc_by_turn"][k].as_f64().unwrap()).abs() < 1e-12, "turn {k}");
        assert!((1.0 - acc - want["asr_by_turn"][k].as_f64().unwrap()).abs() < 1e-12, "turn {k}");
        assert!((m.rounds[k].mdsr.unwrap() - want["mdsr_by_turn"][k].as_f64().unwrap()).abs() < 1e-12, "turn {k}");
        assert_eq!(m.rounds[k].rda, None, "the INFA trace records no poison selection");
    }
    let c = t.calls.iter().find(|c| c.site.task == 1 && c.site.round == 2 && c.site.agent == 3).unwrap();
    assert_eq!(c.site.memories.len(), 5);
    assert_eq!(c.site.memories[0], "maple_guard_csqa_fixture_1_r1_a0");
}

#[test]
fn importers_refuse_records_without_the_fields_they_need() {
    let dir = scratch("import-bad");
    let src = std::fs::read_to_string(common::path("tests/fixtures/reference-stream/trace.jsonl")).unwrap();
    let summary = common::path("tests/fixtures/reference-stream/trace.summary.json");
    for field in ["round_selected_memory_ids", "paper_round_observations", "actual_inputs", "is_poisoning_task"] {
        let lines: Vec<String> = src
            .lines()
            .enumerate()
            .map(|(i, l)| {
                if i != 2 {
                    return l.to_string();
                }
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                if field == "round_selected_memory_ids" {
                    v["task_trace"].as_object_mut().unwrap().remove(field);
                } else {
                    v.as_object_mut().unwrap().remove(field);
                }
                v.to_string()
            })
            .collect();
        let p = dir.join(format!("{field}.jsonl"));
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        let e = memlink::study::trace::import::stream(&p, Some(&summary)).expect_err(field).to_string();
        assert!(e.starts_with(&format!("{}:3:1:", p.display())) && e.contains(field), "{e}");
    }
    let e = memlink::study::trace::import::stream(&common::path("tests/fixtures/reference-stream/trace.jsonl"), None)
        .expect_err("no summary")
        .to_string();
    assert!(e.contains("--summary"), "{e}");
    let ta = dir.join("ta.trace.jsonl");
    std::fs::write(&ta, "{\"sample_id\": \"t0\", \"attacker_instruction\": \"x\", \"communication_data\": []}\n")
        .unwrap();
    let e = memlink::study::trace::import::infa(&ta, None).expect_err("TA").to_string();
    assert!(e.contains(":1:1:") && e.contains("official evaluator"), "{e}");
    let garbage = dir.join("garbage.jsonl");
    std::fs::write(&garbage, "{\"task_index\": 0,\n").unwrap();
    let e = memlink::study::trace::import::stream(&garbage, Some(&summary)).expect_err("garbage").to_string();
    assert!(e.contains("garbage.jsonl:1:"), "{e}");
}

#[test]
fn the_three_commands_work_from_the_command_line() {
    use std::process::Command;
    let dir = scratch("cli");
    let memlink = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_memlink")).args(args).current_dir(common::root()).output().expect("runs")
    };
    let scn = common::path("scenarios").join(format!("cli-replay-{}.ron", std::process::id()));
    std::fs::write(&scn, common::small("", 6)).unwrap();
    let trace = dir.join("t.jsonl");
    let (s, t, out) = (scn.to_str().unwrap(), trace.to_str().unwrap(), dir.join("out"));
    let rec = memlink(&["run", s, "--record", t, "--out", out.to_str().unwrap()]);
    let _ = std::fs::remove_file(&scn);
    assert!(rec.status.success(), "{}", String::from_utf8_lossy(&rec.stderr));
    let nd = dir.join("t.no-defense.jsonl");
    assert!(nd.exists() && dir.join("t.maple-guard.jsonl").exists());
    let rep = memlink(&["replay", nd.to_str().unwrap(), "--out", dir.join("r").to_str().unwrap()]);
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    assert!(String::from_utf8_lossy(&rep.stdout).contains("no divergence"));
    let recorded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let replayed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r/summary.json")).unwrap()).unwrap();
    assert_eq!(recorded["arms"][0], replayed["arms"][0]);
    assert!(dir.join("r/replay.json").exists());
    let cf =
        memlink(&["replay", nd.to_str().unwrap(), "--arm", "MAPLE-Guard", "--out", dir.join("c").to_str().unwrap()]);
    assert!(cf.status.success(), "{}", String::from_utf8_lossy(&cf.stderr));
    let strict = memlink(&[
        "replay",
        nd.to_str().unwrap(),
        "--arm",
        "MAPLE-Guard",
        "--mode",
        "strict",
        "--out",
        dir.join("s").to_str().unwrap(),
    ]);
    assert_eq!(strict.status.code(), Some(1), "a strict divergence exits 1");
    assert!(String::from_utf8_lossy(&strict.stderr).contains("replay diverged"));
    let text = std::fs::read_to_string(&nd).unwrap();
    let cut = dir.join("cut.jsonl");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let bad = memlink(&["replay", cut.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2), "a corrupted trace is an input error");
    assert!(String::from_utf8_lossy(&bad.stderr).starts_with(&format!("error: {}:", cut.display())));
    let imp = memlink(&[
        "import-trace",
        "tests/fixtures/reference-infa/maple_guard.trace.jsonl",
        "--format",
        "infa",
        "--out",
        dir.join("infa.jsonl").to_str().unwrap(),
    ]);
    assert!(imp.status.success(), "{}", String::from_utf8_lossy(&imp.stderr));
    assert!(String::from_utf8_lossy(&imp.stdout).contains("memory ids reconstructed (approximate)"));
    let v = memlink(&["validate", dir.join("infa.jsonl").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&v.stdout).contains("ok — trace: reference-infa trace"));
}
