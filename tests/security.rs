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
