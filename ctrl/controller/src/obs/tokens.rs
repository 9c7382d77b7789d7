//! Bearer tokens and their roles, loaded from a file.
//!
//! File format, one token per line, strict:
//!
//! ```text
//! # comments and blank lines are ignored
//! viewer    k3J9x-read-only-dashboards-0001
//! scheduler 4b0d-training-job-launcher-0001
//! operator  9f2c1e0b7a6d5c4b3a29181706f5e4d3
//! admin    <another long random token>
//! ```
//!
//! Each line is `<role> <token>`: role one of `viewer`, `scheduler`,
//! `operator`, `admin`; token at least [`MIN_TOKEN_LEN`] characters of the RFC 6750
//! `b64token` alphabet (letters, digits, `-._~+/`, trailing `=`). Every
//! token must be distinct. The file should be readable by its owner only; a
//! group- or world-readable file is loaded with a warning.
//!
//! Roles follow least privilege ([`Role::may`]): `viewer` reads;
//! `scheduler` (a job scheduler's token) reads and registers or removes
//! jobs, nothing else; `operator` reads, changes the mode, rolls back,
//! reports links and manages jobs; `admin` may do everything (reserved for
//! administrative endpoints). Tokens never appear in `Debug` output, logs or
//! error messages; a lookup compares against every token in constant time.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

/// Shortest token accepted; also the bound below which a field is safe to
/// echo in an error (it cannot be a valid token).
pub const MIN_TOKEN_LEN: usize = 16;

/// What a token may do. Not a ladder: a `scheduler` may register jobs,
/// which a `viewer` may not, but nothing an operator does; see
/// [`Role::may`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Viewer,
    Scheduler,
    Operator,
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Scheduler, Role::Operator, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Scheduler => "scheduler",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// True when a token of this role may do what needs `need`: every role
    /// reads (`Viewer`); job registration (`Scheduler`) is for schedulers,
    /// operators and admins; operator actions for operators and admins;
    /// admin actions for admins only.
    pub fn may(self, need: Role) -> bool {
        match need {
            Role::Viewer => true,
            Role::Scheduler => matches!(self, Role::Scheduler | Role::Operator | Role::Admin),
            Role::Operator => matches!(self, Role::Operator | Role::Admin),
            Role::Admin => self == Role::Admin,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a token file was refused. No variant carries a token.
#[derive(Debug, Error)]
pub enum TokenError {
    #[error("cannot read token file {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("token file {}, line {line}: {problem}", path.display())]
    Line { path: PathBuf, line: usize, problem: String },
    #[error("token file {} has no tokens; add lines `<role> <token>`", path.display())]
    Empty { path: PathBuf },
}

/// A secret that never prints itself.
struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The loaded tokens.
pub struct Tokens {
    path: PathBuf,
    entries: Vec<(Role, Secret)>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let roles: Vec<Role> = self.entries.iter().map(|(r, _)| *r).collect();
        f.debug_struct("Tokens").field("path", &self.path).field("roles", &roles).finish_non_exhaustive()
    }
}

impl Tokens {
    /// Reads and checks `path`; warns if others may read it.
    pub fn load(path: &Path) -> Result<Tokens, TokenError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| TokenError::Read { path: path.into(), source })?;
        warn_if_shared(path);
        let tokens = Tokens::parse(path, &text)?;
        tracing::info!(path = %path.display(), tokens = tokens.entries.len(), "loaded API tokens");
        Ok(tokens)
    }

    /// Parses the file's text; `path` only names the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Tokens, TokenError> {
        let mut entries: Vec<(Role, Secret)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |problem: String| TokenError::Line { path: path.into(), line: i + 1, problem };
            let (role, token) = parse_line(line).map_err(err)?;
            if entries.iter().any(|(_, s)| ct_eq(&s.0, token.as_bytes())) {
                return Err(err(
                    "this token is already listed on an earlier line; tokens must be distinct".into()
                ));
            }
            entries.push((role, Secret(token.as_bytes().to_vec())));
        }
        if entries.is_empty() {
            return Err(TokenError::Empty { path: path.into() });
        }
        Ok(Tokens { path: path.into(), entries })
    }

    /// The role of `token`, if any. Compares with every entry, whatever the
    /// outcome, so timing does not reveal which entry matched.
    pub fn role_of(&self, token: &str) -> Option<Role> {
        let mut found = None;
        for (role, secret) in &self.entries {
            if ct_eq(&secret.0, token.as_bytes()) {
                found = Some(*role);
            }
        }
        found
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn parse_line(line: &str) -> Result<(Role, &str), String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let &[role, token] = fields.as_slice() else {
        return Err(format!("expected `<role> <token>`, found {} fields", fields.len()));
    };
    let role = Role::parse(role).ok_or_else(|| {
        // Echo the word only when it is too short to be a token.
        let shown = if role.len() < MIN_TOKEN_LEN { format!("\"{role}\"") } else { "(not shown)".into() };
        format!("unknown role {shown}; expected viewer, scheduler, operator or admin as the first field")
    })?;
    if token.len() < MIN_TOKEN_LEN {
        return Err(format!("token has {} characters; at least {MIN_TOKEN_LEN} are required", token.len()));
    }
    if !is_b64token(token) {
        return Err("token may only contain letters, digits, - . _ ~ + / and trailing =".into());
    }
    Ok((role, token))
}

/// RFC 6750 `b64token`: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_b64token(s: &str) -> bool {
    let body = s.trim_end_matches('=');
    !body.is_empty() && body.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

/// Equal-length inputs are compared without an early exit; only the length
/// difference is visible in timing, and lengths are not secret here.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(unix)]
fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(path = %path.display(), mode = format!("{mode:o}"),
                "token file is readable by group or others; chmod 600 it");
        }
    }
}

#[cfg(not(unix))]
fn warn_if_shared(_path: &Path) {}

#[cfg(test)]
#[path = "tokens_tests.rs"]
mod tests;
