//! Loading a calibration: its targets, profile and scenarios, every input checked with a
//! positioned error, and no attacked MAPLE-Guard row selected.

use super::*;

impl Calibration {
    /// Loads a calibration file, its targets, profile and scenarios, and checks that no
    /// attacked MAPLE-Guard row is selected (attack-free ones may be, issue 43).
    pub fn load(path: &Path) -> Result<Self> {
        Self::load_str(&read_file(path)?, path)
    }

    /// [`Self::load`] of calibration `text` as if read from `path`.
    pub fn load_str(text: &str, path: &Path) -> Result<Self> {
        let text = text.to_string();
        let spec: CalibrationSpec = parse_ron(path, &text)?;
        let invalid = |field: &str, expected: String| Error::Invalid {
            path: path.to_path_buf(),
            pos: locate_field(&text, field),
            field: field.to_string(),
            expected,
        };
        let profile_path = resolve_profile(path, &spec.profile);
        let profile = crate::agent::load_profile(&profile_path)?;
        let mut others = BTreeMap::new();
        for name in &spec.also {
            let p = crate::agent::load_profile(&resolve_profile(path, name))?;
            if p.name == profile.name {
                return Err(invalid("also", format!("a backbone other than the fitted one, not `{name}`")));
            }
            others.insert(p.name.clone(), p);
        }
        if spec.parameters.is_empty() {
            return Err(invalid("parameters", "at least one parameter to fit".into()));
        }
        for p in &spec.parameters {
            if p.guard.is_some() && p.judge.is_some() {
                return Err(invalid("judge", format!("either `guard` or `judge` for `{}`, not both", p.name)));
            }
            let Some(kind) = &p.judge else { continue };
            if !crate::agent::JUDGE_KINDS.contains(&kind.as_str()) {
                return Err(invalid(
                    "judge",
                    format!("a judge guard kind, one of {:?}, not `{kind}`", crate::agent::JUDGE_KINDS),
                ));
            }
            if crate::agent::JudgeShift::default().get(&p.name).is_none() {
                return Err(invalid("name", format!("`bias` or `dissent` for judge `{kind}`, not `{}`", p.name)));
            }
        }
        for p in spec.parameters.iter().filter(|p| p.guard.is_none() && p.judge.is_none()) {
            if !profile.workloads.contains_key(&p.workload) {
                return Err(invalid("workload", format!("a workload of profile `{}`", profile.name)));
            }
            if get_param(&profile, &p.workload, &p.name).is_none() {
                return Err(invalid(
                    "name",
                    format!(
                        "a parameter of the `{}` workload ({:?}) or of the model ({:?}), not `{}`",
                        p.workload,
                        crate::agent::WORKLOAD_FIELDS,
                        crate::agent::MODEL_FIELDS,
                        p.name
                    ),
                ));
            }
        }
        for (i, p) in spec.parameters.iter().enumerate() {
            if !(p.lo.is_finite() && p.hi.is_finite() && p.lo.partial_cmp(&p.hi) == Some(std::cmp::Ordering::Less)) {
                return Err(invalid("lo", format!("lo < hi for `{}`", p.name)));
            }
            if let Some(sd) = p.prior_sd {
                if !is_model_param(p) {
                    return Err(invalid(
                        "prior_sd",
                        format!(
                            "prior_sd only on a model parameter fitted per workload ({:?}), not on `{}`",
                            crate::agent::MODEL_FIELDS,
                            p.name
                        ),
                    ));
                }
                if !(sd.is_finite() && sd > 0.0) {
                    return Err(invalid("prior_sd", format!("a positive spread for `{}`, got {sd}", p.name)));
                }
            }
            if spec.parameters[..i]
                .iter()
                .any(|q| q.workload == p.workload && q.name == p.name && q.judge == p.judge && q.guard == p.guard)
            {
                return Err(invalid(
                    "parameters",
                    format!("each parameter once, not `{}.{}` twice", p.workload, p.name),
                ));
            }
        }
        if let Loss::Huber(k) = spec.loss
            && !(k.is_finite() && k > 0.0)
        {
            return Err(invalid("loss", format!("Huber(k) with k > 0, got {k}")));
        }
        if spec.seeds.is_empty() {
            return Err(invalid("seeds", "at least one seed".into()));
        }
        let targets = crate::files::load_referenced(path, Some(&text), "targets", &spec.targets, read_targets)?;
        // The stored results are read later, through the same join: refuse a path outside the
        // policy here, at its field.
        for (field, rel) in [("loso", &spec.loso), ("identify", &spec.identify)] {
            if let Some(rel) = rel {
                crate::files::referenced(path, rel).map_err(|e| invalid(field, e))?;
            }
        }
        let published = effects::effects(&targets);
        // A baseline cell of a pair `memlink effects` marks as inconsistent.
        let contradicted = |t: &Target| {
            published.iter().any(|e| {
                e.gap() > effects::INCONSISTENT_GAP
                    && e.backbone == t.backbone
                    && e.setting == t.setting
                    && e.guard == t.guard
                    && e.metric == t.metric
                    && (t.source == "table2" || (t.source == e.rounds_source && t.topology == "random"))
            })
        };
        let selects = |f: &RowFilter, t: &Target| {
            (t.backbone == profile.name || others.contains_key(&t.backbone))
                && spec.settings.contains_key(&t.setting)
                && (f.sources.is_empty() || f.sources.contains(&t.source))
                && (f.guards.is_empty()
                    || f.guards.contains(&t.guard)
                    || (f.attack_free_guards.contains(&t.guard) && t.source.contains("attack_free")))
                && (f.metrics.is_empty() || f.metrics.contains(&t.metric))
                && !f.except.contains(&format!("{}/{}", t.source, t.setting))
                && !(f.consistent_only && contradicted(t))
        };
        let mut rows = Vec::new();
        for t in targets {
            let fitted = selects(&spec.rows, &t);
            if !fitted && !spec.checks.as_ref().is_some_and(|c| selects(c, &t)) {
                continue;
            }
            let attack_free = t.source.contains("attack_free");
            if fitted && t.guard.to_lowercase().contains("maple") && !attack_free {
                return Err(invalid(
                    "guards",
                    format!(
                        "no attacked MAPLE-Guard row: its numbers are predictions and never enter a fit (targets line {}); \
                         only attack-free rows may, through `attack_free_guards`",
                        t.line
                    ),
                ));
            }
            let topologies = topologies_of(&t.topology).ok_or_else(|| {
                invalid("targets", format!("a known topology, not `{}` (line {})", t.topology, t.line))
            })?;
            let (mdsr, round) = match t.metric.split_once('@') {
                Some(("MDSR", k)) => (true, k.parse().unwrap_or(0)),
                Some(("RDA", k)) => (false, k.parse().unwrap_or(0)),
                _ => return Err(invalid("metrics", format!("MDSR@k or RDA@k, not `{}` (line {})", t.metric, t.line))),
            };
            let scenario = match spec.source_settings.get(&t.source) {
                Some(m) if m.contains_key(&t.setting) => format!("{}/{}", t.source, t.setting),
                _ => t.setting.clone(),
            };
            rows.push(Row {
                setting: t.setting.clone(),
                scenario,
                topologies,
                mdsr,
                round,
                attack_free,
                fitted,
                target: t,
            });
        }
        if !rows.iter().any(|r| r.fitted) {
            return Err(invalid("rows", "a filter that selects at least one target row".into()));
        }
        for (field, map) in
            [("setting_seeds", &spec.setting_seeds), ("setting_interval_seeds", &spec.setting_interval_seeds)]
        {
            for (name, seeds) in map {
                if !spec.settings.contains_key(name) {
                    return Err(invalid(field, format!("a setting of `settings`, not `{name}`")));
                }
                if seeds.is_empty() {
                    return Err(invalid(field, format!("at least one seed for `{name}`")));
                }
            }
        }
        let replaced = |key: &str| {
            key.split_once('/')
                .is_some_and(|(src, name)| spec.source_settings.get(src).is_some_and(|m| m.contains_key(name)))
        };
        for (name, sets) in &spec.attacker_sets {
            if !spec.settings.contains_key(name) && !replaced(name) {
                return Err(invalid(
                    "attacker_sets",
                    format!("a setting of `settings` or a `source/setting` of `source_settings`, not `{name}`"),
                ));
            }
            if sets.is_empty() {
                return Err(invalid("attacker_sets", format!("at least one attacker set for `{name}`")));
            }
        }
        for (source, map) in &spec.source_settings {
            for name in map.keys() {
                if !spec.settings.contains_key(name) {
                    return Err(invalid(
                        "source_settings",
                        format!("a setting of `settings`, not `{name}` ({source})"),
                    ));
                }
            }
        }
        let sources = spec.settings.iter().map(|(name, rel)| (name.clone(), name.clone(), rel)).chain(
            spec.source_settings
                .iter()
                .flat_map(|(src, m)| m.iter().map(move |(name, rel)| (format!("{src}/{name}"), name.clone(), rel))),
        );
        let mut scenarios = BTreeMap::new();
        for (key, name, rel) in sources {
            let name = &name;
            let mut ls = crate::files::load_referenced(path, Some(&text), "settings", rel, load)?;
            if let Some(n) = spec.tasks {
                ls.scenario.workload.set_tasks(n);
            }
            for p in &spec.parameters {
                let Some(arm) = &p.guard else { continue };
                let Some(a) = ls.scenario.arms.iter().find(|a| &a.name == arm) else { continue };
                if is_maple(&a.guard) {
                    return Err(invalid(
                        "guard",
                        format!(
                            "a baseline's arm: `{arm}` runs MAPLE-Guard, whose constants are the paper's and never fitted"
                        ),
                    ));
                }
                if get_guard_param(&a.guard, &p.name).is_none() {
                    return Err(invalid(
                        "name",
                        format!("a number in the configuration of arm `{arm}`, not `{}`", p.name),
                    ));
                }
            }
            for ids in spec.attacker_sets.get(&key).or_else(|| spec.attacker_sets.get(name)).into_iter().flatten() {
                let mut s = ls.scenario.clone();
                s.attackers = crate::scenario::Attackers::Ids(ids.clone());
                s.check().map_err(|(_, e)| invalid("attacker_sets", e))?;
            }
            for r in rows.iter().filter(|r| r.scenario == key) {
                if !ls.scenario.arms.iter().any(|a| a.name == r.target.guard) {
                    return Err(invalid(
                        "settings",
                        format!("scenario of `{name}` with an arm named `{}`", r.target.guard),
                    ));
                }
                if ls.scenario.protocol.rounds < r.round as u32 {
                    return Err(invalid("settings", format!("scenario of `{name}` with at least {} rounds", r.round)));
                }
            }
            scenarios.insert(key, ls);
        }
        Ok(Calibration { spec, path: path.to_path_buf(), profile_path, profile, others, rows, scenarios })
    }
}
