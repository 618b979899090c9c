//! Helpers shared by the integration tests.
#![allow(dead_code)]

use memlink::scenario::{LoadedScenario, load_str};
use std::path::{Path, PathBuf};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A small scenario (MMLU/MINJA, wheel) with the given overrides spliced in as RON fields.
pub fn small(extra: &str, tasks: u32) -> String {
    format!(
        r#"(
    name: "test",
    seed: 7,
    agents: 8,
    attackers: Ids([0, 1, 5]),
    topology: Wheel,
    workload: Mmlu((tasks: {tasks}, pool: 120)),
    attack: Minja(()),
    backbone: "qwen3.5-122b-a10b",
    arms: [(name: "No Defense", guard: NoDefense), (name: "MAPLE-Guard", guard: Maple(()))],
    {extra}
)"#
    )
}

/// Loads scenario text as if it lived in scenarios/.
pub fn load(text: &str) -> LoadedScenario {
    load_str(text, &root().join("scenarios/test.ron")).expect("test scenario loads")
}

/// Loads a bundled scenario.
pub fn bundled(rel: &str) -> LoadedScenario {
    memlink::scenario::load(&root().join(rel)).expect("bundled scenario loads")
}

/// Path of a bundled file.
pub fn path(rel: &str) -> PathBuf {
    root().join(rel)
}

/// Whether a file exists.
pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// A fresh scratch folder `memlink-<kind>-<name>-<pid>` under the temp dir (emptied first).
pub fn scratch(kind: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memlink-{kind}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
