//! The evaluator's token. [`EvaluatorAccess`] proves evaluator privilege: the oracle's read
//! methods demand one. Its field is private and its one constructor is visible inside
//! [`crate::eval`] alone (the metrics mint it from there), so guard, agent, attack and world
//! code cannot make one, and cannot read the truth.
//!
//! This module imports nothing, so the oracle and the metrics both depend on it without
//! depending on each other through it.
//!
//! ```compile_fail
//! // Outside `eval`, the constructor is out of reach:
//! let _ = memlink::eval::access::EvaluatorAccess::mint();
//! ```
//!
//! The type itself is public, so a signature can name it (this compiles):
//!
//! ```
//! fn takes(_: &memlink::eval::access::EvaluatorAccess) {}
//! ```

/// Proof of evaluator privilege; see the module documentation.
#[derive(Debug)]
pub struct EvaluatorAccess {
    _private: (),
}

impl EvaluatorAccess {
    /// The token. Visible inside [`crate::eval`] only.
    pub(in crate::eval) const fn mint() -> Self {
        EvaluatorAccess { _private: () }
    }
}
