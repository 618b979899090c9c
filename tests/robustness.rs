//! Each finding of the robustness audit (a mutation fuzzer over every command's inputs) as a
//! test of the command line: the input is refused with an error naming the file, the position
//! and what was expected, and exit code 2 — never a panic, an abort, a run of hours, or a
//! normal-looking number computed from an impossible one.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn memlink_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memlink")).args(args).current_dir(dir).output().expect("binary runs")
}

fn memlink(args: &[&str]) -> Output {
    memlink_in(&common::root(), args)
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memlink-robust-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Exit code 2 and an error that names `file`, says `needle`, and does not point at 1:1 unless
/// `anywhere` (a whole-file problem).
fn refused(o: &Output, file: &str, needle: &str) -> String {
    let (out, err) = text(o);
    assert_eq!(o.status.code(), Some(2), "stdout {out} stderr {err}");
    assert!(err.contains(file), "error names the file {file}: {err}");
    assert!(err.contains(needle), "error says `{needle}`: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// A variant of the quickstart scenario in a scratch folder that has the models beside it.
fn variant(name: &str, from: &str, to: &str) -> PathBuf {
    let base = std::fs::read_to_string(common::path("scenarios/quickstart.ron")).unwrap();
    assert!(base.contains(from), "{from}");
    let d = scratch(name);
    std::fs::create_dir_all(d.join("models")).unwrap();
    for m in ["qwen3.5-122b-a10b.ron", "gemma-4-31b.ron"] {
        std::fs::copy(common::path(&format!("models/{m}")), d.join("models").join(m)).unwrap();
    }
    let p = d.join(format!("{name}.ron"));
    std::fs::write(&p, base.replacen(from, to, 1)).unwrap();
    p
}

fn run_refused(name: &str, from: &str, to: &str, needle: &str) -> String {
    let p = variant(name, from, to);
    let err = refused(&memlink(&["run", p.to_str().unwrap()]), &format!("{name}.ron:"), needle);
    // validate refuses exactly what run refuses.
    let v = refused(&memlink(&["validate", p.to_str().unwrap()]), &format!("{name}.ron:"), needle);
    assert_eq!(err, v);
    err
}

#[test]
fn scenarios_that_panicked_in_run_are_refused_at_validation() {
    run_refused("backend-k", "top_k: 3)", "top_k: 3, backend_k: Some(0))", "`backend_k`");
    run_refused(
        "uniform",
        "timing: Lockstep",
        "timing: Async(llm: Fixed(5), message: Uniform(0, 18446744073709551615))",
        "`message`",
    );
    run_refused("top-k", "top_k: 3)", "top_k: 65535)", "`top_k`");
}

#[test]
fn impossible_values_are_refused_where_they_are_written() {
    // Non-finite numbers anywhere, at their position.
    let e = run_refused("nan", "rounds: 3", "rounds: 3, epsilon: NaN", "finite number");
    assert!(e.contains("nan.ron:14:36:"), "{e}");
    run_refused("inf", "rounds: 3", "rounds: 3, epsilon: 1e400", "finite number");
    // Duplicate arm names would merge two arms' results.
    run_refused("dup", "name: \"MAPLE-Guard\"", "name: \"No Defense\"", "distinct arm names");
    // A log-normal latency whose median overflows the clock.
    run_refused(
        "lognormal",
        "timing: Lockstep",
        "timing: Async(llm: LogNormal(1e308, 0.5), message: Fixed(5))",
        "`llm`",
    );
    // A MAPLE threshold of 1e308 would overflow the read score.
    run_refused("huge", "guard: Maple(())", "guard: Maple((firewall: (min_score: -1e308)))", "magnitude");
}

#[test]
fn a_profile_with_impossible_parameters_is_refused() {
    for (name, from, to, needle) in [
        ("skill", "skill:", "skill: NaN, x:", "finite number"),
        ("temp", "temperature:", "temperature: 1e-320, x:", "temperature`"),
        ("logit", "knowledge_logit:", "knowledge_logit: 1e300, x:", "knowledge_logit`"),
    ] {
        let p = variant(&format!("profile-{name}"), "agents: 8", "agents: 8");
        let prof = p.parent().unwrap().join("models/qwen3.5-122b-a10b.ron");
        let t = std::fs::read_to_string(&prof).unwrap();
        // Replace the first occurrence's value, keeping the rest of the line as a dummy field
        // the deny-unknown check would catch if the value were accepted.
        let at = t.find(from).unwrap_or_else(|| panic!("{from}"));
        let end = at + t[at..].find(',').unwrap();
        let fixed = format!("{}{}{}", &t[..at], to.trim_end_matches(", x:"), &t[end..]);
        std::fs::write(&prof, fixed).unwrap();
        refused(&memlink(&["run", p.to_str().unwrap()]), "qwen3.5-122b-a10b.ron:", needle);
    }
}

#[test]
fn runs_too_big_for_the_machine_are_refused_with_the_estimate_and_the_knob() {
    for (name, from, to) in [
        ("agents", "agents: 8", "agents: 100000"),
        ("tasks", "tasks: 60", "tasks: 4294967295"),
        ("rounds", "rounds: 3", "rounds: 1000000"),
    ] {
        let e = run_refused(&format!("big-{name}"), from, to, "a run that fits in memory");
        assert!(e.contains("estimated") && e.contains("Turn down"), "{e}");
    }
    // MEMLINK_MAX_MEMORY lowers the limit; the quickstart then no longer fits.
    let o = Command::new(env!("CARGO_BIN_EXE_memlink"))
        .args(["validate", "scenarios/quickstart.ron"])
        .current_dir(common::root())
        .env("MEMLINK_MAX_MEMORY", "1M")
        .output()
        .unwrap();
    refused(&o, "quickstart.ron:7:5:", "a run that fits in memory");
    let o = Command::new(env!("CARGO_BIN_EXE_memlink"))
        .args(["validate", "scenarios/quickstart.ron"])
        .current_dir(common::root())
        .env("MEMLINK_MAX_MEMORY", "plenty")
        .output()
        .unwrap();
    refused(&o, "quickstart.ron", "MEMLINK_MAX_MEMORY");
}

#[test]
fn backbones_resolve_from_the_scenario_and_a_missing_one_is_positioned() {
    // From inside scenarios/, the bundled profile is still found.
    let o = memlink_in(&common::root().join("scenarios"), &["validate", "quickstart.ron"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = memlink_in(&common::root().join("scenarios/paper"), &["validate", "../quickstart.ron"]);
    assert!(o.status.success(), "{:?}", text(&o));
    // A backbone that names no profile: the scenario's `backbone` line.
    let p = variant("nobackbone", "\"qwen3.5-122b-a10b\"", "\"no-such-model\"");
    refused(&memlink(&["validate", p.to_str().unwrap()]), "nobackbone.ron:15:5", "no-such-model.ron");
}

#[test]
fn explain_refuses_values_outside_their_domain() {
    let item = "scenarios/explain/team-promotion.ron";
    for (flag, value, needle) in
        [("--sim", "NaN", "--sim"), ("--sim", "1.5", "cosine similarity"), ("--reader", "99", "team size")]
    {
        let o = memlink(&["explain", item, "--query", "strong acid", flag, value]);
        refused(&o, "<command line>", needle);
    }
    let o = memlink(&["explain", "--intent", "x", "--experience", "y", "--q", "inf"]);
    refused(&o, "<command line>", "utility Q");
    // In a file, at the field's position.
    let d = scratch("explain");
    let t = std::fs::read_to_string(common::path(item)).unwrap().replacen("trust: 0.55", "trust: 1.7", 1);
    let f = d.join("item.ron");
    std::fs::write(&f, t).unwrap();
    refused(&memlink(&["explain", f.to_str().unwrap()]), "item.ron:13:5:", "a trust in [0, 1]");
}

fn grid_file(name: &str, body: &str) -> PathBuf {
    let d = common::root().join("target").join(format!("robust-grids-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(format!("{name}.ron"));
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn grids_refuse_empty_lists_round_zero_and_point_into_their_settings() {
    let g = grid_file("seeds", "(name: \"g\", base: \"../../scenarios/quickstart.ron\", seeds: [])");
    refused(&memlink(&["grid", g.to_str().unwrap()]), "seeds.ron:1:", "`seeds`");
    let g = grid_file("topos", "(name: \"g\", base: \"../../scenarios/quickstart.ron\",\n topologies: [])");
    refused(&memlink(&["validate", g.to_str().unwrap()]), "topos.ron:2:", "`topologies`");
    let g = grid_file("round", "(name: \"g\", base: \"../../scenarios/quickstart.ron\", seeds: [1])");
    refused(&memlink(&["grid", g.to_str().unwrap(), "--round", "0"]), "<command line>", "`round`");
    refused(&memlink(&["grid", g.to_str().unwrap(), "--round", "4"]), "<command line>", "1 to 3");
    // An error of one setting points at that setting, not at 1:1.
    let g = grid_file(
        "setting",
        "(\n  name: \"g\",\n  settings: [\n    (name: \"ok\", base: \"../../scenarios/quickstart.ron\"),\n    (name: \"bad\", base: \"../../scenarios/quickstart.ron\",\n     attacker_sets: Some([[0, 1, 9]])),\n  ],\n)",
    );
    refused(&memlink(&["validate", g.to_str().unwrap()]), "setting.ron:6:", "agent ids below 8");
    let g = grid_file("missing", "(\n  name: \"g\",\n  settings: [\n    (name: \"m\", base: \"nope.ron\"),\n  ],\n)");
    refused(&memlink(&["validate", g.to_str().unwrap()]), "missing.ron:4:", "a readable file");
}

fn results_file(name: &str, edit: impl Fn(&str) -> String) -> PathBuf {
    let line = r#"{"grid":"g","run":0,"setting":"s","backbone":"b","seed":1,"topology":"wheel","attackers":"base","arm":"No Defense","guard":"no_defense","mdsr":[0.5,0.4,0.3],"rda":[0.2,0.3,0.4],"asr":[0.1,0.1,0.1],"mdsr_upper":[],"rda_lower":[],"trace_hash":"x"}"#;
    let two = format!("{line}\n{}\n", line.replace("\"run\":0", "\"run\":1").replace("wheel", "chain"));
    let p = scratch("results").join(format!("{name}.jsonl"));
    std::fs::write(&p, edit(&two)).unwrap();
    p
}

#[test]
fn report_refuses_corrupted_results() {
    let ok = results_file("ok", |t| t.to_string());
    let o = memlink(&["report", ok.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    type Edit = Box<dyn Fn(&str) -> String>;
    let cases: [(&str, Edit, &str); 5] = [
        ("empty", Box::new(|_| String::new()), "empty"),
        ("negative", Box::new(|t| t.replacen("0.5,0.4,0.3", "-5,0.4,0.3", 1)), "rates in [0, 1]"),
        ("huge", Box::new(|t| t.replacen("0.5,0.4,0.3", "1e308,0.4,0.3", 1)), "rates in [0, 1]"),
        ("fewer", Box::new(|t| t.replacen("0.5,0.4,0.3]", "0.5,0.4]", 1)), "one value per round"),
        ("dupe", Box::new(|t| t.replacen("\"run\":1", "\"run\":0", 1)), "one record per run and arm"),
    ];
    for (name, edit, needle) in cases {
        let p = results_file(name, edit);
        refused(&memlink(&["report", p.to_str().unwrap()]), &format!("{name}.jsonl:"), needle);
        // validate reads results files too, and says the same.
        refused(&memlink(&["validate", p.to_str().unwrap()]), &format!("{name}.jsonl:"), needle);
    }
    // Records of one arm with fewer rounds than the others would change its @3 cell silently.
    let p = results_file("short", |t| {
        let mut lines: Vec<String> = t.lines().map(String::from).collect();
        lines[1] = lines[1]
            .replace("0.5,0.4,0.3", "0.5,0.4")
            .replace("0.2,0.3,0.4", "0.2,0.3")
            .replace("0.1,0.1,0.1", "0.1,0.1");
        lines.join("\n")
    });
    refused(&memlink(&["report", p.to_str().unwrap()]), "short.jsonl:2:", "rounds, as every record of its arm");
}

#[test]
fn validate_takes_every_kind_of_file_and_names_it() {
    let ok = results_file("kinds", |t| t.to_string());
    for (file, kind) in [
        ("scenarios/quickstart.ron", "scenario"),
        ("scenarios/paper/grid-rounds.ron", "grid"),
        ("scenarios/calibration/qwen-table2-nodefense.ron", "calibration"),
        ("models/gemma-4-31b.ron", "backbone profile"),
        ("scenarios/explain/minja-strong-shared.ron", "explain item"),
        (ok.to_str().unwrap(), "grid results"),
    ] {
        let o = memlink(&["validate", file]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{file}: {err}");
        assert!(out.contains(&format!("ok — {kind}:")), "{file}: {out}");
    }
}

#[test]
fn calibrate_resume_refuses_an_impossible_checkpoint() {
    let cal =
        memlink::study::calibrate::Calibration::load(&common::path("scenarios/calibration/qwen-table2-nodefense.ron"))
            .expect("calibration");
    let good = serde_json::to_string_pretty(&cal.example_checkpoint()).unwrap();
    let state = Path::new("qwen-table2-nodefense.state.json");
    assert!(cal.checkpoint_from_str(&good, state).is_ok());
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    // A vertex outside its parameter's bounds.
    let mut out_of_bounds = v.clone();
    out_of_bounds[0]["vertices"][0][0][0] = serde_json::json!(1e6);
    let e = cal.checkpoint_from_str(&out_of_bounds.to_string(), state).unwrap_err().to_string();
    assert!(e.contains("outside its bounds"), "{e}");
    // Iterations and evaluations that no fit writes.
    v[0]["evaluations"] = serde_json::json!(0);
    let e = cal.checkpoint_from_str(&v.to_string(), state).unwrap_err().to_string();
    assert!(e.contains("evaluations"), "{e}");
    // And through the command line: `--resume` reads the checkpoint before fitting anything.
    let d = scratch("resume");
    std::fs::write(d.join("qwen-table2-nodefense.state.json"), out_of_bounds.to_string()).unwrap();
    let o = memlink(&[
        "calibrate",
        "scenarios/calibration/qwen-table2-nodefense.ron",
        "--out",
        d.to_str().unwrap(),
        "--resume",
        "--profile-out",
        d.join("p.ron").to_str().unwrap(),
    ]);
    refused(&o, "qwen-table2-nodefense.state.json", "outside its bounds");
}
