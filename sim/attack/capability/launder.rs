//! Lineage laundering: the payload reaches memory only as a benign agent's summary of a
//! summary of it, `hops` relays deep. Each hop is a receiver-side summary written by the
//! relaying agent's (honest) memory manager: the stand-in's summarizer decides per hop whether
//! the claim survives (verbatim, as a stance, or not at all), and the lineage keeps the
//! previous hop's parents with probability `parent_retention`, else starts afresh as an honest
//! summary's does. The last hop is committed through the manager's own route, so a signed
//! ledger signs it honestly: the signature proves who wrote the summary, not that what it
//! relays is true. The world walks the chain along the communication topology
//! (`World::launder`); this file holds the capability's data and its lineage rule.

use serde::{Deserialize, Serialize};

/// What the registry says.
pub const ABOUT: &str = "lineage laundering: the payload re-summarized through h benign hops (honestly signed at the last), parents kept per hop with a probability";

/// The laundering capability (`Launder((hops: 2, parent_retention: 0.0))`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Laundering {
    /// Benign relays between the attacker and the stored summary (1..=8).
    pub hops: u32,
    /// Probability that a hop keeps its input's lineage (0..=1).
    pub parent_retention: f64,
}

impl Default for Laundering {
    fn default() -> Self {
        Laundering { hops: 2, parent_retention: 0.0 }
    }
}

impl Laundering {
    /// `(field, expected)` when out of range.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !(1..=8).contains(&self.hops) {
            return Err(("hops".into(), format!("1..=8 hops, got {}", self.hops)));
        }
        if !(0.0..=1.0).contains(&self.parent_retention) {
            return Err(("parent_retention".into(), format!("a probability in [0, 1], got {}", self.parent_retention)));
        }
        Ok(())
    }

    /// The lineage of a hop: the input's parents and name when `kept`, else what an honest
    /// summary names (`fresh`).
    pub fn hop_parents(
        kept: bool,
        input_parents: &[std::sync::Arc<str>],
        input_name: &str,
        fresh: Vec<std::sync::Arc<str>>,
    ) -> Vec<std::sync::Arc<str>> {
        if kept {
            let mut p = input_parents.to_vec();
            p.push(input_name.into());
            p
        } else {
            fresh
        }
    }
}

impl super::CapabilityKind for Laundering {
    const NAME: &'static str = "Launder";
    const ABOUT: &'static str = ABOUT;
    fn validate(&self) -> Result<(), (String, String)> {
        Laundering::validate(self)
    }
}
