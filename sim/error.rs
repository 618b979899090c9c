//! Errors of the library. The binary prints them and exits with code 2 for bad input.

use std::path::PathBuf;

/// A position in an input file (1-based).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Pos {
    /// Line.
    pub line: usize,
    /// Column.
    pub col: usize,
}

/// Everything that can go wrong in memlink.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("{path}: cannot read file: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file does not parse as the expected format.
    #[error("{path}:{}:{}: {message}", pos.line, pos.col)]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where.
        pos: Pos,
        /// What was wrong and what was expected.
        message: String,
    },
    /// A file parses but holds an impossible value.
    #[error("{path}:{}:{}: invalid `{field}`: expected {expected}", pos.line, pos.col)]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where (the field's first occurrence, or 1:1).
        pos: Pos,
        /// The field path.
        field: String,
        /// What was expected.
        expected: String,
    },
    /// Output could not be written.
    #[error("{path}: cannot write: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A run failed determinism checks.
    #[error("determinism check failed: {0}")]
    Nondeterministic(String),
}

impl Error {
    /// Whether the error is the user's input (exit code 2) rather than the environment.
    pub fn is_input_error(&self) -> bool {
        matches!(self, Error::Io { .. } | Error::Parse { .. } | Error::Invalid { .. })
    }
}

/// Result with memlink's error.
pub type Result<T> = std::result::Result<T, Error>;

/// Reads a file, naming it in the error.
pub fn read_file(path: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })
}

/// Parses RON text into `T`, turning ron's error into a positioned one.
pub fn parse_ron<T: serde::de::DeserializeOwned>(path: &std::path::Path, text: &str) -> Result<T> {
    let opts = ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME);
    opts.from_str(text).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        pos: Pos { line: e.span.start.line, col: e.span.start.col },
        message: e.code.to_string(),
    })
}

/// Position of the first occurrence of `key:` in a RON text (1-based), for semantic errors.
pub fn locate_field(text: &str, key: &str) -> Pos {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut from = 0;
        while let Some(off) = code[from..].find(leaf) {
            let at = from + off;
            let before_ok =
                at == 0 || !code.as_bytes()[at - 1].is_ascii_alphanumeric() && code.as_bytes()[at - 1] != b'_';
            let rest = code[at + leaf.len()..].trim_start();
            if before_ok && rest.starts_with(':') {
                return Pos { line: i + 1, col: at + 1 };
            }
            from = at + leaf.len();
        }
    }
    Pos { line: 1, col: 1 }
}
