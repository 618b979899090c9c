//! The documentation is checked like code: every RON block in the README and `docs/` is loaded
//! by memlink's own `validate`, every relative link resolves, and every input a
//! `cargo run --release -- …` line names exists.
//!
//! A RON block is validated as a file in `scenarios/` unless a `<!-- validate in: DIR -->` line
//! stands right before it (DIR relative to the repository), so that the paths inside it resolve
//! as they would for a reader who saved it there.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every page under docs/, in name order.
fn pages() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    v.sort();
    v.insert(0, root().join("README.md"));
    v
}

/// (line of the fence, folder to validate in, text) of every ```ron block of `text`.
fn ron_blocks(text: &str) -> Vec<(usize, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_start().starts_with("```ron") {
            let dir = i
                .checked_sub(1)
                .and_then(|j| lines[j].trim().strip_prefix("<!-- validate in:"))
                .and_then(|r| r.strip_suffix("-->"))
                .map_or("scenarios".to_string(), |d| d.trim().to_string());
            let start = i + 1;
            let mut j = start;
            while j < lines.len() && !lines[j].trim_start().starts_with("```") {
                j += 1;
            }
            out.push((i + 1, dir, lines[start..j].join("\n") + "\n"));
            i = j;
        }
        i += 1;
    }
    out
}

/// A file that is removed when dropped, panic or not.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn every_ron_block_validates() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.file_stem().unwrap().to_string_lossy().to_string();
        for (line, dir, block) in ron_blocks(&text) {
            let file = root().join(&dir).join(format!(".docs-check-{name}-{line}.ron"));
            std::fs::write(&file, &block).unwrap();
            let scratch = Scratch(file);
            if let Err(e) = memlink::inputs::validate(&scratch.0) {
                problems.push(format!("{}:{line}: {e}", page.display()));
            }
            checked += 1;
        }
    }
    assert!(checked >= 2, "found only {checked} RON blocks");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_broken_ron_block_is_caught() {
    // The check above must be able to fail: a block with a field no scenario has.
    let dir = root().join("scenarios");
    let file = dir.join(".docs-check-broken.ron");
    std::fs::write(&file, "(name: \"x\", agents: 8, arms: [], workload: Mmlu(()), no_such_field: 1)\n").unwrap();
    let scratch = Scratch(file);
    assert!(memlink::inputs::validate(&scratch.0).is_err());
}

#[test]
fn every_relative_link_resolves() {
    let mut problems = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (n, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(at) = rest.find("](") {
                rest = &rest[at + 2..];
                let Some(end) = rest.find(')') else { break };
                let target = &rest[..end];
                rest = &rest[end..];
                if target.starts_with("http") || target.starts_with('#') || target.contains(' ') {
                    continue;
                }
                let file = target.split('#').next().unwrap();
                if !page.parent().unwrap().join(file).exists() {
                    problems.push(format!("{}:{}: link to {target}, which does not exist", page.display(), n + 1));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The options after which a path is an output, not an input.
const OUTPUT_OPTIONS: &[&str] = &["--out", "--record", "--report", "--profile-out"];

#[test]
fn every_input_a_command_line_names_exists() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (n, line) in text.lines().enumerate() {
            let Some(at) = line.find("cargo run --release -- ") else { continue };
            let cmd = &line[at..];
            let cmd = cmd.split(['`', '#', '|']).next().unwrap();
            let words: Vec<&str> = cmd.split_whitespace().collect();
            for (k, w) in words.iter().enumerate() {
                let is_input = ["scenarios/", "models/", "reports/"].iter().any(|p| w.starts_with(p))
                    && !(k > 0 && OUTPUT_OPTIONS.contains(&words[k - 1]));
                if !is_input || w.contains(['<', '*', '{', '…']) {
                    continue;
                }
                checked += 1;
                if !Path::new(&root()).join(w).exists() {
                    problems.push(format!("{}:{}: `{w}` does not exist", page.display(), n + 1));
                }
            }
        }
    }
    assert!(checked >= 10, "found only {checked} inputs");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_stays_short() {
    let len = std::fs::metadata(root().join("README.md")).unwrap().len();
    assert!(len <= 15 * 1024, "README.md is {len} bytes; the limit is 15 KiB (move detail to docs/)");
}

#[test]
fn the_glossary_lists_every_tidy_metric() {
    let text = std::fs::read_to_string(root().join("docs/outputs.md")).unwrap();
    for (name, unit, _, what) in memlink::tidy::METRICS {
        let row = format!("| `{name}` | {unit} | {what} |");
        assert!(text.contains(&row), "docs/outputs.md lacks the row {row}");
    }
}

/// Every field of every attack (at its default, as `memlink scenario` prints it) has a row in
/// the attack-field table of docs/scenario-format.md that names the attack.
#[test]
fn every_attack_field_is_documented() {
    use memlink::attack::AttackConfig as A;
    let text = std::fs::read_to_string(root().join("docs/scenario-format.md")).unwrap();
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| `")).collect();
    let attacks = [
        ("Minja", A::Minja(Default::default())),
        ("Explicit", A::Explicit(Default::default())),
        ("MemoryGraft", A::MemoryGraft(Default::default())),
        ("AgentPoison", A::AgentPoison(Default::default())),
        ("PromptInject", A::PromptInject(Default::default())),
        ("ToolAttack", A::ToolAttack(Default::default())),
    ];
    let mut missing = Vec::new();
    let mut seen = 0;
    for (name, attack) in attacks {
        let ron = ron::to_string(&attack).unwrap();
        let inner = ron.strip_prefix(name).unwrap_or(&ron);
        // Top-level field names: `name:` at nesting depth 2 of `((…))`.
        let mut depth = 0;
        let mut word = String::new();
        let mut fields = Vec::new();
        for c in inner.chars() {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                c if c.is_alphanumeric() || c == '_' => {
                    word.push(c);
                    continue;
                }
                ':' if depth == 2 && !word.is_empty() => fields.push(word.clone()),
                _ => {}
            }
            word.clear();
        }
        fields.push("capabilities".into()); // skipped when empty, documented all the same
        if matches!(name, "PromptInject" | "ToolAttack") {
            fields.pop();
        }
        for f in fields {
            seen += 1;
            let row = rows.iter().any(|r| {
                r.starts_with(&format!("| `{f}` |")) && (r.contains(&format!("`{name}`")) || r.contains("every attack"))
            });
            if !row {
                missing.push(format!("{name}.{f}"));
            }
        }
    }
    assert!(seen >= 20, "found only {seen} attack fields");
    assert!(missing.is_empty(), "attack fields without a row in docs/scenario-format.md: {missing:?}");
}

/// Every registered attack capability is documented in docs/what-ifs.md, by its RON variant.
#[test]
fn every_capability_is_documented() {
    let text = std::fs::read_to_string(root().join("docs/what-ifs.md")).unwrap();
    let missing: Vec<&str> = memlink::attack::capability::REGISTRY
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !text.contains(&format!("`{name}(")))
        .collect();
    assert!(memlink::attack::capability::REGISTRY.len() >= 7);
    assert!(missing.is_empty(), "capabilities without a `Name(…)` entry in docs/what-ifs.md: {missing:?}");
}
