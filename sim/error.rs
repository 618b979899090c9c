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
    /// A command-line value that is not what its option takes (positioned at the command
    /// line, not at a file).
    #[error("<command line>: invalid `{field}`: expected {expected}")]
    Arg {
        /// The option (`--round`) or argument.
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
    /// A strict replay made a call the trace does not hold (or did not make one it holds).
    #[error("replay diverged: {0}")]
    Diverged(String),
    /// A monitored invariant was violated and the caller asked for that to be an error
    /// (`--fail-on-violation`); the results were written first.
    #[error("invariant violated: {0}")]
    Violated(String),
    /// A check's outcome is not the one its file expects: an invariant expected to hold was
    /// violated, or one expected to fail held.
    #[error("check outcome not as expected: {0}")]
    CheckOutcome(String),
    /// A report's records are missing runs or differ from what the code simulates now.
    #[error("report records: {0}")]
    Records(String),
}

impl Error {
    /// Whether the error is the user's input (exit code 2) rather than the environment.
    pub fn is_input_error(&self) -> bool {
        matches!(self, Error::Io { .. } | Error::Parse { .. } | Error::Invalid { .. } | Error::Arg { .. })
    }
}

/// Result with memlink's error.
pub type Result<T> = std::result::Result<T, Error>;

/// The most memlink reads of any one input file (512 MiB): a trace of a 10,000-agent run is
/// well under it, and a file past it is refused by name instead of filling the memory.
pub const MAX_INPUT_BYTES: u64 = 512 << 20;

/// Reads a file, naming it in the error: [`read_file_limited`] with [`MAX_INPUT_BYTES`].
pub fn read_file(path: &std::path::Path) -> Result<String> {
    read_file_limited(path, MAX_INPUT_BYTES)
}

/// Reads a regular file of at most `limit` bytes as UTF-8. A device, FIFO, socket or folder is
/// refused without reading (the file is opened non-blocking, so a FIFO cannot hang it), a file
/// past `limit` is refused after `limit` bytes, and text that is not UTF-8 is refused at the
/// line and column of its first bad byte; no error quotes the file's contents.
pub fn read_file_limited(path: &std::path::Path, limit: u64) -> Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| Error::Io { path: path.to_path_buf(), source };
    let refuse = |message: String| Error::Parse { path: path.to_path_buf(), pos: Pos { line: 1, col: 1 }, message };
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        let kind = if meta.is_dir() { "a folder" } else { "a device, FIFO or socket" };
        return Err(refuse(format!("expected a regular file, found {kind}")));
    }
    if meta.len() > limit {
        return Err(refuse(format!("expected a file of at most {limit} bytes, found {} bytes", meta.len())));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(refuse(format!("expected a file of at most {limit} bytes")));
    }
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        let start = good.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let col = std::str::from_utf8(&good[start..]).map_or(1, |t| t.chars().count() + 1);
        Error::Parse { path: path.to_path_buf(), pos: Pos { line, col }, message: "expected UTF-8 text".into() }
    })
}

/// Parses RON text into `T`, turning ron's error into a positioned one. A non-finite number
/// (`NaN`, `inf`, or a literal too large for an f64, such as `1e400`) is refused at its position
/// before parsing: no memlink input has a use for one, and it would turn every metric it touches
/// into a normal-looking wrong number.
pub fn parse_ron<T: serde::de::DeserializeOwned>(path: &std::path::Path, text: &str) -> Result<T> {
    if let Some((pos, found)) = non_finite_literal(text) {
        return Err(Error::Parse {
            path: path.to_path_buf(),
            pos,
            message: format!("expected a finite number, found `{found}`"),
        });
    }
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

/// The first non-finite number literal of a RON text, outside strings and comments: `NaN`,
/// `inf` (any sign), or a decimal literal that overflows an f64.
pub fn non_finite_literal(text: &str) -> Option<(Pos, String)> {
    let b = text.as_bytes();
    let (mut i, mut line, mut line_start) = (0usize, 1usize, 0usize);
    let pos = |at: usize, line: usize, line_start: usize| Pos { line, col: text[line_start..at].chars().count() + 1 };
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                i += 1;
                line += 1;
                line_start = i;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    if b[i] == b'\n' {
                        line += 1;
                        line_start = i + 1;
                    }
                    i += 1;
                }
                i += 2;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    if i < b.len() && b[i] == b'\n' {
                        line += 1;
                        line_start = i + 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#')) && (i == 0 || !is_ident(b[i - 1])) => {
                // A raw string r#"…"#: skip to the closing quote and as many hashes.
                let mut j = i + 1;
                while j < b.len() && b[j] == b'#' {
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let hashes = j - i - 1;
                let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
                match text[j + 1..].find(&close) {
                    Some(end) => {
                        let stop = j + 1 + end + close.len();
                        for (k, ch) in b[i..stop].iter().enumerate() {
                            if *ch == b'\n' {
                                line += 1;
                                line_start = i + k + 1;
                            }
                        }
                        i = stop;
                    }
                    None => return None,
                }
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
                let word = &text[start..i];
                if matches!(word, "NaN" | "nan" | "inf" | "infinity" | "Infinity" | "NAN" | "INF") {
                    let from = if start > 0 && matches!(b[start - 1], b'-' | b'+') { start - 1 } else { start };
                    return Some((pos(from, line, line_start), text[from..i].to_string()));
                }
            }
            c if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || b[i] == b'.'
                        || b[i] == b'_'
                        || (matches!(b[i], b'+' | b'-') && matches!(b[i - 1], b'e' | b'E')))
                {
                    i += 1;
                }
                let lit: String = text[start..i].chars().filter(|c| *c != '_').collect();
                let decimal = !lit.starts_with("0x") && !lit.starts_with("0b") && !lit.starts_with("0o");
                if decimal && lit.parse::<f64>().is_ok_and(|v| v.is_infinite()) {
                    return Some((pos(start, line, line_start), text[start..i].to_string()));
                }
            }
            _ => i += 1,
        }
    }
    None
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The first floating-point value of `value` (serialised) whose magnitude exceeds `limit`, as
/// (field path, value): a guard against inputs that overflow the arithmetic they enter.
pub fn oversized_float<T: serde::Serialize>(value: &T, limit: f64) -> Option<(String, f64)> {
    fn walk(v: &serde_json::Value, path: &mut Vec<String>, limit: f64) -> Option<(String, f64)> {
        match v {
            serde_json::Value::Number(n) if n.is_f64() => {
                let x = n.as_f64().unwrap_or(0.0);
                (x.abs() > limit).then(|| (path.join("."), x))
            }
            serde_json::Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| {
                if let Some(last) = path.last_mut() {
                    last.push_str(&format!("[{i}]"));
                }
                let r = walk(x, path, limit);
                if let Some(last) = path.last_mut()
                    && let Some(at) = last.rfind('[')
                {
                    last.truncate(at);
                }
                r
            }),
            serde_json::Value::Object(o) => o.iter().find_map(|(k, x)| {
                path.push(k.clone());
                let r = walk(x, path, limit);
                path.pop();
                r
            }),
            _ => None,
        }
    }
    let v = serde_json::to_value(value).ok()?;
    walk(&v, &mut Vec::new(), limit)
}
