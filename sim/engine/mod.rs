//! The discrete-event core: integer time, the `(time, seq)` event queue, named RNG streams and
//! the running trace hash. It knows nothing about memory, guards or agents.

mod queue;
mod rng;
mod trace;

pub use queue::{EventQueue, Scheduled};
pub(crate) use rng::mix64;
pub use rng::{SimRng, StreamKind, Streams};
pub use trace::{TraceEntry, TraceHash, first_divergence};

use serde::{Deserialize, Serialize};

/// Simulated time in integer ticks (one tick is one simulated millisecond by convention).
///
/// Integer time keeps event order exact: there are no float ties to break differently on
/// different machines.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Time(pub u64);

impl Time {
    /// The start of every run.
    pub const ZERO: Time = Time(0);

    /// This time plus `ticks`, saturating at the end of time.
    pub fn after(self, ticks: u64) -> Time {
        Time(self.0.saturating_add(ticks))
    }
}

impl std::fmt::Display for Time {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "t={}", self.0)
    }
}
