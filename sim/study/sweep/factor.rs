//! Factors: numbers inside a scenario or its backbone profile, named by a path.
//!
//! A path walks the scenario as serialised (`protocol.top_k`, `attackers.Count`,
//! `arms[MAPLE-Guard].guard.weights.provenance`), or the profile when it starts with
//! `profile.` (`profile.model.memory_weight`, `profile.workloads.mmlu.skill`). A segment `name[k]` selects element k
//! of a list, `name[Arm name]` the element whose `name` is that; an enum's variant is stepped
//! into implicitly (`guard.weights` means `guard.Maple.weights`). Integer fields take the
//! nearest integer. Setting a value re-reads the whole scenario, so every check of a hand-written
//! file applies to every design point.
//!
//! **Weights that must sum to 1** (MAPLE-Guard's eight signal weights): when a point moves some of
//! an arm's weights away from their nominal values, the arm's other weights are scaled by one
//! common factor so that all eight sum to 1 again, and each moved weight keeps the value the
//! design gave it: w_j ← w_j · (1 − Σ_moved w) / Σ_unmoved w. A point whose moved weights alone
//! exceed 1 is refused. When a point moves all eight (a design over every weight), all eight are
//! divided by their sum.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One factor of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Factor {
    /// Name in tables and figures (default: the path's last segment).
    #[serde(default)]
    pub name: Option<String>,
    /// Where the number lives.
    pub path: String,
    /// Absolute range [lo, hi] (designs in the unit cube map onto it).
    #[serde(default)]
    pub range: Option<(f64, f64)>,
    /// Range as multiples of the nominal value (default (0.8, 1.2) when no range or values).
    #[serde(default)]
    pub relative: Option<(f64, f64)>,
    /// Discrete values (a unit coordinate picks one; factorial levels are these).
    #[serde(default)]
    pub values: Option<Vec<f64>>,
}

impl Factor {
    /// The name in outputs.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            let last = self.path.rsplit('.').next().unwrap_or(&self.path);
            last.to_string()
        })
    }

    /// The factor's value at unit coordinate `u`, given its nominal value.
    pub fn at_unit(&self, u: f64, nominal: f64) -> f64 {
        if let Some(v) = &self.values {
            let k = ((u * v.len() as f64).floor() as usize).min(v.len() - 1);
            return v[k];
        }
        let (lo, hi) = self.bounds(nominal);
        lo + u * (hi - lo)
    }

    /// The absolute bounds (for SALib's problem file and the unit mapping).
    pub fn bounds(&self, nominal: f64) -> (f64, f64) {
        if let Some(v) = &self.values {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            return (lo, hi);
        }
        if let Some(r) = self.range {
            return r;
        }
        let (a, b) = self.relative.unwrap_or((0.8, 1.2));
        let (x, y) = (nominal * a, nominal * b);
        (x.min(y), x.max(y))
    }

    /// Checks the factor's own fields.
    pub fn check(&self) -> std::result::Result<(), String> {
        let set = [self.range.is_some(), self.relative.is_some(), self.values.is_some()];
        if set.iter().filter(|x| **x).count() > 1 {
            return Err("at most one of `range`, `relative` and `values`".into());
        }
        if let Some((lo, hi)) = self.range
            && !(lo.is_finite() && hi.is_finite() && lo < hi)
        {
            return Err(format!("a range with lo < hi, got ({lo}, {hi})"));
        }
        if let Some((a, b)) = self.relative
            && !(a.is_finite() && b.is_finite() && a < b)
        {
            return Err(format!("relative bounds with lo < hi, got ({a}, {b})"));
        }
        if let Some(v) = &self.values
            && (v.is_empty() || v.iter().any(|x| !x.is_finite()))
        {
            return Err("a non-empty list of finite values".into());
        }
        Ok(())
    }
}

/// Where a path points: the scenario or the profile, and the segments below.
pub fn split_root(path: &str) -> (bool, &str) {
    match path.strip_prefix("profile.") {
        Some(rest) => (true, rest),
        None => (false, path),
    }
}

fn segments(path: &str) -> Vec<(String, Option<String>)> {
    path.split('.')
        .map(|s| match (s.find('['), s.ends_with(']')) {
            (Some(i), true) => (s[..i].to_string(), Some(s[i + 1..s.len() - 1].to_string())),
            _ => (s.to_string(), None),
        })
        .collect()
}

/// The value at `path` in `v`, mutable; `Err` names the segment that does not exist.
pub fn locate<'a>(v: &'a mut Value, path: &str) -> std::result::Result<&'a mut Value, String> {
    let mut cur = v;
    for (key, sel) in segments(path) {
        cur = step(cur, &key).ok_or_else(|| format!("no `{key}` in `{path}`"))?;
        if let Some(sel) = sel {
            let Value::Array(items) = cur else { return Err(format!("`{key}` in `{path}` is not a list")) };
            let found = match sel.parse::<usize>() {
                Ok(k) => items.get_mut(k),
                Err(_) => items.iter_mut().find(|x| x.get("name").and_then(Value::as_str) == Some(sel.as_str())),
            };
            cur = found.ok_or_else(|| format!("no element `{sel}` of `{key}` in `{path}`"))?;
        }
    }
    // A number wrapped in a one-variant object (an enum's newtype variant) is the number.
    while matches!(&*cur, Value::Object(o) if o.len() == 1 && o.values().next().is_some_and(Value::is_number)) {
        let Value::Object(o) = cur else { break };
        cur = o.values_mut().next().expect("one value");
    }
    Ok(cur)
}

fn step<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    let Value::Object(o) = v else { return None };
    if o.contains_key(key) {
        return o.get_mut(key);
    }
    // Step into an enum variant's content: `{"Maple": {...}}` or `{"Mmlu": {...}}`.
    if o.len() == 1 {
        let inner = o.values_mut().next()?;
        return step(inner, key);
    }
    None
}

/// The number at `path` in `v`.
pub fn read(v: &Value, path: &str) -> std::result::Result<f64, String> {
    let mut c = v.clone();
    let x = locate(&mut c, path)?;
    x.as_f64().ok_or_else(|| format!("`{path}` is not a number ({x})"))
}

/// Whether the number at `path` in `v` is an integer field.
pub fn is_integer(v: &Value, path: &str) -> bool {
    let mut c = v.clone();
    locate(&mut c, path).is_ok_and(|x| x.is_u64() || x.is_i64())
}

/// Sets the number at `path`; integer fields take the nearest integer (negative ones refused).
pub fn write(v: &mut Value, path: &str, x: f64) -> std::result::Result<(), String> {
    let slot = locate(v, path)?;
    if !slot.is_number() {
        return Err(format!("`{path}` is not a number ({slot})"));
    }
    *slot = if slot.is_u64() || slot.is_i64() {
        let r = x.round();
        if slot.is_u64() && r < 0.0 {
            return Err(format!("`{path}` is a count; {x} rounds below 0"));
        }
        if r.abs() > 9.0e15 {
            return Err(format!("`{path}`: {x} is too large for an integer field"));
        }
        if r < 0.0 { Value::from(r as i64) } else { Value::from(r as u64) }
    } else {
        serde_json::Number::from_f64(x).map(Value::Number).ok_or_else(|| format!("`{path}`: {x} is not finite"))?
    };
    Ok(())
}

/// The signal weights' names in a MAPLE configuration.
const WEIGHTS: [&str; 8] =
    ["provenance", "lineage", "self_claim", "instruction", "answer_binding", "trigger", "cluster", "agent_trust"];

/// Renormalises every MAPLE weight set that `set_paths` moved (see the module docs). A path
/// moves a weight of a set when it ends in `weights.<signal>`.
pub fn renormalise_weights(v: &mut Value, set_paths: &[String]) -> std::result::Result<(), String> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for p in set_paths {
        let (_, rest) = split_root(p);
        if let Some(at) = rest.rfind(".weights.") {
            let (prefix, leaf) = (&rest[..at + ".weights".len()], &rest[at + ".weights.".len()..]);
            if WEIGHTS.contains(&leaf) {
                match groups.iter_mut().find(|g| g.0 == prefix) {
                    Some(g) => g.1.push(leaf.to_string()),
                    None => groups.push((prefix.to_string(), vec![leaf.to_string()])),
                }
            }
        }
    }
    for (prefix, set) in groups {
        let w = locate(v, &prefix)?;
        let get = |w: &Value, k: &str| w.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let fixed: f64 = set.iter().map(|k| get(w, k)).sum();
        let free: f64 = WEIGHTS.iter().filter(|k| !set.iter().any(|s| s == *k)).map(|k| get(w, k)).sum();
        let all = WEIGHTS.iter().all(|k| set.iter().any(|s| s == *k));
        if !all && (fixed > 1.0 + 1e-12 || (free <= 0.0 && (fixed - 1.0).abs() > 1e-12)) {
            return Err(format!("weights of `{prefix}` that can sum to 1: the set ones alone sum to {fixed}"));
        }
        if WEIGHTS.iter().all(|k| set.iter().any(|s| s == *k)) {
            // Every weight was moved: divide all eight by their sum.
            if fixed <= 0.0 {
                return Err(format!("weights of `{prefix}` with a positive sum"));
            }
            for k in WEIGHTS {
                let x = get(w, k) / fixed;
                if let Some(slot) = w.get_mut(k) {
                    *slot = serde_json::Number::from_f64(x).map(Value::Number).unwrap_or(Value::from(0));
                }
            }
            continue;
        }
        let scale = if free > 0.0 { (1.0 - fixed) / free } else { 0.0 };
        for k in WEIGHTS.iter().filter(|k| !set.iter().any(|s| s == *k)) {
            let x = get(w, k) * scale;
            if let Some(slot) = w.get_mut(*k) {
                *slot = serde_json::Number::from_f64(x).map(Value::Number).unwrap_or(Value::from(0));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_step_into_lists_by_name_and_into_variants() {
        let mut v = json!({"arms": [{"name": "No Defense", "guard": "NoDefense"},
                                     {"name": "MAPLE-Guard", "guard": {"Maple": {"weights": {"provenance": 0.24}}}}],
                           "attackers": {"Count": 3}, "protocol": {"top_k": 3}});
        assert_eq!(read(&v, "arms[MAPLE-Guard].guard.weights.provenance"), Ok(0.24));
        assert_eq!(read(&v, "arms[1].guard.Maple.weights.provenance"), Ok(0.24));
        assert_eq!(read(&v, "attackers"), Ok(3.0));
        write(&mut v, "protocol.top_k", 4.6).unwrap();
        assert_eq!(v["protocol"]["top_k"], json!(5));
        assert!(write(&mut v, "protocol.top_k", -2.0).is_err());
        assert!(read(&v, "protocol.top_q").unwrap_err().contains("top_q"));
        assert!(read(&v, "arms[Nobody].guard").unwrap_err().contains("Nobody"));
    }

    #[test]
    fn set_weights_keep_their_values_and_the_rest_rescale() {
        let w = json!({"provenance": 0.24, "lineage": 0.20, "self_claim": 0.14, "instruction": 0.14,
                       "answer_binding": 0.12, "trigger": 0.10, "cluster": 0.04, "agent_trust": 0.02});
        let mut v = json!({"arms": [{"name": "M", "guard": {"Maple": {"weights": w}}}]});
        let p = "arms[M].guard.weights.provenance".to_string();
        write(&mut v, &p, 0.288).unwrap();
        renormalise_weights(&mut v, std::slice::from_ref(&p)).unwrap();
        let w = &v["arms"][0]["guard"]["Maple"]["weights"];
        let sum: f64 = WEIGHTS.iter().map(|k| w[*k].as_f64().unwrap()).sum();
        assert!((sum - 1.0).abs() < 1e-12, "{sum}");
        assert_eq!(w["provenance"].as_f64(), Some(0.288));
        let ratio = w["lineage"].as_f64().unwrap() / w["trigger"].as_f64().unwrap();
        assert!((ratio - 2.0).abs() < 1e-12, "the others keep their proportions");
    }
}
