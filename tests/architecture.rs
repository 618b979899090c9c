//! The house rules of the source tree, checked on every `cargo test`:
//!
//! 1. Every module of the library has a floor, and a `crate::` import never climbs: a module
//!    imports only from its own floor or lower ones. The floors are the list below (the crate
//!    documentation in `sim/lib.rs` draws the same list as a table).
//! 2. The module graph has no circle, not even within a floor.
//!
//! A new top-level module (or a new study or evaluator part) must be given a floor here; the
//! test fails until it is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Lowest floor first. `study/x` and `eval/x` are the parts of those folders.
const FLOORS: &[&[&str]] = &[
    &["engine", "error", "allocator", "files", "report", "tidy"],
    &["text", "topology"],
    &["workload", "memory"],
    &["embed", "ledger"],
    &["agent"],
    &["attack", "guard"],
    &["eval/access"],
    &["eval/oracle"],
    &["eval/metrics"],
    &["eval/monitor"],
    &["eval/spread"],
    &["scenario"],
    &["world"],
    &["records"],
    &["run"],
    &["study/explain", "study/calibrate", "study/spread"],
    &["study/predictive"],
    &["study/sweep"],
    &["study/grid", "study/trace"],
    &["study/whatif", "study/check", "study/fidelity"],
    &["inputs"],
    &["testkit"],
];

/// Folders whose parts are modules of their own in this graph.
const SPLIT: &[&str] = &["study", "eval"];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|f| f.contains(&module))
}

/// The module a source file belongs to (`sim/study/grid/table.rs` → `study/grid`), or `None`
/// for the crate root and the folders' own `mod.rs`.
fn module_of(rel: &Path) -> Option<String> {
    let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    match parts.as_slice() {
        [one] if one == "lib" || one == "main" => None,
        [one] => Some(one.clone()),
        [dir, rest @ ..] if SPLIT.contains(&dir.as_str()) => {
            if rest == ["mod"] {
                None
            } else {
                Some(format!("{dir}/{}", rest[0]))
            }
        }
        [dir, ..] if dir == "cli" => None,
        [dir, ..] => Some(dir.clone()),
        [] => None,
    }
}

/// The module a `crate::a::b` path names.
fn target_of(a: &str, b: Option<&str>) -> String {
    match b {
        Some(b) if SPLIT.contains(&a) && b.chars().next().is_some_and(|c| c.is_ascii_lowercase()) => format!("{a}/{b}"),
        _ => a.to_string(),
    }
}

/// Every `crate::` import of code (comment lines skipped), as (source module, target module,
/// where). A file's unit-test module (`#[cfg(test)] mod tests`, last in the file) is not read:
/// tests may drive the whole pipeline (the registries' test-only entries run scenarios), and the
/// floors are about the code that ships.
fn imports() -> Vec<(String, String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sim");
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = p.strip_prefix(&root).unwrap().to_path_buf();
            let Some(module) = module_of(&rel) else { continue };
            let text = std::fs::read_to_string(&p).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let shipped = lines
                .windows(2)
                .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod tests"))
                .unwrap_or(lines.len());
            for (i, line) in lines[..shipped].iter().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                let code = code.split(" // ").next().unwrap_or(code);
                let mut rest = code;
                while let Some(at) = rest.find("crate::") {
                    rest = &rest[at + "crate::".len()..];
                    let a: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    let after = &rest[a.len()..];
                    let b: Option<String> = after
                        .strip_prefix("::")
                        .map(|s| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect());
                    let target = target_of(&a, b.as_deref());
                    if target != module && !module.starts_with(&format!("{target}/")) {
                        out.push((module.clone(), target, format!("sim/{}:{}", rel.display(), i + 1)));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_module_has_a_floor_and_no_import_climbs() {
    let mut problems = Vec::new();
    for (from, to, at) in imports() {
        match (floor_of(&from), floor_of(&to)) {
            (None, _) => problems.push(format!("{at}: module `{from}` has no floor in tests/architecture.rs")),
            (_, None) => problems.push(format!("{at}: module `{to}` has no floor in tests/architecture.rs")),
            (Some(f), Some(t)) if t > f => {
                problems.push(format!("{at}: `{from}` (floor {f}) imports `{to}` (floor {t}), which is above it"))
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_module_graph_has_no_circle() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to, _) in imports() {
        graph.entry(from).or_default().insert(to);
    }
    // Depth-first search with three colours; a grey node met again closes a circle.
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        colour: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        colour.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match colour.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|p| p == m).unwrap();
                    let mut c = path[start..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, g, colour, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        colour.insert(n.to_string(), 2);
        None
    }
    let mut colour = BTreeMap::new();
    for n in graph.keys() {
        if colour.get(n.as_str()).copied().unwrap_or(0) == 0 {
            let mut path = Vec::new();
            if let Some(c) = visit(n, &graph, &mut colour, &mut path) {
                panic!("circle of imports: {}", c.join(" → "));
            }
        }
    }
}

#[test]
fn the_checker_sees_an_import_that_climbs() {
    // The rules above are only as good as the parser: a known upward import must be found.
    assert_eq!(module_of(Path::new("memory/dense.rs")).as_deref(), Some("memory"));
    assert_eq!(module_of(Path::new("study/grid/table.rs")).as_deref(), Some("study/grid"));
    assert_eq!(target_of("study", Some("grid")), "study/grid");
    assert_eq!(target_of("eval", Some("EvalThing")), "eval");
    let (f, t) = (floor_of("memory").unwrap(), floor_of("run").unwrap());
    assert!(t > f, "run sits above memory");
    // And every module the parser finds in the tree today has a floor.
    let found: BTreeSet<String> = imports().into_iter().flat_map(|(a, b, _)| [a, b]).collect();
    assert!(found.len() > 20, "the parser found only {found:?}");
}
