//! `memlink check`: invariants over generated scenarios, each violation shrunk to a minimal
//! scenario that `memlink run` reproduces.
//!
//! A check file names a base scenario and a space around it — ranges of agents, attackers,
//! tasks, rounds and seeds, lists of topologies, memory topologies, placements and attacks,
//! and numeric factors anywhere in the scenario or its profile (the sweep's paths, see
//! [`crate::study::sweep::factor`]). For each invariant it asks about ([`crate::eval::monitor::REGISTRY`]),
//! and each arm it names (each guard is checked on its own), proptest draws `cases` scenarios
//! from the space with a runner seeded from the file (the same cases on every machine), runs
//! the arm with that invariant monitored, and on the first violation shrinks: ranges move toward their low end and lists toward their first element, so
//! order a list simplest first. The minimal case is written as a scenario RON with the
//! invariant in its `invariants` (so `memlink run` on it reports the violation), the item the
//! violation names as a `memlink explain` item, and the outcome of every invariant in
//! `check.json` and `check.md`.
//!
//! A check file may state what it expects of each invariant (`expect: {"name": Violated}`, or
//! `{"Arm/name": Violated}` for one arm):
//! a documented counterexample is then a pass, and an invariant that was expected to fail but
//! held is reported. Without a statement an invariant is expected to hold. Each invariant's
//! outcome is written the moment it is known, so `--resume` after a kill skips the finished ones.

use crate::attack::AttackConfig;
use crate::error::{Error, Pos, Result, locate_field, parse_ron, read_file};
use crate::eval::monitor::Violation;
use crate::files::write_atomic;
use crate::guard::maple::ProvenanceMode;
use crate::memory::{MemoryTopology, StoreKind};
use crate::run::{describe_violation, run_monitored};
use crate::scenario::{Attackers, LoadedScenario, Placement, load};
use crate::study::sweep::factor::{self, Factor};
use crate::topology::Topology;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a check file expects of an invariant.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expect {
    /// It holds on every case (the default).
    #[default]
    Holds,
    /// A counterexample is known: finding one passes (and is written), holding is reported.
    Violated,
}

/// The space scenarios are drawn from. A field left out keeps the base scenario's value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Space {
    /// Agents, inclusive range.
    #[serde(default)]
    pub agents: Option<(u32, u32)>,
    /// Counted attackers, inclusive range (clamped below the case's agents).
    #[serde(default)]
    pub attackers: Option<(u32, u32)>,
    /// Tasks of the workload, inclusive range.
    #[serde(default)]
    pub tasks: Option<(u32, u32)>,
    /// Rounds per task, inclusive range.
    #[serde(default)]
    pub rounds: Option<(u32, u32)>,
    /// Master seeds, inclusive range.
    #[serde(default)]
    pub seeds: Option<(u64, u64)>,
    /// Communication topologies (simplest first: shrinking moves toward the first).
    #[serde(default)]
    pub topologies: Option<Vec<Topology>>,
    /// Memory topologies.
    #[serde(default)]
    pub memory_topologies: Option<Vec<MemoryTopology>>,
    /// Placements of counted attackers.
    #[serde(default)]
    pub placements: Option<Vec<Placement>>,
    /// Attacks (family, strength, stealth).
    #[serde(default)]
    pub attacks: Option<Vec<AttackConfig>>,
    /// Provenance modes of the protocol (derive, or the strict ledger).
    #[serde(default)]
    pub provenance: Option<Vec<ProvenanceMode>>,
    /// Numbers anywhere in the scenario or profile (`range` or `values`; shrinking moves
    /// toward the low end).
    #[serde(default)]
    pub factors: Vec<Factor>,
}

/// A check file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// Name (output folder `runs/check/<name>`).
    pub name: String,
    /// The base scenario (relative to the check file).
    pub base: PathBuf,
    /// The base's arms to run, by name (default: all).
    #[serde(default)]
    pub arms: Option<Vec<String>>,
    /// Invariants to check (default: every registered one).
    #[serde(default)]
    pub invariants: Vec<String>,
    /// What is expected of each (default: holds).
    #[serde(default)]
    pub expect: BTreeMap<String, Expect>,
    /// Cases per invariant (default 1000).
    #[serde(default = "default_cases")]
    pub cases: u32,
    /// Seed of the case generator.
    #[serde(default = "one")]
    pub seed: u64,
    /// Most shrinking steps per counterexample (default 1024).
    #[serde(default = "default_shrink")]
    pub max_shrink_iters: u32,
    /// The space.
    pub space: Space,
}

fn default_cases() -> u32 {
    1000
}
fn one() -> u64 {
    1
}
fn default_shrink() -> u32 {
    1024
}

/// One drawn case: a point of the space (list fields as indices).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// Agents.
    pub agents: u32,
    /// Attackers (before clamping below agents).
    pub attackers: u32,
    /// Tasks.
    pub tasks: u32,
    /// Rounds.
    pub rounds: u32,
    /// Seed.
    pub seed: u64,
    /// Index into `topologies`.
    pub topology: usize,
    /// Index into `memory_topologies`.
    pub memory_topology: usize,
    /// Index into `placements`.
    pub placement: usize,
    /// Index into `attacks`.
    pub attack: usize,
    /// Index into `provenance`.
    pub provenance: usize,
    /// Factor values.
    pub factors: Vec<f64>,
    /// The stand-in's posterior draw (`--ensemble`): 0 the fitted profile, `k` draw `k − 1`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub draw: usize,
}

fn is_zero(v: &usize) -> bool {
    *v == 0
}

/// How a case's scenario is run: the first violation of its monitored invariant and the arm,
/// `Err` to skip the case.
pub type Exec<'a> = dyn Fn(&LoadedScenario) -> std::result::Result<Option<(String, Violation)>, String> + 'a;

/// The default [`Exec`]: every arm of the scenario with its invariants monitored.
pub fn monitored(ls: &LoadedScenario) -> std::result::Result<Option<(String, Violation)>, String> {
    let run = run_monitored(ls, ls.scenario.seed, &[]).map_err(|e| e.to_string())?;
    Ok(run.violations().next().map(|(a, v)| (a.to_string(), v.clone())))
}

/// What [`Check::search`] found.
#[derive(Clone, Debug)]
pub struct Search {
    /// Cases run before the first failure (all of them when none failed).
    pub cases: u32,
    /// Failing cases seen, shrinking included.
    pub failures: u32,
    /// The minimal failing case.
    pub minimal: Option<Case>,
}

/// A loaded check.
pub struct Check {
    /// The spec.
    pub spec: CheckSpec,
    /// Where it came from.
    pub path: PathBuf,
    base: LoadedScenario,
    nominal: Vec<f64>,
    /// The base's profile at each posterior draw (`--ensemble`; empty: the fit alone).
    draws: Vec<crate::agent::Profile>,
}

/// A counterexample: the minimal case and what it violates.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Counterexample {
    /// The minimal case.
    pub case: Case,
    /// The arm that violates it.
    pub arm: String,
    /// Its first violation.
    pub violation: Violation,
    /// Failing cases tried while shrinking (the first failure included).
    pub failures_seen: u32,
    /// The scenario file written for it.
    pub scenario: PathBuf,
    /// The explain item written for the violation's item, if it names one.
    pub item: Option<PathBuf>,
}

/// One invariant's outcome on one arm.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Outcome {
    /// The arm (its guard is what is checked).
    pub arm: String,
    /// The invariant.
    pub invariant: String,
    /// What the file expected.
    pub expect: Expect,
    /// Cases that ran (the last one the first failure, if any; shrinking not counted).
    pub cases: u32,
    /// The counterexample, if one was found.
    pub counterexample: Option<Counterexample>,
}

impl Outcome {
    /// Whether the outcome is what the file expected.
    pub fn as_expected(&self) -> bool {
        (self.counterexample.is_some()) == (self.expect == Expect::Violated)
    }
}

impl Check {
    /// Loads and checks a check file: the base scenario, every invariant name, the ranges and
    /// the factors (each factor must name a number of the base), with positioned errors.
    pub fn load(path: &Path) -> Result<Check> {
        let text = read_file(path)?;
        Self::load_str(&text, path)
    }

    /// A check file, or a scenario: then every invariant over its seeds 1..=1000 (the
    /// scenario's own invariants when it lists some), nothing else varied.
    pub fn load_any(path: &Path) -> Result<Check> {
        let text = read_file(path)?;
        if crate::files::detect(path, &text) != crate::files::FileKind::Scenario {
            return Self::load_str(&text, path);
        }
        let ls = crate::scenario::load_str(&text, path)?;
        let spec = CheckSpec {
            name: ls.scenario.name.clone(),
            base: PathBuf::from(path.file_name().unwrap_or_default()),
            arms: None,
            invariants: ls.scenario.invariants.clone(),
            expect: BTreeMap::new(),
            cases: default_cases(),
            seed: 1,
            max_shrink_iters: default_shrink(),
            space: Space { seeds: Some((1, u64::from(default_cases()))), ..Space::default() },
        };
        let body = ron::ser::to_string(&spec).expect("serializable");
        Self::load_str(&body, path)
    }

    /// [`Self::load`] of `text` as if read from `path`.
    pub fn load_str(text: &str, path: &Path) -> Result<Check> {
        let spec: CheckSpec = parse_ron(path, text)?;
        let invalid = |field: &str, expected: String| Error::Invalid {
            path: path.to_path_buf(),
            pos: locate_field(text, field),
            field: field.into(),
            expected,
        };
        let expect_names = spec.expect.keys().map(|k| k.rsplit('/').next().unwrap_or(k).to_string());
        for n in spec.invariants.iter().cloned().chain(expect_names) {
            if crate::eval::monitor::entry(&n).is_none() {
                return Err(invalid(
                    "invariants",
                    format!("invariant names among {}, got {n:?}", crate::eval::monitor::names()),
                ));
            }
        }
        if spec.cases == 0 || spec.cases > 10_000_000 {
            return Err(invalid("cases", format!("1 to 10000000 cases, got {}", spec.cases)));
        }
        let s = &spec.space;
        let range = |field: &str, r: Option<(u64, u64)>, min: u64| -> Result<()> {
            match r {
                Some((lo, hi)) if lo > hi || lo < min => {
                    Err(invalid(field, format!("a range (lo, hi) with {min} <= lo <= hi, got ({lo}, {hi})")))
                }
                _ => Ok(()),
            }
        };
        let wide = |r: Option<(u32, u32)>| r.map(|(a, b)| (u64::from(a), u64::from(b)));
        range("agents", wide(s.agents), 2)?;
        range("attackers", wide(s.attackers), 0)?;
        range("tasks", wide(s.tasks), 1)?;
        range("rounds", wide(s.rounds), 1)?;
        range("seeds", s.seeds, 0)?;
        if s.agents.is_some_and(|(_, hi)| hi > 64) {
            return Err(invalid("agents", "at most 64 agents per case (a check runs thousands of them)".into()));
        }
        if s.tasks.is_some_and(|(_, hi)| hi > 200) {
            return Err(invalid("tasks", "at most 200 tasks per case".into()));
        }
        for (field, empty) in [
            ("topologies", s.topologies.as_ref().is_some_and(Vec::is_empty)),
            ("memory_topologies", s.memory_topologies.as_ref().is_some_and(Vec::is_empty)),
            ("placements", s.placements.as_ref().is_some_and(Vec::is_empty)),
            ("attacks", s.attacks.as_ref().is_some_and(Vec::is_empty)),
            ("provenance", s.provenance.as_ref().is_some_and(Vec::is_empty)),
        ] {
            if empty {
                return Err(invalid(field, "a non-empty list".into()));
            }
        }
        let base = crate::files::load_referenced(path, Some(text), "base", &spec.base, load)?;
        if let Some(arms) = &spec.arms {
            if let Some(a) = arms.iter().find(|a| !base.scenario.arms.iter().any(|b| &b.name == *a)) {
                return Err(invalid("arms", format!("arm names of {}, got {a:?}", spec.base.display())));
            }
            if arms.is_empty() {
                return Err(invalid("arms", "at least one arm".into()));
            }
        }
        let sv = serde_json::to_value(&base.scenario).expect("serializable");
        let pv = serde_json::to_value(&base.profile).expect("serializable");
        let mut nominal = Vec::new();
        for f in &s.factors {
            f.check().map_err(|e| invalid("factors", e))?;
            if f.relative.is_some() || (f.range.is_none() && f.values.is_none()) {
                return Err(invalid(
                    "factors",
                    format!("`{}`: a `range` or `values` (a check has no nominal design)", f.path),
                ));
            }
            let (profile, sub) = factor::split_root(&f.path);
            let v = factor::read(if profile { &pv } else { &sv }, sub)
                .map_err(|e| invalid("factors", format!("`{}`: a path to a number of the base: {e}", f.path)))?;
            nominal.push(v);
        }
        let check = Check { spec, path: path.to_path_buf(), base, nominal, draws: Vec::new() };
        // The smallest case must be a scenario: otherwise every case may be refused.
        let small = check.smallest();
        check
            .scenario(&small, "poison-accounted")
            .map_err(|e| invalid("space", format!("a space whose smallest case is a valid scenario: {e}")))?;
        Ok(check)
    }

    /// The invariants this check asks about, in registry order when the file lists none.
    pub fn invariants(&self) -> Vec<String> {
        if self.spec.invariants.is_empty() {
            crate::eval::monitor::REGISTRY.iter().map(|e| e.name.to_string()).collect()
        } else {
            self.spec.invariants.clone()
        }
    }

    /// The case every range and list starts at (where shrinking heads).
    pub fn smallest(&self) -> Case {
        let s = &self.spec.space;
        let b = &self.base.scenario;
        Case {
            agents: s.agents.map_or(b.agents, |r| r.0),
            attackers: s.attackers.map_or(0, |r| r.0),
            tasks: s.tasks.map_or(b.workload.tasks(), |r| r.0),
            rounds: s.rounds.map_or(b.protocol.rounds, |r| r.0),
            seed: s.seeds.map_or(b.seed, |r| r.0),
            topology: 0,
            memory_topology: 0,
            placement: 0,
            attack: 0,
            provenance: 0,
            factors: s.factors.iter().map(|f| f.bounds(0.0).0).collect(),
            draw: 0,
        }
    }

    /// The check with its cases drawn over the base profile's posterior draws as well
    /// ([`crate::study::predictive`]): each case runs at the fit or at one draw, and a violation
    /// shrinks toward the fit.
    pub fn with_ensemble(mut self, ensembles: &mut crate::study::predictive::Ensembles) -> Result<Check> {
        self.draws = ensembles.draws_of(&self.base)?.into_iter().map(|ls| ls.profile).collect();
        Ok(self)
    }

    /// Posterior draws the cases range over besides the fit.
    pub fn draws(&self) -> usize {
        self.draws.len()
    }

    /// The case generator.
    fn strategy(&self) -> proptest::strategy::BoxedStrategy<Case> {
        let cases = self.fit_strategy();
        if self.draws.is_empty() {
            // Without an ensemble the generator is the one it always was: the same cases.
            return cases.boxed();
        }
        (cases, 0..=self.draws.len())
            .prop_map(|(mut c, d)| {
                c.draw = d;
                c
            })
            .boxed()
    }

    /// The generator of the space's cases at the fitted profile.
    fn fit_strategy(&self) -> impl Strategy<Value = Case> + use<> {
        let s = self.spec.space.clone();
        let b = &self.base.scenario;
        let agents = s.agents.unwrap_or((b.agents, b.agents));
        let attackers = s.attackers.unwrap_or((0, 0));
        let tasks = s.tasks.unwrap_or((b.workload.tasks(), b.workload.tasks()));
        let rounds = s.rounds.unwrap_or((b.protocol.rounds, b.protocol.rounds));
        let seeds = s.seeds.unwrap_or((b.seed, b.seed));
        let lists =
            (len(&s.topologies), len(&s.memory_topologies), len(&s.placements), len(&s.attacks), len(&s.provenance));
        let factors: Vec<(f64, f64, Option<Vec<f64>>)> = s
            .factors
            .iter()
            .map(|f| {
                let (lo, hi) = f.bounds(0.0);
                (lo, hi, f.values.clone())
            })
            .collect();
        let ints =
            (agents.0..=agents.1, attackers.0..=attackers.1, tasks.0..=tasks.1, rounds.0..=rounds.1, seeds.0..=seeds.1);
        let picks = (0..lists.0, 0..lists.1, 0..lists.2, 0..lists.3, 0..lists.4);
        let numbers: Vec<proptest::strategy::BoxedStrategy<f64>> = factors
            .into_iter()
            .map(|(lo, hi, values)| match values {
                Some(v) => (0..v.len()).prop_map(move |k| v[k]).boxed(),
                None => (0.0f64..=1.0).prop_map(move |u| lo + u * (hi - lo)).boxed(),
            })
            .collect();
        (ints, picks, numbers).prop_map(|((agents, attackers, tasks, rounds, seed), (t, m, p, a, v), factors)| Case {
            agents,
            attackers,
            tasks,
            rounds,
            seed,
            topology: t,
            memory_topology: m,
            placement: p,
            attack: a,
            provenance: v,
            factors,
            draw: 0,
        })
    }

    /// The arms this check runs, by name (the file's `arms`, or every arm of the base).
    pub fn arm_names(&self) -> Vec<String> {
        self.spec.arms.clone().unwrap_or_else(|| self.base.scenario.arms.iter().map(|a| a.name.clone()).collect())
    }

    /// The scenario of `case` with only arm `arm` (None: every arm the check runs), monitoring
    /// `invariant`; `Err` says why the case is not a scenario (it is then skipped as rejected).
    pub fn scenario_for(
        &self,
        case: &Case,
        arm: Option<&str>,
        invariant: &str,
    ) -> std::result::Result<LoadedScenario, String> {
        let mut ls = self.scenario(case, invariant)?;
        if let Some(arm) = arm {
            ls.scenario.arms.retain(|a| a.name == arm);
        }
        Ok(ls)
    }

    /// The scenario of `case` with every arm the check runs, monitoring `invariant`; `Err`
    /// says why the case is not a scenario (it is then skipped as a rejected case).
    pub fn scenario(&self, case: &Case, invariant: &str) -> std::result::Result<LoadedScenario, String> {
        let s = &self.spec.space;
        let mut ls = self.base.clone();
        if case.draw > 0 {
            ls.profile =
                self.draws.get(case.draw - 1).ok_or_else(|| format!("draw {} of the ensemble", case.draw - 1))?.clone();
        }
        let scn = &mut ls.scenario;
        scn.name = format!("{}-{invariant}", self.spec.name);
        scn.seed = case.seed;
        scn.agents = case.agents;
        if s.attackers.is_some() {
            scn.attackers = Attackers::Count(case.attackers.min(case.agents.saturating_sub(1)));
        } else if let Attackers::Ids(ids) = &scn.attackers {
            // The base's ids that exist in a smaller team.
            let kept: Vec<u32> = ids.iter().copied().filter(|i| *i + 1 < case.agents).collect();
            scn.attackers = Attackers::Ids(kept);
        }
        if let Some(v) = &s.topologies {
            scn.topology = v[case.topology].clone();
        }
        if let Some(v) = &s.memory_topologies {
            scn.memory_topology = v[case.memory_topology];
        }
        if let Some(v) = &s.placements {
            scn.placement = v[case.placement];
        }
        if let Some(v) = &s.attacks {
            scn.attack = v[case.attack].clone();
        }
        if let Some(v) = &s.provenance {
            scn.protocol.provenance = v[case.provenance];
        }
        scn.workload.set_tasks(case.tasks);
        scn.protocol.rounds = case.rounds;
        if let Some(arms) = &self.spec.arms {
            scn.arms.retain(|a| arms.contains(&a.name));
        }
        scn.invariants = vec![invariant.to_string()];
        if !s.factors.is_empty() {
            ls = crate::study::sweep::apply(&ls, &s.factors, &case.factors, &self.nominal)
                .map_err(|(i, e)| format!("factor `{}`: {e}", s.factors[i].path))?;
        }
        ls.scenario.check().map_err(|(f, e)| format!("`{f}`: {e}"))?;
        crate::scenario::check_size(&ls.scenario)?;
        Ok(ls)
    }

    /// Runs `case` on `arm` (None: every arm) with `invariant` monitored: the first violation
    /// and its arm, if any.
    pub fn run_case(
        &self,
        case: &Case,
        arm: Option<&str>,
        invariant: &str,
    ) -> std::result::Result<Option<(String, Violation)>, String> {
        let ls = self.scenario_for(case, arm, invariant)?;
        monitored(&ls)
    }

    /// Draws up to `cases` cases and runs each through `exec` (which runs a case's scenario with
    /// `invariant` monitored and returns the first violation and its arm); on a violation,
    /// shrinks. Returns the cases run, the failing cases seen (shrinking included) and the
    /// minimal failing case. `exec` lets a test bring a guard of its own; `tick` sees each case.
    pub fn search(
        &self,
        arm: Option<&str>,
        invariant: &str,
        cases: u32,
        exec: &Exec<'_>,
        tick: &dyn Fn(),
    ) -> Result<Search> {
        let config = Config {
            cases,
            max_shrink_iters: self.spec.max_shrink_iters,
            max_global_rejects: cases.saturating_mul(4).max(1024),
            max_local_rejects: 65_536,
            failure_persistence: None,
            ..Config::default()
        };
        let mut seed = [0u8; 32];
        let h =
            blake3::hash(format!("{}/{invariant}/{}/{}", self.spec.seed, self.spec.name, arm.unwrap_or("")).as_bytes());
        seed.copy_from_slice(h.as_bytes());
        let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
        let ran = Cell::new(0u32);
        let failures = Cell::new(0u32);
        let strategy = self.strategy();
        let result = runner.run(&strategy, |case| {
            if failures.get() == 0 {
                ran.set(ran.get() + 1);
                tick();
            }
            let ls = self.scenario_for(&case, arm, invariant).map_err(TestCaseError::reject)?;
            match exec(&ls) {
                Err(why) => Err(TestCaseError::reject(why)),
                Ok(None) => Ok(()),
                Ok(Some((arm, v))) => {
                    failures.set(failures.get() + 1);
                    Err(TestCaseError::fail(format!("arm `{arm}`: {}", describe_violation(&v))))
                }
            }
        });
        let minimal = match result {
            Ok(()) => None,
            Err(TestError::Fail(_, case)) => Some(case),
            Err(TestError::Abort(why)) => {
                return Err(Error::Invalid {
                    path: self.path.clone(),
                    pos: Pos { line: 1, col: 1 },
                    field: "space".into(),
                    expected: format!("a space most of whose cases are valid scenarios ({invariant}: {why})"),
                });
            }
        };
        Ok(Search { cases: ran.get(), failures: failures.get(), minimal })
    }

    /// What the file expects of `invariant` on `arm`: its `"arm/invariant"` entry, else its
    /// `"invariant"` entry, else that it holds.
    pub fn expectation(&self, arm: &str, invariant: &str) -> Expect {
        let e = &self.spec.expect;
        e.get(&format!("{arm}/{invariant}")).or_else(|| e.get(invariant)).copied().unwrap_or_default()
    }

    /// Where `arm`'s files go: `out` itself for a one-arm check, else a folder per arm.
    fn arm_dir(&self, out: &Path, arm: &str) -> PathBuf {
        if self.arm_names().len() == 1 { out.to_path_buf() } else { out.join(slug(arm)) }
    }

    /// Checks `invariant` on `arm` over `cases` drawn cases; on a violation shrinks it and
    /// writes the counterexample's scenario (and item) into `out` (a folder per arm when the
    /// check runs several). `tick` sees every case run.
    pub fn check_invariant(
        &self,
        arm: &str,
        invariant: &str,
        cases: u32,
        out: &Path,
        tick: &dyn Fn(),
    ) -> Result<Outcome> {
        let found = self.search(Some(arm), invariant, cases, &monitored, tick)?;
        let expect = self.expectation(arm, invariant);
        let dir = self.arm_dir(out, arm);
        let counterexample = match &found.minimal {
            None => None,
            Some(case) => Some(self.write_counterexample(case, arm, invariant, found.failures, &dir)?),
        };
        Ok(Outcome {
            arm: arm.to_string(),
            invariant: invariant.to_string(),
            expect,
            cases: found.cases,
            counterexample,
        })
    }

    /// Writes the scenario of a minimal case (and its violation's item) into `out`.
    fn write_counterexample(
        &self,
        case: &Case,
        arm: &str,
        invariant: &str,
        failures: u32,
        out: &Path,
    ) -> Result<Counterexample> {
        let ls = self.scenario_for(case, Some(arm), invariant).map_err(|e| Error::Invalid {
            path: self.path.clone(),
            pos: Pos { line: 1, col: 1 },
            field: "space".into(),
            expected: format!("a shrunk case that is still a scenario: {e}"),
        })?;
        std::fs::create_dir_all(out).map_err(|source| Error::Write { path: out.to_path_buf(), source })?;
        // Find the arm and the violation again, with the final bank for the item.
        let names = vec![invariant.to_string()];
        let mut found = None;
        for arm in &ls.scenario.arms {
            let m = crate::eval::monitor::Monitors::new(&names).expect("a registered invariant");
            let (run, insp) = crate::world::World::new(&ls.scenario, &ls.profile, arm, ls.scenario.seed, false)
                .with_monitors(m)
                .run_inspected();
            if let Some(v) = run.monitor.and_then(|r| r.violations.into_iter().next()) {
                found = Some((arm.name.clone(), v, insp.bank));
                break;
            }
        }
        let Some((arm, violation, bank)) = found else {
            return Err(Error::Nondeterministic(format!(
                "the shrunk case of `{invariant}` no longer violates it when run again"
            )));
        };
        let file = out.join(format!("{invariant}.ron"));
        let mut scenario = ls.scenario.clone();
        // The profile goes beside the scenario when a factor or a posterior draw moved it.
        if case.draw > 0 || self.spec.space.factors.iter().any(|f| factor::split_root(&f.path).0) {
            let pfile = out.join(format!("{invariant}.profile.ron"));
            let body =
                ron::ser::to_string_pretty(&ls.profile, ron::ser::PrettyConfig::default()).expect("serializable");
            write_atomic(&pfile, format!("// The profile of {}'s counterexample.\n{body}\n", file.display()))?;
            scenario.backbone = format!("{invariant}.profile.ron");
        } else {
            scenario.backbone = self.base_backbone_path(out);
        }
        let body = ron::ser::to_string_pretty(&scenario, ron::ser::PrettyConfig::default()).expect("serializable");
        let header = format!(
            "// Counterexample to `{invariant}`, shrunk by `memlink check {}` ({failures} failing cases tried).\n// {}\n// Reproduce: memlink run {}\n",
            self.path.display(),
            describe_violation(&violation),
            file.display()
        );
        write_atomic(&file, format!("{header}{body}\n"))?;
        let item = match &violation.item {
            Some((id, _)) if bank.try_get(*id).is_some() => {
                let it = bank.get(*id);
                let input = crate::study::explain::ExplainInput::of_item(it, bank.location(*id) == StoreKind::Shared);
                let ifile = out.join(format!("{invariant}.item.ron"));
                let body = ron::ser::to_string_pretty(&input, ron::ser::PrettyConfig::default()).expect("serializable");
                write_atomic(
                    &ifile,
                    format!(
                        "// Item {} ({}) of {}'s violation, as the bank held it at the end of the run.\n// Dissect: memlink explain {}\n{body}\n",
                        id,
                        it.name,
                        file.display(),
                        ifile.display()
                    ),
                )?;
                Some(ifile)
            }
            _ => None,
        };
        Ok(Counterexample { case: case.clone(), arm, violation, failures_seen: failures, scenario: file, item })
    }

    /// The base's backbone as a path that resolves from `out` (its profile file, absolute when
    /// no relative path is known).
    fn base_backbone_path(&self, out: &Path) -> String {
        let resolved = crate::scenario::resolve_profile(&self.base.path, &self.base.scenario.backbone);
        let abs = std::path::absolute(&resolved).unwrap_or(resolved);
        let out_abs = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
        relative(&abs, &out_abs).display().to_string()
    }

    /// Runs every invariant (skipping those whose outcome is in `out` already when `resume`),
    /// writing each outcome as it is known and `check.json` and `check.md` at the end.
    pub fn run(
        &self,
        out: &Path,
        cases: Option<u32>,
        only: &[String],
        resume: bool,
        quiet: bool,
    ) -> Result<Vec<Outcome>> {
        let cases = cases.unwrap_or(self.spec.cases);
        let names: Vec<String> = if only.is_empty() { self.invariants() } else { only.to_vec() };
        if let Some(n) = names.iter().find(|n| crate::eval::monitor::entry(n).is_none()) {
            return Err(Error::Invalid {
                path: self.path.clone(),
                pos: Pos { line: 1, col: 1 },
                field: "invariants".into(),
                expected: format!("invariant names among {}, got {n:?}", crate::eval::monitor::names()),
            });
        }
        std::fs::create_dir_all(out).map_err(|source| Error::Write { path: out.to_path_buf(), source })?;
        let arms = self.arm_names();
        let bar = crate::study::sweep::exec::progress_bar(
            u64::from(cases) * (names.len() * arms.len()) as u64,
            quiet,
            "cases",
        );
        let mut outcomes = Vec::new();
        for (arm, name) in arms.iter().flat_map(|a| names.iter().map(move |n| (a, n))) {
            let dir = self.arm_dir(out, arm);
            std::fs::create_dir_all(&dir).map_err(|source| Error::Write { path: dir.clone(), source })?;
            let file = dir.join(format!("{name}.outcome.json"));
            if resume && file.exists() {
                let text = read_file(&file)?;
                let o: Outcome = serde_json::from_str(&text).map_err(|e| Error::Parse {
                    path: file.clone(),
                    pos: Pos { line: e.line(), col: e.column() },
                    message: format!("expected an outcome of `memlink check`: {e}"),
                })?;
                if o.cases == cases || o.counterexample.is_some() {
                    bar.inc(u64::from(cases));
                    outcomes.push(o);
                    continue;
                }
            }
            bar.set_message(format!("{arm}: {name}"));
            let o = self.check_invariant(arm, name, cases, out, &|| bar.inc(1))?;
            // A failure ends the draw early: the bar moves on to the next invariant.
            bar.inc(u64::from(cases - o.cases.min(cases)));
            write_atomic(&file, &(serde_json::to_string_pretty(&o).expect("serializable") + "\n"))?;
            outcomes.push(o);
        }
        bar.finish_and_clear();
        write_atomic(
            &out.join("check.json"),
            &(serde_json::to_string_pretty(&outcomes).expect("serializable") + "\n"),
        )?;
        write_atomic(&out.join("check.md"), self.report(&outcomes))?;
        Ok(outcomes)
    }

    /// The outcomes as a readable report.
    pub fn report(&self, outcomes: &[Outcome]) -> String {
        let mut s = format!(
            "# memlink check {}\n\nBase {}, arms {}, generator seed {}.\n\n| arm | invariant | expected | outcome | cases | counterexample |\n|---|---|---|---|---|---|\n",
            self.path.display(),
            self.spec.base.display(),
            self.spec.arms.as_ref().map_or("all".to_string(), |a| a.join(", ")),
            self.spec.seed
        );
        if !self.draws.is_empty() {
            s.insert_str(
                s.find("| arm |").expect("the table"),
                &format!(
                    "Each case runs at the fitted profile or at one of the first {} posterior draws of its stand-in (`--ensemble`); a counterexample shrinks toward the fit, and one that needs a draw says which (`draw k` is the ensemble's draw k − 1) and writes that profile beside it.\n\n",
                    self.draws.len()
                ),
            );
        }
        for o in outcomes {
            let (outcome, cx) = match &o.counterexample {
                None => ("holds".to_string(), String::new()),
                Some(c) => (
                    "violated".to_string(),
                    format!(
                        "{} agents, {} attackers, {} tasks, {} rounds, seed {}{}: `{}`",
                        c.case.agents,
                        c.case.attackers.min(c.case.agents.saturating_sub(1)),
                        c.case.tasks,
                        c.case.rounds,
                        c.case.seed,
                        if c.case.draw > 0 { format!(", draw {}", c.case.draw) } else { String::new() },
                        c.scenario.display()
                    ),
                ),
            };
            let mark = if o.as_expected() { "" } else { " **(unexpected)**" };
            s.push_str(&format!(
                "| {} | {} | {:?} | {outcome}{mark} | {} | {cx} |\n",
                o.arm, o.invariant, o.expect, o.cases
            ));
        }
        for o in outcomes {
            if let Some(c) = &o.counterexample {
                s.push_str(&format!(
                    "\n## {} on {}\n\n{}\n\nArm `{}`: {}\n",
                    o.invariant,
                    o.arm,
                    crate::eval::monitor::entry(&o.invariant).map_or("", |e| e.about),
                    c.arm,
                    describe_violation(&c.violation)
                ));
            }
        }
        s
    }
}

/// A name as a folder name: lowercase letters, digits and dashes.
fn slug(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    s.trim_matches('-').to_string()
}

/// `path` relative to directory `from` (both absolute).
fn relative(path: &Path, from: &Path) -> PathBuf {
    let p: Vec<_> = path.components().collect();
    let f: Vec<_> = from.components().collect();
    let common = p.iter().zip(&f).take_while(|(a, b)| a == b).count();
    let mut r = PathBuf::new();
    for _ in common..f.len() {
        r.push("..");
    }
    for c in &p[common..] {
        r.push(c);
    }
    r
}

/// A list field's length (1 when absent: the base's value).
fn len<T>(v: &Option<Vec<T>>) -> usize {
    v.as_ref().map_or(1, Vec::len)
}
