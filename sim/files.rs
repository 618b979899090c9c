//! Files: where the files one input file names may lie (a grid's `base`, a sweep's CSV design,
//! a ledger's `key_file`, a calibration's targets and stored results), how an output is written
//! ([`write_atomic`]) and locked ([`lock_folder`]), and what kind of input a file is
//! ([`detect`], read from its name and top-level fields; `crate::inputs` validates each kind).
//!
//! **The path policy.** A file named inside another file must resolve, symbolic links followed,
//! to a path under one of the allowed roots:
//!
//! - the folder of the file that names it;
//! - the working directory (memlink is run from the project folder, as the README's commands
//!   are, so every bundled file reaches every other), unless that is the file system's root;
//! - any folder given with `--allow-root DIR` (or [`allow_root`]).
//!
//! So a scenario, grid or sweep handed to memlink cannot make it read `/etc/shadow`, a home
//! folder's keys, or anything outside the project through `../` or a link, while the bundled
//! files and a scenario's own neighbours work. The files named on the command line are the
//! user's own choice and are not restricted. Independently of where a file lies, a referenced
//! file is read with [`crate::error::read_file_limited`] (regular files only, a size limit), and
//! no error quotes a referenced file's contents: a message names the referring file's field and
//! position, the referenced path, and what was expected.

use crate::error::{Error, Pos, Result, locate_field};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static EXTRA_ROOTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Adds `dir` to the allowed roots of this process (the command line's `--allow-root`).
pub fn allow_root(dir: &Path) -> std::io::Result<()> {
    let canon = dir.canonicalize()?;
    EXTRA_ROOTS.lock().expect("roots").push(canon);
    Ok(())
}

/// The allowed roots for files named by `referring`, canonical.
fn roots(referring: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let dir = referring.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Ok(d) = dir.canonicalize() {
        out.push(d);
    }
    if let Ok(cwd) = std::env::current_dir().and_then(|c| c.canonicalize())
        && cwd.parent().is_some()
    {
        out.push(cwd);
    }
    out.extend(EXTRA_ROOTS.lock().expect("roots").iter().cloned());
    out
}

/// `named` (as written in `referring`) resolved against `referring`'s folder, if it satisfies
/// the path policy; otherwise what was expected, for the caller's positioned error. A path that
/// does not exist is returned as resolved, so the reader's error names it.
pub fn referenced(referring: &Path, named: &Path) -> std::result::Result<PathBuf, String> {
    let dir = referring.parent().unwrap_or(Path::new("."));
    let joined = dir.join(named);
    let Ok(canon) = joined.canonicalize() else {
        return Ok(joined);
    };
    let roots = roots(referring);
    if roots.iter().any(|r| canon.starts_with(r)) {
        return Ok(joined);
    }
    Err(format!(
        "a file under the folder of {} or the working directory (or a folder given with \
         --allow-root); `{}` resolves to {}, outside them",
        referring.display(),
        named.display(),
        canon.display()
    ))
}

/// Loads the file `named` by `field` of `referring` (whose text, when at hand, places the
/// field) with `load`. A path outside the policy is refused at the field's position; so is a
/// referenced file that cannot be read (missing, a folder, a device, too large), naming the
/// path the field resolved to. Errors inside a file that was read are `load`'s own.
pub fn load_referenced<T>(
    referring: &Path,
    text: Option<&str>,
    field: &str,
    named: &Path,
    load: impl FnOnce(&Path) -> Result<T>,
) -> Result<T> {
    let at = |expected: String| Error::Invalid {
        path: referring.to_path_buf(),
        pos: text.map_or(Pos { line: 1, col: 1 }, |t| locate_field(t, field)),
        field: field.to_string(),
        expected,
    };
    let path = referenced(referring, named).map_err(at)?;
    load(&path).map_err(|e| match unreadable(&e, &path) {
        Some(expected) => at(expected),
        None => unquoted(e),
    })
}

/// An error met inside a referenced file (or one it names in turn), with every quoted piece
/// of that file's text taken out: the error keeps its file, position and what was expected,
/// and a parser's "found `…`" no longer prints the file's contents (which may be anything the
/// path policy allowed, a key file or a foreign one).
pub fn unquoted(e: Error) -> Error {
    let text = match &e {
        Error::Parse { path, .. } | Error::Invalid { path, .. } => {
            crate::error::read_file_limited(path, crate::error::MAX_INPUT_BYTES).unwrap_or_default()
        }
        _ => return e,
    };
    match e {
        Error::Parse { path, pos, message } => Error::Parse { path, pos, message: redact(&message, &text) },
        Error::Invalid { path, pos, field, expected } => {
            Error::Invalid { path, pos, field, expected: redact(&expected, &text) }
        }
        e => e,
    }
}

/// `message` with each piece quoted in backticks or double quotes that occurs in `text` (or
/// cannot be checked against it) replaced by `…`.
pub fn redact(message: &str, text: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find(['`', '"']) {
        let q = rest[open..].chars().next().expect("found");
        let Some(len) = rest[open + 1..].find(q) else { break };
        let inner = &rest[open + 1..open + 1 + len];
        out.push_str(&rest[..open]);
        if !inner.is_empty() && (text.is_empty() || text.contains(inner)) {
            out.push(q);
            out.push('…');
            out.push(q);
        } else {
            out.push_str(&rest[open..open + len + 2]);
        }
        rest = &rest[open + len + 2..];
    }
    out.push_str(rest);
    out
}

/// What was expected of `path`, when `e` says it could not be read at all (missing, a folder,
/// a device or FIFO, past the size limit): for an error at the field that named it.
pub fn unreadable(e: &Error, path: &Path) -> Option<String> {
    match e {
        Error::Io { path: p, source } if p == path => Some(format!("a readable file: {} ({source})", p.display())),
        Error::Parse { path: p, message, .. } if p == path && message.starts_with("expected a regular file") => {
            Some(format!(
                "a regular file: {} is not one ({})",
                p.display(),
                &message["expected a regular file, found ".len().min(message.len())..]
            ))
        }
        Error::Parse { path: p, message, .. } if p == path && message.starts_with("expected a file of at most") => {
            Some(format!("a file of at most {} bytes: {} is larger", crate::error::MAX_INPUT_BYTES, p.display()))
        }
        _ => None,
    }
}

/// Writes `bytes` (text or binary) to `path` atomically through a uniquely named temporary file
/// in the same folder (`tempfile`), renamed over `path`; on error the temporary file is removed.
pub fn write_atomic(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    use std::io::Write;
    let bytes = bytes.as_ref();
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let write = |source| Error::Write { path: path.to_path_buf(), source };
    use std::os::unix::fs::PermissionsExt;
    let mut tmp = tempfile::Builder::new()
        .prefix(".memlink-")
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)
        .map_err(write)?;
    tmp.write_all(bytes).map_err(write)?;
    tmp.as_file().sync_data().map_err(write)?;
    tmp.persist(path).map_err(|e| write(e.error))?;
    Ok(())
}

/// An output folder held by this process: other memlink processes that write to the same
/// folder wait until it is released (dropped).
#[derive(Debug)]
pub struct FolderLock {
    _file: std::fs::File,
}

/// The name of the lock file [`lock_folder`] holds in an output folder.
pub const LOCK_FILE: &str = ".memlink.lock";

/// Takes the advisory lock of output folder `dir` (created if missing; `LOCK_FILE` in it). When
/// another memlink holds it, says so on stderr and waits, so that two commands writing to one
/// folder never interleave their files or compute the same runs twice (the second finds the
/// first's results stored).
pub fn lock_folder(dir: &Path) -> Result<FolderLock> {
    lock_folder_saying(dir, true)
}

/// [`lock_folder`], saying that it waits only when `say`.
pub fn lock_folder_saying(dir: &Path, say: bool) -> Result<FolderLock> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_path_buf(), source })?;
    let p = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(|source| Error::Write { path: p.clone(), source })?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            if say {
                eprintln!("waiting: another memlink is writing to {} (it holds {})", dir.display(), p.display());
            }
            file.lock().map_err(|source| Error::Write { path: p.clone(), source })?;
        }
        Err(std::fs::TryLockError::Error(source)) => return Err(Error::Write { path: p, source }),
    }
    Ok(FolderLock { _file: file })
}

// ---- What kind of input a file is, read from the file itself ----

/// The `format` field of every trace header's first line (`crate::study::trace::FORMAT`).
pub const TRACE_FORMAT: &str = "memlink-trace";

/// The kinds of input file.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A scenario (`memlink run`).
    Scenario,
    /// A grid (`memlink grid`).
    Grid,
    /// A calibration (`memlink calibrate`, `memlink assess`).
    Calibration,
    /// A backbone profile (`models/*.ron`).
    Profile,
    /// An explain item (`memlink explain`).
    Explain,
    /// Grid results (`results.jsonl`, `memlink report`).
    Results,
    /// A calibration checkpoint (`<name>.state.json`, `memlink calibrate --resume`).
    Checkpoint,
    /// A sensitivity sweep (`memlink sweep`).
    Sweep,
    /// A fidelity report's switches (`memlink fidelity`).
    Fidelity,
    /// An invariant check over a space of scenarios (`memlink check`).
    Check,
    /// A recorded or imported trace (`memlink replay`).
    Trace,
    /// A threat-model what-if (`memlink whatif`).
    WhatIf,
    /// A stored run (`<out>/runs/<hash>.json` of a sweep, grid or what-if).
    StoredRun,
    /// A calibration's posterior ensemble (`models/<profile>.ensemble.ron`, `memlink calibrate
    /// --ensemble`).
    Ensemble,
}

impl FileKind {
    /// What to do with a file of this kind, for a command that was given the wrong kind.
    pub fn how_to_use(self) -> &'static str {
        match self {
            FileKind::Scenario => "run it with `memlink run`",
            FileKind::Grid => "run it with `memlink grid`",
            FileKind::Calibration => "run it with `memlink calibrate` or `memlink assess`",
            FileKind::Profile => "a scenario names it as its `backbone`",
            FileKind::Explain => "score it with `memlink explain`",
            FileKind::Results => "render it with `memlink report`",
            FileKind::Checkpoint => "resume it with `memlink calibrate --resume`",
            FileKind::Sweep => "run it with `memlink sweep`",
            FileKind::Fidelity => "run it with `memlink fidelity`",
            FileKind::Check => "run it with `memlink check`",
            FileKind::Trace => "replay it with `memlink replay`",
            FileKind::WhatIf => "run it with `memlink whatif`",
            FileKind::StoredRun => "a study's stored run, read by the study that wrote it",
            FileKind::Ensemble => "`--ensemble` reads it beside its profile",
        }
    }

    /// The kind's name as `validate` prints it.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Scenario => "scenario",
            FileKind::Grid => "grid",
            FileKind::Calibration => "calibration",
            FileKind::Profile => "backbone profile",
            FileKind::Explain => "explain item",
            FileKind::Results => "grid results",
            FileKind::Checkpoint => "calibration checkpoint",
            FileKind::Sweep => "sweep",
            FileKind::Fidelity => "fidelity report",
            FileKind::Check => "invariant check",
            FileKind::Trace => "trace",
            FileKind::WhatIf => "what-if",
            FileKind::StoredRun => "stored run",
            FileKind::Ensemble => "posterior ensemble",
        }
    }
}

/// Top-level field names of a RON text: `name:` at nesting depth 1, outside strings and comments.
fn top_level_fields(text: &str) -> Vec<String> {
    top_level_field_spans(text).into_iter().map(|(_, name)| name).collect()
}

/// [`top_level_fields`] with each name's byte offset.
fn top_level_field_spans(text: &str) -> Vec<(usize, String)> {
    let b = text.as_bytes();
    let (mut depth, mut i) = (0i32, 0usize);
    let mut out = Vec::new();
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            c if depth == 1 && (c.is_ascii_alphabetic() || c == b'_') => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let rest = text[i..].trim_start();
                if rest.starts_with(':') && !rest.starts_with("::") {
                    out.push((start, text[start..i].to_string()));
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The top-level field of a RON text within which (1-based) `line` and `col` fall: the last
/// `name:` at nesting depth 1 that starts before them.
pub fn top_level_field_at(text: &str, line: usize, col: usize) -> Option<String> {
    // The byte offset of (line, col), columns counted in characters.
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            offset += l.char_indices().nth(col.saturating_sub(1)).map_or(l.len(), |(b, _)| b);
            break;
        }
        offset += l.len();
    }
    top_level_field_spans(text).into_iter().rev().find(|(at, _)| *at <= offset).map(|(_, name)| name)
}

/// The kind of the file at `path` with contents `text`.
pub fn detect(path: &Path, text: &str) -> FileKind {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with(".jsonl") {
        // By what the first line parses to, not by its bytes: a trace written with other
        // spacing is still a trace.
        let first = text.lines().next().unwrap_or("");
        let format = serde_json::from_str::<serde_json::Value>(first)
            .ok()
            .and_then(|v| v.get("format").and_then(|f| f.as_str()).map(String::from));
        return if format.as_deref() == Some(TRACE_FORMAT) { FileKind::Trace } else { FileKind::Results };
    }
    if name.ends_with(".json") {
        let stored = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .is_some_and(|v| v.get("hash").is_some() && v.get("arms").is_some() && v.get("digest").is_some());
        if stored {
            return FileKind::StoredRun;
        }
        return if text.trim_start().starts_with('[') || name.ends_with(".state.json") {
            FileKind::Checkpoint
        } else {
            FileKind::Results
        };
    }
    let fields = top_level_fields(text);
    let has = |f: &str| fields.iter().any(|x| x == f);
    if has("draws") && has("searches") {
        FileKind::Ensemble
    } else if has("fixes") || has("undetermined") {
        FileKind::Fidelity
    } else if has("conditions") {
        FileKind::WhatIf
    } else if has("space") {
        FileKind::Check
    } else if has("factors") || has("design") {
        FileKind::Sweep
    } else if has("parameters") || has("targets") {
        FileKind::Calibration
    } else if has("settings") || (has("base") && !has("arms")) {
        FileKind::Grid
    } else if has("workloads") {
        FileKind::Profile
    } else if has("experience") || has("intent") {
        FileKind::Explain
    } else {
        FileKind::Scenario
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_beside_the_referring_one_is_allowed_and_one_outside_every_root_is_not() {
        let d = std::env::temp_dir().join(format!("memlink-files-{}", std::process::id()));
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/a.ron"), "()").unwrap();
        std::fs::write(d.join("b.ron"), "()").unwrap();
        let referring = d.join("sub/grid.ron");
        assert_eq!(referenced(&referring, Path::new("a.ron")).unwrap(), d.join("sub/a.ron"));
        // /etc lies under no root (the tests run in the repository, not at /).
        let e = referenced(&referring, Path::new("/etc/hostname")).unwrap_err();
        assert!(e.contains("outside them"), "{e}");
        let e = referenced(&referring, Path::new("../../../../../../../../etc/hostname")).unwrap_err();
        assert!(e.contains("outside them"), "{e}");
        // A link inside the folder that points out of it is followed, and refused.
        let link = d.join("sub/link.ron");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        assert!(referenced(&referring, Path::new("link.ron")).is_err());
        // A file one folder up is outside sub/ and outside the working directory: refused
        // until its folder is allowed.
        assert!(referenced(&referring, Path::new("../b.ron")).is_err());
        allow_root(&d).unwrap();
        assert_eq!(referenced(&referring, Path::new("../b.ron")).unwrap(), d.join("sub/../b.ron"));
        // A quoted piece of a referenced file's text is taken out of a message; others stay.
        assert_eq!(
            redact("expected `Scenario` but found `c0ffee` in \"x\"", "c0ffee and x"),
            "expected `Scenario` but found `…` in \"…\""
        );
        // A missing file is the reader's error, named as resolved.
        assert_eq!(referenced(&referring, Path::new("nope.ron")).unwrap(), d.join("sub/nope.ron"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;

    #[test]
    fn kinds_are_told_apart_by_their_fields() {
        let p = Path::new("x.ron");
        assert_eq!(detect(p, "(name: \"a\", agents: 8, arms: [], workload: Mmlu(()))"), FileKind::Scenario);
        assert_eq!(detect(p, "(name: \"g\", settings: [(name: \"a\", base: \"b.ron\")])"), FileKind::Grid);
        assert_eq!(detect(p, "(name: \"g\", base: \"b.ron\", seeds: [1])"), FileKind::Grid);
        assert_eq!(detect(p, "(name: \"c\", profile: \"q\", parameters: [])"), FileKind::Calibration);
        assert_eq!(detect(p, "(name: \"q\", workloads: { \"mmlu\": () })"), FileKind::Profile);
        assert_eq!(detect(p, "(intent: \"a\", experience: \"b\")"), FileKind::Explain);
        assert_eq!(
            detect(p, "(name: \"s\", base: \"b.ron\", factors: [], design: Oat(steps: [0.8]))"),
            FileKind::Sweep
        );
        assert_eq!(detect(Path::new("r/results.jsonl"), "{}"), FileKind::Results);
        assert_eq!(detect(Path::new("c.state.json"), "[]"), FileKind::Checkpoint);
        // Nested fields do not count: a scenario's arms hold a `name` and a `guard`.
        assert_eq!(top_level_fields("(a: (b: 1), c: \"d: e\") // f: 1"), vec!["a", "c"]);
    }
}
