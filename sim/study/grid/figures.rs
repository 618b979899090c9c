//! A grid's figures (`memlink plot <results.jsonl>` and the figures `memlink grid` writes
//! beside its table): MDSR, RDA or ASR per round, and at round k by topology, per arm.

use super::GridRecord;
use crate::error::Result;
use crate::study::sweep::output::{plot_err, slug};
use crate::study::sweep::stats::{estimate, mean};
use std::path::{Path, PathBuf};

/// Draws the figure `kind` (`rounds` or `topology`) of one setting (default: the first) of a
/// grid's results file into `out` (default: beside the results, `<kind>-<setting>-<metric>.svg`).
pub fn plot(
    results: &Path,
    kind: &str,
    metric: Option<&str>,
    setting: Option<&str>,
    out: Option<&Path>,
) -> Result<PathBuf> {
    let records = super::read_records(results)?;
    let k: usize = metric.and_then(|m| m.split_once('@')).and_then(|(_, k)| k.parse().ok()).unwrap_or(3);
    let base = metric.map(|m| m.split('@').next().unwrap_or("mdsr").to_string()).unwrap_or_else(|| "mdsr".into());
    fn series<'a>(r: &'a GridRecord, base: &str) -> &'a Vec<f64> {
        match base {
            "rda" => &r.rda,
            "asr" => &r.asr,
            _ => &r.mdsr,
        }
    }
    let pick = |r: &GridRecord| series(r, &base).clone();
    let setting = setting.map(String::from).unwrap_or_else(|| records[0].setting.clone());
    let recs: Vec<&GridRecord> = records.iter().filter(|r| r.setting == setting).collect();
    let mut arms: Vec<String> = Vec::new();
    for r in &recs {
        if !arms.contains(&r.arm) {
            arms.push(r.arm.clone());
        }
    }
    let file = out.map(Path::to_path_buf).unwrap_or_else(|| {
        results.parent().unwrap_or(Path::new(".")).join(format!("{kind}-{}-{base}.svg", slug(&setting)))
    });
    match kind {
        "rounds" => {
            let series: Vec<crate::report::plot::Curve> = arms
                .iter()
                .map(|arm| {
                    let rs: Vec<&&GridRecord> = recs.iter().filter(|r| r.arm == *arm).collect();
                    let n = rs.iter().map(|r| pick(r).len()).min().unwrap_or(0);
                    let pts = (0..n)
                        .map(|i| {
                            let v: Vec<f64> = rs.iter().map(|r| 100.0 * pick(r)[i]).collect();
                            let e = estimate(&v, 1000, i as u64 + 1);
                            ((i + 1) as f64, e.mean, e.lo, e.hi)
                        })
                        .collect();
                    (arm.clone(), pts)
                })
                .collect();
            crate::report::plot::curves(
                &file,
                &format!("{setting}: {} per round", base.to_uppercase()),
                &format!("{} (%)", base.to_uppercase()),
                &series,
            )?;
        }
        "topology" => {
            let mut topos: Vec<String> = recs.iter().map(|r| r.topology.clone()).collect();
            topos.sort();
            topos.dedup();
            let series: Vec<(String, Vec<(f64, f64)>)> = arms
                .iter()
                .map(|arm| {
                    let vals = topos
                        .iter()
                        .map(|t| {
                            let v: Vec<f64> = recs
                                .iter()
                                .filter(|r| r.arm == *arm && r.topology == *t)
                                .filter_map(|r| pick(r).get(k.saturating_sub(1)).map(|x| 100.0 * x))
                                .collect();
                            (mean(&v), crate::study::sweep::stats::sd(&v))
                        })
                        .collect();
                    (arm.clone(), vals)
                })
                .collect();
            crate::report::plot::grouped_bars(
                &file,
                &format!("{setting}: {}@{k} by topology (± sd over runs)", base.to_uppercase()),
                &format!("{}@{k} (%)", base.to_uppercase()),
                &topos,
                &series,
            )?;
        }
        k => return Err(plot_err(results, "kind", format!("`rounds` or `topology` for a grid's results, not `{k}`"))),
    }
    Ok(file)
}
