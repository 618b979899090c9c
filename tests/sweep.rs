//! The sweep engine from the command line: a killed sweep resumes to the bytes of an
//! uninterrupted one, shards merge to the bytes of an unsharded run, `merge` refuses a missing or
//! duplicated run, grids share the engine, and bad sweep files get positioned errors.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn memlink(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memlink")).args(args).current_dir(common::root()).output().expect("binary runs")
}

fn ok(o: &Output) -> String {
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "stdout {out}\nstderr {err}");
    out.into_owned()
}

fn refused(o: &Output, needle: &str) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "error says `{needle}`: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// A scratch folder with a small base scenario, the models beside it, and a sweep over it.
fn setup(name: &str, sweep_body: &str, tasks: u32) -> (PathBuf, PathBuf) {
    let d = std::env::temp_dir().join(format!("memlink-sweep-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("models")).unwrap();
    std::fs::copy(common::path("models/qwen3.5-122b-a10b.ron"), d.join("models/qwen3.5-122b-a10b.ron")).unwrap();
    std::fs::write(d.join("base.ron"), common::small("", tasks)).unwrap();
    let sweep = d.join("s.ron");
    std::fs::write(&sweep, sweep_body).unwrap();
    (d, sweep)
}

const OAT: &str = r#"(
    name: "t",
    base: "base.ron",
    replicates: Some(6),
    design: Oat(steps: [0.8, 1.2]),
    factors: [
        (name: Some("w.provenance"), path: "arms[MAPLE-Guard].guard.weights.provenance"),
        (name: Some("read.risk_min"), path: "arms[MAPLE-Guard].guard.firewall.risk_min"),
        (name: Some("memory_weight"), path: "profile.model.memory_weight"),
    ],
)"#;

const OUTPUTS: [&str; 5] = ["summary.md", "runs.csv", "runs.jsonl", "analysis.json", "problem.json"];

fn outputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| OUTPUTS.contains(&n.as_str()) || n.ends_with(".svg"))
        .collect();
    files.sort();
    assert!(files.len() >= OUTPUTS.len() + 2, "{files:?}");
    files.into_iter().map(|f| (f.clone(), std::fs::read(dir.join(&f)).unwrap())).collect()
}

#[test]
fn a_killed_sweep_resumes_to_the_bytes_of_an_uninterrupted_one() {
    let (d, sweep) = setup("kill", OAT, 14);
    let s = sweep.to_str().unwrap();
    let whole = d.join("whole");
    let first = memlink(&["sweep", s, "--out", whole.to_str().unwrap(), "--quiet"]);
    ok(&first);
    // A fresh folder: every run is simulated, and the status line claims nothing was stored.
    let status = String::from_utf8_lossy(&first.stderr).into_owned();
    assert!(status.contains("ran 42 runs\n") && !status.contains("stored"), "{status}");
    let killed = d.join("killed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_memlink"))
        .args(["sweep", s, "--out", killed.to_str().unwrap(), "--quiet"])
        .current_dir(common::root())
        .spawn()
        .unwrap();
    let runs = killed.join("runs");
    let t0 = std::time::Instant::now();
    loop {
        let n = std::fs::read_dir(&runs)
            .map(|r| r.filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json"))).count())
            .unwrap_or(0);
        if n >= 4 || t0.elapsed().as_secs() > 120 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SIGKILL: nothing is flushed, nothing is cleaned up.
    child.kill().unwrap();
    child.wait().unwrap();
    let done = std::fs::read_dir(&runs).unwrap().count();
    assert!(done < 42, "the sweep was still running when killed ({done} files)");
    assert!(!killed.join("summary.md").exists());
    let o = ok(&memlink(&["sweep", s, "--out", killed.to_str().unwrap(), "--resume", "--quiet"]));
    assert!(o.contains("wrote"), "{o}");
    assert_eq!(outputs(&whole), outputs(&killed));
    // A plain rerun runs nothing more.
    let again = memlink(&["sweep", s, "--out", killed.to_str().unwrap(), "--quiet"]);
    ok(&again);
    let status = String::from_utf8_lossy(&again.stderr).into_owned();
    assert!(status.contains("ran 0 runs; 42 were already stored"), "{status}");
}

#[test]
fn shards_merge_to_the_bytes_of_an_unsharded_run_and_merge_checks_the_runs() {
    let (d, sweep) = setup("shard", OAT, 8);
    let s = sweep.to_str().unwrap();
    let whole = d.join("whole");
    ok(&memlink(&["sweep", s, "--out", whole.to_str().unwrap(), "--quiet"]));
    let shards: Vec<PathBuf> = (1..=3).map(|i| d.join(format!("shard{i}"))).collect();
    for (i, dir) in shards.iter().enumerate() {
        let o =
            ok(&memlink(&["sweep", s, "--out", dir.to_str().unwrap(), "--shard", &format!("{}/3", i + 1), "--quiet"]));
        assert!(o.contains("memlink merge"), "{o}");
        assert!(!dir.join("summary.md").exists(), "a shard alone writes no outputs");
    }
    // Slurm's array variables choose the shard when --shard is absent.
    let slurm = d.join("slurm2");
    let o = Command::new(env!("CARGO_BIN_EXE_memlink"))
        .args(["sweep", s, "--out", slurm.to_str().unwrap(), "--quiet"])
        .current_dir(common::root())
        .env("SLURM_ARRAY_TASK_ID", "2")
        .env("SLURM_ARRAY_TASK_MIN", "1")
        .env("SLURM_ARRAY_TASK_COUNT", "3")
        .output()
        .unwrap();
    ok(&o);
    let names = |p: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(p.join("runs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&slurm), names(&shards[1]));
    let merged = d.join("merged");
    let args: Vec<&str> = ["merge"]
        .into_iter()
        .chain(shards.iter().map(|p| p.to_str().unwrap()))
        .chain(["--out", merged.to_str().unwrap()])
        .collect();
    ok(&memlink(&args));
    assert_eq!(outputs(&whole), outputs(&merged));
    // A missing shard, and a run present twice, are refused.
    refused(
        &memlink(&[
            "merge",
            shards[0].to_str().unwrap(),
            shards[1].to_str().unwrap(),
            "--out",
            d.join("m2").to_str().unwrap(),
        ]),
        "missing",
    );
    let first = std::fs::read_dir(shards[0].join("runs")).unwrap().next().unwrap().unwrap().path();
    std::fs::copy(&first, shards[1].join("runs").join(first.file_name().unwrap())).unwrap();
    let m3 = d.join("m3");
    let args: Vec<&str> = ["merge"]
        .into_iter()
        .chain(shards.iter().map(|p| p.to_str().unwrap()))
        .chain(["--out", m3.to_str().unwrap()])
        .collect();
    refused(&memlink(&args), "exactly one shard folder");
}

#[test]
fn bad_sweep_files_and_corrupted_results_get_positioned_errors() {
    let (d, sweep) = setup("bad", &OAT.replace("guard.firewall.risk_min", "guard.firewall.risk_max"), 6);
    let e = refused(&memlink(&["sweep", sweep.to_str().unwrap(), "--quiet"]), "risk_max");
    assert!(e.contains("s.ron:8:"), "positioned at the factor: {e}");
    // A range outside the parameter's domain: a probability beyond 1.
    let body = OAT.replace(
        r#"(name: Some("memory_weight"), path: "profile.model.memory_weight"),"#,
        r#"(name: Some("epsilon"), path: "protocol.epsilon", range: Some((0.0, 1.5))),"#,
    );
    std::fs::write(&sweep, body.replace("Oat(steps: [0.8, 1.2])", "Lhs(samples: 8)")).unwrap();
    let e = refused(&memlink(&["validate", sweep.to_str().unwrap()]), "epsilon");
    assert!(e.contains("s.ron:9:"), "{e}");
    // An unknown design parameter.
    std::fs::write(&sweep, OAT.replace("Oat(steps: [0.8, 1.2])", "Morris(trajectories: 4, levels: 3)")).unwrap();
    refused(&memlink(&["sweep", sweep.to_str().unwrap()]), "even number of levels");
    // A corrupted stored run: named, with its position; deleting it reruns it.
    std::fs::write(&sweep, OAT.replace("Some(6)", "Some(1)")).unwrap();
    let out = d.join("out");
    ok(&memlink(&["sweep", sweep.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]));
    let f = std::fs::read_dir(out.join("runs")).unwrap().next().unwrap().unwrap().path();
    std::fs::write(&f, "{\"hash\": 3").unwrap();
    let e = refused(
        &memlink(&["sweep", sweep.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]),
        "delete the file to rerun it",
    );
    assert!(e.contains(f.file_name().unwrap().to_str().unwrap()) && e.contains(":1:"), "{e}");
    std::fs::remove_file(&f).unwrap();
    ok(&memlink(&["sweep", sweep.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]));
}

#[test]
fn every_design_runs_and_draws_its_figure() {
    for (design, figure) in [
        ("Factorial(levels: 2)", "heatmap-"),
        ("Lhs(samples: 4)", "rounds-"),
        ("Morris(trajectories: 2, levels: 4)", "morris-"),
        ("Sobol(samples: 4)", "sobol-"),
    ] {
        let body = OAT.replace("Oat(steps: [0.8, 1.2])", design).replace("Some(6)", "Some(1)");
        let (d, sweep) = setup(&format!("design-{}", &figure[..figure.len() - 1]), &body, 4);
        let out = d.join("out");
        ok(&memlink(&["sweep", sweep.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]));
        let names: Vec<String> =
            std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert!(names.iter().any(|n| n.starts_with(figure) && n.ends_with(".svg")), "{design}: {names:?}");
        // Figures are readable by others, as the other outputs are (they were 0600).
        use std::os::unix::fs::PermissionsExt;
        for n in names.iter().filter(|n| n.ends_with(".svg") || n.ends_with(".md")) {
            let mode = std::fs::metadata(out.join(n)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode & 0o044, 0o044, "{n}: mode {mode:o}");
        }
        let problem: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("problem.json")).unwrap()).unwrap();
        assert_eq!(problem["num_vars"], 3);
        // Every arm has its figure and its section, not only the focus arm (issue 46).
        let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
        for arm in ["No_Defense", "MAPLE-Guard"] {
            if figure != "rounds-" {
                assert!(
                    names.iter().any(|n| n.starts_with(figure) && n.contains(arm)),
                    "{design}: no {arm} figure in {names:?}"
                );
            }
        }
        assert!(summary.contains("### No Defense") && summary.contains("### MAPLE-Guard"), "{summary}");
        // A Morris or Sobol design writes SALib's files in its sample order.
        if figure == "morris-" || figure == "sobol-" {
            let x = std::fs::read_to_string(out.join("salib-X.txt")).unwrap();
            let y = std::fs::read_to_string(out.join("salib-Y.txt")).unwrap();
            assert_eq!(x.lines().count() + 1, y.lines().count(), "{design}: X and Y rows (Y has a header)");
            assert!(y.starts_with("# ") && y.lines().next().unwrap().contains("MAPLE-Guard/"), "{y}");
        }
    }
    // A CSV design runs its rows verbatim (a SALib sample).
    let (d, sweep) =
        setup("csv", &OAT.replace("Oat(steps: [0.8, 1.2])", "Csv(\"design.csv\")").replace("Some(6)", "Some(1)"), 4);
    std::fs::write(d.join("design.csv"), "w.provenance,read.risk_min,memory_weight\n0.2,0.5,3.0\n0.3,0.4,2.0\n")
        .unwrap();
    let out = d.join("out");
    ok(&memlink(&["sweep", sweep.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]));
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert!(csv.lines().any(|l| l.contains(",0.3,0.4,2.0,")), "{csv}");
    // The same design as np.savetxt writes it (no header, space-separated, a `#` comment): the
    // columns are the factors in the sweep's order, and the runs are the same bytes.
    std::fs::write(
        d.join("design.csv"),
        "# a SALib sample\n2.000000000000000111e-01 5.000000000000000000e-01 3.000000000000000000e+00\n2.999999999999999889e-01 4.000000000000000222e-01 2.000000000000000000e+00\n",
    )
    .unwrap();
    let out2 = d.join("out-savetxt");
    ok(&memlink(&["sweep", sweep.to_str().unwrap(), "--out", out2.to_str().unwrap(), "--quiet"]));
    let csv2 = std::fs::read_to_string(out2.join("runs.csv")).unwrap();
    assert!(csv2.lines().any(|l| l.contains(",0.3,0.4,2.0,")), "{csv2}");
    // Two columns for three factors: refused, saying what was expected.
    std::fs::write(d.join("design.csv"), "0.2 0.5\n").unwrap();
    refused(
        &memlink(&["sweep", sweep.to_str().unwrap(), "--out", d.join("o3").to_str().unwrap()]),
        "exactly 3 columns",
    );
    // A PNG on request.
    let png = d.join("fig.png");
    ok(&memlink(&["plot", out.to_str().unwrap(), "--kind", "rounds", "--out", png.to_str().unwrap()]));
    // An arm the sweep does not have is refused by name, with the arms it has.
    let e = refused(
        &memlink(&["plot", out.to_str().unwrap(), "--kind", "rounds", "--arm", "Nope"]),
        "an arm of this sweep",
    );
    assert!(e.contains("MAPLE-Guard") && e.contains("`Nope`"), "{e}");
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
}

#[test]
fn a_grid_runs_through_the_engine_and_a_rerun_skips_what_is_done() {
    let (d, _) = setup("grid", OAT, 6);
    let grid = d.join("g.ron");
    std::fs::write(&grid, "(name: \"g\", base: \"base.ron\", seeds: [1, 2, 3])").unwrap();
    let out = d.join("out");
    let o = memlink(&["grid", grid.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]);
    ok(&o);
    let first = std::fs::read(out.join("results.jsonl")).unwrap();
    assert_eq!(std::fs::read_dir(out.join("runs")).unwrap().count(), 3);
    // The stored runs give the records `run_grid` computes directly.
    let (spec, runs) = memlink::study::grid::expand(&grid).unwrap();
    let direct = memlink::study::grid::run_grid(&spec, &runs);
    assert_eq!(memlink::study::grid::read_records(&out.join("results.jsonl")).unwrap(), direct);
    let o = memlink(&["grid", grid.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]);
    ok(&o);
    assert_eq!(first, std::fs::read(out.join("results.jsonl")).unwrap());
}

/// `sweep --ensemble`: the fit's outputs are the plain sweep's bytes (summary.md gains a
/// section at its end), and ensemble.json gives every quantity its predictive interval.
#[test]
fn an_ensemble_sweep_keeps_the_fits_outputs_and_adds_predictive_intervals() {
    let (d, sweep) = setup("ensemble", &OAT.replace("Some(6)", "Some(3)"), 8);
    std::fs::copy(
        common::path("models/qwen3.5-122b-a10b.ensemble.ron"),
        d.join("models/qwen3.5-122b-a10b.ensemble.ron"),
    )
    .unwrap();
    let s = sweep.to_str().unwrap();
    let (plain, with) = (d.join("plain"), d.join("with"));
    ok(&memlink(&["sweep", s, "--out", plain.to_str().unwrap(), "--quiet"]));
    ok(&memlink(&["sweep", s, "--ensemble", "2", "--out", with.to_str().unwrap(), "--quiet"]));
    for ((name, a), (other, b)) in outputs(&plain).into_iter().zip(outputs(&with)) {
        assert_eq!(name, other);
        if name == "summary.md" {
            let (a, b) = (String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
            let extra = b.strip_prefix(&a).expect("the plain summary, then the ensemble's section");
            assert!(
                extra.contains("## Calibration uncertainty") && extra.contains("first 2 posterior draws"),
                "{extra}"
            );
            assert!(extra.contains("memory_weight×1.2 effect"), "{extra}");
        } else {
            assert!(a == b, "{name} is the plain sweep's");
        }
    }
    let e: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(with.join("ensemble.json")).unwrap()).unwrap();
    assert_eq!(e["draws"], 2);
    let q = e["quantities"].as_array().unwrap();
    // Two arms × two default metrics × (nominal + 3 factors × 2 steps).
    assert!(!q.is_empty() && q.len().is_multiple_of(7), "{}", q.len());
    for x in q {
        let p = &x["predictive"];
        assert!(p["interval"][0].as_f64().unwrap() <= p["interval"][1].as_f64().unwrap(), "{x}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn integer_factors_record_the_simulated_value_and_oat_refuses_a_list_of_values() {
    // Latin hypercube over top_k in [1, 5]: the design's values are fractions, the runs use the
    // nearest integer, and runs.csv must say what ran.
    let body = r#"(
    name: "ints",
    base: "base.ron",
    replicates: Some(1),
    design: Lhs(samples: 4),
    factors: [(path: "protocol.top_k", range: Some((1.0, 5.0)))],
)"#;
    let (d, sweep) = setup("ints", body, 3);
    let out = d.join("out");
    ok(&memlink(&["sweep", sweep.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]));
    let mut rdr = csv::Reader::from_path(out.join("runs.csv")).unwrap();
    let col = rdr.headers().unwrap().iter().position(|h| h == "top_k").expect("a top_k column");
    let values: Vec<f64> = rdr.records().map(|r| r.unwrap()[col].parse().unwrap()).collect();
    assert!(!values.is_empty());
    for v in &values {
        assert_eq!(*v, v.round(), "top_k recorded as {v}, not the value simulated");
    }
    // problem.json says the factor is an integer (SALib ignores the key; a reader does not).
    let problem: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("problem.json")).unwrap()).unwrap();
    assert_eq!(problem["integer"], serde_json::json!(["top_k"]), "{problem}");
    // OAT steps multiples of the nominal value: a factor's `values` would be ignored, so it is refused.
    let body = OAT.replace(
        r#"(name: Some("memory_weight"), path: "profile.model.memory_weight"),"#,
        r#"(path: "protocol.top_k", values: Some([1, 3, 5])),"#,
    );
    let (_, sweep) = setup("oat-values", &body, 3);
    let e = refused(&memlink(&["sweep", sweep.to_str().unwrap()]), "for an OAT design");
    assert!(e.contains("factors[top_k]"), "{e}");
}
