//! Tokens: the run's interner and the sorted, deduplicated overlap tokens of spec §2.2.

use super::Fragment;
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// An interned token.
pub type Sym = u32;

/// Token interner of one run (insertion order is deterministic within a run).
#[derive(Debug, Default, Clone)]
pub struct Lexicon {
    ids: HashMap<Box<str>, Sym>,
    words: Vec<Box<str>>,
}

impl Lexicon {
    /// An empty lexicon.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `word`, interning it if new.
    pub fn intern(&mut self, word: &str) -> Sym {
        if let Some(id) = self.ids.get(word) {
            return *id;
        }
        let id = self.words.len() as Sym;
        self.words.push(word.into());
        self.ids.insert(word.into(), id);
        id
    }

    /// The id of `word` if known.
    pub fn get(&self, word: &str) -> Option<Sym> {
        self.ids.get(word).copied()
    }

    /// The word of `id`.
    pub fn word(&self, id: Sym) -> &str {
        &self.words[id as usize]
    }

    /// Number of interned words.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// True when nothing is interned.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

/// Token-overlap stopwords of spec §2.2.
pub const STOPWORDS: [&str; 19] = [
    "the", "and", "for", "that", "with", "this", "from", "should", "would", "which", "question", "answer", "option",
    "task", "current", "future", "similar", "memory", "agent",
];

/// The overlap tokens of a memory text: either already merged, or the fragments they come from,
/// merged on first use (most handoff summaries are never scored, so most never need them).
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    merged: std::sync::OnceLock<Vec<Sym>>,
    sources: Option<Arc<[Arc<Fragment>]>>,
}

impl Tokens {
    /// Tokens already merged.
    pub fn from_vec(v: Vec<Sym>) -> Self {
        Tokens { merged: std::sync::OnceLock::from(v), sources: None }
    }

    pub(super) fn lazy(sources: Arc<[Arc<Fragment>]>) -> Self {
        Tokens { merged: std::sync::OnceLock::new(), sources: Some(sources) }
    }

    /// The sorted, deduplicated tokens.
    pub fn get(&self) -> &[Sym] {
        self.merged.get_or_init(|| {
            // Each fragment's tokens are sorted and deduplicated already: merge them pairwise
            // (a handoff has at most eight fragments) instead of sorting their concatenation.
            let frags = self.sources.as_deref().unwrap_or(&[]);
            let cap = frags.iter().map(|f| f.tokens.len()).sum();
            let (mut v, mut next): (Vec<Sym>, Vec<Sym>) = (Vec::with_capacity(cap), Vec::with_capacity(cap));
            for f in frags {
                debug_assert!(f.tokens.windows(2).all(|w| w[0] < w[1]), "fragment tokens sorted and distinct");
                merge_distinct(&v, &f.tokens, &mut next);
                std::mem::swap(&mut v, &mut next);
            }
            v
        })
    }
}

/// The union of two sorted, duplicate-free token lists, sorted and duplicate-free: the tokens
/// of two texts joined by a separator (a character that is no word character).
pub fn union_of(a: &[Sym], b: &[Sym]) -> Vec<Sym> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    merge_distinct(a, b, &mut out);
    out
}

/// The union of two sorted, duplicate-free lists, sorted and duplicate-free, into `out`.
pub(super) fn merge_distinct(a: &[Sym], b: &[Sym], out: &mut Vec<Sym>) {
    out.clear();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
}

impl PartialEq for Tokens {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl From<Vec<Sym>> for Tokens {
    fn from(v: Vec<Sym>) -> Self {
        Tokens::from_vec(v)
    }
}

/// Whether `w` is one of [`STOPWORDS`]: the same answer as `STOPWORDS.contains(&w)`, found by
/// length first (most words match no stopword's length and first byte), since every token of
/// every text is checked.
#[inline]
pub fn is_stopword(w: &str) -> bool {
    match w.len() {
        3 => matches!(w, "the" | "and" | "for"),
        4 => matches!(w, "that" | "with" | "this" | "from" | "task"),
        5 => matches!(w, "which" | "agent" | "would"),
        6 => matches!(w, "should" | "answer" | "option" | "future" | "memory"),
        7 => matches!(w, "current" | "similar"),
        8 => w == "question",
        _ => false,
    }
}

/// Sorted, deduplicated overlap tokens of an already lowercased text: maximal runs matching
/// `[a-z][a-z0-9_]{2,}` (a hand-written scanner equivalent to that regex), minus stopwords.
pub fn tokens_of(lower: &str, lex: &mut Lexicon) -> Vec<Sym> {
    scan_tokens(lower, |w| Some(lex.intern(w))).expect("interning always finds a symbol")
}

/// [`tokens_of`] without interning: `None` if a word is not in `lex` yet. A call planned on a
/// worker thread tokenises this way, so that new words are interned in agent order (a word's
/// symbol is its place in that order, and token lists are sorted by symbol).
pub fn known_tokens_of(lower: &str, lex: &Lexicon) -> Option<Vec<Sym>> {
    scan_tokens(lower, |w| lex.get(w))
}

thread_local! {
    /// The symbols of the text being tokenised, before sorting and deduplication: one buffer
    /// per thread, so that a token list is allocated once, at its final length.
    static SCRATCH: std::cell::RefCell<Vec<Sym>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The sorted, deduplicated symbols of `lower`'s words (three or more characters, not stop
/// words), each looked up by `sym`; `None` as soon as `sym` finds none.
pub(super) fn scan_tokens(lower: &str, mut sym: impl FnMut(&str) -> Option<Sym>) -> Option<Vec<Sym>> {
    SCRATCH.with_borrow_mut(|out| {
        out.clear();
        let b = lower.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i].is_ascii_lowercase() {
                let start = i;
                i += 1;
                while i < b.len() && (b[i].is_ascii_lowercase() || b[i].is_ascii_digit() || b[i] == b'_') {
                    i += 1;
                }
                if i - start >= 3 {
                    let w = &lower[start..i];
                    if !is_stopword(w) {
                        out.push(sym(w)?);
                    }
                }
            } else {
                i += 1;
            }
        }
        out.sort_unstable();
        out.dedup();
        Some(out.to_vec())
    })
}

/// |A ∩ B| of two sorted token lists.
pub fn intersection_size(a: &[Sym], b: &[Sym]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// Token overlap of spec §2.2: |T(q) ∩ T(m)| / max(1, min(|T(q)|, |T(m)|)).
pub fn token_overlap(query: &[Sym], memory: &[Sym]) -> f64 {
    let inter = intersection_size(query, memory) as f64;
    inter / (query.len().min(memory.len()).max(1)) as f64
}
