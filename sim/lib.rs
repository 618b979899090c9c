//! memlink: a deterministic discrete-event simulator of memory-link poisoning in LLM
//! multi-agent systems.
//!
//! An attacker writes a poisoned "experience" memory once; memlink follows it through the
//! agents' private and shared memories across a communication topology, and measures how the
//! guards (MAPLE-Guard's write, retrieval, promotion and cross-agent reuse gates, and the
//! baselines it was compared with) contain it. The LLM is replaced by a calibrated stand-in
//! ([`agent`]) or a recorded trace ([`study::trace`]), so a run takes milliseconds and gives the
//! same bytes on any machine, with any number of threads.
//!
//! # One run, in order
//!
//! 1. [`scenario::load`] reads a scenario (RON): agents and attackers, the communication and
//!    memory topologies, the workload, the attack, the protocol, the backbone profile and the
//!    guard arms to compare. Every field has a positioned error.
//! 2. [`run::run_scenario`] runs every arm on the same seed (common random numbers): the
//!    [`world`] schedules tasks on the [`engine`] (integer time, `(time, seq)` order, named
//!    random streams), the [`attack`] plans its poisoned write, each agent retrieves from its
//!    [`memory`] views, the arm's [`guard`] decides what is written, promoted, retrieved and
//!    reused, the stand-in answers, and messages travel the [`topology`].
//! 3. The evaluator ([`eval`]) counts MDSR, RDA and ASR per round against the attack's truth,
//!    which only it can read (the [`eval::access`] token), and its monitors check invariants.
//! 4. [`run::ScenarioResult`] prints the table and writes `summary.json` and `rounds.csv`.
//!
//! # Where things live, lowest floor first
//!
//! Imports only point down this list (`tests/architecture.rs` holds it):
//!
//! | floor | modules |
//! |---|---|
//! | foundations | [`engine`], [`error`], [`files`], [`allocator`], [`report`] (figures), [`tidy`] (the long format) |
//! | text and graphs | [`text`], [`topology`] |
//! | stores and tasks | [`embed`], [`memory`], [`workload`] |
//! | records and readers | [`ledger`], [`agent`] |
//! | actors | [`attack`], [`guard`] |
//! | evaluator | [`eval`] (metrics, oracle, monitors, the token, the spread tracer) |
//! | the file | [`scenario`] (schema, loading, the memory estimate) |
//! | the simulation | [`world`], then [`records`] (stored results), then [`run`] |
//! | studies | [`study`]: grid, sweep, what-if, check, calibrate, predictive, fidelity, trace, explain, spread |
//! | tooling | [`inputs`] (validate any file), [`testkit`] (fuzzer, property kit) |
//!
//! The `memlink` binary (`sim/main.rs`, `sim/cli/`, one file per command) sits on top.
//!
//! # Example
//!
//! ```
//! let ls = memlink::load(std::path::Path::new("scenarios/quickstart.ron")).unwrap();
//! let result = memlink::run_scenario(&ls, ls.scenario.seed);
//! assert_eq!(result.arms.len(), 2); // No Defense and MAPLE-Guard
//! println!("{}", result.table());
//! ```
#![warn(missing_docs)]

pub mod agent;
pub mod allocator;
pub mod attack;
pub mod embed;
pub mod engine;
pub mod error;
pub mod eval;
pub mod files;
pub mod guard;
pub mod inputs;
pub mod ledger;
pub mod memory;
pub mod records;
pub mod report;
pub mod run;
pub mod scenario;
pub mod study;
pub mod testkit;
pub mod text;
pub mod tidy;
pub mod topology;
pub mod workload;
pub mod world;

pub use error::{Error, Result};
pub use eval::metrics::ArmSummary;
pub use guard::{Guard, GuardSpec};
pub use run::{ScenarioResult, run_scenario};
pub use scenario::{LoadedScenario, Scenario, load};
pub use world::World;
