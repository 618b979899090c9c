//! Memory items, their metadata and lineage, and the stores they live in (private per agent,
//! shared, quarantine). Nothing here knows which items are poison: that truth lives in
//! [`crate::oracle`], which guards cannot reach.

mod item;
mod store;

pub use item::{ItemId, MemoryItem, Scope, Status, Taint, Writer};
pub use store::{MemoryBank, MemoryTopology, StoreKind};
