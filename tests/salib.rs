//! memlink's Sobol and Morris statistics against SALib itself (`tests/salib_check.py`), on the
//! Ishigami function over memlink's own Saltelli and Morris designs: S1, ST, μ, μ*, σ and every
//! confidence agree to 1e-9. The confidences are computed by SALib's formulas on memlink's
//! bootstrap resamples (numpy's random draws are not memlink's; everything else is SALib's code).
//!
//! SALib comes from PyPI: `.ci/run` installs it (`pip install SALib`). Without it, the test says
//! so and passes on a developer's machine, and fails in CI (`CI` set), where it must run.

use memlink::study::sweep::design::{Coord, morris as morris_design, morris_steps, saltelli};
use memlink::study::sweep::stats::{morris, resample_indices, sobol};
use memlink::study::sweep::{design::Design, salib_order};
use std::io::Write;
use std::process::{Command, Stdio};

fn ishigami(x: &[f64]) -> f64 {
    let pi = std::f64::consts::PI;
    let x: Vec<f64> = x.iter().map(|u| -pi + 2.0 * pi * u).collect();
    x[0].sin() + 7.0 * x[1].sin().powi(2) + 0.1 * x[2].powi(4) * x[0].sin()
}

fn unit(c: &[Coord]) -> Vec<f64> {
    c.iter().map(|c| if let Coord::Unit(u) = c { *u } else { panic!("a unit coordinate") }).collect()
}

fn salib_available() -> bool {
    Command::new("python3")
        .args(["-c", "import SALib, scipy, numpy"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn sobol_and_morris_agree_with_salib() {
    if !salib_available() {
        assert!(std::env::var_os("CI").is_none(), "CI must run the SALib differential test: `pip install SALib`");
        eprintln!("SALib is not installed (`pip install SALib`): the differential test is skipped here");
        return;
    }
    let (d, n, resamples, seed) = (3, 256, 50, 17);
    // Sobol on memlink's Saltelli design, memlink's order; SALib gets the same responses in its own.
    let p = saltelli(d, n, 5);
    let y: Vec<f64> = p.points.iter().map(|c| ishigami(&unit(c))).collect();
    let idx = sobol(&y, n, d, resamples, seed);
    let order = salib_order(&Design::Sobol { samples: n as u32 }, y.len(), d).unwrap();
    let y_salib: Vec<f64> = order.iter().map(|&i| y[i]).collect();
    let sobol_case = serde_json::json!({
        "d": d, "n": n, "y_salib": y_salib,
        "resamples": resample_indices(n, resamples, seed),
        "s1": idx.iter().map(|x| x.s1).collect::<Vec<_>>(),
        "st": idx.iter().map(|x| x.st).collect::<Vec<_>>(),
        "s1_conf": idx.iter().map(|x| x.s1_conf).collect::<Vec<_>>(),
        "st_conf": idx.iter().map(|x| x.st_conf).collect::<Vec<_>>(),
    });
    // Morris on memlink's trajectories (the same order in both).
    let (levels, trajectories) = (4, 40);
    let m = morris_design(d, trajectories, levels, 11);
    let x: Vec<Vec<f64>> = m.points.iter().map(|c| unit(c)).collect();
    let ym: Vec<f64> = x.iter().map(|u| ishigami(u)).collect();
    let mi = morris(&morris_steps(&x, d), &ym, d, resamples, seed);
    let morris_case = serde_json::json!({
        "d": d, "levels": levels, "x": x, "y": ym,
        "resamples": (0..d).map(|i| resample_indices(trajectories, resamples, seed ^ (i as u64 + 1))).collect::<Vec<_>>(),
        "mu": mi.iter().map(|x| x.mu).collect::<Vec<_>>(),
        "mu_star": mi.iter().map(|x| x.mu_star).collect::<Vec<_>>(),
        "sigma": mi.iter().map(|x| x.sigma).collect::<Vec<_>>(),
        "mu_star_conf": mi.iter().map(|x| x.mu_star_conf).collect::<Vec<_>>(),
    });
    let case = serde_json::json!({ "sobol": sobol_case, "morris": morris_case });
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/salib_check.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child.stdin.take().unwrap().write_all(case.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    assert!(out.status.success(), "memlink's statistics differ from SALib's:\n{text}");
    assert!(text.contains("sobol S1: largest difference"), "{text}");
}

#[test]
fn the_salib_order_interleaves_saltelli_rows() {
    // memlink keeps A (N rows), B, then each AB_j; SALib wants A_i, AB_1i … AB_Di, B_i per i.
    let order = salib_order(&Design::Sobol { samples: 2 }, 2 * 4, 2).unwrap();
    assert_eq!(order, vec![0, 4, 6, 2, 1, 5, 7, 3]);
}
