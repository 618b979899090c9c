//! Memory items, their metadata and lineage, and the stores they live in (private per agent,
//! shared, quarantine). Nothing here knows which items are poison: that truth lives in
//! [`crate::eval::oracle`], which guards cannot reach.

mod dense;
mod item;
mod store;

pub use dense::PrescoreInput;
pub use item::{ItemId, LINEAGE_MARKERS, LedgerTag, MemoryItem, Scope, Status, Taint, Writer, marker_bits};
pub use store::{Capacity, Eviction, IntentGroup, MemoryBank, MemoryTopology, StoreKind};
