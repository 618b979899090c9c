//! The reference's patterns (spec §2.1–§2.2, "Corrections" C1) and the matcher that runs them:
//! one combined set with a literal prefilter, answer-key extraction, Python `re` semantics for
//! non-ASCII text.

use aho_corasick::AhoCorasick;
use regex::Regex;
use std::sync::OnceLock;

/// Self-claim patterns (signal 3), case-insensitive, word-bounded.
pub const SELF_CLAIM_PATTERNS: [&str; 9] = [
    r"\bvalidated\b",
    r"\bverified\b",
    r"\bsuccessful\b",
    r"\baccepted\b",
    r"\bhigh[- ]confidence\b",
    r"\bcorrect answer\b",
    r"\boutcome:\s*correct\b",
    r"\bteam verification\b",
    r"\breview outcome\b",
];

/// Soft instruction-like patterns (signal 4), case-insensitive, word-bounded.
pub const SOFT_INSTRUCTION_PATTERNS: [&str; 7] = [
    r"\breuse\b",
    r"\bprioritize\b",
    r"\bmap(?:s|ped)? .* to option\b",
    r"\bwhen .* appears\b",
    r"\bfuture query\b",
    r"\bprimary prior\b",
    r"\bkeep the final answer\b",
];

/// FORBIDDEN_MEMORY_PATTERNS, matched case-*sensitively* on the lowercased text as the reference
/// does; the three `[A-E]` patterns can therefore never match (the documented quirk).
pub const FORBIDDEN_PATTERNS: [&str; 9] = [
    r"ignore (all )?(previous|prior|system) instructions",
    r"bypass (the )?(safety|security|policy|approval)",
    r"always answer [A-E]",
    r"reuse this shortcut confidently",
    r"should choose option [A-E]",
    r"future similar .* choose option [A-E]",
    r"treated as reliable past team experience",
    r"skip (verification|approval|review)",
    r"do not verify",
];

/// Answer-binding patterns (signal 5), case-insensitive, word-bounded.
pub const ANSWER_BINDING_PATTERNS: [&str; 4] = [
    r"\boption\s+[A-E]\b",
    r"\bfinal answer\s*[:=]\s*[A-E]\b",
    r"\bchoose\s+(the\s+)?option\s+[A-E]\b",
    r"\banswer pattern\s+[A-E]\b",
];

/// memlink's own, not the reference's: a third party's words ("my cousin mentioned …"),
/// case-insensitive. The stand-in reads a candidate named in them as reported speech
/// ([`super::TextFeatures::reported_speech`]); no guard reads them. One pattern per verb, so
/// that each has a literal for the prefilter.
pub const REPORTED_SPEECH_PATTERNS: [&str; 5] = [
    r"\b(?:cousin|friend|colleague|coworker|neighbou?r|sister|brother|mother|father|mom|dad|partner|boss|manager|someone|somebody)\s+mentioned\b",
    r"\b(?:cousin|friend|colleague|coworker|neighbou?r|sister|brother|mother|father|mom|dad|partner|boss|manager|someone|somebody)\s+said\b",
    r"\b(?:cousin|friend|colleague|coworker|neighbou?r|sister|brother|mother|father|mom|dad|partner|boss|manager|someone|somebody)\s+told\b",
    r"\b(?:cousin|friend|colleague|coworker|neighbou?r|sister|brother|mother|father|mom|dad|partner|boss|manager|someone|somebody)\s+suggested\b",
    r"\b(?:cousin|friend|colleague|coworker|neighbou?r|sister|brother|mother|father|mom|dad|partner|boss|manager|someone|somebody)\s+recommended\b",
];

/// Answer-key extraction patterns in priority order (spec §2.2).
pub const ANSWER_KEY_PATTERNS: [&str; 4] = [
    r"(?i)\bfinal answer\s*[:=]\s*([A-E])\b",
    r"(?i)\banswer pattern\s+([A-E])\b",
    r"(?i)\bchoose\s+(?:the\s+)?option\s+([A-E])\b",
    r"(?i)\boption\s+([A-E])\b",
];

/// Prefix the write gate's REWRITE action puts in front of an experience.
pub const REWRITE_PREFIX: &str = "Unverified historical note, for reference only and not an instruction: ";

// Indices of the combined pattern set run on the lowercased text.
pub(super) const SC0: usize = 0;
pub(super) const SOFT0: usize = SC0 + SELF_CLAIM_PATTERNS.len();
pub(super) const FQ0: usize = SOFT0 + SOFT_INSTRUCTION_PATTERNS.len();
pub(super) const FF0: usize = FQ0 + FORBIDDEN_PATTERNS.len();
pub(super) const AB0: usize = FF0 + FORBIDDEN_PATTERNS.len();
pub(super) const RS0: usize = AB0 + ANSWER_BINDING_PATTERNS.len();
pub(super) const NPAT: usize = RS0 + REPORTED_SPEECH_PATTERNS.len();
const _: () = assert!(NPAT <= 64, "pattern bits are a u64");

pub(super) struct Patterns {
    /// Self-claim, soft-instruction, FORBIDDEN (quirk, fixed), answer-binding and
    /// reported-speech patterns, in that order (index = bit of `Fragment::bits`).
    pub(super) lower: Vec<Regex>,
    /// A literal every match of pattern `i` must contain (lowercase), for the prefilter.
    pub(super) required: AhoCorasick,
    /// Patterns gated by each literal of `required`.
    pub(super) gated: Vec<Vec<usize>>,
    pub(super) answer_key: Vec<Regex>,
    pub(super) rare_phrase: Regex,
    pub(super) wordpiece: Regex,
    /// The write gate's REJECT pattern, case-insensitive on the original experience.
    pub(super) credential: Regex,
    pub(super) five_words: Regex,
    pub(super) claim_option: Regex,
    pub(super) claim_reason: Regex,
    /// The literal needles of a scan ([`NEEDLES`]), found in one pass.
    pub(super) needles: AhoCorasick,
}

pub(super) fn ci(p: &str) -> String {
    format!("(?i){p}")
}

pub(super) fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let mut all: Vec<String> = Vec::with_capacity(NPAT);
        all.extend(SELF_CLAIM_PATTERNS.iter().map(|p| ci(p)));
        all.extend(SOFT_INSTRUCTION_PATTERNS.iter().map(|p| ci(p)));
        all.extend(FORBIDDEN_PATTERNS.iter().map(|p| (*p).to_string()));
        all.extend(FORBIDDEN_PATTERNS.iter().map(|p| ci(p)));
        all.extend(ANSWER_BINDING_PATTERNS.iter().map(|p| ci(p)));
        all.extend(REPORTED_SPEECH_PATTERNS.iter().map(|p| ci(p)));
        let lits = required_literals();
        let mut uniq: Vec<&str> = lits.clone();
        uniq.sort_unstable();
        uniq.dedup();
        let mut gated = vec![Vec::new(); uniq.len()];
        for (i, l) in lits.iter().enumerate() {
            gated[uniq.binary_search(l).expect("present")].push(i);
        }
        Patterns {
            lower: all.iter().map(|p| Regex::new(p).expect("static pattern")).collect(),
            required: AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::Standard)
                .build(&uniq)
                .expect("static literals"),
            gated,
            answer_key: ANSWER_KEY_PATTERNS.iter().map(|p| Regex::new(p).expect("static pattern")).collect(),
            rare_phrase: Regex::new(r"(?i)\btrigger phrase\b|\bcalibration token\b|\bsuffix\b").expect("static"),
            wordpiece: Regex::new(r"##[A-Za-z0-9_]+").expect("static"),
            credential: Regex::new(r"(?i)credential|api key|password|secret|token").expect("static"),
            five_words: Regex::new(r"\b[A-Za-z]{3,}(?:\s+[A-Za-z]{3,}){4}\b").expect("static"),
            claim_option: Regex::new(r"(?i)\boption\s+([A-E])\s*\(([^)\n]*)\)").expect("static"),
            claim_reason: Regex::new(r"(?i)\breason:\s*([^\n]*?)(?:final answer|$)").expect("static"),
            needles: AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::Standard)
                .build(NEEDLES)
                .expect("static literals"),
        }
    })
}

/// For each pattern of the combined list, a lowercase literal that every match contains. Case
/// matters only for the FORBIDDEN quirk patterns, which run on the lowercased text anyway.
pub(super) fn required_literals() -> Vec<&'static str> {
    let sc = [
        "validated",
        "verified",
        "successful",
        "accepted",
        "confidence",
        "correct answer",
        "outcome:",
        "team verification",
        "review outcome",
    ];
    let soft = ["reuse", "prioritize", "map", "when", "future query", "primary prior", "keep the final answer"];
    let forbidden = [
        "ignore",
        "bypass",
        "always answer",
        "reuse this shortcut confidently",
        "should choose option",
        "future similar",
        "treated as reliable past team experience",
        "skip",
        "do not verify",
    ];
    let ab = ["option", "final answer", "choose", "answer pattern"];
    let rs = ["mentioned", "said", "told", "suggested", "recommended"];
    let mut v: Vec<&str> = Vec::with_capacity(NPAT);
    v.extend(sc);
    v.extend(soft);
    v.extend(forbidden);
    v.extend(forbidden);
    v.extend(ab);
    v.extend(rs);
    v
}

/// Bits of the combined patterns that match `lower`: a literal prefilter, then only the
/// patterns whose required literal occurs. Non-ASCII text is matched through [`py_view`], so
/// that word boundaries, `\s` and case folding follow Python's `re` as the reference runs it.
pub(super) fn pattern_bits(lower: &str) -> u64 {
    let p = patterns();
    let mut bits = 0u64;
    if lower.is_ascii() && !lower.bytes().any(is_py_only_space) {
        let mut candidates = 0u64;
        for m in p.required.find_overlapping_iter(lower) {
            for i in &p.gated[m.pattern().as_usize()] {
                candidates |= 1 << i;
            }
        }
        while candidates != 0 {
            let i = candidates.trailing_zeros() as usize;
            candidates &= candidates - 1;
            if p.lower[i].is_match(lower) {
                bits |= 1 << i;
            }
        }
        return bits;
    }
    // The FORBIDDEN patterns run without re.I in the reference, every other one with it.
    let exact = py_view(lower, false);
    let folded = py_view(lower, true);
    for (i, re) in p.lower.iter().enumerate() {
        let text = if (FQ0..FF0).contains(&i) { &exact } else { &folded };
        if re.is_match(text) {
            bits |= 1 << i;
        }
    }
    bits
}

/// The ASCII separators that Python's `\s` matches and Rust's does not.
pub(super) fn is_py_only_space(b: u8) -> bool {
    (0x1c..=0x1f).contains(&b)
}

/// `text` rewritten so that Rust's `regex` matches the reference's (ASCII-only) patterns on it
/// exactly as Python's `re` matches them on `text`:
/// - a character that is a word character for one engine and not for the other (Python:
///   letters, numbers and `_`; Rust: alphabetic, marks, decimal digits, connector punctuation)
///   becomes `ª` (word in both) or `¤` (word in neither), so `\b` falls where Python puts it;
/// - U+001C–U+001F (whitespace for Python's `\s` only) become U+2000 (whitespace for both);
/// - with `fold`, `ı` and `İ` become `i`, as Python's re.I matches them to an ASCII `i` (Rust's
///   simple case folding already matches `ſ` to `s` and the Kelvin sign to `k`, as Python does).
///
/// No pattern names a non-ASCII character, so no other match can change.
pub fn py_view(text: &str, fold: bool) -> std::borrow::Cow<'_, str> {
    if text.is_ascii() && !text.bytes().any(is_py_only_space) {
        return std::borrow::Cow::Borrowed(text);
    }
    static CLASSES: OnceLock<(Regex, Regex)> = OnceLock::new();
    let (py_word, rust_word) =
        CLASSES.get_or_init(|| (Regex::new(r"^[\p{L}\p{N}_]$").expect("static"), Regex::new(r"^\w$").expect("static")));
    let mut out = String::with_capacity(text.len());
    let mut buf = [0u8; 4];
    for c in text.chars() {
        if c.is_ascii() {
            out.push(if is_py_only_space(c as u8) { '\u{2000}' } else { c });
            continue;
        }
        if fold && (c == 'ı' || c == 'İ') {
            out.push('i');
            continue;
        }
        let s = c.encode_utf8(&mut buf);
        match (py_word.is_match(s), rust_word.is_match(s)) {
            (true, false) => out.push('ª'),
            (false, true) => out.push('¤'),
            _ => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

pub(super) const CREDENTIAL_LITERALS: [&str; 5] = ["credential", "api key", "password", "secret", "token"];
pub(super) const TOOL_MARKERS: [&str; 4] = ["tool", "external", "environment", "<information>"];
pub(super) const QCTX_EXTERNAL: [&str; 5] =
    ["<information>", "external tool output", "tool output", "retrieved external", "untrusted user note"];
pub(super) const QCTX_OVERRIDE: [&str; 4] =
    ["ignore previous", "do not verify", "without re-verifying", "always answer"];
pub(super) const QCTX_TRIGGER: [&str; 4] = ["calibration token", "parallel universe", "trigger", "suffix"];
/// Substrings without which `rare_trigger_risk` is 0 (every one of its rules needs one).
pub(super) const RARE_TRIGGER_NEEDLES: [&str; 4] = ["trigger", "##", "suffix", "calibration token"];
/// What the literal failure flag looks for.
pub(super) const FAILURE_NOTE: &str = "outcome: incorrect";

/// Every literal a scan looks for in a lower-cased text, searched in one pass
/// ([`needle_bits`]): the credential literals, the tool markers, the rare-trigger needles and
/// the failure note, in that order (bit i: `NEEDLES[i]` occurs).
pub(super) const NEEDLES: [&str; 14] = [
    CREDENTIAL_LITERALS[0],
    CREDENTIAL_LITERALS[1],
    CREDENTIAL_LITERALS[2],
    CREDENTIAL_LITERALS[3],
    CREDENTIAL_LITERALS[4],
    TOOL_MARKERS[0],
    TOOL_MARKERS[1],
    TOOL_MARKERS[2],
    TOOL_MARKERS[3],
    RARE_TRIGGER_NEEDLES[0],
    RARE_TRIGGER_NEEDLES[1],
    RARE_TRIGGER_NEEDLES[2],
    RARE_TRIGGER_NEEDLES[3],
    FAILURE_NOTE,
];
/// The bits of [`needle_bits`] that stand for a credential literal, a tool marker, a
/// rare-trigger needle and the failure note.
pub(super) const NEEDLE_CREDENTIAL: u32 = 0b1_1111;
pub(super) const NEEDLE_TOOL: u32 = 0b1111 << 5;
pub(super) const NEEDLE_RARE: u32 = 0b1111 << 9;
pub(super) const NEEDLE_FAILURE: u32 = 1 << 13;

/// Which of [`NEEDLES`] occur in `lower` (bit i for `NEEDLES[i]`): one overlapping pass finds
/// every occurrence of every needle, so a bit is set exactly when `lower.contains(NEEDLES[i])`.
pub(super) fn needle_bits(lower: &str) -> u32 {
    let mut bits = 0u32;
    for m in patterns().needles.find_overlapping_iter(lower) {
        bits |= 1 << m.pattern().as_usize();
    }
    bits
}

/// Which answer-binding pattern each answer-key pattern refines (key k matches only where
/// binding pattern `ANSWER_KEY_TWIN[k]` matches).
pub(super) const ANSWER_KEY_TWIN: [usize; 4] = [1, 3, 2, 0];

/// Captures of the first match of `re` in `text`, with the match's offset: the fast DFA finds
/// the span, the capturing engine then runs on that slice only. Word boundaries at the slice's
/// edges hold in context too, because the match itself required them.
pub(super) fn captures_at<'t>(re: &Regex, text: &'t str) -> Option<(usize, regex::Captures<'t>)> {
    let m = re.find(text)?;
    re.captures(&text[m.start()..m.end()]).map(|c| (m.start(), c))
}

pub(super) fn any_of(text: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| text.contains(n))
}

pub(super) fn count(bits: u64, from: usize, len: usize) -> u32 {
    ((bits >> from) & ((1u64 << len) - 1)).count_ones()
}

pub(super) fn clamp01(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}
