//! Signed provenance: the memory manager signs the system-assigned metadata of every write it
//! processes, and the gates verify a signature before they trust an item's provenance and
//! lineage (MAPLE-Guard's two heaviest signals read exactly those fields).
//!
//! **The record** a tag covers: the writer, the source route (`source_type`) and memory type,
//! the readers (scope and allowed agents), the lineage (parents), the task and round, a digest
//! of the text, and a nonce. Not covered: Q and the success/failure counters, which outcome
//! updates change after the write (an attacker who gets a valid tag can still forge them).
//!
//! **Keys.** BLAKE3 in keyed mode (a MAC): the memory manager that signs and the gates that
//! verify are one trusted memory service here, so a symmetric key suffices and costs a hash
//! per check; public-key signatures (Ed25519) would matter only if third parties verified
//! without being able to sign. [`KeyScheme::Shared`]: one key for every writer.
//! [`KeyScheme::PerAgent`]: one key per agent (derived from a master key), and a record naming
//! agent *i* as its writer verifies only under *i*'s key, so a compromised agent key lets its
//! holder sign as itself only; the shared key, compromised, signs anything. Keys derive from
//! the run's seed through their own stream, and no attacker code reads them unless a
//! capability says its key was compromised.
//!
//! **Verify modes** ([`VerifyMode`]): `None` (no ledger), `PresenceOnly` (a tag exists: the gap
//! a published certified defence's code has — a garbage tag passes), `Verify` (the MAC over the
//! item's claimed record, the nonce unused by any other item, else the item's provenance is
//! read as unverified) and `VerifyRejectUnsigned` (as `Verify`, and an item that fails is
//! rejected at the write gate).

use crate::memory::{LedgerTag, MemoryItem, Scope, Taint, Writer};
use serde::{Deserialize, Serialize};

/// How gates treat tags.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum VerifyMode {
    /// No ledger: nothing is signed or checked.
    #[default]
    None,
    /// A tag is trusted if present, whatever it says.
    PresenceOnly,
    /// A tag must verify; an item without a valid one is read with unverified provenance.
    Verify,
    /// A tag must verify; an item without a valid one is rejected.
    VerifyRejectUnsigned,
}

/// Who holds which key.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyScheme {
    /// One key for every writer.
    #[default]
    Shared,
    /// One key per agent; the user history and external channels share the manager's own.
    PerAgent,
}

/// An arm's signed ledger (`ledger: Some((verify: Verify, keys: PerAgent))`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LedgerConfig {
    /// The verify mode.
    pub verify: VerifyMode,
    /// The key scheme.
    pub keys: KeyScheme,
    /// A file holding the master key as 64 hex digits (relative to the scenario; `#` starts a
    /// comment line). Without one, the master key comes from the run's seed through its own
    /// stream. The scenario loader reads it into `key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_file: Option<std::path::PathBuf>,
    /// The master key itself (64 hex digits), given inline or read from `key_file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<LedgerKey>,
}

/// A master key: 32 bytes, written as 64 hex digits in a scenario or a key file. It never leaves
/// memory: serialised (into a trace's embedded scenario, a stored run's hash, a report record's
/// key) it is its [`LedgerKey::fingerprint`], and its `Debug` shows only that. A scenario read
/// back from a trace holds the fingerprint alone, which cannot sign: replaying such a trace
/// takes the key from the scenario file that holds it, checked against the fingerprint.
#[derive(Clone, PartialEq, Eq)]
pub enum LedgerKey {
    /// The key itself.
    Secret([u8; 32]),
    /// Only the fingerprint of a key (as read from a serialised scenario).
    Fingerprint(String),
}

/// The BLAKE3 key-derivation context of [`LedgerKey::fingerprint`].
pub const FINGERPRINT_CONTEXT: &str = "memlink 2026 ledger key fingerprint";

impl LedgerKey {
    /// Parses 64 hex digits (surrounding whitespace and `#` comment lines ignored), character
    /// by character. An error says where the text stops being a key, never what it holds: a
    /// key is a secret, and the text may be another file's.
    pub fn parse(text: &str) -> Result<LedgerKey, String> {
        let digits: Vec<char> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .flat_map(|l| l.chars())
            .filter(|c| !c.is_whitespace())
            .collect();
        if let Some(at) = digits.iter().position(|c| !c.is_ascii_hexdigit()) {
            return Err(format!("64 hex digits, got a character that is not one at digit {}", at + 1));
        }
        if digits.len() != 64 {
            return Err(format!("64 hex digits, got {} digits", digits.len()));
        }
        let mut key = [0u8; 32];
        for (k, pair) in key.iter_mut().zip(digits.chunks_exact(2)) {
            let hi = pair[0].to_digit(16).expect("checked hex");
            let lo = pair[1].to_digit(16).expect("checked hex");
            *k = (hi * 16 + lo) as u8;
        }
        Ok(LedgerKey::Secret(key))
    }

    /// `fingerprint:` and the first 16 bytes, in hex, of BLAKE3's key derivation under
    /// [`FINGERPRINT_CONTEXT`]: it tells two keys apart and reveals nothing of either.
    pub fn fingerprint(&self) -> String {
        match self {
            LedgerKey::Secret(k) => {
                let d = blake3::derive_key(FINGERPRINT_CONTEXT, k);
                let hex: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
                format!("fingerprint:{hex}")
            }
            LedgerKey::Fingerprint(f) => f.clone(),
        }
    }

    /// The key's bytes, when this is the key and not its fingerprint.
    pub fn secret(&self) -> Option<&[u8; 32]> {
        match self {
            LedgerKey::Secret(k) => Some(k),
            LedgerKey::Fingerprint(_) => None,
        }
    }

    /// Whether two keys are the same key, comparing fingerprints (so a fingerprint read from a
    /// trace matches the key it stands for).
    pub fn same_as(&self, other: &LedgerKey) -> bool {
        self.fingerprint() == other.fingerprint()
    }
}

impl std::fmt::Debug for LedgerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LedgerKey({})", self.fingerprint())
    }
}

impl Serialize for LedgerKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.fingerprint())
    }
}

impl<'de> Deserialize<'de> for LedgerKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if let Some(hex) = text.strip_prefix("fingerprint:") {
            if hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Ok(LedgerKey::Fingerprint(text));
            }
            return Err(serde::de::Error::custom("a key fingerprint: `fingerprint:` and 32 hex digits"));
        }
        LedgerKey::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A tag on an item (the memory module's type): the MAC and the nonce.
pub type Tag = LedgerTag;

/// What verification made of an item.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its provenance may be trusted.
    Trusted,
    /// No tag.
    Unsigned,
    /// A tag that does not verify over the item's claimed record.
    Invalid,
    /// A valid tag whose nonce another item already used (a replayed record).
    Replayed,
}

/// Verification work of a run (the cost the summary reports).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LedgerStats {
    /// Records signed by the memory manager.
    pub signed: u64,
    /// Tags checked at the write gate.
    pub write_checks: u64,
    /// Tags checked when an item enters a prompt.
    pub read_checks: u64,
    /// Items whose provenance was read as unverified.
    pub distrusted: u64,
    /// Items rejected for their tag.
    pub rejected: u64,
}

/// The keys of one run and the nonces already used.
#[derive(Clone, Debug)]
pub struct Ledger {
    /// The configuration.
    pub config: LedgerConfig,
    master: [u8; 32],
    next_nonce: u64,
    used: rustc_hash::FxHashMap<u64, u32>,
    /// Work done.
    pub stats: LedgerStats,
}

fn writer_code(w: Writer) -> (u8, u32) {
    match w {
        Writer::Agent(a) => (1, a),
        Writer::User => (2, 0),
        Writer::External => (3, 0),
    }
}

/// The canonical bytes of an item's claimed record (see the module docs).
fn record(item: &MemoryItem, nonce: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(256);
    let mut field = |x: &[u8]| {
        b.extend_from_slice(&(x.len() as u64).to_le_bytes());
        b.extend_from_slice(x);
    };
    let (w, a) = writer_code(item.writer);
    field(&[w]);
    field(&a.to_le_bytes());
    field(item.source_type.as_bytes());
    field(item.memory_type.as_bytes());
    field(&[u8::from(item.scope == Scope::Team)]);
    let readers: Vec<u8> = item.allowed_agents.iter().flat_map(|r| r.to_le_bytes()).collect();
    field(&readers);
    field(&(item.parents().len() as u64).to_le_bytes());
    for p in item.parents() {
        field(p.as_bytes());
    }
    field(&item.origin_task.to_le_bytes());
    field(&item.origin_round.to_le_bytes());
    let mut text = blake3::Hasher::new();
    text.update(item.intent.as_bytes());
    text.update(b"\0");
    text.update(item.experience.as_bytes());
    field(text.finalize().as_bytes());
    field(&nonce.to_le_bytes());
    b
}

impl Ledger {
    /// A run's ledger, its master key derived from `seed`.
    pub fn new(config: LedgerConfig, seed: u64) -> Ledger {
        // A fingerprint cannot sign: loading refuses a scenario whose key is one
        // (`Scenario::check`), so the seed's key stands in only where no key was given.
        let master = match config.key.as_ref().and_then(LedgerKey::secret) {
            Some(k) => *k,
            None => blake3::derive_key("memlink 2026 ledger master key", &seed.to_le_bytes()),
        };
        Ledger { config, master, next_nonce: 1, used: Default::default(), stats: LedgerStats::default() }
    }

    /// Whether the ledger is on.
    pub fn on(&self) -> bool {
        self.config.verify != VerifyMode::None
    }

    /// The key that signs a record naming `writer`.
    pub fn key_for(&self, writer: Writer) -> [u8; 32] {
        match (self.config.keys, writer) {
            (KeyScheme::PerAgent, Writer::Agent(a)) => {
                let mut ctx = self.master.to_vec();
                ctx.extend_from_slice(&a.to_le_bytes());
                blake3::derive_key("memlink 2026 ledger agent key", &ctx)
            }
            _ => self.master,
        }
    }

    /// A fresh nonce.
    pub fn nonce(&mut self) -> u64 {
        let n = self.next_nonce;
        self.next_nonce += 1;
        n
    }

    /// The tag of `item`'s record under `key` with `nonce` (signing; also what a holder of a
    /// compromised key computes).
    pub fn tag_with(key: &[u8; 32], item: &MemoryItem, nonce: u64) -> Tag {
        Tag { mac: *blake3::keyed_hash(key, &record(item, nonce)).as_bytes(), nonce }
    }

    /// The memory manager signs `item`'s record as the honest pipeline assigned it.
    pub fn sign(&mut self, item: &mut MemoryItem) {
        let nonce = self.nonce();
        let key = self.key_for(item.writer);
        item.tag = Some(Box::new(Ledger::tag_with(&key, item, nonce)));
        self.stats.signed += 1;
    }

    /// Checks `item`'s tag against its claimed record (no bookkeeping of nonces).
    pub fn check(&self, item: &MemoryItem) -> Verdict {
        let Some(tag) = item.tag.as_deref() else { return Verdict::Unsigned };
        if self.config.verify == VerifyMode::PresenceOnly {
            return Verdict::Trusted;
        }
        let want = Ledger::tag_with(&self.key_for(item.writer), item, tag.nonce);
        // Constant-time comparison of the MACs.
        if blake3::Hash::from(want.mac) != blake3::Hash::from(tag.mac) {
            return Verdict::Invalid;
        }
        Verdict::Trusted
    }

    /// The write gate's check of item `id` (not yet stored): the verdict, with its nonce
    /// consumed when it verifies (a second item with the same valid nonce is a replay).
    pub fn check_write(&mut self, item: &MemoryItem, id: u32) -> Verdict {
        self.stats.write_checks += 1;
        let v = self.check(item);
        if v != Verdict::Trusted || self.config.verify == VerifyMode::PresenceOnly {
            return v;
        }
        let nonce = item.tag.as_ref().map_or(0, |t| t.nonce);
        match self.used.get(&nonce) {
            Some(other) if *other != id => Verdict::Replayed,
            _ => {
                self.used.insert(nonce, id);
                Verdict::Trusted
            }
        }
    }

    /// A read's check of a stored item (counted; a stored item's metadata does not change
    /// after its write in this model, so this repeats the write's verdict at a MAC's cost).
    pub fn check_read(&mut self, item: &MemoryItem) -> Verdict {
        self.stats.read_checks += 1;
        self.check(item)
    }
}

/// The reason a direct write the ledger refuses carries in its commit verdict (the write gate's
/// decision, `Reject`), as the reference's `memory_manager` reports it.
pub const REJECT_REASON: &str = "ledger_signature_invalid";

/// What the ledger made of a direct write, one that bypassed the memory manager.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Admission {
    /// Its tag did not verify: its provenance claims were set aside ([`distrust`]).
    pub distrusted: bool,
    /// And the ledger refuses unverified writes ([`VerifyMode::VerifyRejectUnsigned`]): it is
    /// not stored as active.
    pub rejected: bool,
}

impl Ledger {
    /// Checks a direct write (item `id`, not yet stored) before the gates trust its provenance:
    /// a tag that does not verify sets its claims aside ([`distrust`]) and, under
    /// [`VerifyMode::VerifyRejectUnsigned`], refuses it. Counts both.
    pub fn admit_direct(&mut self, item: &mut MemoryItem, id: u32) -> Admission {
        if self.check_write(item, id) == Verdict::Trusted {
            return Admission::default();
        }
        self.stats.distrusted += 1;
        let rejected = self.config.verify == VerifyMode::VerifyRejectUnsigned;
        if rejected {
            self.stats.rejected += 1;
        }
        distrust(item);
        Admission { distrusted: true, rejected }
    }
}

/// The view the gates take of an item whose provenance did not verify: its claims about
/// route, lineage, writer standing, outcomes and utility are set aside. The route becomes
/// `unverified_provenance`, taint at least unverified, lineage empty, writer trust neutral,
/// counters zero and Q at most neutral; the text and the readers stay.
pub fn distrust(item: &mut MemoryItem) {
    item.source_type = "unverified_provenance".into();
    item.memory_type = "unverified_memory".into();
    item.taint = item.taint.max(Taint::Unverified);
    item.set_parents(Vec::new());
    item.source_agent_trust = 0.5;
    item.success_count = 0;
    item.failure_count = 0;
    item.utility_q = item.utility_q.min(0.0);
    item.tag = None;
}
