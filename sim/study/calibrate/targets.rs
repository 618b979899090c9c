//! The published numbers (spec `calibration-targets.csv`): one row per source table, backbone,
//! setting, guard, topology, round and metric, in percent, with the topology spread where the
//! paper reports one.

use crate::error::{Error, Pos, Result, read_file};
use std::path::Path;

/// One published number.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// Line in the file (1-based), for reports.
    pub line: usize,
    /// Source table ("table2", "table6_attack_free", "table11", …).
    pub source: String,
    /// Backbone profile name.
    pub backbone: String,
    /// Setting ("mmlu_minja", …).
    pub setting: String,
    /// Method ("No Defense", "PIGuard", …).
    pub guard: String,
    /// Topology ("mean(star,chain,tree)", "star", "random", …).
    pub topology: String,
    /// Round (1-based).
    pub round: usize,
    /// Metric ("MDSR@3", "RDA@3", …).
    pub metric: String,
    /// The value in percent.
    pub percent: f64,
    /// The reported across-topology standard deviation, if any.
    pub topology_std: Option<f64>,
}

/// Splits one CSV line, honouring double quotes.
fn fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Reads a targets file; a malformed line is an error naming it.
pub fn read_targets(path: &Path) -> Result<Vec<Target>> {
    let text = read_file(path)?;
    let bad = |line: usize, col: usize, message: String| Error::Parse {
        path: path.to_path_buf(),
        pos: Pos { line, col },
        message,
    };
    let mut lines = text.lines().enumerate();
    let header = lines.next().map(|(_, l)| l.trim()).unwrap_or("");
    let want = "source,backbone,setting,guard,topology,round,metric,percent,topology_std";
    if header != want {
        return Err(bad(1, 1, format!("expected the header `{want}`")));
    }
    let mut out = Vec::new();
    for (i, l) in lines {
        if l.trim().is_empty() {
            continue;
        }
        let f = fields(l);
        if f.len() != 9 {
            return Err(bad(i + 1, 1, format!("expected 9 fields, found {}", f.len())));
        }
        let round = f[5].parse().map_err(|_| bad(i + 1, 1, format!("expected a round number, found `{}`", f[5])))?;
        let percent = f[7].parse().map_err(|_| bad(i + 1, 1, format!("expected a percentage, found `{}`", f[7])))?;
        let topology_std = if f[8].trim().is_empty() {
            None
        } else {
            Some(f[8].parse().map_err(|_| bad(i + 1, 1, format!("expected a spread, found `{}`", f[8])))?)
        };
        out.push(Target {
            line: i + 1,
            source: f[0].clone(),
            backbone: f[1].clone(),
            setting: f[2].clone(),
            guard: f[3].clone(),
            topology: f[4].clone(),
            round,
            metric: f[6].clone(),
            percent,
            topology_std,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_and_missing_spreads() {
        let f = fields(r#"table2,q,mmlu_minja,No Defense,"mean(star,chain,tree)",3,MDSR@3,46.7,1.1"#);
        assert_eq!(f.len(), 9);
        assert_eq!(f[4], "mean(star,chain,tree)");
        let dir = std::env::temp_dir().join(format!("memlink-targets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.csv");
        std::fs::write(
            &p,
            "source,backbone,setting,guard,topology,round,metric,percent,topology_std\n\
             table13,q,appworld_agentpoison,No Defense,random,1,RDA@1,13.0,\n\
             table2,q,mmlu_minja,No Defense,\"mean(star,chain,tree)\",3,MDSR@3,x,1.1\n",
        )
        .unwrap();
        let e = read_targets(&p).unwrap_err().to_string();
        assert!(e.contains("t.csv:3:1") && e.contains("percentage"), "{e}");
    }
}
