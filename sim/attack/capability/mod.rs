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
//! truth. A new capability is one file here, one [`REGISTRY`] line (and its variant in
//! [`Capability`]), and, if it needs the run, one step in that file's `commit_planned`.
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

use serde::{Deserialize, Serialize};

/// One capability of the attacker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Capability {
    /// Metadata forgery on the direct-memory route ([`Forgery`]).
    Forge(Forgery),
    /// What tag the direct-memory route's writes carry against a signed ledger ([`TagAttack`]).
    Tag(TagAttack),
    /// Below-threshold accumulation over low-risk fragments ([`Accumulation`]).
    Accumulate(Accumulation),
    /// Lineage laundering through benign summary hops ([`Laundering`]).
    Launder(Laundering),
    /// Sleeper: useful for a while, then edited into the payload ([`Sleeper`]).
    Sleep(Sleeper),
    /// Adaptive choice of wording and metadata, white- or black-box ([`Adaptive`]).
    Adapt(Adaptive),
    /// The receiver-summary memory manager is the attacker's ([`SummarizerCompromise`]).
    Summarizer(SummarizerCompromise),
}

/// The registered capabilities: (RON variant, what it does).
pub const REGISTRY: &[(&str, &str)] = &[
    ("Forge", forge::ABOUT),
    ("Tag", tag::ABOUT),
    ("Accumulate", accumulate::ABOUT),
    ("Launder", launder::ABOUT),
    ("Sleep", sleeper::ABOUT),
    ("Adapt", adapt::ABOUT),
    ("Summarizer", summarizer::ABOUT),
];

impl Capability {
    /// `(field, expected)` when a parameter is out of range (the expectation names the
    /// capability).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let (name, r) = match self {
            Capability::Forge(f) if f.fields.is_empty() => {
                ("Forge", Err(("fields".to_string(), "at least one field to forge".to_string())))
            }
            Capability::Forge(_) | Capability::Tag(_) => return Ok(()),
            Capability::Accumulate(a) => ("Accumulate", a.validate()),
            Capability::Launder(l) => ("Launder", l.validate()),
            Capability::Sleep(s) => ("Sleep", s.validate()),
            Capability::Adapt(a) => ("Adapt", a.validate()),
            Capability::Summarizer(s) => ("Summarizer", s.validate()),
        };
        r.map_err(|(f, e)| (f, format!("{e} (capability {name})")))
    }
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
