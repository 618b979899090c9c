//! Synthetic embeddings whose cosine distribution resembles a real embedder's.
//!
//! A text's vector mixes a global direction shared by every text (weight² 0.19, which puts
//! unrelated texts at cosine ≈ 0.19), a bag of its *content* words (each word a fixed random
//! direction derived from the word itself, weight² 0.72) and a small per-text jitter
//! (weight² 0.09). Unrelated texts therefore score 0.19 ± ~0.09 in 64 dimensions, texts about
//! related tasks (sharing some content words) higher, and paraphrases of the same task highest.
//! Template words ("preference", "rule", …) are not content, as a real embedder largely
//! ignores boilerplate shared by every memory.

use crate::engine::mix64;
use crate::text::{Lexicon, Sym};

const GLOBAL_W2: f64 = 0.19;
const CONTENT_W2: f64 = 0.72;
const NOISE_W2: f64 = 0.09;
/// Weight of a non-content (template) word in the bag of words.
pub const BOILERPLATE_WEIGHT: f32 = 0.3;

/// The run's embedder: word vectors are cached by symbol but derived from the word's text, so
/// they do not depend on interning order.
#[derive(Clone, Debug)]
pub struct Embedder {
    dim: usize,
    seed: u64,
    global: Vec<f32>,
    /// Word vectors by symbol, `dim` floats each, in one table so a text's words are summed
    /// without chasing a pointer per word; `has_word[sym]` says whether the row is filled.
    words: Vec<f32>,
    has_word: Vec<bool>,
    /// Normalised bags of words by token list. The bag depends on the tokens and the content
    /// marks alone (a new mark empties the cache), and many texts share a token list: a
    /// handoff summary's header differs between receivers only in agent numbers, which form no
    /// token. A paper MMLU run embeds ~1,900 texts with ~570 distinct token lists.
    bags: rustc_hash::FxHashMap<Box<[Sym]>, Box<[f32]>>,
    content: Vec<bool>,
}

fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A unit vector of `dim` components drawn from `key` (uniform components, then normalised).
fn unit_from_key(dim: usize, key: u64) -> Vec<f32> {
    let mut v = Vec::with_capacity(dim);
    let mut state = key;
    while v.len() < dim {
        state = mix64(state);
        for k in 0..4 {
            if v.len() < dim {
                let bits = ((state >> (16 * k)) & 0xFFFF) as f32;
                v.push(bits / 32767.5 - 1.0);
            }
        }
    }
    normalise(&mut v);
    v
}

fn normalise(v: &mut [f32]) {
    let n = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x = (f64::from(*x) / n) as f32);
    }
}

/// Cosine of two unit vectors: eight interleaved accumulators summed in a fixed order, so the
/// compiler can vectorise it and the result is still the same on every run.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let mut acc = [0f32; 8];
    let (xs, ys) = (a.chunks_exact(8), b.chunks_exact(8));
    let (xt, yt) = (xs.remainder(), ys.remainder());
    for (x, y) in xs.zip(ys) {
        let (x, y): (&[f32; 8], &[f32; 8]) = (x.try_into().expect("chunk of 8"), y.try_into().expect("chunk of 8"));
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut tail = 0f32;
    for (x, y) in xt.iter().zip(yt) {
        tail += x * y;
    }
    let s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    f64::from(s + tail)
}

impl Embedder {
    /// An embedder of dimension `dim` for the run seeded `seed`.
    pub fn new(dim: usize, seed: u64) -> Self {
        Embedder {
            dim,
            seed,
            global: unit_from_key(dim, mix64(seed ^ 0x0061_06a1)),
            words: Vec::new(),
            has_word: Vec::new(),
            bags: rustc_hash::FxHashMap::default(),
            content: Vec::new(),
        }
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Marks `sym` as a content word.
    pub fn mark_content(&mut self, sym: Sym) {
        let i = sym as usize;
        if self.content.len() <= i {
            self.content.resize(i + 1, false);
        }
        if !self.content[i] {
            // A bag weighs content words differently: any cached bag may now be stale.
            self.bags.clear();
        }
        self.content[i] = true;
    }

    /// Whether `sym` is a content word.
    pub fn is_content(&self, sym: Sym) -> bool {
        self.content.get(sym as usize).copied().unwrap_or(false)
    }

    /// Fills the vector row of every symbol in `tokens` not seen before.
    fn fill_words(&mut self, tokens: &[Sym], lex: &Lexicon) {
        for &sym in tokens {
            let i = sym as usize;
            if self.has_word.len() <= i {
                self.has_word.resize(i + 1, false);
                self.words.resize((i + 1) * self.dim, 0.0);
            }
            if !self.has_word[i] {
                let key = mix64(self.seed ^ fnv(lex.word(sym).as_bytes()));
                self.words[i * self.dim..(i + 1) * self.dim].copy_from_slice(&unit_from_key(self.dim, key));
                self.has_word[i] = true;
            }
        }
    }

    /// The embedding of a text with overlap tokens `tokens`; `jitter_key` identifies the text.
    /// Content words weigh 1 in the bag, boilerplate words [`BOILERPLATE_WEIGHT`], so a text
    /// with no content words still points somewhere of its own rather than at the global mean.
    pub fn embed(&mut self, tokens: &[Sym], jitter_key: u64, lex: &Lexicon) -> Vec<f32> {
        let dim = self.dim;
        if !self.bags.contains_key(tokens) {
            self.fill_words(tokens, lex);
            let mut bag = vec![0f32; dim];
            for &t in tokens {
                let weight = if self.is_content(t) { 1.0 } else { BOILERPLATE_WEIGHT };
                let w = &self.words[t as usize * dim..(t as usize + 1) * dim];
                bag.iter_mut().zip(w).for_each(|(b, x)| *b += weight * x);
            }
            normalise(&mut bag);
            self.bags.insert(tokens.into(), bag.into_boxed_slice());
        }
        let bag = &self.bags[tokens];
        let noise = unit_from_key(dim, mix64(self.seed ^ jitter_key ^ 0x9e37));
        let (g, c, n) = (GLOBAL_W2.sqrt() as f32, CONTENT_W2.sqrt() as f32, NOISE_W2.sqrt() as f32);
        let mut v: Vec<f32> = (0..dim).map(|i| g * self.global[i] + c * bag[i] + n * noise[i]).collect();
        normalise(&mut v);
        v
    }

    /// Key for the jitter of a text.
    pub fn text_key(text: &str) -> u64 {
        fnv(text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{StreamKind, Streams};
    use crate::text::{Lexicon, tokens_of};
    use crate::workload::{McqConfig, McqWorkload};

    fn stats(xs: &[f64]) -> (f64, f64) {
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
        (m, v.sqrt())
    }

    /// Unrelated questions sit at cosine ≈ 0.19 ± 0.09 as with a real embedder; questions that
    /// share content words sit higher, and a memory about the same question higher still.
    #[test]
    fn cosine_distribution_resembles_a_real_embedder() {
        let streams = Streams::new(9);
        let w = McqWorkload::generate(&McqConfig { tasks: 300, ..McqConfig::default() }, "mmlu", &streams);
        let mut lex = Lexicon::new();
        let mut e = Embedder::new(64, streams.seed_of(StreamKind::Embedding, &[]));
        for v in w.vocabulary() {
            let s = lex.intern(v);
            e.mark_content(s);
        }
        let tasks = w.tasks();
        let embs: Vec<(Vec<Sym>, Vec<f32>)> = tasks
            .iter()
            .map(|t| {
                let tok = tokens_of(&t.query.to_lowercase(), &mut lex);
                let v = e.embed(&tok, Embedder::text_key(&t.query), &lex);
                let content: Vec<Sym> = tok.into_iter().filter(|s| e.is_content(*s)).collect();
                (content, v)
            })
            .collect();
        let (mut unrelated, mut related) = (Vec::new(), Vec::new());
        for i in 0..tasks.len() {
            for j in i + 1..tasks.len() {
                if tasks[i].id == tasks[j].id {
                    continue;
                }
                let shared = crate::text::intersection_size(&embs[i].0, &embs[j].0);
                let c = cosine(&embs[i].1, &embs[j].1);
                if shared == 0 {
                    unrelated.push(c)
                } else if shared >= 3 {
                    related.push(c)
                }
            }
        }
        let (mu, su) = stats(&unrelated);
        let (mr, _) = stats(&related);
        assert!((0.15..=0.23).contains(&mu), "unrelated mean {mu}");
        assert!((0.06..=0.12).contains(&su), "unrelated sd {su}");
        assert!(mr > mu + 0.1, "related {mr} vs unrelated {mu}");
        // A memory that restates a question's content words is closer than any related question.
        let t = &tasks[0];
        let memo = format!("User preference note for cues [{}] toward option A ({})", t.cues.join(", "), t.options[0]);
        let tok = tokens_of(&memo.to_lowercase(), &mut lex);
        let m = e.embed(&tok, Embedder::text_key(&memo), &lex);
        assert!(cosine(&embs[0].1, &m) > mr, "same-task memory {}", cosine(&embs[0].1, &m));
    }
}
