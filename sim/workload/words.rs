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
        if w.len() >= 4 && !has_blocked(w.as_bytes()) {
            return w;
        }
    }
}

/// Whether `w` contains any blocked fragment: `str::contains` for each, by byte windows (the
/// words are a dozen bytes long, too short for a substring searcher's setup to pay).
fn has_blocked(w: &[u8]) -> bool {
    BLOCKED.iter().any(|b| {
        let b = b.as_bytes();
        w.windows(b.len()).any(|x| x[0] == b[0] && x == b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window check says what `str::contains` says, on every two-syllable string the
    /// generator can draw, a spread of the three-syllable ones and on the blocked fragments themselves.
    #[test]
    fn the_window_check_is_str_contains() {
        let syllables: Vec<String> = ONSETS
            .iter()
            .flat_map(|o| VOWELS.iter().flat_map(move |v| CODAS.iter().map(move |c| format!("{o}{v}{c}"))))
            .collect();
        let by_contains = |w: &str| BLOCKED.iter().any(|b| w.contains(b));
        let mut blocked = 0;
        for a in &syllables {
            for b in &syllables {
                let w = format!("{a}{b}");
                assert_eq!(has_blocked(w.as_bytes()), by_contains(&w), "{w}");
                blocked += usize::from(by_contains(&w));
            }
            // Three syllables: every first, a spread of the others.
            for b in syllables.iter().step_by(17) {
                for c in syllables.iter().step_by(19) {
                    let w = format!("{a}{b}{c}");
                    assert_eq!(has_blocked(w.as_bytes()), by_contains(&w), "{w}");
                }
            }
        }
        assert!(blocked > 0, "some two-syllable words are blocked");
        for b in BLOCKED {
            assert!(has_blocked(format!("x{b}y").as_bytes()));
        }
    }
}
