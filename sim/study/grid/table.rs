//! A grid's table: per backbone, setting and arm, the mean of the per-topology means with the
//! across-topology standard deviation (the paper's Table 2), with its predictive intervals
//! when the grid ran an ensemble ([`crate::study::predictive`]); as markdown, as CSV and beside the
//! published numbers.

use super::GridRecord;
use crate::study::predictive::{Component, Predictive};
use serde::Serialize;
use std::collections::BTreeMap;

/// Per topology, the runs' (MDSR, RDA) at round k.
type Strata<'a> = BTreeMap<&'a str, Vec<(f64, f64)>>;

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    // Equal values have no spread: say 0, not the rounding of their mean (1e-14).
    if xs.iter().all(|x| *x == xs[0]) {
        return (m, 0.0);
    }
    let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
    (m, v.sqrt())
}

/// One row of the table: an arm's metric at round `k` (1-based) in one setting with one
/// backbone, the mean over topologies of each topology's mean over seeds and attacker sets, and
/// the across-topology population standard deviation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableRow {
    /// Backbone profile.
    pub backbone: String,
    /// Setting name.
    pub setting: String,
    /// Arm name.
    pub arm: String,
    /// Per topology: (label, MDSR@k mean, RDA@k mean, runs).
    pub per_topology: Vec<(String, f64, f64, usize)>,
    /// MDSR@k mean and across-topology sd, in percent.
    pub mdsr: (f64, f64),
    /// RDA@k mean and across-topology sd, in percent.
    pub rda: (f64, f64),
    /// MDSR@k with its seed-only and predictive intervals, in percent (when the grid ran an
    /// ensemble).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mdsr_predictive: Option<Predictive>,
    /// RDA@k likewise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rda_predictive: Option<Predictive>,
}

/// First-seen order of the distinct values of `key` over `records`.
fn first_seen<'a>(records: &'a [GridRecord], key: impl Fn(&'a GridRecord) -> &'a str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for r in records {
        let k = key(r);
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// The table of `records` at round `k` (1-based): backbones, settings and arms in first-seen
/// order, topologies sorted. The values are the fitted profile's runs; where records at
/// posterior draws are present (`memlink grid --ensemble`), each row also carries its
/// predictive intervals ([`crate::study::predictive`]; a topology is a stratum).
pub fn table(records: &[GridRecord], k: usize) -> Vec<TableRow> {
    let at = |r: &GridRecord| (r.mdsr.get(k - 1).copied().unwrap_or(0.0), r.rda.get(k - 1).copied().unwrap_or(0.0));
    let mut rows = Vec::new();
    for backbone in first_seen(records, |r| &r.backbone) {
        for setting in first_seen(records, |r| &r.setting) {
            let cell: Vec<&GridRecord> =
                records.iter().filter(|r| r.backbone == backbone && r.setting == setting).collect();
            let mut arms: Vec<&str> = Vec::new();
            for r in cell.iter().filter(|r| r.draw.is_none()) {
                if !arms.contains(&r.arm.as_str()) {
                    arms.push(&r.arm);
                }
            }
            for arm in arms {
                // Per draw (None: the fit), per topology: the runs' (MDSR, RDA).
                let mut by_draw: BTreeMap<Option<usize>, Strata> = BTreeMap::new();
                for r in cell.iter().filter(|r| r.arm == arm) {
                    by_draw.entry(r.draw).or_default().entry(r.topology.as_str()).or_default().push(at(r));
                }
                let fit = by_draw.remove(&None).unwrap_or_default();
                let per_topology: Vec<(String, f64, f64, usize)> = fit
                    .iter()
                    .map(|(t, v)| {
                        let m: Vec<f64> = v.iter().map(|x| x.0).collect();
                        let d: Vec<f64> = v.iter().map(|x| x.1).collect();
                        (t.to_string(), 100.0 * mean_sd(&m).0, 100.0 * mean_sd(&d).0, v.len())
                    })
                    .collect();
                let ms: Vec<f64> = per_topology.iter().map(|x| x.1).collect();
                let ds: Vec<f64> = per_topology.iter().map(|x| x.2).collect();
                let component = |strata: &BTreeMap<&str, Vec<(f64, f64)>>, f: fn(&(f64, f64)) -> f64| {
                    let percent = |v: &Vec<(f64, f64)>| v.iter().map(|x| 100.0 * f(x)).collect();
                    Component::of_strata(&strata.values().map(percent).collect::<Vec<Vec<f64>>>())
                };
                let predictive = |f: fn(&(f64, f64)) -> f64| {
                    (!by_draw.is_empty()).then(|| {
                        let draws: Vec<Component> = by_draw.values().map(|s| component(s, f)).collect();
                        Predictive::of(component(&fit, f), &draws, (0.0, 100.0))
                    })
                };
                rows.push(TableRow {
                    backbone: backbone.to_string(),
                    setting: setting.to_string(),
                    arm: arm.to_string(),
                    per_topology,
                    mdsr: mean_sd(&ms),
                    rda: mean_sd(&ds),
                    mdsr_predictive: predictive(|x| x.0),
                    rda_predictive: predictive(|x| x.1),
                });
            }
        }
    }
    rows
}

/// The table as markdown, shaped like the paper's Table 2: one table per backbone, a row per
/// arm, per setting "MDSR@k | RDA@k" as mean ± the sd of the per-topology means (the mean alone
/// for a cell over one topology); then the per-topology means.
pub fn markdown(rows: &[TableRow], k: usize) -> String {
    let mut s = String::new();
    let mut backbones: Vec<&str> = Vec::new();
    for r in rows {
        if !backbones.contains(&r.backbone.as_str()) {
            backbones.push(&r.backbone);
        }
    }
    for b in backbones {
        let mine: Vec<&TableRow> = rows.iter().filter(|r| r.backbone == b).collect();
        let mut settings: Vec<&str> = Vec::new();
        let mut arms: Vec<&str> = Vec::new();
        for r in &mine {
            if !settings.contains(&r.setting.as_str()) {
                settings.push(&r.setting);
            }
            if !arms.contains(&r.arm.as_str()) {
                arms.push(&r.arm);
            }
        }
        // Say over what the spread is: a cell over one topology (say ten seeds on a wheel) has
        // no spread over topologies, and printing "± 0.0" would read as no spread at all.
        let spread = "mean ± sd of the per-topology means, %; a cell over one topology shows its mean alone";
        if b.is_empty() {
            s.push_str(&format!("Round {k} ({spread})\n\n"));
        } else {
            s.push_str(&format!("**{b}** (round {k}; {spread})\n\n"));
        }
        s.push_str("| arm |");
        for st in &settings {
            s.push_str(&format!(" {st} MDSR@{k} | {st} RDA@{k} |"));
        }
        s.push_str("\n|---|");
        s.push_str(&"---|---|".repeat(settings.len()));
        s.push('\n');
        for arm in &arms {
            s.push_str(&format!("| {arm} |"));
            for st in &settings {
                match mine.iter().find(|r| r.arm == *arm && r.setting == *st) {
                    Some(r) if r.per_topology.len() < 2 => s.push_str(&format!(" {:.1} | {:.1} |", r.mdsr.0, r.rda.0)),
                    Some(r) => {
                        s.push_str(&format!(" {:.1} ± {:.1} | {:.1} ± {:.1} |", r.mdsr.0, r.mdsr.1, r.rda.0, r.rda.1))
                    }
                    None => s.push_str(" – | – |"),
                }
            }
            s.push('\n');
        }
        s.push_str(&predictive_markdown(&mine, k));
        s.push_str("\nPer topology (MDSR / RDA, runs):\n\n| setting | arm | per topology |\n|---|---|---|\n");
        for r in &mine {
            let per: Vec<String> =
                r.per_topology.iter().map(|(t, m, d, n)| format!("{t}: {m:.1} / {d:.1} ({n})")).collect();
            s.push_str(&format!("| {} | {} | {} |\n", r.setting, r.arm, per.join("; ")));
        }
        s.push('\n');
    }
    s
}

/// The rows' predictive intervals as a markdown table (empty when no row has them): per
/// setting and arm, each metric's fit, seed-only 95% interval, 95% predictive interval over the
/// ensemble's draws and the seeds, and the calibration's share of the predictive variance.
fn predictive_markdown(rows: &[&TableRow], k: usize) -> String {
    let Some(draws) = rows.iter().find_map(|r| r.mdsr_predictive.map(|p| p.draws)) else {
        return String::new();
    };
    let mut s = format!(
        "\nCalibration uncertainty: the fitted profile's value, its seed-only 95% interval, the 95% predictive interval over {draws} posterior draws of the stand-in and the seeds, and the calibration's share of the predictive variance (`memlink grid --ensemble`, see docs/calibration.md):\n\n| setting | arm | MDSR@{k} | seed-only | predictive | calib. | RDA@{k} | seed-only | predictive | calib. |\n|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in rows {
        let (Some(m), Some(d)) = (r.mdsr_predictive, r.rda_predictive) else { continue };
        s.push_str(&format!("| {} | {} |", r.setting, r.arm));
        for p in [m, d] {
            s.push_str(&format!(
                " {:.1} | {} | {} | {:.0}% |",
                p.point,
                p.show_seed(),
                p.show_interval(),
                100.0 * p.calibration_share
            ));
        }
        s.push('\n');
    }
    s
}

/// The table as CSV, one line per backbone, setting and arm. Where the rows carry predictive
/// intervals, each metric adds `<metric>_at_<k>_lo` and `_hi` (the 95% predictive interval),
/// `_seed_lo` and `_seed_hi` (the seed-only interval) and `<metric>_calibration_share`.
pub fn csv(rows: &[TableRow], k: usize) -> String {
    let predictive = rows.iter().any(|r| r.mdsr_predictive.is_some());
    let mut s = format!("backbone,setting,arm,mdsr_at_{k},mdsr_sd,rda_at_{k},rda_sd");
    if predictive {
        for m in ["mdsr", "rda"] {
            s.push_str(&format!(
                ",{m}_at_{k}_lo,{m}_at_{k}_hi,{m}_at_{k}_seed_lo,{m}_at_{k}_seed_hi,{m}_calibration_share"
            ));
        }
    }
    s.push('\n');
    for r in rows {
        s.push_str(&format!(
            "{},{},{},{},{},{},{}",
            r.backbone, r.setting, r.arm, r.mdsr.0, r.mdsr.1, r.rda.0, r.rda.1
        ));
        if predictive {
            for p in [r.mdsr_predictive, r.rda_predictive] {
                match p {
                    Some(p) => s.push_str(&format!(
                        ",{},{},{},{},{}",
                        p.interval.0,
                        p.interval.1,
                        p.seed.map_or(String::new(), |s| s.0.to_string()),
                        p.seed.map_or(String::new(), |s| s.1.to_string()),
                        p.calibration_share
                    )),
                    None => s.push_str(",,,,,"),
                }
            }
        }
        s.push('\n');
    }
    s
}

/// The table next to the published numbers (`targets`, Table 2 rows of the same backbone,
/// setting and method at round `k`): simulated, published ± its topology spread, and the
/// residual. MAPLE-Guard's rows are marked as predictions. The last lines count the cells
/// within issue 4's tolerances (No Defense: 3 points or the reported spread if larger;
/// baselines: 5 points).
///
/// Whether every topology of a row is a random graph.
fn on_random_graphs(r: &TableRow) -> bool {
    !r.per_topology.is_empty() && r.per_topology.iter().all(|t| t.0.starts_with("random"))
}

/// A grid on random topologies only is compared with the round-level tables (11–15, "random")
/// instead, without the Table 2 tolerance counts.
pub fn versus_paper(rows: &[TableRow], targets: &[crate::study::calibrate::Target], k: usize) -> String {
    let random = !rows.is_empty() && rows.iter().all(on_random_graphs);
    let find = |r: &TableRow, metric: &str| {
        targets.iter().find(|t| {
            // Table 4's scale rows name neither backbone nor setting: a grid setting called
            // `scale_30_agents` stands for `table4_scale_30_agents`.
            let scale = random && t.source == format!("table4_{}", r.setting);
            (scale
                || (if random {
                    t.source.starts_with("table1") && t.topology == "random"
                } else {
                    t.source == "table2" && t.topology == "mean(star,chain,tree)"
                }) && t.backbone == r.backbone
                    && t.setting == r.setting)
                && t.guard == r.arm
                && t.metric == format!("{metric}@{k}")
        })
    };
    let predictive = rows.iter().any(|r| r.mdsr_predictive.is_some());
    let mut s = if predictive {
        format!(
            "| backbone | setting | method | MDSR@{k} sim | seed-only 95% | predictive 95% | paper | Δ | RDA@{k} sim | seed-only 95% | predictive 95% | paper | Δ | calib. share (MDSR / RDA) | role |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        )
    } else {
        format!(
            "| backbone | setting | method | MDSR@{k} sim | paper | Δ | RDA@{k} sim | paper | Δ | role |\n|---|---|---|---|---|---|---|---|---|---|\n"
        )
    };
    // Per role (No Defense, baselines, MAPLE-Guard): published values inside the predictive
    // interval, of those compared.
    let mut inside = [(0usize, 0usize); 3];
    let (mut nd, mut nd_ok, mut base, mut base_ok) = (0, 0, 0, 0);
    let (mut consistent, mut consistent_ok) = (0, 0);
    let effects = crate::study::calibrate::effects::effects(targets);
    for r in rows {
        let maple = r.arm.to_lowercase().contains("maple");
        let cells = [(r.mdsr.0, r.mdsr_predictive, find(r, "MDSR")), (r.rda.0, r.rda_predictive, find(r, "RDA"))];
        let role = if maple {
            2
        } else if r.arm == "No Defense" {
            0
        } else {
            1
        };
        let mut line = format!("| {} | {} | {} |", r.backbone, r.setting, r.arm);
        for (sim, pred, t) in cells {
            line.push_str(&format!(" {sim:.1} |"));
            if predictive {
                line.push_str(
                    &pred.map_or(" – | – |".to_string(), |p| {
                        format!(" {} | {} |", p.show_seed(), p.show_interval())
                    }),
                );
            }
            match t {
                Some(t) => {
                    let d = sim - t.percent;
                    let spread = t.topology_std.unwrap_or(0.0);
                    if let Some(p) = pred {
                        inside[role].1 += 1;
                        inside[role].0 += usize::from(p.interval.0 <= t.percent && t.percent <= p.interval.1);
                    }
                    line.push_str(&format!(" {:.1} ± {spread:.1} | {d:+.1} |", t.percent));
                    if !maple && r.arm == "No Defense" {
                        nd += 1;
                        nd_ok += usize::from(d.abs() <= 3.0f64.max(spread));
                    } else if !maple {
                        base += 1;
                        base_ok += usize::from(d.abs() <= 5.0);
                        if !crate::study::calibrate::effects::inconsistent(
                            &effects,
                            &r.backbone,
                            &r.setting,
                            &r.arm,
                            &t.metric,
                        ) {
                            consistent += 1;
                            consistent_ok += usize::from(d.abs() <= 5.0);
                        }
                    }
                }
                None => line.push_str(" – | – |"),
            }
        }
        if predictive {
            match (r.mdsr_predictive, r.rda_predictive) {
                (Some(m), Some(d)) => line.push_str(&format!(
                    " {:.0}% / {:.0}% |",
                    100.0 * m.calibration_share,
                    100.0 * d.calibration_share
                )),
                _ => line.push_str(" – |"),
            }
        }
        // A Table 2 cell simulated as the round-level tables were (the grid file says why).
        let on_random = !random && on_random_graphs(r);
        line.push_str(if maple { " prediction (never fitted)" } else { " stand-in / detector parameters" });
        line.push_str(if on_random { "; run on random graphs, as the round-level tables |\n" } else { " |\n" });
        s.push_str(&line);
    }
    if predictive {
        let [nd_in, base_in, maple_in] = inside;
        let maple = if maple_in.1 == 0 {
            "MAPLE-Guard's rows are predictions whose published values memlink does not read".to_string()
        } else {
            format!("MAPLE-Guard (predictions) {} of {}", maple_in.0, maple_in.1)
        };
        s.push_str(&format!(
            "\nPublished values inside the 95% predictive interval (calibration and seeds): No Defense {} of {}, baselines {} of {}; {maple}.\n",
            nd_in.0, nd_in.1, base_in.0, base_in.1
        ));
    }
    if random {
        s.push_str("\nRandom-topology tables (the round-level Tables 11–15, the scale rows of Table 4): residuals shown, no tolerance applies.\n");
    } else {
        s.push_str(&format!(
            "\nNo Defense cells within 3 points (or the reported spread): {nd_ok} of {nd}. Baseline cells within 5 points: {consistent_ok} of the {consistent} whose published effect the round-level table does not contradict (the criterion: `memlink effects` marks the other {} as differing by more than {} points between the tables, and no guard with one effect on both kinds of graph can meet both); {base_ok} of all {base}.\n",
            base - consistent,
            crate::study::calibrate::effects::INCONSISTENT_GAP
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(run: usize, topology: &str, mdsr: f64) -> GridRecord {
        GridRecord {
            grid: "g".into(),
            run,
            setting: "s".into(),
            backbone: "b".into(),
            seed: run as u64,
            topology: topology.into(),
            attackers: String::new(),
            arm: "No Defense".into(),
            guard: "no_defense".into(),
            mdsr: vec![mdsr; 3],
            rda: vec![0.2; 3],
            asr: vec![0.5; 3],
            mdsr_upper: Vec::new(),
            rda_lower: Vec::new(),
            trace_hash: String::new(),
            draw: None,
        }
    }

    #[test]
    fn a_cell_over_one_topology_shows_no_spread_and_equal_values_have_none() {
        // Ten seeds on one topology: the mean alone, never "± 0.0".
        let one: Vec<GridRecord> = (0..10).map(|i| record(i, "wheel", 0.1 * (i % 3) as f64)).collect();
        let md = markdown(&table(&one, 3), 3);
        let row = md.lines().find(|l| l.starts_with("| No Defense |")).unwrap();
        assert!(!row.contains('±'), "{row}");
        assert!(md.contains("a cell over one topology shows its mean alone"), "{md}");
        // Three topologies with the same mean: the spread is exactly 0, in the CSV too.
        let same: Vec<GridRecord> =
            ["wheel", "chain", "tree"].iter().enumerate().map(|(i, t)| record(i, t, 1.0 / 3.0)).collect();
        let rows = table(&same, 3);
        assert_eq!(rows[0].mdsr.1, 0.0);
        assert!(csv(&rows, 3).lines().nth(1).unwrap().contains(",0,"), "{}", csv(&rows, 3));
        assert!(markdown(&rows, 3).contains("± 0.0"));
    }
}
