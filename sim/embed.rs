//! Synthetic embeddings whose cosine distribution resembles a real embedder's.
//!
//! **The similarity model.** A text's vector mixes a global direction shared by every text
//! (weight² `floor`), a bag of its words (weight² 1 − floor − jitter) and a per-text jitter
//! (weight² `jitter`). Each word is a fixed random direction derived from the word itself;
//! *content* words (the workload's entities and cue words) weigh 1 in the bag, template words
//! ("preference", "rule", "memory", …) weigh `boilerplate`, as a real embedder largely ignores
//! boilerplate shared by every memory. Three kinds of pairs follow, measured by
//! `cargo run --release --example similarity` on the paper's MMLU and AppWorld workloads:
//!
//! - *unrelated* (no content word in common): cosine ≈ floor, 0.19 ± 0.09 at 64 dimensions —
//!   the distribution the reference's MemRL backend normalises by (z_sim = (sim − 0.18568) /
//!   0.09408, `memory_service.py`'s corpus statistics of its embedder);
//! - *siblings* (tasks sharing some content words: the same subject or app): higher, in
//!   proportion to the words they share;
//! - *related* (a memory about the same task as the query): highest. The gap between related
//!   and unrelated pairs is the model's **contrast**; published measurements of production
//!   sentence embedders put the mean related-minus-unrelated gap at 0.44–0.75 (five models,
//!   all-MiniLM-L6-v2 to mxbai-embed-large; clawrxiv 2604.00998, "The Concentration Paradox"),
//!   with random-pair floors from 0.05 (all-MiniLM-L6-v2) to 0.47 (bge-small-en-v1.5;
//!   clawrxiv 2604.01087). `boilerplate` sets the contrast: the default 0.05 gives a gap of
//!   about 0.45 on both workloads (the low end of that range), the earlier 0.3 about 0.3.
//!
//! The scenario's `similarity` field sets all three; the reference does not record its
//! embedder's contrast, so it is a parameter (see reports/fidelity.md for what it moves).

use crate::engine::mix64;
use crate::text::{Lexicon, Sym};

use serde::{Deserialize, Serialize};

/// The synthetic embedder's similarity model (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimilarityModel {
    /// Weight² of the direction every text shares: the cosine of unrelated texts.
    pub floor: f64,
    /// Weight² of the per-text jitter.
    pub jitter: f64,
    /// Weight of a template (non-content) word in the bag; lower is sharper contrast.
    pub boilerplate: f64,
}

impl Default for SimilarityModel {
    fn default() -> Self {
        SimilarityModel { floor: 0.19, jitter: 0.09, boilerplate: 0.05 }
    }
}

impl SimilarityModel {
    /// The model memlink used before its contrast was set from published figures.
    pub fn before_fidelity() -> Self {
        SimilarityModel { boilerplate: 0.3, ..SimilarityModel::default() }
    }

    /// Checks the weights; returns (field, what was expected).
    pub fn validate(&self) -> Result<(), (String, String)> {
        for (name, v) in [("floor", self.floor), ("jitter", self.jitter), ("boilerplate", self.boilerplate)] {
            if !(0.0..=1.0).contains(&v) {
                return Err((name.into(), format!("a weight in [0, 1], got {v}")));
            }
        }
        if self.floor + self.jitter >= 1.0 {
            return Err((
                "floor".into(),
                format!("floor + jitter below 1 (the bag of words needs weight), got {}", self.floor + self.jitter),
            ));
        }
        Ok(())
    }
}

/// The run's embedder: word vectors are cached by symbol but derived from the word's text, so
/// they do not depend on interning order.
///
/// Its caches sit behind a lock so that agents' calls planned on several threads share them;
/// every cached value is a function of its key alone, so which thread fills an entry first
/// changes nothing.
#[derive(Debug)]
pub struct Embedder {
    dim: usize,
    seed: u64,
    model: SimilarityModel,
    global: Vec<f32>,
    cache: std::sync::Mutex<EmbedCache>,
    content: Vec<bool>,
}

/// What an [`Embedder`] keeps between calls.
#[derive(Clone, Debug, Default)]
struct EmbedCache {
    /// Word vectors by symbol, `dim` floats each, in one table so a text's words are summed
    /// without chasing a pointer per word; `has_word[sym]` says whether the row is filled.
    words: Vec<f32>,
    has_word: Vec<bool>,
    /// Normalised bags of words by token list. The bag depends on the tokens and the content
    /// marks alone (a new mark empties the cache), and many texts share a token list: a
    /// handoff summary's header differs between receivers only in agent numbers, which form no
    /// token. A paper MMLU run embeds ~1,900 texts with ~570 distinct token lists.
    bags: rustc_hash::FxHashMap<Box<[Sym]>, Box<[f32]>>,
}

impl Clone for Embedder {
    fn clone(&self) -> Self {
        Embedder {
            dim: self.dim,
            seed: self.seed,
            model: self.model.clone(),
            global: self.global.clone(),
            cache: std::sync::Mutex::new(self.lock().clone()),
            content: self.content.clone(),
        }
    }
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
    // Each `mix64` step gives four components, in order (written in place rather than pushed,
    // so the conversion vectorises; the same arithmetic, so the same bits).
    let mut v = vec![0f32; dim];
    let mut state = key;
    for chunk in v.chunks_mut(4) {
        state = mix64(state);
        for (k, x) in chunk.iter_mut().enumerate() {
            *x = ((state >> (16 * k)) & 0xFFFF) as f32 / 32767.5 - 1.0;
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
    /// An embedder of dimension `dim` for the run seeded `seed`, with the default model.
    pub fn new(dim: usize, seed: u64) -> Self {
        Self::with_model(dim, seed, SimilarityModel::default())
    }

    /// An embedder with similarity model `model`.
    pub fn with_model(dim: usize, seed: u64, model: SimilarityModel) -> Self {
        Embedder {
            dim,
            seed,
            model,
            global: unit_from_key(dim, mix64(seed ^ 0x0061_06a1)),
            cache: std::sync::Mutex::new(EmbedCache::default()),
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
            self.cache.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).bags.clear();
        }
        self.content[i] = true;
    }

    /// Whether `sym` is a content word.
    pub fn is_content(&self, sym: Sym) -> bool {
        self.content.get(sym as usize).copied().unwrap_or(false)
    }

    /// The cache; a panic elsewhere cannot leave it inconsistent (entries are written whole),
    /// so a poisoned lock is taken as it is.
    fn lock(&self) -> std::sync::MutexGuard<'_, EmbedCache> {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fills the vector row of every symbol in `tokens` not seen before.
    fn fill_words(&self, cache: &mut EmbedCache, tokens: &[Sym], lex: &Lexicon) {
        for &sym in tokens {
            let i = sym as usize;
            if cache.has_word.len() <= i {
                cache.has_word.resize(i + 1, false);
                cache.words.resize((i + 1) * self.dim, 0.0);
            }
            if !cache.has_word[i] {
                let key = mix64(self.seed ^ fnv(lex.word(sym).as_bytes()));
                cache.words[i * self.dim..(i + 1) * self.dim].copy_from_slice(&unit_from_key(self.dim, key));
                cache.has_word[i] = true;
            }
        }
    }

    /// The embedding of a text with overlap tokens `tokens`; `jitter_key` identifies the text.
    /// Content words weigh 1 in the bag, boilerplate words the model's `boilerplate`, so a text
    /// with no content words still points somewhere of its own rather than at the global mean.
    pub fn embed(&self, tokens: &[Sym], jitter_key: u64, lex: &Lexicon) -> Vec<f32> {
        let dim = self.dim;
        let noise = unit_from_key(dim, mix64(self.seed ^ jitter_key ^ 0x9e37));
        let m = &self.model;
        let (g, c, n) =
            (m.floor.sqrt() as f32, (1.0 - m.floor - m.jitter).max(0.0).sqrt() as f32, m.jitter.sqrt() as f32);
        let mut cache = self.lock();
        if !cache.bags.contains_key(tokens) {
            self.fill_words(&mut cache, tokens, lex);
            let mut bag = vec![0f32; dim];
            for &t in tokens {
                let weight = if self.is_content(t) { 1.0 } else { self.model.boilerplate as f32 };
                let w = &cache.words[t as usize * dim..(t as usize + 1) * dim];
                bag.iter_mut().zip(w).for_each(|(b, x)| *b += weight * x);
            }
            normalise(&mut bag);
            cache.bags.insert(tokens.into(), bag.into_boxed_slice());
        }
        let bag = &cache.bags[tokens];
        let mut v: Vec<f32> = (0..dim).map(|i| g * self.global[i] + c * bag[i] + n * noise[i]).collect();
        drop(cache);
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

    /// The unit vector of a key, component by component as first written (pushed four per
    /// `mix64` step), for every dimension and a few keys: the same bits.
    #[test]
    fn unit_vectors_keep_their_bits() {
        fn pushed(dim: usize, key: u64) -> Vec<f32> {
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
        for dim in [1, 3, 4, 5, 63, 64, 65, 384] {
            for key in [0u64, 1, 0x9e37, u64::MAX, 0x1234_5678_9abc_def0] {
                let (a, b) = (unit_from_key(dim, key), pushed(dim, key));
                assert_eq!(
                    a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    b.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                );
            }
        }
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
