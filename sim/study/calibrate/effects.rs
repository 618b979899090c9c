//! The published baselines' effects, table against table: for each method, backbone, setting
//! and metric, the method's value minus No Defense's at round 3 in Table 2 (star/chain/tree)
//! and in the round-level table of the same setting (random graphs). Where a guard removes most
//! of the damage in one table and none in the other, a guard whose effect is the same on both
//! kinds of graph cannot land within a few points of both cells, and a fit of its detector has
//! to give one of them up. (MMLU's and AppWorld's round-level rows also ran the strict
//! protocol, which may account for part of a gap there.) Computed from the targets alone.

use super::Target;

/// The gap (points) beyond which `memlink effects` marks a pair inconsistent by default: a
/// guard with one effect on both kinds of graph cannot then land within 5 points of both cells.
pub const INCONSISTENT_GAP: f64 = 10.0;

/// Whether the published Table 2 cell (backbone, setting, method, metric at round 3) has an
/// effect that the round-level table contradicts by more than [`INCONSISTENT_GAP`]: such a
/// cell is not a target a consistent guard can meet, so the baseline criterion leaves it out
/// (issue 15). A cell without a round-level pair is consistent.
pub fn inconsistent(effects: &[Effect], backbone: &str, setting: &str, guard: &str, metric: &str) -> bool {
    effects.iter().any(|e| {
        e.backbone == backbone
            && e.setting == setting
            && e.guard == guard
            && e.metric == metric
            && e.gap() > INCONSISTENT_GAP
    })
}

/// One method's published effect in Table 2 and in its setting's round-level table.
#[derive(Clone, Debug, PartialEq)]
pub struct Effect {
    /// Backbone.
    pub backbone: String,
    /// Setting.
    pub setting: String,
    /// Method.
    pub guard: String,
    /// "MDSR@3" or "RDA@3".
    pub metric: String,
    /// Method − No Defense in Table 2, in points.
    pub table2: f64,
    /// The round-level table ("table11", …).
    pub rounds_source: String,
    /// Method − No Defense at round 3 of the round-level table, in points.
    pub rounds: f64,
}

impl Effect {
    /// How far the two effects differ, in points.
    pub fn gap(&self) -> f64 {
        (self.table2 - self.rounds).abs()
    }
}

fn value(targets: &[Target], source: &str, backbone: &str, setting: &str, guard: &str, metric: &str) -> Option<f64> {
    targets
        .iter()
        .find(|t| {
            t.source == source
                && t.backbone == backbone
                && t.setting == setting
                && t.guard == guard
                && t.metric == metric
        })
        .map(|t| t.percent)
}

/// Every baseline (not No Defense, not MAPLE-Guard) with a round-3 value in both Table 2 and
/// a round-level table (`table11`…), in the targets' order.
pub fn effects(targets: &[Target]) -> Vec<Effect> {
    let mut out = Vec::new();
    for t in targets.iter().filter(|t| t.source == "table2" && t.metric.ends_with("@3")) {
        if t.guard == "No Defense" || t.guard.to_lowercase().contains("maple") {
            continue;
        }
        let round_table = targets.iter().find(|r| {
            r.source.starts_with("table1")
                && r.topology == "random"
                && r.backbone == t.backbone
                && r.setting == t.setting
                && r.guard == t.guard
                && r.metric == t.metric
        });
        let Some(r) = round_table else { continue };
        let nd = |source: &str| value(targets, source, &t.backbone, &t.setting, "No Defense", &t.metric);
        let (Some(nd2), Some(ndr)) = (nd("table2"), nd(&r.source)) else { continue };
        out.push(Effect {
            backbone: t.backbone.clone(),
            setting: t.setting.clone(),
            guard: t.guard.clone(),
            metric: t.metric.clone(),
            table2: t.percent - nd2,
            rounds_source: r.source.clone(),
            rounds: r.percent - ndr,
        });
    }
    out
}

/// The effects as a markdown table, the pairs that differ by more than `threshold` points
/// marked, with a count per backbone and setting.
pub fn markdown(effects: &[Effect], threshold: f64) -> String {
    let mut s = String::from(
        "| backbone | setting | method | metric | Table 2 effect | round-level table | its effect | gap |\n|---|---|---|---|---|---|---|---|\n",
    );
    for e in effects {
        let mark = if e.gap() > threshold { " **!**" } else { "" };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:+.1} | {} | {:+.1} | {:.1}{mark} |\n",
            e.backbone,
            e.setting,
            e.guard,
            e.metric,
            e.table2,
            e.rounds_source,
            e.rounds,
            e.gap()
        ));
    }
    let mut groups: Vec<(&str, &str, usize, usize)> = Vec::new();
    for e in effects {
        let far = usize::from(e.gap() > threshold);
        match groups.iter_mut().find(|g| g.0 == e.backbone && g.1 == e.setting) {
            Some(g) => {
                g.2 += 1;
                g.3 += far;
            }
            None => groups.push((&e.backbone, &e.setting, 1, far)),
        }
    }
    let far: usize = groups.iter().map(|g| g.3).sum();
    s.push_str(&format!(
        "\nEffects that differ by more than {threshold} points between the two tables (**!**): {far} of {}.\n\n| backbone | setting | differ | of |\n|---|---|---|---|\n",
        effects.len()
    ));
    for (b, st, n, f) in groups {
        s.push_str(&format!("| {b} | {st} | {f} | {n} |\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(source: &str, guard: &str, topology: &str, percent: f64) -> Target {
        Target {
            line: 0,
            source: source.into(),
            backbone: "b".into(),
            setting: "s".into(),
            guard: guard.into(),
            topology: topology.into(),
            round: 3,
            metric: "RDA@3".into(),
            percent,
            topology_std: None,
        }
    }

    #[test]
    fn an_effect_is_each_tables_own_difference_from_no_defense() {
        let rows = [
            t("table2", "No Defense", "mean(star,chain,tree)", 38.0),
            t("table2", "Challenger", "mean(star,chain,tree)", 2.0),
            t("table2", "MAPLE-Guard", "mean(star,chain,tree)", 0.0),
            t("table12", "No Defense", "random", 40.0),
            t("table12", "Challenger", "random", 43.0),
            t("table12", "MAPLE-Guard", "random", 0.0),
        ];
        let e = effects(&rows);
        assert_eq!(e.len(), 1, "MAPLE-Guard is never compared");
        assert_eq!((e[0].table2, e[0].rounds, e[0].gap()), (-36.0, 3.0, 39.0));
        let md = markdown(&e, 10.0);
        assert!(md.contains("39.0 **!**") && md.contains("1 of 1"), "{md}");
        assert!(markdown(&e, 40.0).contains("0 of 1"));
    }
}
