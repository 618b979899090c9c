//! The calibration file's types: which rows a calibration fits, which parameters, which seeds,
//! how residuals are weighed.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Which target rows a calibration fits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RowFilter {
    /// Source tables ("table2", "table6_attack_free", …); empty = all.
    pub sources: Vec<String>,
    /// Methods; default No Defense only.
    pub guards: Vec<String>,
    /// Methods whose attack-free rows (a source named `…attack_free…`, simulated without an
    /// attack) are selected besides `guards`' (issue 43). The only way a MAPLE-Guard row enters
    /// a fit: Table 6's attack-free MAPLE-Guard utility is the one published measurement of a
    /// team reading evidence-framed memories without an attack. An attacked MAPLE-Guard row is
    /// refused whichever filter selects it.
    pub attack_free_guards: Vec<String>,
    /// Metrics ("MDSR@3", "RDA@1", …); empty = all.
    pub metrics: Vec<String>,
    /// `source/setting` pairs left out ("table2/mmlu_minja"): a table that prints another
    /// table's numbers for a setting (Qwen's Table 2 MMLU baselines are Table 11's round 3)
    /// is fitted once, where those numbers were measured.
    pub except: Vec<String>,
    /// Leave out the baseline cells whose published effect (method − No Defense at round 3)
    /// differs between Table 2 and the round-level table by more than
    /// [`super::effects::INCONSISTENT_GAP`] (`memlink effects`): both cells of such a pair (issue 15).
    /// No guard with one effect on both kinds of graph can meet both, so fitting them only
    /// trades one for the other.
    pub consistent_only: bool,
}

impl Default for RowFilter {
    fn default() -> Self {
        RowFilter {
            sources: vec!["table2".into()],
            guards: vec!["No Defense".into()],
            attack_free_guards: Vec::new(),
            metrics: Vec::new(),
            except: Vec::new(),
            consistent_only: false,
        }
    }
}

/// One fitted parameter: a field of the profile's parameters for one workload, (with `judge`)
/// a field of the profile's shift for one LLM-judge guard kind, or (with `guard`) a number in
/// the configuration of the scenarios' arm of that name — a baseline's detector, fitted with
/// the profile held fixed. MAPLE-Guard's constants are the paper's and are refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitParameter {
    /// Workload key in the profile ("mmlu"); unused for guard and judge parameters.
    #[serde(default)]
    pub workload: String,
    /// LLM-judge guard kind whose shift in the profile holds the parameter ("challenger"; see
    /// [`crate::agent::JUDGE_KINDS`]); `name` is then `bias` or `dissent`.
    #[serde(default)]
    pub judge: Option<String>,
    /// Arm whose guard configuration holds the parameter ("Challenger").
    #[serde(default)]
    pub guard: Option<String>,
    /// Field of `WorkloadParams` ("memory_weight"), or a dotted path in the guard's
    /// configuration ("detector.bias").
    pub name: String,
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
    /// Where the search starts (default: the profile's or the arm's current value).
    #[serde(default)]
    pub start: Option<f64>,
    /// For a model parameter fitted on one workload (`name` one of
    /// [`crate::agent::MODEL_FIELDS`]: the value is the workload's, the model's plus its
    /// deviation): the spread its deviation from the model's value is penalised by, adding
    /// ((value − model) / prior_sd)² to the objective's sum. None: the workload's value is free
    /// (the structure before issue 15) and does not pool into the model's.
    #[serde(default)]
    pub prior_sd: Option<f64>,
    /// Where the prior comes from (the centre it is penalised around and its spread, or the
    /// bounds of a flat one): a citation the calibration report prints beside the parameter.
    #[serde(default)]
    pub source: Option<String>,
}

/// How a row's spread-weighted residual z enters the objective.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum Loss {
    /// z²: every row pulls in proportion to its miss.
    #[default]
    Squared,
    /// Huber's loss at k spreads: z² while |z| ≤ k, then 2k|z| − k², so a row pulls no harder
    /// than k however far it is. For rows the mechanism cannot reach (a baseline the paper ran
    /// under another setup), which would otherwise decide the fit for every row it can.
    Huber(f64),
}

impl Loss {
    /// The loss of a spread-weighted residual `z`.
    pub fn of(self, z: f64) -> f64 {
        match self {
            Loss::Squared => z * z,
            Loss::Huber(k) if z.abs() <= k => z * z,
            Loss::Huber(k) => 2.0 * k * z.abs() - k * k,
        }
    }

    /// How the report names the objective: the mean loss of the residuals over σ.
    pub fn describe(self) -> String {
        match self {
            Loss::Squared => "mean squared residual / σ".into(),
            Loss::Huber(k) => format!("mean Huber loss (k = {k}) of residual / σ"),
        }
    }
}

/// A calibration file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationSpec {
    /// Name (output file names).
    pub name: String,
    /// Backbone profile to fit (name under models/, or a path).
    pub profile: String,
    /// Further backbone profiles whose rows are selected too, each simulated with its own
    /// profile, held fixed: a baseline's detector is one configuration on both backbones, so
    /// it is fitted to both backbones' rows at once.
    #[serde(default)]
    pub also: Vec<String>,
    /// Targets CSV, relative to the calibration file.
    pub targets: PathBuf,
    /// Which rows to fit (only rows of this profile's backbone and of a listed setting).
    #[serde(default)]
    pub rows: RowFilter,
    /// Further rows evaluated at the fitted parameters and reported, never fitted (e.g. the
    /// round-level rows, whose direction from round 1 to round 3 the report checks). Unlike
    /// `rows`, these may include MAPLE-Guard's: they are predictions.
    #[serde(default)]
    pub checks: Option<RowFilter>,
    /// Setting name → scenario file (relative to the calibration file); its arms must include
    /// every selected method by name.
    pub settings: BTreeMap<String, PathBuf>,
    /// Per source table, setting name → scenario file replacing the one in `settings` for
    /// that table's rows: a table the paper ran under another protocol (the round-level tables
    /// on random graphs come from the strict matrix, spec §11).
    #[serde(default)]
    pub source_settings: BTreeMap<String, BTreeMap<String, PathBuf>>,
    /// The parameters to fit.
    pub parameters: Vec<FitParameter>,
    /// Seeds every evaluation runs (common random numbers).
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// Tasks per run, overriding the scenarios' (None keeps them).
    #[serde(default)]
    pub tasks: Option<u32>,
    /// Most objective evaluations.
    #[serde(default = "default_evals")]
    pub max_evaluations: u32,
    /// Stop when the simplex's values differ by less than this.
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// The coordinates the searches move in: `Box` (the parameters, clamped into their
    /// bounds; the default, which every committed fit used) or `Logit` (each parameter's
    /// logit within its bounds, so that no search ends on a bound).
    #[serde(default)]
    pub coordinates: super::nelder_mead::Coordinates,
    /// Smallest spread (percentage points) a target is weighted by.
    #[serde(default = "default_floor")]
    pub spread_floor: f64,
    /// How a row's spread-weighted residual enters the objective.
    #[serde(default)]
    pub loss: Loss,
    /// Seeds the report's 95% intervals are computed over at the fitted parameters (default:
    /// the fitting seeds). Never part of the objective.
    #[serde(default)]
    pub interval_seeds: Vec<u64>,
    /// Per setting, fit seeds replacing `seeds`: a small setting (CSQA's 24 tasks) needs more
    /// runs before its mean settles, and costs little per run.
    #[serde(default)]
    pub setting_seeds: BTreeMap<String, Vec<u64>>,
    /// Per setting, interval seeds replacing `interval_seeds`.
    #[serde(default)]
    pub setting_interval_seeds: BTreeMap<String, Vec<u64>>,
    /// Per setting, the attacker sets a target averages over (Table 2 averages the 15 fixed
    /// triples of spec §10); a setting without an entry keeps its scenario's attackers.
    #[serde(default)]
    pub attacker_sets: BTreeMap<String, Vec<Vec<u32>>>,
    /// Partial pooling of the model parameters fitted per workload with a `prior_sd`
    /// ([`super::pool`]): the fit first searches every workload free (stage A), sets each such model
    /// parameter to the precision-weighted mean of the workloads' stage-A values, then searches
    /// again with every deviation from it penalised (stage C). Off: one search, deviations
    /// penalised from the profile's model values as they are.
    #[serde(default)]
    pub pooled: bool,
    /// Most evaluations of each stage-C search (default `max_evaluations`): stage C starts at
    /// stage A's optimum, so it needs fewer.
    #[serde(default)]
    pub pooled_evaluations: Option<u32>,
    /// A leave-one-setting-out result of this calibration (`memlink calibrate --leave-one-out`'s
    /// `<name>.loso.json`, relative to the calibration file): `memlink assess` re-evaluates its
    /// folds at their stored parameters and reports them beside the fit, so the committed
    /// cross-validated error regenerates (and is drift-checked) without refitting.
    #[serde(default)]
    pub loso: Option<PathBuf>,
    /// An identifiability analysis of this calibration (`memlink calibrate --identify N`'s
    /// `<name>.identify.json`, relative to the calibration file): `memlink assess` re-evaluates
    /// χ² at the profile and at its stored profile points and reports the verdicts beside the
    /// fit ([`super::identify`]).
    #[serde(default)]
    pub identify: Option<PathBuf>,
}

fn default_seeds() -> Vec<u64> {
    vec![42]
}
fn default_evals() -> u32 {
    80
}
fn default_tolerance() -> f64 {
    1e-3
}
fn default_floor() -> f64 {
    1.0
}
