//! Issue 43, point 5: a what-if over the calibration's posterior draws (`whatif --ensemble`):
//! every job again at each draw on the same seeds, the fit's numbers unchanged, and each
//! difference with a predictive interval and the calibration's share of its variance.

mod common;

use memlink::study::predictive::Ensembles;
use memlink::study::whatif::WhatIf;

fn small_whatif(dir: &std::path::Path) -> std::path::PathBuf {
    let base = common::path("scenarios/paper/mmlu-minja-wheel.ron");
    let text = format!(
        r#"(
    name: "ens-forgery",
    question: "Does forging metadata move MAPLE-Guard, over the calibration's uncertainty?",
    settings: [(name: "mmlu_minja", base: {base:?}, tasks: Some(12))],
    topologies: [Wheel, Chain],
    replicates: 2,
    arms: [(name: "No Defense", guard: NoDefense), (name: "MAPLE-Guard", guard: Maple(()))],
    conditions: [
        (name: "honest metadata", capabilities: []),
        (name: "forged, surviving", capabilities: [Forge((order: Survives))]),
    ],
    reference: "honest metadata",
    metrics: ["rda@3", "mdsr@3"],
    figures: [],
)"#
    );
    let p = dir.join("w.ron");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_whatif_over_the_ensemble_keeps_the_fit_and_adds_predictive_intervals() {
    let dir = common::scratch("predictive", "whatif");
    let file = small_whatif(&dir);
    let plain = WhatIf::load(&file).unwrap();
    let fit_jobs = plain.jobs.len();
    let w = WhatIf::load(&file).unwrap().with_ensemble(&mut Ensembles::new(Some(3))).unwrap();
    assert_eq!((w.draws, w.jobs.len()), (3, 4 * fit_jobs));
    // The draws run on the fit's seeds, labelled for their own record stratum.
    assert!(w.jobs[fit_jobs..].iter().zip(plain.jobs.iter().cycle()).all(|(d, f)| d.seed == f.seed));
    assert!(w.jobs[fit_jobs..].iter().all(|j| j.label == memlink::study::predictive::LABEL));
    let results = w.run(&dir.join("runs"), true).unwrap();
    let a = w.analyse(&results);
    let b = plain.analyse(&plain.run(&dir.join("runs"), true).unwrap());
    for (x, y) in a.cells.iter().zip(&b.cells) {
        assert_eq!((x.value, x.vs_reference), (y.value, y.vs_reference), "the fit's numbers do not move");
        assert!(x.predictive.is_some() && y.predictive.is_none());
        assert_eq!(x.vs_reference_predictive.is_some(), x.vs_reference.is_some());
        if let Some(p) = x.vs_reference_predictive {
            assert!(p.interval.0 <= p.interval.1 && (0.0..=1.0).contains(&p.calibration_share), "{p:?}");
            assert_eq!(p.draws, 3);
        }
    }
    let md = std::fs::read_to_string(w.report(&a, &dir.join("report")).unwrap()).unwrap();
    assert!(md.contains("## Calibration uncertainty"), "{md}");
    assert!(md.contains("first 3 posterior draws"), "{md}");
    let plain_md = std::fs::read_to_string(plain.report(&b, &dir.join("plain")).unwrap()).unwrap();
    assert!(!plain_md.contains("Calibration uncertainty"));
    // The same what-if and draws, the same report bytes.
    let again = WhatIf::load(&file).unwrap().with_ensemble(&mut Ensembles::new(Some(3))).unwrap();
    let md2 = std::fs::read_to_string(again.report(&again.analyse(&results), &dir.join("again")).unwrap()).unwrap();
    assert_eq!(md, md2);
    std::fs::remove_dir_all(&dir).ok();
}
