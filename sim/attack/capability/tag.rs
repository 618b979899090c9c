//! What tag the attacker's direct-memory writes carry against a signed provenance ledger
//! (`crate::ledger`). The direct route bypasses the memory manager, so an honest signature is
//! never among them.

use serde::{Deserialize, Serialize};

/// What the registry says.
pub const ABOUT: &str = "the tag direct writes carry against a signed ledger: none, garbage, an honest record's replayed, or one made with a compromised agent key or the shared key";

/// The attacker's way with tags.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TagAttack {
    /// No tag (the write bypasses the manager; a stripped or downgraded signature is the same).
    #[default]
    Unsigned,
    /// Random bytes where the MAC should be.
    Garbage,
    /// The tag of the latest honest record, copied with every field it covers but the text.
    Replay,
    /// A MAC made with the attacker's own agent key, compromised (per-agent keys: it signs as
    /// itself only, so a forged writer fails; with a shared key this is the shared key).
    OwnKey,
    /// A MAC made with the compromised shared key (per-agent keys: the master they derive from),
    /// over whatever the item claims.
    SharedKey,
}

impl super::CapabilityKind for TagAttack {
    const NAME: &'static str = "Tag";
    const ABOUT: &'static str = ABOUT;
}
