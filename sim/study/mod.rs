//! Studies: what a researcher runs over many scenarios. Each study expands its file into runs,
//! has [`crate::run`] simulate them (answered from report records where they are stored), and
//! analyses the results.
//!
//! - [`grid`]: settings × backbones × seeds × topologies × attacker sets, and the paper's tables.
//! - [`sweep`]: parameter-sensitivity designs (OAT, factorial, Latin hypercube, Morris, Sobol)
//!   and their statistics; also the executor every study's runs go through.
//! - [`whatif`]: threat-model what-ifs, each condition paired with a reference.
//! - [`check`]: invariants over generated scenarios, counterexamples shrunk.
//! - [`calibrate`]: fitting a backbone's stand-in to published numbers, its validation and its
//!   posterior ensemble; [`predictive`] runs any study over that ensemble.
//! - [`fidelity`]: the paper's grid with each routing switch in its other state.
//! - [`trace`]: recording, importing and replaying backbone calls.
//! - [`explain`]: one memory item through MAPLE-Guard's signals and gates.
//! - [`spread`]: the figure of how poison spread over the communication graph in one run.

pub mod calibrate;
pub mod check;
pub mod explain;
pub mod fidelity;
pub mod grid;
pub mod predictive;
pub mod spread;
pub mod sweep;
pub mod trace;
pub mod whatif;
