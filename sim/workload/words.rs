//! Pronounceable pseudo-words for synthetic subjects, free of every pattern the risk signals
//! scan for (so a word never fires a signal by accident).

use crate::engine::SimRng;

const ONSETS: [&str; 16] = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "v", "z", "br", "gl", "tr"];
const VOWELS: [&str; 6] = ["a", "e", "i", "o", "u", "y"];
const CODAS: [&str; 8] = ["", "n", "r", "l", "x", "m", "s", "th"];

const BLOCKED: [&str; 24] = [
    "token",
    "secret",
    "passw",
    "credential",
    "apikey",
    "option",
    "answer",
    "trigger",
    "suffix",
    "verif",
    "valid",
    "accept",
    "success",
    "correct",
    "reuse",
    "priorit",
    "tool",
    "extern",
    "environ",
    "bridge",
    "poison",
    "map",
    "when",
    "the",
];

/// A pseudo-word of 2–3 syllables.
pub fn pseudo_word(rng: &mut SimRng) -> String {
    loop {
        let syll = 2 + rng.index(2);
        let mut w = String::new();
        for _ in 0..syll {
            w.push_str(ONSETS[rng.index(ONSETS.len())]);
            w.push_str(VOWELS[rng.index(VOWELS.len())]);
            w.push_str(CODAS[rng.index(CODAS.len())]);
        }
        if w.len() >= 4 && !BLOCKED.iter().any(|b| w.contains(b)) {
            return w;
        }
    }
}
