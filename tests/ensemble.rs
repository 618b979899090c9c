//! Issue 43, point 4: the calibration's posterior ensemble (sim/study/calibrate/ensemble.rs) on a
//! small MMLU calibration: the same inputs give the same bytes, a killed run resumes to the
//! same file from its journal, every draw lies in the bounds and applies to the profile, and a
//! parameter no row sees spreads over its bounds while one the rows fix stays near its fit.

mod common;

use memlink::study::calibrate::Calibration;
use memlink::study::calibrate::ensemble::{Ensemble, EnsembleOptions};
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    common::scratch("ensemble", name)
}

/// MMLU's Table 2 and Table 6 No Defense rows under the non-strict protocol (memories shown as
/// experiences): skill and memory weight act on them, evidence framing cannot.
fn calibration(dir: &Path, extra: &str) -> PathBuf {
    let text = format!(
        r#"(
    name: "ens",
    profile: "{profile}",
    targets: "{targets}",
    rows: (sources: ["table2", "table6_attack_free"], guards: ["No Defense"], metrics: ["MDSR@3"]),
    settings: {{ "mmlu_minja": "{mmlu}" }},
    parameters: [
        (workload: "mmlu", name: "skill", lo: 0.0, hi: 20.0),
        (workload: "mmlu", name: "evidence_framing", lo: 0.0, hi: 2.0),
    ],
    seeds: [1],
    tasks: Some(16),
    {extra}
)"#,
        profile = dir.join("profile.ron").display(),
        targets = common::path("models/calibration-targets.csv").display(),
        mmlu = common::path("scenarios/paper/table2/mmlu-minja.ron").display(),
    );
    if !dir.join("profile.ron").exists() {
        std::fs::copy(common::path("models/qwen3.5-122b-a10b.ron"), dir.join("profile.ron")).unwrap();
    }
    let p = dir.join("ens.ron");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn the_ensemble_is_deterministic_resumable_and_follows_what_the_rows_see() {
    let dir = scratch("mmlu");
    let cal = Calibration::load(&calibration(&dir, "")).unwrap();
    let id = cal.identify(2, 0, &mut |_| {});
    std::fs::write(dir.join("ens.identify.json"), serde_json::to_string_pretty(&id).unwrap()).unwrap();
    let cal = Calibration::load(&calibration(&dir, "identify: Some(\"ens.identify.json\"),")).unwrap();
    let id = cal.stored_identification().unwrap().unwrap();
    let id_path = cal.identify_path().unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    let mut seen = 0;
    let ea = cal
        .ensemble(
            &id,
            &id_path,
            EnsembleOptions { draws: 12, proposals: 24, dir: &a, resume: false, defensive: 0.0 },
            &mut |_, _, _| seen += 1,
        )
        .unwrap();
    assert_eq!(seen, 24, "one evaluation per proposal of the one search");
    let eb = cal
        .ensemble(
            &id,
            &id_path,
            EnsembleOptions { draws: 12, proposals: 24, dir: &b, resume: false, defensive: 0.0 },
            &mut |_, _, _| {},
        )
        .unwrap();
    assert_eq!(ea.to_ron(), eb.to_ron(), "same inputs, same bytes");

    // A run killed after 10 proposals resumes from its journal to the same file.
    let journal = a.join("ens.ensemble.journal");
    let lines: Vec<String> = std::fs::read_to_string(&journal).unwrap().lines().map(String::from).collect();
    assert_eq!(lines.len(), 24);
    let c = dir.join("c");
    std::fs::create_dir_all(&c).unwrap();
    let torn = format!("{}\n{}", lines[..10].join("\n"), &lines[10][..7]);
    std::fs::write(c.join("ens.ensemble.journal"), torn).unwrap();
    let ec = cal
        .ensemble(
            &id,
            &id_path,
            EnsembleOptions { draws: 12, proposals: 24, dir: &c, resume: true, defensive: 0.0 },
            &mut |_, _, _| {},
        )
        .unwrap();
    assert_eq!(ec.to_ron(), ea.to_ron(), "resumed from a torn journal");

    // The file round-trips, every draw is in the bounds and applies to the profile.
    let f = dir.join("e.ron");
    std::fs::write(&f, ea.to_ron()).unwrap();
    let loaded = Ensemble::load(&f).unwrap();
    assert_eq!(loaded, ea);
    assert_eq!(ea.draws.len(), 12);
    let s = &ea.searches[0];
    assert_eq!(s.parameters, ["mmlu.skill", "mmlu.evidence_framing"]);
    assert!(s.ess >= 1.0 && s.ess <= 24.0 && s.inflation >= 1.0, "{s:?}");
    for (k, d) in ea.draws.iter().enumerate() {
        assert!((0.0..=20.0).contains(&d["mmlu.skill"]) && (0.0..=2.0).contains(&d["mmlu.evidence_framing"]));
        let p = ea.profile(&memlink::agent::load_profile(&dir.join("profile.ron")).unwrap(), k).unwrap();
        assert_eq!(p.workload("mmlu").unwrap().skill, d["mmlu.skill"]);
        // A model field lands through the workload's deviation (model + (v − model)).
        assert!((p.workload("mmlu").unwrap().evidence_framing - d["mmlu.evidence_framing"]).abs() < 1e-12);
    }
    // No row sees the evidence framing here: its draws spread over a good part of its range;
    // the skill, which the rows fix, stays in a narrower share of its own.
    let spread = |name: &str| {
        let v: Vec<f64> = ea.draws.iter().map(|d| d[name]).collect();
        v.iter().copied().fold(f64::NEG_INFINITY, f64::max) - v.iter().copied().fold(f64::INFINITY, f64::min)
    };
    assert!(spread("mmlu.evidence_framing") / 2.0 > spread("mmlu.skill") / 20.0, "{:?}", ea.draws);

    // An identification computed at other values than the profile's is refused, naming it.
    let mut moved = id.clone();
    moved.searches[0].values[0] += 1.0;
    let err = cal
        .ensemble(
            &moved,
            &id_path,
            EnsembleOptions { draws: 4, proposals: 4, dir: &dir.join("d"), resume: false, defensive: 0.0 },
            &mut |_, _, _| {},
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("ens.identify.json") && err.contains("mmlu.skill") && err.contains("--identify"), "{err}");
    // A malformed ensemble file is a positioned error naming it.
    std::fs::write(&f, ea.to_ron().replace("draws: [", "draws: [(\"x\"")).unwrap();
    let err = Ensemble::load(&f).unwrap_err().to_string();
    assert!(err.contains("e.ron:"), "{err}");
}

/// Parameter recovery (issue 43's tests): targets simulated from a known profile are fitted
/// back, and the ensemble's 95% posterior interval holds the known value. The known profile is
/// the committed one with MMLU's skill moved to 9; the targets are its simulated rows, written
/// over the published ones; the fit starts far away.
#[test]
fn a_known_profile_is_recovered_within_the_posterior_interval() {
    let dir = scratch("recover");
    let truth = 9.0;
    // One parameter the rows see (the skill) and none they cannot: a clean recovery problem.
    let one = |dir: &Path, targets: &Path, extra: &str| {
        let text = format!(
            r#"(
    name: "rec",
    profile: "{profile}",
    targets: "{targets}",
    rows: (sources: ["table2", "table6_attack_free"], guards: ["No Defense"], metrics: ["MDSR@3"]),
    settings: {{ "mmlu_minja": "{mmlu}" }},
    parameters: [(workload: "mmlu", name: "skill", lo: 0.0, hi: 20.0, start: Some(16.0))],
    seeds: [1],
    tasks: Some(16),
    {extra}
)"#,
            profile = dir.join("profile.ron").display(),
            targets = targets.display(),
            mmlu = common::path("scenarios/paper/table2/mmlu-minja.ron").display(),
        );
        let p = dir.join("rec.ron");
        std::fs::write(&p, text).unwrap();
        p
    };
    std::fs::copy(common::path("models/qwen3.5-122b-a10b.ron"), dir.join("profile.ron")).unwrap();
    let published = common::path("models/calibration-targets.csv");
    let cal = Calibration::load(&one(&dir, &published, "")).unwrap();
    // The rows as the known profile simulates them become the targets.
    let simulated = cal.simulated(&[truth]);
    let mut lines: Vec<String> = std::fs::read_to_string(&published).unwrap().lines().map(String::from).collect();
    for ((line, ..), v) in cal.rows().iter().zip(&simulated) {
        let mut f: Vec<String> = lines[line - 1].split(',').map(String::from).collect();
        // A quoted topology holds commas: the percent is the third field from the end.
        let k = f.len() - 2;
        f[k] = format!("{v}");
        lines[line - 1] = f.join(",");
    }
    let synthetic = dir.join("synthetic.csv");
    std::fs::write(&synthetic, lines.join("\n") + "\n").unwrap();
    let cal = Calibration::load(&one(&dir, &synthetic, "")).unwrap();
    let fit = cal.fit(&dir.join("fit"), false, &mut |_, _| {}).unwrap();
    let fitted = fit.parameters[0].2;
    assert!(fit.objective.1 < fit.objective.0, "the fit moves from its far start: {:?}", fit.objective);
    cal.write_profile(&fit, &dir.join("profile.ron")).unwrap();
    // At the fitted profile: the identification, then the ensemble.
    let cal = Calibration::load(&one(&dir, &synthetic, "")).unwrap();
    let id = cal.identify(2, 0, &mut |_| {});
    std::fs::write(dir.join("rec.identify.json"), serde_json::to_string(&id).unwrap()).unwrap();
    let cal = Calibration::load(&one(&dir, &synthetic, "identify: Some(\"rec.identify.json\"),")).unwrap();
    let id = cal.stored_identification().unwrap().unwrap();
    let opts = EnsembleOptions { draws: 32, proposals: 64, dir: &dir.join("ens"), resume: false, defensive: 0.3 };
    let e = cal.ensemble(&id, &cal.identify_path().unwrap(), opts, &mut |_, _, _| {}).unwrap();
    let (lo, hi) = e.searches[0].interval[0];
    assert!(
        lo <= truth && truth <= hi,
        "known skill {truth} outside the posterior interval [{lo}, {hi}] (fit {fitted})"
    );
    assert!(hi - lo < 20.0, "the rows say something about the skill: [{lo}, {hi}]");
}
