//! Problems found in a file a person wrote (the client's config, the simulator's, a listing
//! map): each names the file and the key, and the line when known, so the message says where
//! to look (docs/design.md, "Layers": shared by the configuration and the simulator).

use std::fmt;
use std::path::{Path, PathBuf};

/// A config problem, naming the file and key (and line, when known).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigProblem {
    /// The file the problem is in.
    pub file: PathBuf,
    /// The key (dotted path) it concerns; empty when none applies (a syntax error).
    pub key: String,
    /// The line (from 1), when known.
    pub line: Option<usize>,
    /// What is wrong and what was expected.
    pub message: String,
    /// Warnings are reported but do not fail `config check`.
    pub warning: bool,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = if self.warning { "warning" } else { "error" };
        write!(f, "{level}: {}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": key `{}`", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Loading failed: the problems that stopped it (at least one).
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct ConfigError(pub Vec<ConfigProblem>);

impl ConfigError {
    /// A TOML file `path` that does not parse: the line the parser points at, its words, and
    /// that line's text (the parser's words alone can be "duplicate key", naming nothing).
    pub fn of_toml(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
        let line = e.span().map(|s| line_of(text, s.start));
        let quoted = line
            .and_then(|n| text.lines().nth(n - 1))
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| format!(" (at `{}`)", l.chars().take(120).collect::<String>()))
            .unwrap_or_default();
        ConfigError(vec![ConfigProblem {
            file: path.to_path_buf(),
            key: String::new(),
            line,
            message: format!("{}{quoted}", e.message()),
            warning: false,
        }])
    }
}

/// The line (from 1) of byte offset `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}
