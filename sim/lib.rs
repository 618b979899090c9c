//! memlink: a deterministic discrete-event simulator of memory-link poisoning in LLM
//! multi-agent systems.
//!
//! A scenario (RON) names agents, attackers, a communication topology, a memory topology, a
//! workload, an attack, a protocol, a backbone profile for the LLM stand-in, and the guard
//! arms to compare. [`run::run_scenario`] runs every arm on the same seed (common random numbers)
//! and returns per-round metrics; the same scenario and seed give byte-identical results on any
//! machine and with any number of threads.
#![warn(missing_docs)]

pub mod agent;
pub mod allocator;
pub mod attack;
pub mod calibrate;
pub mod check;
pub mod embed;
pub mod engine;
pub mod error;
pub mod estimate;
pub mod explain;
pub mod fidelity;
pub mod files;
pub mod fuzz;
pub mod grid;
pub mod guard;
pub mod inputs;
pub mod ledger;
pub mod memory;
pub mod metrics;
pub mod monitor;
pub mod oracle;
pub mod plot;
pub mod predictive;
pub mod props;
pub mod records;
pub mod run;
pub mod scenario;
pub mod sweep;
pub mod text;
pub mod topology;
pub mod trace;
pub mod whatif;
pub mod workload;
pub mod world;
