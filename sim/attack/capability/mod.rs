//! Attacker capabilities beyond the paper's threat model (literature.md §8): what-ifs that
//! compose with every memory attack family and stealth mode, each a RON entry of the attack's
//! `capabilities` list (`attack: MemoryGraft((capabilities: [Forge(()), Tag(Garbage)]))`). With
//! the list empty, the default, an attack is exactly today's.
//!
//! A capability here is data and, where it only edits the attacker's own write, that edit;
//! what needs the run (a key the attacker compromised, an honest record it copies) the world
//! applies, since attack code never sees guard or ledger internals. A new capability is one
//! file and one [`REGISTRY`] line (and its variant in [`Capability`]).

mod forge;
mod tag;

pub use forge::{ForgeField, ForgeOrder, Forgery};
pub use tag::TagAttack;

use serde::{Deserialize, Serialize};

/// One capability of the attacker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Capability {
    /// Metadata forgery on the direct-memory route ([`Forgery`]).
    Forge(Forgery),
    /// What tag the direct-memory route's writes carry against a signed ledger ([`TagAttack`]).
    Tag(TagAttack),
}

/// The registered capabilities: (RON variant, what it does).
pub const REGISTRY: &[(&str, &str)] = &[("Forge", forge::ABOUT), ("Tag", tag::ABOUT)];

/// The forgery among `caps`, if any (the last one wins).
pub fn forgery(caps: &[Capability]) -> Option<&Forgery> {
    caps.iter().rev().find_map(|c| if let Capability::Forge(f) = c { Some(f) } else { None })
}

/// The tag attack among `caps` (default: unsigned).
pub fn tag_attack(caps: &[Capability]) -> TagAttack {
    caps.iter().rev().find_map(|c| if let Capability::Tag(t) = c { Some(*t) } else { None }).unwrap_or_default()
}
