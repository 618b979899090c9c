//! Grids: deterministic expansion, thread-independent results, the table, and bad results files.

mod common;

use memlink::study::grid::{expand, read_records, run_grid, table, write_records};
use std::process::Command;

#[test]
fn expansion_is_deterministic_and_counts_what_the_file_says() {
    let path = common::path("tests/fixtures/grid/small.ron");
    let (spec, runs) = expand(&path).unwrap();
    assert_eq!(runs.len(), 2 * 3 * 2);
    let labels: Vec<(u64, String, String)> =
        runs.iter().map(|r| (r.seed, r.topology.clone(), r.attackers.clone())).collect();
    assert_eq!(labels[0], (3, "wheel".into(), "0,1,2".into()));
    assert_eq!(labels[1], (3, "wheel".into(), "3,4,5".into()));
    assert_eq!(labels[2], (3, "chain".into(), "0,1,2".into()));
    assert_eq!(labels[11], (4, "tree".into(), "3,4,5".into()));
    let (_, again) = expand(&path).unwrap();
    assert_eq!(labels, again.iter().map(|r| (r.seed, r.topology.clone(), r.attackers.clone())).collect::<Vec<_>>());
    assert_eq!(spec.name, "small-grid");
    // The paper grid: 3 topologies × 15 triples.
    let (_, paper) = expand(&common::path("scenarios/paper/grid-mmlu-minja.ron")).unwrap();
    assert_eq!(paper.len(), 45);
    // Table 2: settings × backbones × 3 topologies × 15 triples, in that order, each run with
    // the setting's nine methods, except that Qwen's MMLU baselines run as Table 11 did (the
    // grid file says why): three random graphs on the strict base, seven methods.
    let (spec, t2) = expand(&common::path("scenarios/paper/grid-table2.ron")).unwrap();
    // MMLU, LongMemEval and AppWorld over 15 triples; CSQA and InjecAgent with the INFA
    // harness's fixed 0, 1, 2.
    assert_eq!(spec.settings.len(), 8);
    let mmlu = 45 + 3 + 45 + 45;
    assert_eq!(t2.len(), mmlu + 2 * (2 * 45 + 2 * 3));
    assert_eq!((t2[0].setting.as_str(), t2[0].backbone.as_str()), ("mmlu_minja", "qwen3.5-122b-a10b"));
    let arms =
        |r: &memlink::study::grid::GridRun| r.scenario.scenario.arms.iter().map(|a| a.name.clone()).collect::<Vec<_>>();
    assert_eq!(arms(&t2[0]), ["No Defense"]);
    let strict = &t2[45..48];
    assert!(strict.iter().all(|r| r.topology.starts_with("random") && r.backbone == "qwen3.5-122b-a10b"));
    assert_eq!(strict.iter().map(|r| r.attackers.as_str()).collect::<Vec<_>>(), ["0,1,5", "0,2,7", "1,5,7"]);
    assert_eq!(strict[0].scenario.scenario.name, "rounds-mmlu-minja");
    assert_eq!(arms(&strict[0]).len(), 7);
    assert!(!arms(&strict[0]).iter().any(|a| a == "No Defense" || a == "MAPLE-Guard"));
    assert_eq!(arms(&t2[48]), ["MAPLE-Guard"]);
    assert_eq!((t2[93].setting.as_str(), t2[93].backbone.as_str()), ("mmlu_minja", "gemma-4-31b"));
    assert_eq!(t2[93].scenario.profile.name, "gemma-4-31b");
    assert_eq!(arms(&t2[93]).len(), 9);
    assert_eq!(t2[mmlu].setting, "longmemeval_memorygraft");
    assert_eq!(t2[mmlu + 90].setting, "appworld_agentpoison");
    assert_eq!((t2[mmlu + 180].setting.as_str(), t2[mmlu + 180].attackers.as_str()), ("csqa_promptinject", "0,1,2"));
    assert!(t2[mmlu..].iter().all(|r| r.scenario.scenario.arms.len() == 9));
}

#[test]
fn a_grid_entry_can_narrow_backbones_arms_and_topologies() {
    let dir = std::env::temp_dir().join(format!("memlink-grid-narrow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("g.ron");
    let base = common::path("tests/fixtures/grid/base.ron");
    let grid = |entry: &str| {
        format!("(name: \"g\", settings: [(name: \"x\", base: {base:?}{entry})], topologies: [Wheel, Chain])")
    };
    std::fs::write(&file, grid(", arms: [\"No Defense\"], topologies: [Tree]")).unwrap();
    let (_, runs) = expand(&file).unwrap();
    assert!(runs.iter().all(|r| r.topology == "tree"));
    assert!(
        runs.iter().all(|r| r.scenario.scenario.arms.len() == 1 && r.scenario.scenario.arms[0].name == "No Defense")
    );
    // An arm the base does not have is a positioned error naming the arms it has.
    std::fs::write(&file, grid(", arms: [\"No Such Guard\"]")).unwrap();
    let e = expand(&file).unwrap_err().to_string();
    assert!(e.contains("g.ron:1:") && e.contains("No Such Guard") && e.contains("No Defense"), "{e}");
}

#[test]
fn a_grid_needs_exactly_one_of_base_and_settings() {
    let dir = std::env::temp_dir().join(format!("memlink-grid-spec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("g.ron");
    std::fs::write(&file, "(name: \"g\")").unwrap();
    let e = expand(&file).unwrap_err().to_string();
    assert!(e.contains("g.ron") && e.contains("setting"), "{e}");
    let base = common::path("tests/fixtures/grid/base.ron");
    let both = format!("(name: \"g\", base: {base:?}, settings: [(name: \"x\", base: {base:?})])");
    std::fs::write(&file, both).unwrap();
    let e = expand(&file).unwrap_err().to_string();
    assert!(e.contains("not both"), "{e}");
}

#[test]
fn results_do_not_depend_on_threads_and_the_table_reads_them_back() {
    let path = common::path("tests/fixtures/grid/small.ron");
    let (spec, runs) = expand(&path).unwrap();
    let run =
        |n: usize| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap().install(|| run_grid(&spec, &runs));
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one.len(), 12 * 2);
    let dir = std::env::temp_dir().join(format!("memlink-grid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("results.jsonl");
    write_records(&file, &one).unwrap();
    let back = read_records(&file).unwrap();
    assert_eq!(back, one);
    let rows = table(&back, 3);
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.setting == "grid-base" || !r.setting.is_empty()));
    assert_eq!(rows[0].arm, "No Defense");
    assert_eq!(rows[0].per_topology.len(), 3);
    assert!(rows.iter().all(|r| r.per_topology.iter().all(|t| t.3 == 4)), "2 seeds × 2 sets per topology");
    // The table's mean is the mean of per-topology means.
    let m = rows[1].per_topology.iter().map(|t| t.1).sum::<f64>() / 3.0;
    assert!((rows[1].mdsr.0 - m).abs() < 1e-9);
}

#[test]
fn a_corrupted_results_file_is_a_positioned_error() {
    let dir = std::env::temp_dir().join(format!("memlink-grid-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("results.jsonl");
    std::fs::write(&file, "{\"grid\":\"g\"}\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_memlink")).args(["report", file.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("results.jsonl:1:"), "{e}");
    assert!(e.contains("grid result record"), "{e}");
    // A grid whose attacker set is impossible names the grid file.
    let g = dir.join("bad-grid.ron");
    std::fs::write(
        &g,
        format!(
            "(name: \"b\", base: \"{}\", attacker_sets: [[0, 9]])",
            common::path("tests/fixtures/grid/base.ron").display()
        ),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_memlink")).args(["grid", g.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("bad-grid.ron:1:") && e.contains("agent ids below 8"), "{e}");
}

#[test]
fn the_report_sets_the_table_beside_published_numbers() {
    use memlink::study::calibrate::Target;
    use memlink::study::grid::{TableRow, versus_paper};
    let row = |arm: &str, m: f64, d: f64| TableRow {
        backbone: "b".into(),
        setting: "s".into(),
        arm: arm.into(),
        per_topology: Vec::new(),
        mdsr: (m, 0.0),
        rda: (d, 0.0),
        mdsr_predictive: None,
        rda_predictive: None,
    };
    let t = |guard: &str, metric: &str, percent: f64, sd: Option<f64>| Target {
        line: 2,
        source: "table2".into(),
        backbone: "b".into(),
        setting: "s".into(),
        guard: guard.into(),
        topology: "mean(star,chain,tree)".into(),
        round: 3,
        metric: metric.into(),
        percent,
        topology_std: sd,
    };
    let rows = [row("No Defense", 46.0, 60.0), row("PIGuard", 40.0, 10.0), row("MAPLE-Guard", 65.0, 1.0)];
    let targets = [
        t("No Defense", "MDSR@3", 46.7, Some(1.1)),
        t("No Defense", "RDA@3", 51.4, Some(9.0)),
        t("PIGuard", "MDSR@3", 72.2, None),
        t("PIGuard", "RDA@3", 12.0, None),
    ];
    let md = versus_paper(&rows, &targets, 3);
    assert!(md.contains("| b | s | No Defense | 46.0 | 46.7 ± 1.1 | -0.7 |"), "{md}");
    assert!(md.contains("prediction (never fitted)"));
    // RDA is 8.6 off but within the reported spread of 9.0; PIGuard's MDSR is 32 off.
    assert!(md.contains("No Defense cells within 3 points (or the reported spread): 2 of 2."), "{md}");
    assert!(md.contains("Baseline cells within 5 points: 1 of the 2 whose"), "{md}");
    assert!(md.contains("the other 0 as differing"), "{md}");
    // A round-level table that contradicts PIGuard's MDSR effect (none there, 25.5 points in
    // Table 2): that cell leaves the criterion, RDA's stays.
    let mut more = targets.to_vec();
    for (guard, percent) in [("No Defense", 80.0), ("PIGuard", 80.0)] {
        more.push(Target { source: "table11".into(), topology: "random".into(), ..t(guard, "MDSR@3", percent, None) });
    }
    let md = versus_paper(&rows, &more, 3);
    assert!(md.contains("Baseline cells within 5 points: 1 of the 1 whose"), "{md}");
    assert!(md.contains("the other 1 as differing by more than 10 points"), "{md}");
    assert!(md.contains("1 of all 2."), "{md}"); // With predictive intervals (an ensemble grid): the columns, and how many published values
    // fall inside them per role.
    use memlink::study::predictive::{Component, Predictive};
    let with = |r: &TableRow, lo: f64, hi: f64| {
        let p = |v: f64| {
            Predictive::of(
                Component { mean: v, var: 1.0, runs: 3 },
                &[Component { mean: lo, var: 0.0, runs: 3 }, Component { mean: hi, var: 0.0, runs: 3 }],
                (0.0, 100.0),
            )
        };
        TableRow { mdsr_predictive: Some(p(r.mdsr.0)), rda_predictive: Some(p(r.rda.0)), ..r.clone() }
    };
    let wide = [with(&rows[0], 40.0, 70.0), with(&rows[1], 38.0, 42.0), with(&rows[2], 60.0, 70.0)];
    let md = versus_paper(&wide, &targets, 3);
    assert!(md.contains("| MDSR@3 sim | seed-only 95% | predictive 95% | paper |"), "{md}");
    assert!(md.contains("| b | s | No Defense | 46.0 | [44.0, 48.0] | [40.0, 70.0] | 46.7 ± 1.1 | -0.7 |"), "{md}");
    // No Defense: MDSR 46.7 and RDA 51.4 inside [40, 70]; PIGuard: 72.2 and 12.0 outside [38, 42].
    assert!(md.contains("No Defense 2 of 2, baselines 0 of 2; MAPLE-Guard's rows are predictions whose published values memlink does not read."), "{md}");
    assert!(!versus_paper(&rows, &targets, 3).contains("predictive"));
}

/// `grid --ensemble`: each run again at each posterior draw, on the same seeds, recorded with
/// its draw; the table keeps the fit's values and adds the intervals; CSV adds `_lo`/`_hi`.
#[test]
fn an_ensemble_grid_runs_every_cell_at_each_draw_and_prints_predictive_intervals() {
    use memlink::study::predictive::Ensembles;
    let path = common::path("tests/fixtures/grid/small.ron");
    let (spec, runs) = expand(&path).unwrap();
    let n = runs.len();
    let all = memlink::study::grid::with_ensemble(runs.clone(), &mut Ensembles::new(Some(2))).unwrap();
    assert_eq!(all.len(), 3 * n);
    assert!(all[..n].iter().all(|r| r.draw.is_none()));
    assert!(all[n..2 * n].iter().all(|r| r.draw == Some(0)) && all[2 * n..].iter().all(|r| r.draw == Some(1)));
    assert!(all.iter().enumerate().all(|(i, r)| r.index == i));
    // A draw moves only the scenario's workload (MMLU) in the profile; the seeds are the fit's.
    let e = memlink::study::calibrate::ensemble::Ensemble::load(&common::path("models/qwen3.5-122b-a10b.ensemble.ron"))
        .unwrap();
    let fit = &runs[0].scenario.profile;
    let at = &all[n].scenario.profile;
    assert_eq!(all[n].seed, runs[0].seed);
    assert_eq!(fit.workloads["appworld"], at.workloads["appworld"]);
    assert_eq!(at.workloads["mmlu"].skill, e.draws[0]["mmlu.skill"]);
    let records = run_grid(&spec, &all);
    let again = run_grid(&spec, &all);
    assert_eq!(records, again, "the same grid, the same records");
    let rows = table(&records, 3);
    // The fit's values are the table's, with or without the draws.
    let plain = table(&run_grid(&spec, &runs), 3);
    assert_eq!(
        rows.iter().map(|r| (r.mdsr, r.rda)).collect::<Vec<_>>(),
        plain.iter().map(|r| (r.mdsr, r.rda)).collect::<Vec<_>>()
    );
    let p = rows[0].mdsr_predictive.expect("a predictive interval");
    assert_eq!(p.draws, 2);
    assert!(p.interval.0 <= p.interval.1 && (0.0..=1.0).contains(&p.calibration_share));
    assert!(p.seed.is_some(), "four runs per topology give a seed-only interval");
    let csv = memlink::study::grid::csv(&rows, 3);
    let header = csv.lines().next().unwrap();
    assert!(header.contains("mdsr_at_3_lo,mdsr_at_3_hi") && header.contains("rda_at_3_lo,rda_at_3_hi"), "{header}");
    assert!(csv.lines().all(|l| l.split(',').count() == header.split(',').count()));
    let md = memlink::study::grid::markdown(&rows, 3);
    assert!(md.contains("predictive interval over 2 posterior draws"), "{md}");
    // The results file keeps the draw and reads back to the same table.
    let dir = std::env::temp_dir().join(format!("memlink-grid-ensemble-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("results.jsonl");
    write_records(&file, &records).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.lines().next().is_some_and(|l| !l.contains("\"draw\"")), "a fit record has no draw field");
    assert!(text.lines().last().is_some_and(|l| l.contains("\"draw\":1")));
    assert_eq!(table(&read_records(&file).unwrap(), 3), rows);
    // More draws than the ensemble has, and a profile without an ensemble, are errors naming
    // what is missing.
    let err =
        memlink::study::grid::with_ensemble(runs.clone(), &mut Ensembles::new(Some(e.draws.len() + 1))).unwrap_err();
    assert!(err.to_string().contains(&format!("1 to {} draws", e.draws.len())), "{err}");
    let base = std::fs::read_to_string(common::path("tests/fixtures/grid/base.ron")).unwrap();
    let profile = dir.join("mine.ron");
    std::fs::copy(common::path("models/qwen3.5-122b-a10b.ron"), &profile).unwrap();
    std::fs::write(dir.join("base.ron"), base.replace("\"qwen3.5-122b-a10b\"", "\"mine.ron\"")).unwrap();
    std::fs::write(dir.join("g.ron"), "(name: \"g\", base: \"base.ron\")").unwrap();
    let (_, mine) = expand(&dir.join("g.ron")).unwrap();
    let err = memlink::study::grid::with_ensemble(mine, &mut Ensembles::new(None)).unwrap_err().to_string();
    assert!(err.contains("mine.ensemble.ron") && err.contains("memlink calibrate"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
