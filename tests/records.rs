//! Report records (`--records FILE --records-mode MODE`, sim/records.rs): a study rendered from
//! its records gives the bytes of the study simulated; `verify` re-simulates a stratified
//! sample; and both a changed configuration and a changed result with the configuration kept
//! (what a one-constant change in the code does) make the check fail.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn memlink(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memlink")).args(args).current_dir(common::root()).output().expect("binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memlink-records-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A copy of the small test grid in `dir`, its base scenario's MAPLE-Guard written as `maple`.
fn grid_in(dir: &Path, maple: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("models")).unwrap();
    std::fs::copy(common::path("models/qwen3.5-122b-a10b.ron"), dir.join("models/qwen3.5-122b-a10b.ron")).unwrap();
    let base = std::fs::read_to_string(common::path("tests/fixtures/grid/base.ron")).unwrap();
    assert!(base.contains("guard: Maple(())"));
    std::fs::write(dir.join("base.ron"), base.replace("guard: Maple(())", &format!("guard: {maple}"))).unwrap();
    let grid = std::fs::read_to_string(common::path("tests/fixtures/grid/small.ron")).unwrap();
    std::fs::write(dir.join("small.ron"), grid).unwrap();
    dir.join("small.ron")
}

fn grid(file: &Path, out: &Path, records: &Path, mode: &str) -> Output {
    memlink(&[
        "--records",
        records.to_str().unwrap(),
        "--records-mode",
        mode,
        "grid",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

/// (stratum, key, line) of every line of a store.
fn lines(p: &Path) -> Vec<(String, String, String)> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["stratum"].as_str().unwrap().to_string(), v["key"].as_str().unwrap().to_string(), l.to_string())
        })
        .collect()
}

#[test]
fn a_study_rendered_from_its_records_has_the_bytes_of_the_study_simulated() {
    let d = scratch("roundtrip");
    let file = grid_in(&d.join("a"), "Maple(())");
    let plain = memlink(&["grid", file.to_str().unwrap(), "--out", d.join("plain").to_str().unwrap()]);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let store = d.join("records.jsonl");
    let fill = grid(&file, &d.join("fill"), &store, "fill");
    assert!(fill.status.success(), "{}", stderr(&fill));
    // 12 runs (2 seeds x 3 topologies x 2 attacker sets) x 2 arms, each kept once; the journal is gone once the store is written.
    assert_eq!(lines(&store).len(), 24);
    assert!(!d.join("records.jsonl.journal").exists());
    let text = std::fs::read_to_string(&store).unwrap();
    let mut sorted = lines(&store);
    sorted.sort();
    assert_eq!(sorted.iter().map(|l| l.2.clone() + "\n").collect::<String>(), text, "sorted by stratum and key");
    let render = grid(&file, &d.join("render"), &store, "render");
    assert!(render.status.success(), "{}", stderr(&render));
    let verify = grid(&file, &d.join("verify"), &store, "verify");
    assert!(verify.status.success(), "{}", stderr(&verify));
    assert!(stderr(&verify).contains("every byte identical"), "{}", stderr(&verify));
    for dir in ["fill", "render", "verify"] {
        for f in ["results.jsonl", "table.md", "table.csv"] {
            assert_eq!(
                std::fs::read(d.join("plain").join(f)).unwrap(),
                std::fs::read(d.join(dir).join(f)).unwrap(),
                "{dir}/{f}"
            );
        }
    }
    // A second fill simulates nothing and writes the same bytes.
    let again = grid(&file, &d.join("again"), &store, "fill");
    assert!(stderr(&again).contains("(0 simulated and added)"), "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(&store).unwrap(), text);
    // Render without the store's records is an error naming the missing run.
    let empty = d.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let none = grid(&file, &d.join("none"), &empty, "render");
    assert_eq!(none.status.code(), Some(1));
    assert!(stderr(&none).contains("24 runs the study asked for are not stored"), "{}", stderr(&none));
    assert!(stderr(&none).contains("regenerate"), "{}", stderr(&none));
}

#[test]
fn a_one_constant_change_to_a_guards_configuration_fails_the_check() {
    let d = scratch("constant");
    let file = grid_in(&d.join("a"), "Maple(())");
    let store = d.join("a.jsonl");
    assert!(grid(&file, &d.join("a-out"), &store, "fill").status.success());

    // The constant changed in the configuration: the runs' keys change, the store lacks them.
    let changed = "Maple((write_gate: (risk_quarantine_min: 0.05)))";
    let file_b = grid_in(&d.join("b"), changed);
    let missing = grid(&file_b, &d.join("b-out"), &store, "verify");
    assert_eq!(missing.status.code(), Some(1), "{}", stderr(&missing));
    assert!(stderr(&missing).contains("MAPLE-Guard"), "{}", stderr(&missing));
    assert!(stderr(&missing).contains("not stored"), "{}", stderr(&missing));

    // The same constant changed in the code: the configuration (so every key) stays, the
    // results move. Made here by giving the changed grid's results the original keys.
    let store_b = d.join("b.jsonl");
    assert!(grid(&file_b, &d.join("b-fill"), &store_b, "fill").status.success());
    let a = lines(&store);
    let b = lines(&store_b);
    assert_eq!(a.len(), b.len());
    let mut moved = 0;
    let mut code_changed = String::new();
    for ((sa, ka, la), (sb, kb, lb)) in a.iter().zip(&b) {
        assert_eq!(sa, sb, "the strata name the same runs");
        let lb = lb.replace(kb.as_str(), ka);
        moved += usize::from(lb != *la);
        code_changed.push_str(&lb);
        code_changed.push('\n');
    }
    assert!(moved > 0, "the constant moves some MAPLE-Guard run of the grid");
    let store_c = d.join("c.jsonl");
    std::fs::write(&store_c, code_changed).unwrap();
    // Rendering alone cannot see it; the sampled re-simulation does.
    assert!(grid(&file, &d.join("c-render"), &store_c, "render").status.success());
    let check = grid(&file, &d.join("c-verify"), &store_c, "verify");
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
    assert!(stderr(&check).contains("differ from their records"), "{}", stderr(&check));
    assert!(stderr(&check).contains("MAPLE-Guard"), "{}", stderr(&check));
}

#[test]
fn a_corrupted_store_is_a_positioned_error() {
    let d = scratch("corrupt");
    let file = grid_in(&d.join("a"), "Maple(())");
    let store = d.join("bad.jsonl");
    std::fs::write(&store, "{\"stratum\":\"x\",\"key\":\"k\",\"result\":{\"arm\":1}}\n").unwrap();
    let o = grid(&file, &d.join("out"), &store, "verify");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("bad.jsonl:1:"), "{}", stderr(&o));
    assert!(stderr(&o).contains("expected a report record"), "{}", stderr(&o));
    // A journal cut off by a kill loses only its last line.
    let store = d.join("resume.jsonl");
    assert!(grid(&file, &d.join("first"), &store, "fill").status.success());
    let text = std::fs::read_to_string(&store).unwrap();
    std::fs::remove_file(&store).unwrap();
    let cut = &text[..text.len() - 30];
    std::fs::write(d.join("resume.jsonl.journal"), cut).unwrap();
    let o = grid(&file, &d.join("second"), &store, "fill");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("(1 simulated and added)"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&store).unwrap(), text);
}
