//! Issue 15, point 10: which parameters the targets leave undetermined, from the objective's
//! profile over each (sim/study/calibrate/identify.rs), on a small MMLU calibration whose rows cannot
//! see one of its parameters.

mod common;

use memlink::study::calibrate::Calibration;
use memlink::study::calibrate::identify::{Identification, Side};
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    common::scratch("identify", name)
}

/// MMLU's Table 2 and Table 6 No Defense rows under the non-strict protocol, where memories are
/// shown as experiences: its skill and memory weight act on them, its evidence framing cannot
/// (no No Defense prompt of these rows renders a memory as evidence).
fn calibration(dir: &Path, extra: &str) -> PathBuf {
    let text = format!(
        r#"(
    name: "ident",
    profile: "{profile}",
    targets: "{targets}",
    rows: (sources: ["table2", "table6_attack_free"], guards: ["No Defense"], metrics: ["MDSR@3"]),
    settings: {{ "mmlu_minja": "{mmlu}" }},
    parameters: [
        (workload: "mmlu", name: "skill", lo: 0.0, hi: 20.0),
        (workload: "mmlu", name: "memory_weight", lo: 0.0, hi: 8.0, prior_sd: Some(1.0)),
        (workload: "mmlu", name: "evidence_framing", lo: 0.0, hi: 1.5),
    ],
    seeds: [1],
    tasks: Some(16),
    {extra}
)"#,
        profile = dir.join("profile.ron").display(),
        targets = common::path("models/calibration-targets.csv").display(),
        mmlu = common::path("scenarios/paper/table2/mmlu-minja.ron").display(),
    );
    std::fs::copy(common::path("models/qwen3.5-122b-a10b.ron"), dir.join("profile.ron")).unwrap();
    let p = dir.join("ident.ron");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_parameter_no_row_sees_is_undetermined_and_the_stored_analysis_reassesses_exactly() {
    let dir = scratch("mmlu");
    let cal = Calibration::load(&calibration(&dir, "")).unwrap();
    let mut traced = Vec::new();
    let id = cal.identify(3, 0, &mut |p| traced.push(p.to_string()));
    assert_eq!(traced, ["mmlu.skill", "mmlu.memory_weight", "mmlu.evidence_framing"]);
    assert_eq!(id.searches.len(), 1, "one workload, one search");
    let s = &id.searches[0];
    assert_eq!(s.rows, 2);
    assert_eq!(s.jacobian.len(), 2);
    // No row moves with the evidence framing: its column is zero, the linearised profile has
    // no width to it, its trace is flat, and it is the flattest direction, alone.
    assert!(s.jacobian.iter().all(|r| r[2] == 0.0), "{:?}", s.jacobian);
    assert_eq!(s.half_width(2, false), None);
    let (lo, hi, lowest) = s.sides(2, false);
    assert!(lo != Side::Bounded && hi == Side::Open && lowest == 0.0, "{lo:?} {hi:?} {lowest}");
    assert_eq!(s.verdict(2, false), "undetermined");
    assert_eq!(s.verdict(2, true), "undetermined", "no prior holds it either");
    let flat = &s.directions()[0];
    assert!(flat.0.abs() < 1e-9 && (flat.1[2] - 1.0).abs() < 1e-12, "{flat:?}");
    // The skill moves the attack-free row from nothing right to everything: determined.
    assert_eq!(s.verdict(0, false), "determined", "{:?}", s.traces[0]);
    assert!(s.half_width(0, false).is_some());
    // Every trace runs from bound to bound through the middle, the traced value exact.
    for t in &s.traces {
        let i = t.parameter;
        let v: Vec<f64> = t.points.iter().map(|p| p.x[i]).collect();
        assert_eq!(v, [s.lo[i], (s.lo[i] + s.hi[i]) / 2.0, s.hi[i]]);
        assert!(t.points.iter().all(|p| p.chi2.is_finite() && p.chi2 >= 0.0));
    }
    // Refining can only lower a point's χ² of the rows (its start is the linearised path's
    // point), and it keeps the traced value.
    let refined = cal.identify(3, 6, &mut |_| {});
    assert_eq!(refined.refine, 6);
    let r = &refined.searches[0];
    for (a, b) in r.traces.iter().zip(&s.traces) {
        for (p, q) in a.points.iter().zip(&b.points) {
            assert!(r.targets_chi2(p) <= s.targets_chi2(q) + 1e-9, "{} > {}", r.targets_chi2(p), s.targets_chi2(q));
            assert_eq!(p.x[a.parameter], q.x[b.parameter]);
        }
    }
    let md = memlink::study::calibrate::identify::identify_report(&cal, &id);
    assert!(md.contains("| mmlu.evidence_framing |") && md.contains("| ∞ |") && md.contains("undetermined"), "{md}");

    // Stored and named by the calibration, `assess` re-evaluates it to the same numbers.
    std::fs::write(dir.join("ident.identify.json"), serde_json::to_string_pretty(&id).unwrap()).unwrap();
    let named = calibration(&dir, "identify: Some(\"ident.identify.json\"),");
    let cal = Calibration::load(&named).unwrap();
    let again = cal.assess_identification().unwrap().expect("the calibration names a stored analysis");
    assert_eq!(again, id);

    // Computed at another profile: refused, naming the file and the parameter.
    let mut stale: Identification = id.clone();
    stale.searches[0].values[0] += 0.5;
    std::fs::write(dir.join("ident.identify.json"), serde_json::to_string(&stale).unwrap()).unwrap();
    let e = cal.assess_identification().unwrap_err().to_string();
    assert!(e.contains("ident.identify.json") && e.contains("mmlu.skill") && e.contains("--identify"), "{e}");
    // Corrupted: a positioned parse error.
    std::fs::write(dir.join("ident.identify.json"), "{\"searches\": [ {\"parameters\": 3 } ] }").unwrap();
    let e = cal.assess_identification().unwrap_err().to_string();
    assert!(e.contains("ident.identify.json:1:") && e.contains("identifiability"), "{e}");
    // A trace point of the wrong dimension: refused before any simulation.
    let mut short = id.clone();
    short.searches[0].traces[1].points[0].x.pop();
    std::fs::write(dir.join("ident.identify.json"), serde_json::to_string(&short).unwrap()).unwrap();
    let e = cal.assess_identification().unwrap_err().to_string();
    assert!(e.contains("ident.identify.json") && e.contains("trace coordinate"), "{e}");
}
