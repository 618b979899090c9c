//! The evaluator: what a run measures, and the truth it measures against.
//!
//! - [`oracle`]: which memory items and messages are poison, registered as the attack writes
//!   them. Its read methods demand an [`access::EvaluatorAccess`] token.
//! - [`metrics`]: MDSR, RDA, ASR and the counters of one arm's run; the only module that mints
//!   the token (see [`access`]).
//! - [`monitor`]: run-time invariants, one file each and one registry line.
//! - [`spread`]: how poison spread in a run (first exposure per agent, edges crossed), traced
//!   from the monitors' seat.
//!
//! Guards, agents, attacks and the world's routing never hold a token, so the evaluator's truth
//! is unreachable from them by construction.

pub mod access;
pub mod metrics;
pub mod monitor;
pub mod oracle;
pub mod spread;
