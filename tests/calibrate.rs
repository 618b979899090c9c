//! `memlink calibrate`: a deterministic fit (same file, same profile bytes), resumable from its
//! checkpoint, and MAPLE-Guard rows refused.

mod common;

use memlink::study::calibrate::Calibration;
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memlink-cal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small calibration written next to the bundled scenarios (so paths resolve), fitting one
/// parameter on a reduced MMLU cell.
fn small_calibration(dir: &std::path::Path, guards: &str, evals: u32) -> PathBuf {
    let text = format!(
        r#"(
    name: "small",
    profile: "qwen3.5-122b-a10b",
    targets: "{targets}",
    rows: (sources: ["table2"], guards: [{guards}]),
    settings: {{ "mmlu_minja": "{scenario}" }},
    parameters: [(workload: "mmlu", name: "memory_weight", lo: 0.5, hi: 2.5)],
    seeds: [42],
    tasks: Some(30),
    max_evaluations: {evals},
)"#,
        targets = common::path("models/calibration-targets.csv").display(),
        scenario = common::path("scenarios/paper/table2/mmlu-minja.ron").display(),
    );
    let p = dir.join("small.ron");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_fit_is_reproducible_and_resumable() {
    let dir = scratch("repro");
    let file = small_calibration(&dir, r#""No Defense""#, 14);
    let cal = Calibration::load(&file).unwrap();
    assert_eq!(cal.rows().len(), 2, "MDSR@3 and RDA@3 of Table 2's No Defense MMLU row");
    let (a, b) = (dir.join("a"), dir.join("b"));
    let fa = cal.fit(&a, false, &mut |_, _| {}).unwrap();
    let fb = cal.fit(&b, false, &mut |_, _| {}).unwrap();
    assert_eq!(fa, fb);
    assert!(fa.objective.1 <= fa.objective.0 + 1e-12, "the fit never ends worse than it started");
    let (pa, pb) = (dir.join("pa.ron"), dir.join("pb.ron"));
    assert_eq!(cal.write_profile(&fa, &pa).unwrap(), cal.write_profile(&fb, &pb).unwrap());
    // The written profile loads and carries the fitted value.
    let loaded = memlink::agent::load_profile(&pa).unwrap();
    assert_eq!(loaded.workload("mmlu").unwrap().memory_weight, fa.parameters[0].2);
    // Interrupted after a few evaluations, then resumed: the same fit.
    let short = Calibration::load(&small_calibration(&dir, r#""No Defense""#, 6)).unwrap();
    let c = dir.join("c");
    short.fit(&c, false, &mut |_, _| {}).unwrap();
    std::fs::rename(c.join("small.state.json"), b.join("small.state.json")).unwrap();
    let resumed = cal.fit(&b, true, &mut |_, _| {}).unwrap();
    assert_eq!(resumed.parameters, fa.parameters);
}

/// `coordinates: Logit`: the search moves in each parameter's logit, so it never ends on a
/// bound, reports progress in the parameters' own units, and resumes as a box search does.
#[test]
fn a_fit_in_logit_coordinates_stays_inside_its_bounds_and_resumes() {
    let dir = scratch("logit");
    let write = |evals: u32| {
        let p = small_calibration(&dir, r#""No Defense""#, evals);
        let text =
            std::fs::read_to_string(&p).unwrap().replace("max_evaluations", "coordinates: Logit,\n    max_evaluations");
        std::fs::write(&p, text).unwrap();
        Calibration::load(&p).unwrap()
    };
    let cal = write(14);
    let mut seen = Vec::new();
    let fit = cal.fit(&dir.join("a"), false, &mut |_, s| seen.push(s.best().0[0])).unwrap();
    let v = fit.parameters[0].2;
    assert!(v > 0.5 && v < 2.5, "strictly inside its bounds: {v}");
    assert!(!seen.is_empty() && seen.iter().all(|x| (0.5..=2.5).contains(x)), "progress in parameter units: {seen:?}");
    assert!(fit.objective.1 <= fit.objective.0 + 1e-12);
    let short = write(6);
    short.fit(&dir.join("c"), false, &mut |_, _| {}).unwrap();
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::rename(dir.join("c/small.state.json"), dir.join("b/small.state.json")).unwrap();
    let cal = write(14);
    assert_eq!(cal.fit(&dir.join("b"), true, &mut |_, _| {}).unwrap().parameters, fit.parameters);
}

#[test]
fn maple_guard_rows_never_enter_a_fit() {
    let dir = scratch("maple");
    let file = small_calibration(&dir, r#""No Defense", "MAPLE-Guard""#, 4);
    // The targets file has no MAPLE-Guard rows; a fabricated one must be refused all the same.
    let targets = dir.join("t.csv");
    let mut csv = std::fs::read_to_string(common::path("models/calibration-targets.csv")).unwrap();
    csv.push_str("table2,qwen3.5-122b-a10b,mmlu_minja,MAPLE-Guard,\"mean(star,chain,tree)\",3,RDA@3,1.0,0.1\n");
    std::fs::write(&targets, csv).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let text = text
        .replace(&common::path("models/calibration-targets.csv").display().to_string(), &targets.display().to_string());
    std::fs::write(&file, text).unwrap();
    let err = Calibration::load(&file).err().expect("refused").to_string();
    assert!(err.contains("MAPLE-Guard") && err.contains("small.ron"), "{err}");
}

/// Table 6's attack-free MAPLE-Guard rows enter a fit only through `attack_free_guards`, and
/// only the attack-free ones: the same filter with a fabricated attacked MAPLE-Guard row under an
/// attack-free-looking guard list is still refused (issue 43).
#[test]
fn attack_free_maple_guard_rows_enter_only_through_attack_free_guards() {
    let dir = scratch("maple-free");
    let file = small_calibration(&dir, r#""No Defense""#, 4);
    let text = std::fs::read_to_string(&file).unwrap().replace(
        r#"rows: (sources: ["table2"], guards: ["No Defense"]),"#,
        r#"rows: (sources: ["table2", "table6_attack_free"], guards: ["No Defense"], attack_free_guards: ["MAPLE-Guard"]),"#,
    );
    std::fs::write(&file, &text).unwrap();
    let cal = Calibration::load(&file).unwrap();
    let maple: Vec<_> = cal.rows().into_iter().filter(|r| r.2 == "MAPLE-Guard").collect();
    assert_eq!(maple.len(), 1, "Qwen's attack-free MMLU MAPLE-Guard row: {maple:?}");
    assert_eq!(cal.rows().len(), 2 + 1 + 1, "Table 2's No Defense MDSR@3 and RDA@3, Table 6's two arms");
    let line = maple[0].0;
    let csv = std::fs::read_to_string(common::path("models/calibration-targets.csv")).unwrap();
    let row = csv.lines().nth(line - 1).unwrap();
    assert!(row.starts_with("table6_attack_free,qwen3.5-122b-a10b,mmlu_minja,MAPLE-Guard,"), "{row}");
    // An attacked MAPLE-Guard row (the targets file has none; a fabricated one) is refused even
    // when the guard is named in `attack_free_guards` only, or among the attacked guards.
    let targets = dir.join("t.csv");
    let mut csv = csv;
    csv.push_str("table2,qwen3.5-122b-a10b,mmlu_minja,MAPLE-Guard,\"mean(star,chain,tree)\",3,RDA@3,1.0,0.1\n");
    std::fs::write(&targets, csv).unwrap();
    let text = text
        .replace(&common::path("models/calibration-targets.csv").display().to_string(), &targets.display().to_string());
    std::fs::write(&file, &text).unwrap();
    assert_eq!(Calibration::load(&file).unwrap().rows().len(), 4, "attack_free_guards alone never selects it");
    std::fs::write(&file, text.replace(r#"guards: ["No Defense"]"#, r#"guards: ["No Defense", "MAPLE-Guard"]"#))
        .unwrap();
    let err = Calibration::load(&file).err().expect("refused").to_string();
    assert!(err.contains("attacked MAPLE-Guard row") && err.contains("small.ron"), "{err}");
}

#[test]
fn the_bundled_calibration_loads() {
    let cal = Calibration::load(&common::path("scenarios/calibration/qwen-table2-nodefense.ron")).unwrap();
    assert_eq!(cal.rows().len(), 4);
    assert!(cal.rows().iter().all(|r| r.2 == "No Defense"));
    for backbone in ["qwen", "gemma"] {
        let all = Calibration::load(&common::path(&format!("scenarios/calibration/{backbone}.ron"))).unwrap();
        assert_eq!(all.checks().len(), 3 * 6, "Tables 12-14: MDSR and RDA at rounds 1-3");
        assert!(all.checks().iter().all(|r| r.2 == "No Defense"));
        // Issue 43: MAPLE-Guard's attack-free rows (Table 6, MDSR@3), one per setting, and no other.
        let maple: Vec<_> = all.rows().into_iter().filter(|r| r.2 != "No Defense").collect();
        assert_eq!(maple.len(), 5, "{backbone}: {maple:?}");
        assert!(maple.iter().all(|r| r.2 == "MAPLE-Guard" && r.3 == "MDSR@3"));
    }
    // Both backbones fit Table 11 (MMLU's rounds) with Tables 2 and 6: its rows pin how far the
    // agents' errors go together, and they alone act on evidence framing and previous-round peers.
    for backbone in ["qwen", "gemma"] {
        let cal = Calibration::load(&common::path(&format!("scenarios/calibration/{backbone}.ron"))).unwrap();
        assert_eq!(
            cal.rows().len(),
            5 * 2 + 5 * 2 + 6,
            "{backbone}: Table 2 MDSR@3 and RDA@3, and Table 6's two arms, for five settings; Table 11 (MMLU) at rounds 1-3"
        );
        let early: Vec<_> = cal.rows().into_iter().filter(|r| !r.3.ends_with("@3")).collect();
        assert_eq!(early.len(), 4, "{backbone}: Table 11's rounds 1 and 2");
        assert!(early.iter().all(|r| r.1 == "mmlu_minja"));
    }
}

/// The evidence-framing slices (reports/evidence-framing.md) evaluate exactly the strict-protocol
/// No Defense rows of Table 11 (MMLU) and Table 13 (AppWorld), over each workload's
/// evidence_framing, on the backbone's committed profile.
#[test]
fn the_evidence_framing_slices_read_tables_11_and_13_alone() {
    for (backbone, profile) in [("qwen", "qwen3.5-122b-a10b"), ("gemma", "gemma-4-31b")] {
        let cal = Calibration::load(&common::path(&format!("scenarios/calibration/{backbone}-evidence.ron"))).unwrap();
        assert_eq!(cal.spec().profile, profile);
        let rows = cal.rows();
        assert_eq!(rows.len(), 12, "{backbone}: MDSR and RDA at rounds 1-3 of two tables");
        assert!(rows.iter().all(|r| r.2 == "No Defense"));
        for (setting, n) in [("mmlu_minja", 6), ("appworld_agentpoison", 6)] {
            assert_eq!(rows.iter().filter(|r| r.1 == setting).count(), n, "{backbone}: {setting}");
        }
        let params: Vec<(&str, &str)> =
            cal.spec().parameters.iter().map(|p| (p.workload.as_str(), p.name.as_str())).collect();
        assert_eq!(params, [("mmlu", "evidence_framing"), ("appworld", "evidence_framing")]);
    }
}

/// The task-keyed handoff what-if refits only MMLU and AppWorld, on copies of those settings
/// that key handoffs by task, and starts from and writes its own profile copies, so running it
/// can never change the bundled profiles.
#[test]
fn the_task_handoff_what_if_fits_its_own_profile_copies() {
    let dir = common::path("scenarios/calibration/task-handoffs");
    for backbone in ["qwen", "gemma"] {
        let cal = Calibration::load(&dir.join(format!("{backbone}.ron"))).unwrap();
        assert_eq!(cal.profile_path().parent(), Some(dir.join("models").as_path()));
        assert_eq!(cal.rows().len(), 2 * 2 + 2, "Table 2 MDSR@3 and RDA@3, and Table 6, for MMLU and AppWorld");
        assert!(cal.rows().iter().all(|r| r.2 == "No Defense"));
    }
    for setting in ["mmlu-minja", "appworld-agentpoison"] {
        let text = std::fs::read_to_string(dir.join(format!("{setting}.ron"))).unwrap();
        assert!(text.contains("handoff_intent: TaskQuestion,"), "{setting}");
    }
}

#[test]
fn a_bad_calibration_file_is_a_positioned_error_with_exit_code_2() {
    let dir = scratch("bad");
    let file = small_calibration(&dir, r#""No Defense""#, 4);
    let text = std::fs::read_to_string(&file).unwrap().replace(r#"name: "memory_weight""#, r#"name: "no_such_knob""#);
    std::fs::write(&file, text).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_memlink"))
        .args(["calibrate", file.to_str().unwrap(), "--out", dir.join("o").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("small.ron:") && e.contains("no_such_knob"), "{e}");
}

#[test]
fn attack_free_rows_run_without_the_attack_and_intervals_span_seeds() {
    let dir = scratch("free");
    let file = small_calibration(&dir, r#""No Defense""#, 2);
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace(r#"sources: ["table2"]"#, r#"sources: ["table2", "table6_attack_free"]"#)
        .replace("seeds: [42],", "seeds: [42], interval_seeds: [1, 2, 3, 4],")
        .replace("tasks: Some(12)", "tasks: Some(30)");
    std::fs::write(&file, text).unwrap();
    let cal = Calibration::load(&file).unwrap();
    assert_eq!(cal.rows().len(), 3);
    let fit = cal.fit(&dir.join("o"), false, &mut |_, _| {}).unwrap();
    let attacked = fit.rows.iter().find(|r| r.source == "table2" && r.metric == "MDSR@3").unwrap();
    let free = fit.rows.iter().find(|r| r.source == "table6_attack_free").unwrap();
    assert_eq!(free.topology, "random");
    assert!(free.simulated > attacked.simulated + 10.0, "{} vs {}", free.simulated, attacked.simulated);
    assert!(fit.rows.iter().any(|r| r.interval.1 > 0.0), "four seeds give a spread");
    let report = memlink::study::calibrate::report(&cal, &fit);
    assert!(
        report.contains("Fit seeds [42], interval seeds [1, 2, 3, 4]") && report.contains("out-of-sample"),
        "{report}"
    );
}

#[test]
fn a_baseline_detector_is_fitted_with_the_profile_fixed_and_maple_never() {
    let dir = scratch("guard");
    let file = small_calibration(&dir, r#""Challenger""#, 8);
    let text = std::fs::read_to_string(&file).unwrap().replace(
        r#"parameters: [(workload: "mmlu", name: "memory_weight", lo: 0.5, hi: 2.5)],"#,
        r#"parameters: [(guard: Some("Challenger"), name: "detector.bias", lo: -5.0, hi: 1.0)],"#,
    );
    std::fs::write(&file, &text).unwrap();
    let cal = Calibration::load(&file).unwrap();
    let fit = cal.fit(&dir.join("o"), false, &mut |_, _| {}).unwrap();
    assert_eq!(fit.parameters[0].0, "Challenger: detector.bias");
    assert_eq!(fit.parameters[0].1, -2.0, "starts from the arm's configuration");
    let arms = cal.fitted_guards(&fit);
    assert!(arms.starts_with("(name: \"Challenger\", guard: Challenger("), "{arms}");
    // MAPLE-Guard's constants are refused.
    let maple = text
        .replace(r#"guard: Some("Challenger")"#, r#"guard: Some("MAPLE-Guard")"#)
        .replace("detector.bias", "weights.provenance");
    std::fs::write(&file, maple).unwrap();
    let err = Calibration::load(&file).err().expect("refused").to_string();
    assert!(err.contains("MAPLE-Guard") && err.contains("never fitted"), "{err}");
}

#[test]
fn a_target_averages_over_the_settings_attacker_sets() {
    let dir = scratch("sets");
    let base = std::fs::read_to_string(small_calibration(&dir, r#""No Defense""#, 2)).unwrap();
    let with = |sets: &str, name: &str| {
        let p = dir.join(name);
        std::fs::write(
            &p,
            base.replace("seeds: [42],", &format!("seeds: [42], attacker_sets: {{ \"mmlu_minja\": {sets} }},")),
        )
        .unwrap();
        Calibration::load(&p).unwrap()
    };
    let both = with("[[0, 1, 2], [3, 4, 5]]", "both.ron");
    let first = with("[[0, 1, 2]]", "first.ron");
    let second = with("[[3, 4, 5]]", "second.ron");
    let x = [1.15];
    let (b, f, s) = (both.simulated(&x), first.simulated(&x), second.simulated(&x));
    for i in 0..b.len() {
        assert!((b[i] - (f[i] + s[i]) / 2.0).abs() < 1e-9, "row {i}: {} vs {} and {}", b[i], f[i], s[i]);
    }
    assert_ne!(f, s, "different attackers give different runs");
    // An impossible set is a positioned error.
    let p = dir.join("bad.ron");
    std::fs::write(&p, base.replace("seeds: [42],", "seeds: [42], attacker_sets: { \"mmlu_minja\": [[0, 1, 9]] },"))
        .unwrap();
    let e = Calibration::load(&p).err().expect("refused").to_string();
    assert!(e.contains("bad.ron") && e.contains("attacker_sets"), "{e}");
}

#[test]
fn parameters_of_different_workloads_are_searched_separately_and_checks_never_enter_the_objective() {
    let dir = scratch("split");
    let text = format!(
        r#"(
    name: "split",
    profile: "qwen3.5-122b-a10b",
    targets: "{targets}",
    rows: (sources: ["table2"], guards: ["No Defense"]),
    checks: Some((sources: ["table6_attack_free"], guards: ["No Defense"])),
    settings: {{ "mmlu_minja": "{mmlu}", "csqa_promptinject": "{csqa}" }},
    parameters: [
        (workload: "mmlu", name: "memory_weight", lo: 0.5, hi: 2.5),
        (workload: "csqa", name: "peer_weight", lo: 0.0, hi: 3.0, start: Some(1.0)),
        (workload: "mmlu", name: "skill", lo: 0.0, hi: 4.0),
    ],
    seeds: [42],
    tasks: Some(12),
    max_evaluations: 6,
)"#,
        targets = common::path("models/calibration-targets.csv").display(),
        mmlu = common::path("scenarios/paper/table2/mmlu-minja.ron").display(),
        csqa = common::path("scenarios/paper/table2/csqa-promptinject.ron").display(),
    );
    let file = dir.join("split.ron");
    std::fs::write(&file, &text).unwrap();
    let cal = Calibration::load(&file).unwrap();
    assert_eq!(cal.rows().len(), 4, "Table 2 MDSR@3 and RDA@3 of two settings");
    assert_eq!(cal.checks().len(), 2, "their attack-free rows, checked only");
    let fit = cal.fit(&dir.join("o"), false, &mut |_, _| {}).unwrap();
    assert_eq!(
        fit.components,
        vec![vec!["mmlu.memory_weight".to_string(), "mmlu.skill".into()], vec!["csqa.peer_weight".to_string()]]
    );
    assert_eq!(fit.parameters[1].1, 1.0, "an explicit start");
    assert_eq!(fit.rows.iter().filter(|r| r.fitted).count(), 4);
    assert!(fit.rows.iter().filter(|r| !r.fitted).all(|r| r.source == "table6_attack_free"));
    // The objective is the same with or without the checks.
    let plain = dir.join("plain.ron");
    std::fs::write(
        &plain,
        text.replace("checks: Some((sources: [\"table6_attack_free\"], guards: [\"No Defense\"])),", ""),
    )
    .unwrap();
    let x = [1.2, 1.0, 2.0];
    assert_eq!(Calibration::load(&plain).unwrap().objective(&x), cal.objective(&x));
    // Each search on its own finds what the split fit found: the CSQA search never sees MMLU.
    let csqa_only = dir.join("csqa.ron");
    std::fs::write(
        &csqa_only,
        text.replace("\"mmlu_minja\": \"", "\"unused\": \"")
            .replace("(workload: \"mmlu\", name: \"memory_weight\", lo: 0.5, hi: 2.5),", "")
            .replace("(workload: \"mmlu\", name: \"skill\", lo: 0.0, hi: 4.0),", "")
            .replace("checks: Some((sources: [\"table6_attack_free\"], guards: [\"No Defense\"])),", ""),
    )
    .unwrap();
    let alone = Calibration::load(&csqa_only).unwrap().fit(&dir.join("o2"), false, &mut |_, _| {}).unwrap();
    assert_eq!(alone.parameters[0].2, fit.parameters[1].2);
    let report = memlink::study::calibrate::report(&cal, &fit);
    assert!(report.contains("no (check)") && report.contains("Independent searches"), "{report}");
}

#[test]
fn round_level_directions_compare_round_one_with_round_three() {
    use memlink::study::calibrate::{RowFit, round_directions};
    let row = |metric: &str, target: f64, simulated: f64| RowFit {
        source: "table11".into(),
        backbone: "qwen3.5-122b-a10b".into(),
        setting: "mmlu_minja".into(),
        guard: "No Defense".into(),
        topology: "random".into(),
        metric: metric.into(),
        target,
        sigma: 3.0,
        simulated,
        interval: (simulated, 0.0),
        fitted: false,
    };
    let rows = vec![
        row("RDA@1", 8.6, 10.0),
        row("RDA@2", 8.3, 11.0),
        row("RDA@3", 9.7, 12.0),
        row("MDSR@1", 86.2, 80.0),
        row("MDSR@3", 82.7, 81.0),
    ];
    let d = round_directions(&rows);
    assert_eq!(d.len(), 2);
    assert!(d[0].metric == "RDA" && d[0].same(), "both rise");
    assert!(d[1].metric == "MDSR" && !d[1].same(), "published falls, simulated rises");
    // A change under a point is noise, not a direction.
    let flat = vec![row("RDA@1", 8.6, 13.47), row("RDA@3", 9.7, 13.52)];
    let d = round_directions(&flat);
    assert!(!d[0].same(), "13.47 -> 13.52 does not rise");
    let rising = vec![row("RDA@1", 8.6, 13.0), row("RDA@3", 9.7, 14.0)];
    assert!(round_directions(&rising)[0].same(), "a one-point rise does");
}

/// The issue's reproducibility: the bundled command writes over the profile it fitted, so a
/// rerun starts from the fitted profile. With every parameter's `start` in the file, the rerun
/// gives the same profile bytes.
#[test]
fn refitting_a_fitted_profile_from_explicit_starts_gives_the_same_bytes() {
    let dir = scratch("refit");
    let profile = dir.join("stand-in.ron");
    std::fs::copy(common::path("models/qwen3.5-122b-a10b.ron"), &profile).unwrap();
    let text = std::fs::read_to_string(small_calibration(&dir, r#""No Defense""#, 8))
        .unwrap()
        .replace(r#"profile: "qwen3.5-122b-a10b""#, &format!("profile: {:?}", profile.display().to_string()))
        .replace("hi: 2.5)]", "hi: 2.5, start: Some(1.0))]");
    let file = dir.join("refit.ron");
    std::fs::write(&file, text).unwrap();
    let fit_once = || {
        let cal = Calibration::load(&file).unwrap();
        let fit = cal.fit(&dir.join("o"), false, &mut |_, _| {}).unwrap();
        cal.write_profile(&fit, cal.profile_path()).unwrap()
    };
    let first = fit_once();
    assert_ne!(first, std::fs::read_to_string(common::path("models/qwen3.5-122b-a10b.ron")).unwrap());
    assert_eq!(fit_once(), first, "the second fit starts from the fitted profile and ends in the same bytes");
}

#[test]
fn the_bundled_baseline_calibration_fits_both_backbones_rows_per_guard() {
    let cal = Calibration::load(&common::path("scenarios/calibration/baselines.ron")).unwrap();
    // Every file sets `consistent_only`: both cells of each pair `memlink effects` marks as
    // contradicting each other are left out (tests/pooling.rs checks exactly which).
    assert_eq!(
        cal.rows().len(),
        4 * (4 * 2 + 4 * 6) * 2 - 50,
        "4 guards × (Table 2 without MMLU: 4 settings × MDSR/RDA@3; Tables 11-14: MDSR/RDA@1-3) × 2 backbones, less 25 contradicted pairs"
    );
    assert!(cal.rows().iter().all(|r| !r.2.contains("MAPLE")));
    // The LLM judges are fitted per backbone, into each profile, on the same kinds of rows.
    for (file, rows) in [("qwen-judges", 3 * (4 * 2 + 4 * 6) - 30), ("gemma-judges", 3 * (5 * 2 + 4 * 6) - 12)] {
        let judges = Calibration::load(&common::path(&format!("scenarios/calibration/{file}.ron"))).unwrap();
        assert_eq!(judges.rows().len(), rows, "{file}");
        assert!(judges.spec().parameters.iter().all(|p| p.judge.is_some()));
    }
}

#[test]
fn a_setting_can_run_its_own_fit_and_interval_seeds() {
    let dir = scratch("seeds");
    let base = std::fs::read_to_string(small_calibration(&dir, r#""No Defense""#, 2)).unwrap();
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        Calibration::load(&p).unwrap()
    };
    let plain = write("plain.ron", base.clone());
    let overridden =
        write("override.ron", base.replace("seeds: [42],", "seeds: [7], setting_seeds: { \"mmlu_minja\": [42] },"));
    let other = write("other.ron", base.replace("seeds: [42],", "seeds: [7],"));
    let x = [1.15];
    assert_eq!(overridden.simulated(&x), plain.simulated(&x), "the setting's own seeds replace `seeds`");
    assert_ne!(other.simulated(&x), plain.simulated(&x));
    let intervals = write(
        "intervals.ron",
        base.replace("seeds: [42],", "seeds: [42], setting_interval_seeds: { \"mmlu_minja\": [1, 2, 3] },"),
    );
    let fit = intervals.fit(&dir.join("o"), false, &mut |_, _| {}).unwrap();
    assert!(fit.rows.iter().all(|r| r.interval.1 > 0.0), "three interval seeds give a spread");
    let report = memlink::study::calibrate::report(&intervals, &fit);
    assert!(report.contains("mmlu_minja: fit seeds [42], interval seeds [1, 2, 3]"), "{report}");
    let e = Calibration::load(&{
        let p = dir.join("bad.ron");
        std::fs::write(&p, base.replace("seeds: [42],", "seeds: [42], setting_seeds: { \"nope\": [1] },")).unwrap();
        p
    })
    .err()
    .expect("refused")
    .to_string();
    assert!(e.contains("bad.ron") && e.contains("setting_seeds"), "{e}");
}
/// `reports/calibration.md` is regenerated and compared byte for byte in CI (reports/regenerate
/// --check, run by .ci/run); this cheap check catches the commonest drift in `cargo test` too: a
/// profile refitted or edited without regenerating the report, whose parameter tables and
/// provenance must be the committed profiles'.
#[test]
fn the_committed_calibration_report_shows_the_committed_profiles() {
    let report = std::fs::read_to_string(common::path("reports/calibration.md")).unwrap();
    for backbone in ["qwen", "gemma", "qwen-judges", "gemma-judges"] {
        let cal = Calibration::load(&common::path(&format!("scenarios/calibration/{backbone}.ron"))).unwrap();
        let profile = memlink::agent::load_profile(cal.profile_path()).unwrap();
        assert!(report.contains(&profile.provenance), "{backbone}: provenance {:?}", profile.provenance);
        for p in &cal.spec().parameters {
            let row = match &p.judge {
                Some(kind) => {
                    format!("| judge {kind}.{} | {:.4} |", p.name, profile.judges[kind].get(&p.name).unwrap())
                }
                None => {
                    let w = serde_json::to_value(profile.workload(&p.workload).unwrap()).unwrap();
                    format!("| {}.{} | {:.4} |", p.workload, p.name, w[&p.name].as_f64().unwrap())
                }
            };
            assert!(report.contains(&row), "{backbone}: {row} missing from reports/calibration.md");
        }
    }
}

/// The baselines' detectors that baselines.ron fits are one configuration in every paper
/// scenario, and the committed calibration report shows those values.
#[test]
fn the_fitted_baseline_arms_are_the_same_in_every_paper_scenario_and_in_the_report() {
    let report = std::fs::read_to_string(common::path("reports/calibration.md")).unwrap();
    let cal = Calibration::load(&common::path("scenarios/calibration/baselines.ron")).unwrap();
    let mut files: Vec<_> = ["scenarios/paper/table2", "scenarios/paper/rounds"]
        .iter()
        .flat_map(|d| std::fs::read_dir(common::path(d)).unwrap().map(|e| e.unwrap().path()))
        .collect();
    files.sort();
    assert_eq!(files.len(), 7);
    for p in &cal.spec().parameters {
        let arm = p.guard.as_deref().expect("guard parameters only");
        let values: Vec<f64> = files
            .iter()
            .map(|f| {
                let ls = memlink::scenario::load(f).unwrap();
                let a = ls.scenario.arms.iter().find(|a| a.name == arm).expect("every paper scenario has the arm");
                let json = serde_json::to_value(&a.guard).unwrap();
                let mut v = json.as_object().unwrap().values().next().unwrap().clone();
                for key in p.name.split('.') {
                    v = v[key].clone();
                }
                v.as_f64().unwrap()
            })
            .collect();
        assert!(values.iter().all(|v| *v == values[0]), "{arm} {}: {values:?}", p.name);
        let row = format!("| {arm}: {} | {:.4} |", p.name, values[0]);
        assert!(report.contains(&row), "{row} missing from reports/calibration.md");
    }
}

/// A baseline's detector is one configuration on both backbones: with `also`, the rows of the
/// other backbone are fitted too, each simulated with its own (fixed) profile.
#[test]
fn a_detector_is_fitted_to_both_backbones_rows_each_run_with_its_own_profile() {
    let dir = scratch("also");
    let base = std::fs::read_to_string(small_calibration(&dir, r#""Challenger""#, 4)).unwrap().replace(
        r#"parameters: [(workload: "mmlu", name: "memory_weight", lo: 0.5, hi: 2.5)],"#,
        r#"parameters: [(guard: Some("Challenger"), name: "detector.bias", lo: -5.0, hi: 1.0)],"#,
    );
    let one = dir.join("one.ron");
    std::fs::write(&one, &base).unwrap();
    let both = dir.join("both.ron");
    std::fs::write(
        &both,
        base.replace("profile: \"qwen3.5-122b-a10b\",", "profile: \"qwen3.5-122b-a10b\", also: [\"gemma-4-31b\"],"),
    )
    .unwrap();
    let (one, both) = (Calibration::load(&one).unwrap(), Calibration::load(&both).unwrap());
    assert_eq!(one.rows().len(), 2);
    assert_eq!(both.rows().len(), 4, "Challenger's MMLU MDSR@3 and RDA@3 for each backbone");
    let x = [-2.0];
    let (a, b) = (one.simulated(&x), both.simulated(&x));
    assert_eq!(&b[..2], &a[..], "the fitted backbone's rows are unchanged");
    assert_ne!(&b[2..], &a[..], "Gemma's rows run with Gemma's profile");
    let fit = both.fit(&dir.join("o"), false, &mut |_, _| {}).unwrap();
    assert!(fit.rows.iter().any(|r| r.backbone == "gemma-4-31b" && r.fitted));
    assert!(memlink::study::calibrate::report(&both, &fit).contains("Rows of `gemma-4-31b` as well"));
}

/// `source_settings`: one table's rows run another scenario of the same setting (the
/// round-level tables run the strict protocol), with its own attacker sets; other rows keep
/// the setting's scenario; an unknown setting is a positioned error.
#[test]
fn a_source_can_run_its_own_scenario_of_a_setting() {
    let dir = scratch("source-settings");
    let base = std::fs::read_to_string(small_calibration(&dir, r#""No Defense""#, 2)).unwrap();
    let rounds = common::path("scenarios/paper/rounds/mmlu-minja.ron").display().to_string();
    let with = |extra: &str, name: &str| {
        let p = dir.join(name);
        let text = base
            .replace(r#"sources: ["table2"]"#, r#"sources: ["table2", "table11"]"#)
            .replace("seeds: [42],", &format!("seeds: [42], {extra}"));
        std::fs::write(&p, text).unwrap();
        p
    };
    let plain = Calibration::load(&with("", "plain.ron")).unwrap();
    let strict = Calibration::load(&with(
        &format!(
            r#"source_settings: {{ "table11": {{ "mmlu_minja": "{rounds}" }} }}, attacker_sets: {{ "table11/mmlu_minja": [[0, 2, 7]] }},"#
        ),
        "strict.ron",
    ))
    .unwrap();
    let x = [1.15];
    let (a, b) = (plain.simulated(&x), strict.simulated(&x));
    let rows = plain.rows();
    assert_eq!(rows, strict.rows());
    for (i, (line, setting, _, metric)) in rows.iter().enumerate() {
        assert_eq!(setting, "mmlu_minja");
        let table2 = metric.ends_with("@3") && *line <= 3;
        if table2 {
            assert_eq!(a[i], b[i], "a Table 2 row keeps its scenario ({metric})");
        }
    }
    assert_ne!(a, b, "the Table 11 rows run the strict scenario");
    let bad = with(r#"source_settings: { "table11": { "csqa": "x.ron" } },"#, "bad.ron");
    let e = Calibration::load(&bad).err().expect("refused").to_string();
    assert!(e.contains("bad.ron") && e.contains("source_settings") && e.contains("csqa"), "{e}");
}

/// A judge parameter is a shift in the fitted profile (`judges`) for one LLM-judge kind: it
/// moves only the rows of arms running that judge, on the fitted backbone, and is written into
/// the profile; a kind that is not a judge, or a field a shift lacks, is a positioned error.
#[test]
fn a_judge_shift_is_fitted_into_the_profile_and_moves_only_its_judges_rows() {
    let dir = scratch("judge");
    let text = std::fs::read_to_string(small_calibration(&dir, r#""Challenger", "AgentSafe""#, 4)).unwrap().replace(
        r#"parameters: [(workload: "mmlu", name: "memory_weight", lo: 0.5, hi: 2.5)],"#,
        r#"parameters: [(judge: Some("challenger"), name: "bias", lo: -3.0, hi: 3.0)],"#,
    );
    let file = dir.join("judge.ron");
    std::fs::write(&file, &text).unwrap();
    let cal = Calibration::load(&file).unwrap();
    let rows = cal.rows();
    assert_eq!(rows.len(), 4, "MDSR@3 and RDA@3 of two guards");
    let (quiet, loud) = (cal.simulated(&[-3.0]), cal.simulated(&[3.0]));
    for (k, (_, _, guard, _)) in rows.iter().enumerate() {
        if guard == "Challenger" {
            assert_ne!(quiet[k], loud[k], "Challenger's judge is the backbone");
        } else {
            assert_eq!(quiet[k], loud[k], "{guard} is another judge");
        }
    }
    let fit = cal.fit(&dir.join("o"), false, &mut |_, _| {}).unwrap();
    assert_eq!(fit.parameters[0].0, "judge challenger.bias");
    let current =
        memlink::agent::load_profile(cal.profile_path()).unwrap().judges.get("challenger").map_or(0.0, |j| j.bias);
    assert_eq!(fit.parameters[0].1, current, "starts from the profile's shift (none: 0)");
    assert_eq!(fit.components.len(), 1);
    let out = dir.join("fitted.ron");
    cal.write_profile(&fit, &out).unwrap();
    let profile = memlink::agent::load_profile(&out).unwrap();
    assert_eq!(profile.judges["challenger"].bias, fit.parameters[0].2);
    for (bad, want) in
        [(r#"judge: Some("gsafeguard")"#, "judge guard kind"), (r#"judge: Some("agentsafe")"#, "`bias` or `dissent`")]
    {
        let broken = dir.join("bad.ron");
        let mut t = text.replace(r#"judge: Some("challenger")"#, bad);
        if bad.contains("agentsafe") {
            t = t.replace(r#"name: "bias""#, r#"name: "noise_sd""#);
        }
        std::fs::write(&broken, t).unwrap();
        let e = Calibration::load(&broken).err().expect("refused").to_string();
        assert!(e.contains("bad.ron") && e.contains(want), "{e}");
    }
}

/// `except` leaves out one source's rows of a setting; Huber's loss bounds how hard a far row
/// pulls, and a Huber k that is not positive is refused.
#[test]
fn rows_can_be_left_out_by_source_and_setting_and_far_rows_pull_boundedly() {
    use memlink::study::calibrate::Loss;
    let dir = scratch("except");
    let base = std::fs::read_to_string(small_calibration(&dir, r#""No Defense""#, 2)).unwrap();
    let with = |rows: &str, extra: &str, name: &str| {
        let p = dir.join(name);
        let text =
            base.replace(r#"sources: ["table2"]"#, rows).replace("seeds: [42],", &format!("seeds: [42], {extra}"));
        std::fs::write(&p, text).unwrap();
        p
    };
    let all = Calibration::load(&with(r#"sources: ["table2", "table11"]"#, "", "all.ron")).unwrap();
    let some =
        Calibration::load(&with(r#"sources: ["table2", "table11"], except: ["table2/mmlu_minja"]"#, "", "some.ron"))
            .unwrap();
    assert_eq!(all.rows().len(), 8, "Table 2's two rows and Table 11's six");
    assert_eq!(some.rows().len(), 6);
    assert!(some.rows().iter().all(|r| r.0 > 3), "only Table 11's rows remain");
    let none = with(r#"sources: ["table2"], except: ["table2/mmlu_minja"]"#, "", "none.ron");
    assert!(Calibration::load(&none).err().expect("nothing to fit").to_string().contains("at least one target row"));
    assert_eq!(Loss::Squared.of(-3.0), 9.0);
    assert_eq!(Loss::Huber(1.0).of(0.5), 0.25);
    assert_eq!(Loss::Huber(1.0).of(-3.0), 5.0, "2k|z| - k² past k");
    let huber = Calibration::load(&with(r#"sources: ["table2"]"#, "loss: Huber(1.0),", "huber.ron")).unwrap();
    let squared = Calibration::load(&with(r#"sources: ["table2"]"#, "", "squared.ron")).unwrap();
    let x = [1.0];
    assert!(huber.objective(&x) <= squared.objective(&x));
    let bad = with(r#"sources: ["table2"]"#, "loss: Huber(0.0),", "bad.ron");
    let e = Calibration::load(&bad).err().expect("refused").to_string();
    assert!(e.contains("bad.ron") && e.contains("loss"), "{e}");
}

/// Issue 15, point 10: each backbone's stand-in is one model block shared by every workload.
/// Its calibration pools every model field it fits (each per-workload value carries the prior
/// spread its deviation is penalised by), and the committed profile it wrote keeps per workload
/// only deviations of model fields, each a workload's value minus the model's.
#[test]
fn each_backbone_shares_one_model_block_across_workloads() {
    for backbone in ["qwen", "gemma"] {
        let cal = Calibration::load(&common::path(&format!("scenarios/calibration/{backbone}.ron"))).unwrap();
        assert!(cal.spec().pooled, "{backbone}: not pooled");
        let model_fitted: Vec<_> = cal
            .spec()
            .parameters
            .iter()
            .filter(|p| p.judge.is_none() && memlink::agent::MODEL_FIELDS.contains(&p.name.as_str()))
            .collect();
        assert!(model_fitted.len() >= 5, "{backbone}: {} model fields fitted", model_fitted.len());
        for p in &model_fitted {
            assert!(p.prior_sd.is_some_and(|t| t > 0.0), "{backbone}: {}.{} is free", p.workload, p.name);
        }
        let profile = memlink::agent::load_profile(cal.profile_path()).unwrap();
        assert!(profile.provenance.contains(&format!("scenarios/calibration/{backbone}.ron")));
        // The penalty keeps each workload near the model: no value a workload fits of a model
        // field lies more than three prior spreads from the model's (the per-workload fits had
        // Qwen's memory weight at 0.03 on InjecAgent and 3.6 on MMLU). Deviations stage C adds
        // for fields a workload does not list are whatever its rows demand (Qwen's LongMemEval
        // rejects AppWorld's instruction gain), so they are not held to this.
        for p in &model_fitted {
            let model = profile.model.get(&p.name).unwrap();
            let tau = p.prior_sd.unwrap();
            let v = profile.workload(&p.workload).unwrap_or_else(|| panic!("{backbone}: no {} block", p.workload));
            let v = serde_json::to_value(v).unwrap()[&p.name].as_f64().unwrap();
            // Issue 43: evidence_framing's model value is the literature's 1, not a pooled one,
            // and Table 11's strict rows hold Gemma's MMLU value at its lower bound (the
            // calibration report names those rows). A value at a bound is allowed; any other
            // must stay within three spreads.
            let at_bound = v - p.lo <= 0.01 * (p.hi - p.lo) || p.hi - v <= 0.01 * (p.hi - p.lo);
            assert!(
                (v - model).abs() <= 3.0 * tau || (p.name == "evidence_framing" && at_bound),
                "{backbone}.{}.{}: {v} against the model's {model}",
                p.workload,
                p.name
            );
        }
    }
}
