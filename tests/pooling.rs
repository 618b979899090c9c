//! Issue 15, point 10: the profile's model block shared by every workload, per-workload
//! deviations penalised, pooled calibration in stages, leave-one-setting-out validation.

mod common;

use memlink::agent::{ModelParams, load_profile, load_profile_str};
use memlink::study::calibrate::Calibration;
use memlink::study::calibrate::loso::{BlockFit, Loso, Predictor};
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memlink-pool-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A pooled calibration of two small settings, each fitting its own skill and its value of the
/// model's memory weight, with Table 2's and Table 6's No Defense rows.
fn pooled_calibration(dir: &Path, pooled: bool, evals: u32) -> PathBuf {
    let text = format!(
        r#"(
    name: "pool",
    profile: "{profile}",
    targets: "{targets}",
    rows: (sources: ["table2", "table6_attack_free"], guards: ["No Defense"], metrics: ["MDSR@3"]),
    settings: {{ "mmlu_minja": "{mmlu}", "csqa_promptinject": "{csqa}" }},
    parameters: [
        (workload: "mmlu", name: "skill", lo: 0.0, hi: 20.0, start: Some(14.0)),
        (workload: "mmlu", name: "memory_weight", lo: 0.0, hi: 8.0, start: Some(3.0), prior_sd: Some(0.5)),
        (workload: "csqa", name: "skill", lo: -1.0, hi: 5.0, start: Some(2.0)),
        (workload: "csqa", name: "memory_weight", lo: 0.0, hi: 8.0, start: Some(1.0), prior_sd: Some(0.5)),
    ],
    seeds: [1],
    tasks: Some(16),
    max_evaluations: {evals},
    pooled: {pooled},
)"#,
        profile = dir.join("profile.ron").display(),
        targets = common::path("models/calibration-targets.csv").display(),
        mmlu = common::path("scenarios/paper/table2/mmlu-minja.ron").display(),
        csqa = common::path("scenarios/paper/table2/csqa-promptinject.ron").display(),
    );
    std::fs::copy(common::path("models/qwen3.5-122b-a10b.ron"), dir.join("profile.ron")).unwrap();
    let p = dir.join("pool.ron");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_workload_reads_the_model_values_plus_its_deviations() {
    let text = r#"(name: "x", model: (memory_weight: 2.0, peer_weight: 0.5),
        workloads: { "mmlu": (skill: 3.0, deviations: { "memory_weight": -0.5 }), "csqa": () })"#;
    let p = load_profile_str(text, Path::new("x.ron")).unwrap();
    let (m, c) = (p.workload("mmlu").unwrap(), p.workload("csqa").unwrap());
    assert_eq!((m.memory_weight, m.peer_weight, m.skill), (1.5, 0.5, 3.0));
    assert_eq!((c.memory_weight, c.peer_weight), (2.0, 0.5), "no deviation: the model's value");
    assert_eq!(c.skill, memlink::agent::WorkloadBlock::default().skill);
    // A workload field is not a deviation, and a deviation must name a model field.
    for (bad, expected) in [
        (r#"(name: "x", workloads: { "mmlu": (memory_weight: 1.0) })"#, "memory_weight"),
        (r#"(name: "x", workloads: { "mmlu": (deviations: { "skill": 1.0 }) })"#, "deviations of model parameters"),
        (
            r#"(name: "x", model: (memory_weight: 0.2), workloads: { "mmlu": (deviations: { "memory_weight": -0.5 }) })"#,
            "the model's value plus",
        ),
    ] {
        let e = load_profile_str(bad, Path::new("bad.ron")).unwrap_err().to_string();
        assert!(e.contains("bad.ron") && e.contains(expected), "{e}");
    }
}

#[test]
fn the_committed_profiles_share_one_model_block() {
    for name in ["qwen3.5-122b-a10b", "gemma-4-31b"] {
        let p = load_profile(&common::path(&format!("models/{name}.ron"))).unwrap();
        assert_ne!(p.model, ModelParams::default(), "{name} has its own model block");
        for (class, w) in &p.workloads {
            for d in w.deviations.keys() {
                assert!(memlink::agent::MODEL_FIELDS.contains(&d.as_str()), "{name} {class}: {d}");
            }
        }
    }
}

#[test]
fn a_pooled_fit_shares_the_model_value_and_penalises_deviations() {
    let dir = scratch("fit");
    let cal = Calibration::load(&pooled_calibration(&dir, true, 10)).unwrap();
    let fit = cal.fit(&dir.join("out"), false, &mut |_, _| {}).unwrap();
    // Stage A, its spreads, and stage C each leave a file; the fit is deterministic.
    for f in ["pool.state.json", "pool.spreads.json", "pool.pooled.state.json"] {
        assert!(dir.join("out").join(f).exists(), "{f}");
    }
    let again = cal.fit(&dir.join("again"), false, &mut |_, _| {}).unwrap();
    assert_eq!(fit, again);
    let (xa, _) = fit.stage_a.clone().expect("a pooled fit has a stage A");
    assert_eq!(fit.centre.len(), 1);
    let (name, centre) = &fit.centre[0];
    assert_eq!(name, "memory_weight");
    // The centre is a weighted mean of the determined stage-A values (or the default if none).
    let determined: Vec<f64> =
        [1, 3].iter().filter(|&&i| fit.spreads[i].as_ref().and_then(|s| s.se).is_some()).map(|&i| xa[i]).collect();
    if determined.is_empty() {
        assert_eq!(*centre, ModelParams::default().memory_weight);
    } else {
        let (lo, hi) = determined.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
        assert!((lo - 1e-9..=hi + 1e-9).contains(centre), "{centre} within [{lo}, {hi}]");
    }
    // The written profile holds the centre as the model's value and each workload's fit as
    // model + deviation.
    let out = dir.join("fitted.ron");
    cal.write_profile(&fit, &out).unwrap();
    let p = load_profile(&out).unwrap();
    assert_eq!(p.model.memory_weight, *centre);
    assert_eq!(p.workload("mmlu").unwrap().memory_weight, fit.parameters[1].2);
    assert_eq!(p.workload("csqa").unwrap().memory_weight, fit.parameters[3].2);
    // Workloads that fit no memory weight share the model's.
    assert_eq!(p.workload("appworld").unwrap().memory_weight, *centre);
    // The penalty counts in the objective: the same point scores worse with a tighter prior.
    let tight =
        std::fs::read_to_string(dir.join("pool.ron")).unwrap().replace("prior_sd: Some(0.5)", "prior_sd: Some(0.01)");
    std::fs::write(dir.join("tight.ron"), tight).unwrap();
    let t = Calibration::load(&dir.join("tight.ron")).unwrap();
    let x: Vec<f64> = fit.parameters.iter().map(|p| p.2).collect();
    let loose = Calibration::load(&dir.join("pool.ron")).unwrap();
    assert!(t.objective(&x) >= loose.objective(&x));
}

#[test]
fn leave_one_setting_out_predicts_each_settings_attack_rows_without_them() {
    let dir = scratch("loso");
    let cal = Calibration::load(&pooled_calibration(&dir, true, 8)).unwrap();
    let out = dir.join("out");
    let l = cal.leave_one_out(&out, false, &mut |_, _| {}).unwrap();
    assert_eq!(l.folds.len(), 12, "two settings × three predictors × two block rules");
    for f in &l.folds {
        // The fold saw only the attack-free row; the attack row is held out.
        assert!(f.rows.iter().any(|r| r.fitted && r.source.contains("attack_free")), "{f:?}");
        assert!(f.rows.iter().any(|r| !r.fitted && r.source == "table2"), "{f:?}");
        assert!(f.rows.iter().all(|r| r.setting == f.setting));
        // Only workload fields were fitted, from the defaults.
        assert!(f.workload_fit.iter().all(|(n, _, _)| n.ends_with(".skill")), "{:?}", f.workload_fit);
        // Each setting's memory weight is fitted by one other setting alone: the shared
        // predictor gives it the default.
        if f.predictor != Predictor::Pooled {
            assert_eq!(f.model, vec![("memory_weight".to_string(), ModelParams::default().memory_weight)]);
        }
    }
    // The pooled prediction of one setting never uses its own stage-A value: changing that
    // setting's rows (here: dropping its attack rows from the targets) leaves its fold's model
    // values as they were.
    let a = l.folds.iter().find(|f| f.setting == "mmlu_minja" && f.predictor == Predictor::Pooled).unwrap();
    let spreads: Vec<Option<memlink::study::calibrate::pool::Spread>> =
        serde_json::from_str(&std::fs::read_to_string(out.join("pool.spreads.json")).unwrap()).unwrap();
    let csqa_determined = spreads[3].as_ref().and_then(|s| s.se).is_some();
    let expected = if csqa_determined {
        let state: Vec<memlink::study::calibrate::Simplex> =
            serde_json::from_str(&std::fs::read_to_string(out.join("pool.state.json")).unwrap()).unwrap();
        // CSQA's search is the second; its memory weight the second coordinate.
        state[1].best().0[1]
    } else {
        ModelParams::default().memory_weight
    };
    assert!((a.model[0].1 - expected).abs() < 1e-12, "{:?} vs {expected}", a.model);
    // Rerun from the checkpoints: the same folds.
    let again = cal.leave_one_out(&out, true, &mut |_, _| {}).unwrap();
    assert_eq!(l, again);
    let md = memlink::study::calibrate::loso::loso_report(&cal, &l);
    assert!(md.contains("| **all** |") && md.contains("mmlu_minja"), "{md}");
}

#[test]
fn a_fold_fits_the_skill_alone_and_a_refold_adds_it_to_a_result_stored_before_the_rule() {
    let dir = scratch("refold");
    let file = pooled_calibration(&dir, true, 6);
    // MMLU also fits its difficulty slope: one attack-free row, two workload fields.
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "(workload: \"csqa\", name: \"skill\"",
        "(workload: \"mmlu\", name: \"difficulty_slope\", lo: 0.0, hi: 30.0, start: Some(16.0)),\n        (workload: \"csqa\", name: \"skill\"",
    );
    std::fs::write(&file, text).unwrap();
    let cal = Calibration::load(&file).unwrap();
    let l = cal.leave_one_out(&dir.join("out"), false, &mut |_, _| {}).unwrap();
    let defaults = memlink::agent::WorkloadBlock::default();
    for f in l.folds.iter().filter(|f| f.setting == "mmlu_minja") {
        let names: Vec<&str> = f.workload_fit.iter().map(|(n, _, _)| n.as_str()).collect();
        match f.block {
            BlockFit::Skill => assert_eq!(names, ["mmlu.skill"]),
            BlockFit::All => assert_eq!(names, ["mmlu.skill", "mmlu.difficulty_slope"]),
        }
        // Every fitted field starts from the stand-in's default, not from the calibration's start.
        for (n, start, _) in &f.workload_fit {
            let field = n.strip_prefix("mmlu.").unwrap();
            assert_eq!(Some(*start), defaults.get(field), "{n}");
        }
    }
    assert_eq!(cal.single_source("mmlu"), vec![("memory_weight".to_string(), vec!["csqa".to_string()])]);
    // A result stored before the rule and the shared predictor: its folds fitted every field
    // and carry no `block`.
    let old = Loso {
        folds: l
            .folds
            .iter()
            .filter(|f| f.block == BlockFit::All && f.predictor != Predictor::Shared)
            .cloned()
            .collect(),
        in_sample: l.in_sample.clone(),
    };
    let mut json: serde_json::Value = serde_json::to_value(&old).unwrap();
    for f in json["folds"].as_array_mut().unwrap() {
        f.as_object_mut().unwrap().remove("block");
    }
    let stored: Loso = serde_json::from_value(json).unwrap();
    assert_eq!(stored, old, "a fold without `block` fitted every field");
    // Its report has columns for what it holds: every block field fitted, pooled and defaults.
    let md = memlink::study::calibrate::loso::loso_report(&cal, &stored);
    assert!(
        md.contains("| in-sample RMS z | LOSO RMS z, pooled, every block field fitted | LOSO RMS z, defaults, every block field fitted |"),
        "{md}"
    );
    let full = memlink::study::calibrate::loso::loso_report(&cal, &l);
    assert!(full.contains("| LOSO RMS z, pooled | LOSO RMS z, pooled where shared | LOSO RMS z, defaults |"), "{full}");
    // The refold computes the missing folds at the stored model values (the shared ones from
    // the pooled): the full run's.
    let again = cal.refold(&stored, &dir.join("refold"), false, &mut |_, _| {}).unwrap();
    assert_eq!(again.folds, l.folds);
}

#[test]
fn consistent_only_leaves_out_both_cells_of_each_contradicted_pair() {
    let dir = scratch("consistent");
    let file = common::path("scenarios/calibration/gemma-judges.ron");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("consistent_only: true"));
    // The same calibration without the filter, written next to the original so paths resolve.
    let all_file = file.with_file_name(format!("all-{}.ron", std::process::id()));
    std::fs::write(&all_file, text.replace("consistent_only: true", "consistent_only: false")).unwrap();
    let all = Calibration::load(&all_file);
    std::fs::remove_file(&all_file).unwrap();
    let (filtered, all) = (Calibration::load(&file).unwrap().rows(), all.unwrap().rows());
    let dropped: Vec<_> = all.iter().filter(|r| !filtered.contains(r)).collect();
    assert!(!dropped.is_empty() && filtered.iter().all(|r| all.contains(r)));
    let targets = memlink::study::calibrate::read_targets(&common::path("models/calibration-targets.csv")).unwrap();
    let effects = memlink::study::calibrate::effects::effects(&targets);
    let line = |l: usize| targets.iter().find(|t| t.line == l).unwrap();
    let mut table2 = 0;
    for (l, setting, guard, metric) in &dropped {
        let t = line(*l);
        assert!(
            memlink::study::calibrate::effects::inconsistent(&effects, &t.backbone, setting, guard, metric),
            "{t:?} is a cell of a contradicted pair"
        );
        assert!(metric.ends_with("@3"));
        table2 += usize::from(t.source == "table2");
    }
    // Both cells of each pair: as many round-level cells as Table 2 cells.
    assert_eq!(2 * table2, dropped.len(), "{dropped:?}");
    let _ = dir;
}

#[test]
fn a_stored_leave_one_out_result_is_reassessed_and_a_corrupted_one_is_a_positioned_error() {
    let dir = scratch("stored");
    let file = pooled_calibration(&dir, true, 6);
    let cal = Calibration::load(&file).unwrap();
    let out = dir.join("out");
    let l = cal.leave_one_out(&out, false, &mut |_, _| {}).unwrap();
    std::fs::write(dir.join("pool.loso.json"), serde_json::to_string_pretty(&l).unwrap()).unwrap();
    // Named by the calibration file, the stored folds re-evaluate to the same rows.
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("pooled: true,", "pooled: true, loso: Some(\"pool.loso.json\"),");
    std::fs::write(&file, text).unwrap();
    let cal = Calibration::load(&file).unwrap();
    let fit = cal.evaluate();
    let again = cal.assess_loso(&fit).unwrap().expect("the calibration names a stored result");
    assert_eq!(again.folds, l.folds);
    // A corrupted spreads file or stored result names itself and where it broke.
    std::fs::write(dir.join("pool.loso.json"), "{\"folds\": [ {\"setting\": 3 } ] }").unwrap();
    let e = cal.assess_loso(&fit).unwrap_err().to_string();
    assert!(e.contains("pool.loso.json:1:") && e.contains("leave-one-setting-out"), "{e}");
    std::fs::write(out.join("pool.spreads.json"), "[ nonsense").unwrap();
    let e = cal.leave_one_out(&out, true, &mut |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("pool.spreads.json:1:") && e.contains("stage-B spreads"), "{e}");
}
