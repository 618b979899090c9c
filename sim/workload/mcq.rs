//! The MMLU-like multiple-choice workload (spec §5.3): a pool of 4-option questions grouped by
//! subject (as the MMLU test file is), streamed by `semantic_mix` so that every anchor is
//! revisited by related tasks whose options share keywords with the anchor's wrong answers.

use super::schedule::{Poisoning, poisoning_set};
use super::words::pseudo_word;
use super::{Task, TaskStream, TaskTruth};
use crate::engine::{SimRng, StreamKind, Streams};
use serde::{Deserialize, Serialize};

/// How the task stream is drawn from the pool.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum StreamBuilder {
    /// Groups of [anchor, 3 random distractors, 2 related tasks], cursor advancing by 66.
    #[default]
    SemanticMix,
    /// Pool order.
    Sequential,
    /// A random permutation of the pool.
    Shuffled,
}

/// MMLU-like workload parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McqConfig {
    /// Tasks in the stream.
    pub tasks: u32,
    /// Questions in the pool.
    pub pool: u32,
    /// Subjects in the pool.
    pub subjects: u32,
    /// Content words per subject.
    pub words_per_subject: u32,
    /// Stream builder.
    pub stream: StreamBuilder,
    /// Which tasks are poisoned.
    pub poisoning: Poisoning,
    /// Options per question (MMLU 4, CommonsenseQA 5).
    pub options: u32,
}

impl Default for McqConfig {
    fn default() -> Self {
        McqConfig {
            tasks: 200,
            pool: 500,
            subjects: 16,
            words_per_subject: 48,
            stream: StreamBuilder::SemanticMix,
            poisoning: Poisoning::AllTasks,
            options: 4,
        }
    }
}

impl McqConfig {
    /// (field, expected) on the first problem.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.tasks == 0 {
            return Err(("tasks".into(), "at least 1 task".into()));
        }
        if !(8..=1_000_000).contains(&self.pool) {
            return Err(("pool".into(), format!("a pool of 8 to 1000000 questions, got {}", self.pool)));
        }
        if self.subjects == 0 || self.subjects > self.pool {
            return Err(("subjects".into(), format!("1..=pool subjects, got {}", self.subjects)));
        }
        if !(2..=5).contains(&self.options) {
            return Err(("options".into(), format!("2..=5 options per question, got {}", self.options)));
        }
        if self.words_per_subject < 2 * self.options + 8 || self.words_per_subject > 100_000 {
            return Err((
                "words_per_subject".into(),
                format!("{} to 100000 words per subject, got {}", 2 * self.options + 8, self.words_per_subject),
            ));
        }
        self.poisoning.validate(self.tasks)
    }
}

const SUBJECTS: [&str; 16] = [
    "high_school_chemistry",
    "college_biology",
    "high_school_physics",
    "world_history",
    "professional_law",
    "econometrics",
    "clinical_knowledge",
    "computer_security",
    "astronomy",
    "philosophy",
    "high_school_geography",
    "nutrition",
    "electrical_engineering",
    "marketing",
    "virology",
    "formal_logic",
];

const STEMS: [&str; 6] = [
    "Which of the following best describes the {0} of {1} under {2}?",
    "Which of the following is a {0} {1} in {2}?",
    "Which of the following explains why {0} changes {1} during {2}?",
    "Which of the following is most closely associated with {0} {1} and {2}?",
    "Which of the following is the primary {0} of {1} in {2} systems?",
    "Which of the following would increase {0} in a {1} {2}?",
];

#[derive(Clone, Debug)]
struct Question {
    id: String,
    subject: usize,
    stem: String,
    cues: Vec<String>,
    options: Vec<String>,
    option_words: Vec<Vec<String>>,
    /// Global ids of the option words (subject × words_per_subject + index), for cheap overlap.
    option_ids: Vec<Vec<u32>>,
    truth: TaskTruth,
}

/// The MMLU-like generator.
pub struct McqWorkload;

impl McqWorkload {
    /// Generates the pool and the stream from the Workload stream of `streams`; `class` names
    /// the benchmark ("mmlu", "csqa") in task ids and classes.
    pub fn generate(cfg: &McqConfig, class: &str, streams: &Streams) -> TaskStream {
        let mut rng = streams.rng(StreamKind::Workload, &[0]);
        let nsub = cfg.subjects as usize;
        let mut vocab: Vec<Vec<String>> = Vec::with_capacity(nsub);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..nsub {
            let mut words = Vec::new();
            while words.len() < cfg.words_per_subject as usize {
                let w = pseudo_word(&mut rng);
                if seen.insert(w.clone()) {
                    words.push(w);
                }
            }
            vocab.push(words);
        }
        // Pool grouped by subject, as the MMLU test file is sorted by subject.
        let per = (cfg.pool as usize).div_ceil(nsub);
        let mut pool: Vec<Question> = Vec::with_capacity(cfg.pool as usize);
        'outer: for (s, words) in vocab.iter().enumerate() {
            for n in 0..per {
                if pool.len() == cfg.pool as usize {
                    break 'outer;
                }
                pool.push(make_question(class, cfg.options as usize, s, n, words, (s * words.len()) as u32, &mut rng));
            }
        }
        let order = build_stream(cfg, &pool, &mut rng);
        // Semantic-mix anchors open each group of six; a scheduled `semantic_anchor` placement
        // poisons those.
        let anchors: Vec<bool> =
            (0..order.len()).map(|i| cfg.stream == StreamBuilder::SemanticMix && i % 6 == 0).collect();
        let poisoning = poisoning_set(&cfg.poisoning, order.len(), &anchors, streams);
        let mut tasks = Vec::with_capacity(order.len());
        let mut truths = Vec::with_capacity(order.len());
        for (i, &q) in order.iter().enumerate() {
            let q = &pool[q];
            let opts: Vec<String> =
                q.options.iter().enumerate().map(|(k, o)| format!("{}) {o}", super::letter(k as u8))).collect();
            let (poison, metric) = poisoning[i];
            tasks.push(Task {
                index: i as u32,
                id: q.id.clone(),
                class: class.into(),
                question: q.stem.clone(),
                options: q.options.clone(),
                cues: q.cues.iter().chain(q.option_words.iter().flatten()).cloned().collect(),
                query: format!("{} Options: {}", q.stem, opts.join("; ")),
                poisoning: poison,
                metric,
                open_ended: false,
            });
            truths.push(q.truth.clone());
        }
        TaskStream::new(tasks, truths, vocab.into_iter().flatten().collect(), Vec::new())
    }
}

fn make_question(
    class: &str,
    k_options: usize,
    subject: usize,
    n: usize,
    words: &[String],
    base: u32,
    rng: &mut SimRng,
) -> Question {
    let picks = rng.sample_indices(words.len(), 2 * k_options + 4);
    let w = |i: usize| words[picks[i]].clone();
    let option_words: Vec<Vec<String>> = (0..k_options).map(|k| vec![w(2 * k), w(2 * k + 1)]).collect();
    let option_ids: Vec<Vec<u32>> =
        (0..k_options).map(|k| vec![base + picks[2 * k] as u32, base + picks[2 * k + 1] as u32]).collect();
    let cues: Vec<String> = (2 * k_options..2 * k_options + 4).map(w).collect();
    let stem = STEMS[rng.index(STEMS.len())]
        .replace("{0}", &cues[0])
        .replace("{1}", &cues[1])
        .replace("{2}", &format!("{} {}", cues[2], cues[3]));
    let options: Vec<String> = option_words.iter().map(|ws| ws.join(" ")).collect();
    let gold = rng.below(k_options as u64) as u8;
    let difficulty = rng.uniform();
    let mut plausibility: Vec<f64> =
        (0..k_options).map(|k| if k == gold as usize { 0.0 } else { rng.uniform() }).collect();
    // One wrong option is the natural trap a strong solver might accept.
    let trap = (0..k_options)
        .filter(|k| *k != gold as usize)
        .max_by(|a, b| plausibility[*a].total_cmp(&plausibility[*b]))
        .unwrap_or(0);
    plausibility[trap] += 1.0;
    let name = SUBJECTS[subject % SUBJECTS.len()];
    let suffix = if subject >= SUBJECTS.len() { format!("_{}", subject / SUBJECTS.len()) } else { String::new() };
    Question {
        id: format!("{class}_{name}{suffix}_test_{n}"),
        subject,
        stem,
        cues,
        options,
        option_words,
        option_ids,
        truth: TaskTruth { gold, difficulty, plausibility, risk: None },
    }
}

fn wrong_ids(q: &Question) -> Vec<u32> {
    q.option_ids
        .iter()
        .enumerate()
        .filter(|(k, _)| *k != q.truth.gold as usize)
        .flat_map(|(_, w)| w.iter().copied())
        .collect()
}

fn build_stream(cfg: &McqConfig, pool: &[Question], rng: &mut SimRng) -> Vec<usize> {
    let n = pool.len();
    let t = cfg.tasks as usize;
    match cfg.stream {
        StreamBuilder::Sequential => (0..t).map(|i| i % n).collect(),
        StreamBuilder::Shuffled => {
            let mut out = Vec::with_capacity(t);
            while out.len() < t {
                let mut p: Vec<usize> = (0..n).collect();
                rng.shuffle(&mut p);
                out.extend(p);
            }
            out.truncate(t);
            out
        }
        StreamBuilder::SemanticMix => {
            let mut out = Vec::with_capacity(t);
            let mut cursor = 0usize;
            while out.len() < t {
                let anchor = cursor % n;
                out.push(anchor);
                for _ in 0..3 {
                    out.push(rng.index(n));
                }
                let wrong = wrong_ids(&pool[anchor]);
                let lo = anchor.saturating_sub(200);
                let hi = (anchor + 200).min(n - 1);
                let mut related: Vec<(usize, usize)> = (lo..=hi)
                    .filter(|&j| j != anchor)
                    .map(|j| {
                        let shared = pool[j].option_ids.iter().flatten().filter(|w| wrong.contains(w)).count();
                        let same_subject = usize::from(pool[j].subject == pool[anchor].subject);
                        (j, shared * 2 + same_subject)
                    })
                    .collect();
                // Highest shared-keyword score first; ties by distance, then index.
                related.sort_by(|a, b| {
                    b.1.cmp(&a.1).then(a.0.abs_diff(anchor).cmp(&b.0.abs_diff(anchor))).then(a.0.cmp(&b.0))
                });
                out.extend(related.iter().take(2).map(|r| r.0));
                cursor += 66;
            }
            out.truncate(t);
            out
        }
    }
}
