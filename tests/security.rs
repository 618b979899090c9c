//! Hostile input files (issue 44's findings): no panic, no hang, no read outside the path
//! policy, no other file's contents and no key in any output or message.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

fn memlink_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memlink")).args(args).current_dir(dir).output().expect("binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A scratch folder holding the bundled profiles, as a project folder would.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memlink-security-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("models")).unwrap();
    for m in ["qwen3.5-122b-a10b.ron", "gemma-4-31b.ron"] {
        std::fs::copy(common::path(&format!("models/{m}")), d.join("models").join(m)).unwrap();
    }
    d
}

fn ledger_scenario(ledger: &str) -> String {
    common::small("", 6).replace(
        r#"(name: "MAPLE-Guard", guard: Maple(()))"#,
        &format!(r#"(name: "MAPLE-Guard", guard: Maple(()), ledger: Some((verify: VerifyRejectUnsigned{ledger})))"#),
    )
}

/// Exit 2, a message naming `file`, no panic.
fn refused(o: &Output, file: &str) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(e.contains(file), "the message names {file}: {e}");
    e
}

#[test]
fn a_key_with_a_multi_byte_character_is_a_positioned_error_that_does_not_print_it() {
    let d = scratch("multibyte");
    let key = format!("{}é0", &KEY[..62]);
    std::fs::write(d.join("s.ron"), ledger_scenario(&format!(r#", key: Some("{key}")"#))).unwrap();
    let o = memlink_in(&d, &["validate", "s.ron"]);
    let e = refused(&o, "s.ron");
    assert!(e.contains("at digit 63"), "{e}");
    assert!(!e.contains(&KEY[..40]), "the key is not printed: {e}");
    // Through a key file: the file's contents are not printed either.
    std::fs::write(d.join("k.key"), format!("{}é0", &KEY[..62])).unwrap();
    std::fs::write(d.join("f.ron"), ledger_scenario(r#", key_file: Some("k.key")"#)).unwrap();
    let e = refused(&memlink_in(&d, &["validate", "f.ron"]), "f.ron");
    assert!(e.contains("key_file") && !e.contains(&KEY[..40]), "{e}");
}

#[test]
fn devices_fifos_and_oversized_files_are_refused_without_reading_them() {
    let d = scratch("devices");
    let fifo = d.join("fifo.key");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for (name, file) in [("zero", "/dev/zero"), ("fifo", fifo.to_str().unwrap())] {
        // Named by absolute path, they are outside the path policy too; allowed explicitly,
        // they are refused for what they are.
        std::fs::write(d.join(format!("{name}.ron")), ledger_scenario(&format!(r#", key_file: Some("{file}")"#)))
            .unwrap();
        let o = memlink_in(&d, &["--allow-root", "/dev", "validate", &format!("{name}.ron")]);
        let e = refused(&o, &format!("{name}.ron"));
        assert!(e.contains("key_file"), "{e}");
        assert!(e.contains("regular file") || e.contains("outside"), "{e}");
    }
    // A sweep whose CSV design is /dev/zero.
    let sweep = std::fs::read_to_string(common::path("scenarios/sweeps/quick-oat.ron")).unwrap();
    let base = common::path("scenarios/quickstart.ron");
    std::fs::copy(&base, d.join("quickstart.ron")).unwrap();
    let csv = sweep.replacen("base: \"../quickstart.ron\"", "base: \"quickstart.ron\"", 1).replacen(
        "design: Oat(steps: [0.8, 1.2])",
        "design: Csv(\"/dev/zero\")",
        1,
    );
    assert!(csv.contains("Csv(\"/dev/zero\")"), "the sweep's design was replaced");
    std::fs::write(d.join("sweep.ron"), csv).unwrap();
    let o = memlink_in(&d, &["--allow-root", "/dev", "validate", "sweep.ron"]);
    let e = refused(&o, "sweep.ron");
    assert!(e.contains("design") && e.contains("regular file"), "{e}");
}

#[test]
fn files_outside_the_path_policy_are_refused_and_never_quoted() {
    let d = scratch("policy");
    let outside = scratch("policy-outside");
    std::fs::write(outside.join("secret.key"), KEY).unwrap();
    std::fs::write(outside.join("passwd.csv"), "root:x:0:0:root:/root:/bin/bash\n1\n").unwrap();
    let sweep = std::fs::read_to_string(common::path("scenarios/sweeps/quick-oat.ron")).unwrap();
    std::fs::copy(common::path("scenarios/quickstart.ron"), d.join("quickstart.ron")).unwrap();
    let sweep = sweep.replacen("base: \"../quickstart.ron\"", "base: \"quickstart.ron\"", 1);
    let cases = [
        (
            "csv.ron",
            sweep.replacen(
                "design: Oat(steps: [0.8, 1.2])",
                &format!("design: Csv(\"{}\")", outside.join("passwd.csv").display()),
                1,
            ),
            "design",
        ),
        ("base.ron", sweep.replacen("base: \"quickstart.ron\"", "base: \"../../../../../../etc/shadow\"", 1), "base"),
        (
            "key.ron",
            ledger_scenario(&format!(r#", key_file: Some("{}")"#, outside.join("secret.key").display())),
            "key_file",
        ),
    ];
    for (name, text, field) in cases {
        std::fs::write(d.join(name), &text).unwrap();
        let e = refused(&memlink_in(&d, &["validate", name]), name);
        assert!(e.contains(field) && e.contains("outside"), "{name}: {e}");
        assert!(!e.contains("root:x") && !e.contains(&KEY[..40]), "{name}: {e}");
    }
    // Allowed explicitly, the CSV is read, and its header is still not quoted.
    let e = refused(&memlink_in(&d, &["--allow-root", outside.to_str().unwrap(), "validate", "csv.ron"]), "passwd.csv");
    assert!(!e.contains("root:x"), "{e}");
    // A folder as a base is refused at the referring field.
    std::fs::create_dir_all(d.join("folder.ron")).unwrap();
    std::fs::write(d.join("dir.ron"), sweep.replacen("base: \"quickstart.ron\"", "base: \"folder.ron\"", 1)).unwrap();
    let e = refused(&memlink_in(&d, &["validate", "dir.ron"]), "dir.ron");
    assert!(e.contains("`base`") && e.contains("regular file"), "{e}");
    // A missing base names the referring field and its position.
    std::fs::write(d.join("missing.ron"), sweep.replacen("base: \"quickstart.ron\"", "base: \"nope.ron\"", 1)).unwrap();
    let e = refused(&memlink_in(&d, &["validate", "missing.ron"]), "missing.ron");
    assert!(e.contains("`base`") && e.contains("nope.ron"), "{e}");
}

#[test]
fn a_file_that_is_not_utf8_is_refused_at_its_line_and_column() {
    let d = scratch("utf8");
    std::fs::write(d.join("s.ron"), b"(\n  name: \"a\xff\",\n)").unwrap();
    let e = refused(&memlink_in(&d, &["validate", "s.ron"]), "s.ron:2:11");
    assert!(e.contains("UTF-8"), "{e}");
}

#[test]
fn no_output_of_a_ledger_run_holds_its_key() {
    let d = scratch("outputs");
    std::fs::write(d.join("lab.key"), KEY).unwrap();
    std::fs::write(d.join("s.ron"), ledger_scenario(r#", key_file: Some("lab.key")"#)).unwrap();
    let out = d.join("out");
    let o = memlink_in(&d, &["run", "s.ron", "--out", out.to_str().unwrap(), "--record", "trace.jsonl"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let raw: Vec<u8> = (0..32).map(|i| u8::from_str_radix(&KEY[2 * i..2 * i + 2], 16).unwrap()).collect();
    let mut seen = 0;
    let mut files = vec![d.join("trace.no-defense.jsonl"), d.join("trace.maple-guard.jsonl")];
    files.extend(std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()));
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        seen += 1;
        let text = String::from_utf8_lossy(&bytes).to_lowercase();
        assert!(!text.contains(KEY), "{} holds the key", f.display());
        assert!(!bytes.windows(32).any(|w| w == raw.as_slice()), "{} holds the key's bytes", f.display());
    }
    assert!(seen >= 4, "both traces, summary.json and rounds.csv were searched");
    for s in [&o.stdout, &o.stderr] {
        assert!(!String::from_utf8_lossy(s).contains(KEY));
    }
    // The trace keeps the fingerprint; replaying it needs the key's file, which it checks.
    let trace = std::fs::read_to_string(d.join("trace.maple-guard.jsonl")).unwrap();
    assert!(trace.contains("fingerprint:"), "the trace keeps the key's fingerprint");
    let r = memlink_in(&d, &["replay", "trace.maple-guard.jsonl"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("fingerprint") && stderr(&r).contains("--arm"), "{}", stderr(&r));
    let r = memlink_in(&d, &["replay", "trace.maple-guard.jsonl", "--arm", "s.ron"]);
    assert!(r.status.success(), "{}", stderr(&r));
    std::fs::write(d.join("other.key"), KEY.replace('0', "1")).unwrap();
    std::fs::write(d.join("o.ron"), ledger_scenario(r#", key_file: Some("other.key")"#)).unwrap();
    let r = memlink_in(&d, &["replay", "trace.maple-guard.jsonl", "--arm", "o.ron"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("does not match"), "{}", stderr(&r));
}

/// The small test grid, copied into `d`.
fn small_grid(d: &Path) -> PathBuf {
    for f in ["base.ron", "small.ron"] {
        std::fs::copy(common::path(&format!("tests/fixtures/grid/{f}")), d.join(f)).unwrap();
    }
    d.join("small.ron")
}

#[test]
fn an_edited_or_swapped_stored_run_is_refused_with_how_to_rerun_it() {
    let d = scratch("stored");
    let grid = small_grid(&d);
    let out = d.join("out");
    let o = memlink_in(&d, &["grid", grid.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut runs: Vec<PathBuf> = std::fs::read_dir(out.join("runs")).unwrap().map(|e| e.unwrap().path()).collect();
    runs.sort();
    let (a, b) = (runs[0].clone(), runs[1].clone());
    let text_a = std::fs::read_to_string(&a).unwrap();
    let text_b = std::fs::read_to_string(&b).unwrap();
    // A number changed by hand.
    let at = text_a.find("\"mdsr\":").unwrap() + 7;
    let edited = format!("{}9{}", &text_a[..at], &text_a[at + 1..]);
    assert_ne!(edited, text_a);
    std::fs::write(&a, &edited).unwrap();
    let o = memlink_in(&d, &["grid", grid.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    let name = a.file_name().unwrap().to_str().unwrap();
    assert!(e.contains(name) && e.contains("digest") && e.contains("delete the file"), "{e}");
    // Another run's file under this run's name, its hash edited to match.
    let hash_a = name.trim_end_matches(".json");
    let hash_b = b.file_name().unwrap().to_str().unwrap().trim_end_matches(".json");
    std::fs::write(&a, text_b.replace(hash_b, hash_a)).unwrap();
    let o = memlink_in(&d, &["grid", grid.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("digest"), "{}", stderr(&o));
    // Deleted, it is recomputed to the same bytes.
    std::fs::remove_file(&a).unwrap();
    let o = memlink_in(&d, &["grid", grid.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&a).unwrap(), text_a);
}

/// memlink started in `dir` with `args`, its stderr kept.
fn spawn_in(dir: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_memlink"))
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn concurrent_writers_to_one_folder_neither_fail_nor_leave_temporary_files() {
    let d = scratch("concurrent");
    std::fs::copy(common::path("scenarios/quickstart.ron"), d.join("q.ron")).unwrap();
    let out = d.join("out");
    for _ in 0..4 {
        let args = ["run", "q.ron", "--out", out.to_str().unwrap()];
        let (x, y) = (spawn_in(&d, &args), spawn_in(&d, &args));
        for c in [x, y] {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
        }
    }
    let names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.contains("tmp")), "{names:?}");
    assert!(names.contains(&"summary.json".to_string()), "{names:?}");
    // Two grids on one folder: the second waits and then finds every run stored.
    let grid = small_grid(&d);
    let gout = d.join("gout");
    let args = ["grid", grid.to_str().unwrap(), "--out", gout.to_str().unwrap()];
    let (x, y) = (spawn_in(&d, &args), spawn_in(&d, &args));
    let (x, y) = (x.wait_with_output().unwrap(), y.wait_with_output().unwrap());
    assert!(x.status.success() && y.status.success(), "{} {}", stderr(&x), stderr(&y));
    assert_eq!(std::fs::read_dir(gout.join("runs")).unwrap().count(), 12);
}

#[test]
fn validate_refuses_what_the_command_would_refuse_before_simulating() {
    let d = scratch("validate");
    // A sweep reading round 3 of a 2-round base.
    let q = std::fs::read_to_string(common::path("scenarios/quickstart.ron")).unwrap();
    std::fs::write(d.join("two.ron"), q.replace("protocol: (rounds: 3,", "protocol: (rounds: 2,")).unwrap();
    let sweep = std::fs::read_to_string(common::path("scenarios/sweeps/quick-oat.ron")).unwrap();
    std::fs::write(d.join("sweep.ron"), sweep.replacen("base: \"../quickstart.ron\"", "base: \"two.ron\"", 1)).unwrap();
    let e = refused(&memlink_in(&d, &["validate", "sweep.ron"]), "sweep.ron");
    assert!(e.contains("metrics") && e.contains("round 3") && e.contains("2 rounds"), "{e}");
    // Duplicated metrics, and a duplicated capability.
    std::fs::copy(common::path("scenarios/quickstart.ron"), d.join("quickstart.ron")).unwrap();
    let dup = sweep.replacen("base: \"../quickstart.ron\"", "base: \"quickstart.ron\"", 1).replacen(
        "design: Oat(",
        "metrics: [\"mdsr@3\", \"mdsr@3\"],\n    design: Oat(",
        1,
    );
    std::fs::write(d.join("dup.ron"), dup).unwrap();
    let e = refused(&memlink_in(&d, &["validate", "dup.ron"]), "dup.ron");
    assert!(e.contains("distinct metrics"), "{e}");
    let caps = q.replace(
        "attack: Minja((strength: Strong, stealth: MetadataClean, target: LookaheadWrong)),",
        "attack: Minja((strength: Strong, stealth: MetadataClean, target: LookaheadWrong, capabilities: [Launder(()), Launder(())])),",
    );
    assert_ne!(caps, q);
    std::fs::write(d.join("caps.ron"), caps).unwrap();
    let e = refused(&memlink_in(&d, &["validate", "caps.ron"]), "caps.ron");
    assert!(e.contains("distinct capabilities"), "{e}");
}

#[test]
fn a_trace_is_known_by_its_content_and_an_edited_header_is_refused() {
    let d = scratch("trace");
    std::fs::copy(common::path("scenarios/quickstart.ron"), d.join("q.ron")).unwrap();
    let o = memlink_in(&d, &["run", "q.ron", "--out", "out", "--record", "t.jsonl"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(d.join("t.maple-guard.jsonl")).unwrap();
    let (head, rest) = text.split_once('\n').unwrap();
    // Re-serialised with spaces: still a trace.
    let v: serde_json::Value = serde_json::from_str(head).unwrap();
    let spaced = serde_json::to_string_pretty(&v).unwrap().replace('\n', " ");
    std::fs::write(d.join("spaced.jsonl"), format!("{spaced}\n{rest}")).unwrap();
    let o = memlink_in(&d, &["validate", "spaced.jsonl"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("trace"), "{}", String::from_utf8_lossy(&o.stdout));
    // Edited attackers, guard and model: each refused at its field.
    for (field, from, to) in [
        ("attackers", "\"attackers\":[0,1,5]", "\"attackers\":[0,1,6]"),
        ("guard", "\"guard\":\"maple_guard\"", "\"guard\":\"no_defense\""),
    ] {
        assert!(head.contains(from), "{field}: {head:.300}");
        std::fs::write(d.join("e.jsonl"), format!("{}\n{rest}", head.replacen(from, to, 1))).unwrap();
        let e = refused(&memlink_in(&d, &["validate", "e.jsonl"]), "e.jsonl");
        assert!(e.contains(field) && e.contains("edited"), "{field}: {e}");
    }
}
