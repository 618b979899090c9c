//! Attacker capabilities beyond the paper's threat model (literature.md §8): what-ifs that
//! compose with every memory attack family and stealth mode, each a RON entry of the attack's
//! `capabilities` list (`attack: MemoryGraft((capabilities: [Forge(()), Tag(Garbage)]))`). With
//! the list empty, the default, an attack is exactly today's.
//!
//! A capability here is data and, where it only edits the attacker's own write, that edit;
//! what needs the run (a key the attacker compromised, an honest record it copies, the
//! topology a laundered payload travels, the summaries a compromised manager writes, the
//! sleepers it edits, the attacker's own copy of the published guard) the world applies in
//! `world/capability.rs`, since attack code never sees guard or ledger internals or evaluator
//! truth.
//!
//! # Adding a capability
//!
//! A new capability is one file here (its parameters and their [`CapabilityKind`]: name,
//! what it does, validation, and, for one that reshapes the attacker's planned writes,
//! [`CapabilityKind::shape`]) and one line of the `capabilities!` list below, which declares
//! the [`Capability`] variant, its validation and its [`REGISTRY`] entry. A capability that
//! needs more of the run than [`ShapeCx`] gives (keys, the honest records, the relays, the
//! sleepers' later tasks) also has a step in `world/capability.rs`. The `#[cfg(test)]` entry,
//! `TestEcho` (`probe.rs`), shows a capability added by its file and one line.
//!
//! | capability | what the attacker can do |
//! |---|---|
//! | `Forge` | set route, writer, readers, taint, lineage, counters, Q of a direct write |
//! | `Tag` | carry no tag, garbage, a replayed honest tag, or one made with a stolen key |
//! | `Accumulate` | split the bias over n low-risk fragments |
//! | `Launder` | reach memory only through h benign summary hops, honestly signed at the last |
//! | `Sleep` | plant useful text, earn Q for d tasks, then edit it into the payload |
//! | `Adapt` | choose wording and metadata against the guard, white- or black-box |
//! | `Summarizer` | own the memory manager that writes receiver summaries |
//!
//! The attacker fraction and placement are the scenario's own `attackers` and `placement`
//! (a what-if condition overrides them).

mod accumulate;
mod adapt;
mod forge;
mod launder;
#[cfg(test)]
mod probe;
mod sleeper;
mod summarizer;
mod tag;

pub use accumulate::Accumulation;
pub use adapt::{AdaptMode, Adaptive, WORDINGS, Wording, metadata_menu};
pub use forge::{ALL_FIELDS, CLAIMED_TRUST_HAZARD, ForgeField, ForgeOrder, Forgery};
pub use launder::Laundering;
pub use sleeper::Sleeper;
pub use summarizer::SummarizerCompromise;
pub use tag::TagAttack;

use crate::attack::PoisonWrite;
use crate::text::TextFeatures;
use crate::workload::Task;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one capability's parameters say about it: its RON variant, what it does, its check,
/// and the edit it makes to the attacker's planned writes.
pub trait CapabilityKind {
    /// The RON variant in `capabilities: [...]`.
    const NAME: &'static str;
    /// What the attacker can do, in a sentence.
    const ABOUT: &'static str;

    /// `(field, expected)` when a parameter is out of range.
    fn validate(&self) -> Result<(), (String, String)> {
        Ok(())
    }

    /// Reshapes the writes the attack planned for one poisoning task, before any is committed
    /// (after the adaptive choice and the accumulation, which have steps of their own in the
    /// world). The default keeps them.
    fn shape(&self, writes: Vec<PoisonWrite>, _cx: &mut ShapeCx<'_>) -> Vec<PoisonWrite> {
        writes
    }
}

/// What [`CapabilityKind::shape`] may use: the task and target, the text analysis the
/// attack's own payloads get, and counters the run summary reports as `cap_<name>`.
pub struct ShapeCx<'a> {
    /// The poisoning task.
    pub task: &'a Task,
    /// The option the attack aims at.
    pub target: u8,
    /// Analyses an (intent, experience) pair as the attack's writes are analysed.
    pub features: &'a mut dyn FnMut(&str, &str) -> TextFeatures,
    /// Counters by name, summed over the run ([`crate::eval::metrics::CapabilityStats::counts`]).
    pub counts: &'a mut BTreeMap<String, u64>,
}

/// Declares [`Capability`], its validation, its write-shaping step and [`REGISTRY`] from one
/// `Variant(Parameters);` line per capability; lines after `; test:` exist in test builds only.
macro_rules! capabilities {
    ($( $(#[doc = $doc:literal])* $v:ident($t:ty); )* ; test: $( $(#[doc = $tdoc:literal])* $tv:ident($tt:ty); )*) => {
        /// One capability of the attacker.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub enum Capability {
            $( $(#[doc = $doc])* $v($t), )*
            $( $(#[doc = $tdoc])* #[cfg(test)] $tv($tt), )*
        }

        /// The registered capabilities: (RON variant, what it does).
        #[cfg(not(test))]
        pub const REGISTRY: &[(&str, &str)] = &[$( (<$t as CapabilityKind>::NAME, <$t as CapabilityKind>::ABOUT), )*];
        /// The registered capabilities: (RON variant, what it does), then the test-only ones.
        #[cfg(test)]
        pub const REGISTRY: &[(&str, &str)] = &[
            $( (<$t as CapabilityKind>::NAME, <$t as CapabilityKind>::ABOUT), )*
            $( (<$tt as CapabilityKind>::NAME, <$tt as CapabilityKind>::ABOUT), )*
        ];

        impl Capability {
            /// `(field, expected)` when a parameter is out of range (the expectation names the
            /// capability).
            pub fn validate(&self) -> Result<(), (String, String)> {
                let (name, r) = match self {
                    $( Capability::$v(c) => (<$t as CapabilityKind>::NAME, CapabilityKind::validate(c)), )*
                    $( #[cfg(test)] Capability::$tv(c) => (<$tt as CapabilityKind>::NAME, CapabilityKind::validate(c)), )*
                };
                r.map_err(|(f, e)| (f, format!("{e} (capability {name})")))
            }

            /// This capability's [`CapabilityKind::shape`] of one task's planned writes.
            pub fn shape(&self, writes: Vec<PoisonWrite>, cx: &mut ShapeCx<'_>) -> Vec<PoisonWrite> {
                match self {
                    $( Capability::$v(c) => c.shape(writes, cx), )*
                    $( #[cfg(test)] Capability::$tv(c) => c.shape(writes, cx), )*
                }
            }
        }
    };
}

capabilities! {
    /// Metadata forgery on the direct-memory route ([`Forgery`]).
    Forge(Forgery);
    /// What tag the direct-memory route's writes carry against a signed ledger ([`TagAttack`]).
    Tag(TagAttack);
    /// Below-threshold accumulation over low-risk fragments ([`Accumulation`]).
    Accumulate(Accumulation);
    /// Lineage laundering through benign summary hops ([`Laundering`]).
    Launder(Laundering);
    /// Sleeper: useful for a while, then edited into the payload ([`Sleeper`]).
    Sleep(Sleeper);
    /// Adaptive choice of wording and metadata, white- or black-box ([`Adaptive`]).
    Adapt(Adaptive);
    /// The receiver-summary memory manager is the attacker's ([`SummarizerCompromise`]).
    Summarizer(SummarizerCompromise);
    ; test:
    /// A test-only capability: every planned write repeated (`probe.rs`).
    TestEcho(probe::Echo);
}

/// The last capability of a kind among `caps`.
macro_rules! last_of {
    ($caps:expr, $variant:ident) => {
        $caps.iter().rev().find_map(|c| if let Capability::$variant(x) = c { Some(x) } else { None })
    };
}

/// The accumulation among `caps`, if any (the last one wins).
pub fn accumulation(caps: &[Capability]) -> Option<&Accumulation> {
    last_of!(caps, Accumulate)
}

/// The laundering among `caps`, if any.
pub fn laundering(caps: &[Capability]) -> Option<&Laundering> {
    last_of!(caps, Launder)
}

/// The sleeper among `caps`, if any.
pub fn sleeper(caps: &[Capability]) -> Option<&Sleeper> {
    last_of!(caps, Sleep)
}

/// The adaptive choice among `caps`, if any.
pub fn adaptive(caps: &[Capability]) -> Option<&Adaptive> {
    last_of!(caps, Adapt)
}

/// The summarizer compromise among `caps`, if any.
pub fn summarizer(caps: &[Capability]) -> Option<&SummarizerCompromise> {
    last_of!(caps, Summarizer)
}

/// The forgery among `caps`, if any (the last one wins).
pub fn forgery(caps: &[Capability]) -> Option<&Forgery> {
    last_of!(caps, Forge)
}

/// The tag attack among `caps` (default: unsigned).
pub fn tag_attack(caps: &[Capability]) -> TagAttack {
    last_of!(caps, Tag).copied().unwrap_or_default()
}
