//! Summarizer compromise: the memory manager that writes receiver summaries is the attacker's.
//! On poisoning tasks it adds the payload's claim sentence to the summaries it writes for
//! benign receivers (with probability `share` each), under the summary's honest metadata and,
//! against a signed ledger, the manager's honest signature. By default the attacker then needs
//! no direct write (`keep_direct: false`).

use serde::{Deserialize, Serialize};

/// What the registry says.
pub const ABOUT: &str = "summarizer compromise: the memory manager writing receiver summaries inserts the payload's claim into them, honestly signed";

/// The summarizer-compromise capability (`Summarizer((share: 1.0, keep_direct: false))`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SummarizerCompromise {
    /// Share of benign receivers' summaries on a poisoning task that carry the claim (0..=1).
    pub share: f64,
    /// Whether the attacker also writes through the direct route.
    pub keep_direct: bool,
}

impl Default for SummarizerCompromise {
    fn default() -> Self {
        SummarizerCompromise { share: 1.0, keep_direct: false }
    }
}

impl SummarizerCompromise {
    /// `(field, expected)` when out of range.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !(0.0..=1.0).contains(&self.share) {
            return Err(("share".into(), format!("a probability in [0, 1], got {}", self.share)));
        }
        Ok(())
    }

    /// The sentence a compromised summary gains.
    pub fn sentence(src: u32, claim: &str) -> String {
        format!("Agent {src} relayed a stored note: {}. ", claim.trim_end_matches('.'))
    }
}

impl super::CapabilityKind for SummarizerCompromise {
    const NAME: &'static str = "Summarizer";
    const ABOUT: &'static str = ABOUT;
    fn validate(&self) -> Result<(), (String, String)> {
        SummarizerCompromise::validate(self)
    }
}
