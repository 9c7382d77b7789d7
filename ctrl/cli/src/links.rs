//! Serve mode's link watcher: P4Runtime carries no port status, so when a
//! served scenario fails or repairs a link, `metaroce sim serve` tells the
//! controller the way a link monitor (BFD, LLDP, the switch OS) would:
//! `POST /api/v1/links` with `{"link": "leaf1:3", "state": "down",
//! "force": true}` and an operator token (forced: the failure happened, so
//! the controller applies it even if it partitions the fabric).

use std::path::Path;
use std::time::Duration;

use metaroce_sim::serve::LinkChange;
use metaroce_topo::Topology;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where the controller's API is and how to authenticate to it.
#[derive(Clone)]
pub struct LinkReporter {
    /// `host:port` of the controller's API.
    authority: String,
    token: String,
}

impl std::fmt::Debug for LinkReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("LinkReporter").field("authority", &self.authority).finish_non_exhaustive()
    }
}

/// `http://host:port` (a trailing `/` allowed) or `host:port`: the
/// authority. Only plain HTTP: the controller's API listens on plain HTTP.
pub fn parse_api(url: &str) -> Result<String, String> {
    let rest = match url.split_once("://") {
        Some(("http", rest)) => rest,
        Some((scheme, _)) => {
            return Err(format!(
                "--controller-api {url:?}: scheme {scheme:?} is not supported; the controller's API is plain http://host:port"
            ))
        }
        None => url,
    };
    let authority = rest.trim_end_matches('/');
    let ok = authority
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && !host.contains('/') && port.parse::<u16>().is_ok());
    if !ok {
        return Err(format!(
            "--controller-api {url:?} names no host and port; write it as http://127.0.0.1:9100 (the controller's --listen address)"
        ));
    }
    Ok(authority.to_owned())
}

/// Why no token came out of a token file.
#[derive(Debug)]
pub enum TokenError {
    /// The file could not be read.
    Unreadable(String),
    /// It was read but holds no usable token.
    Invalid(String),
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Unreadable(m) | TokenError::Invalid(m) => f.write_str(m),
        }
    }
}

/// The bearer token in `path`: a file holding just the token, or the
/// controller's own tokens file (`<role> <token>` lines), whose first
/// operator or admin token is taken. Never puts a token in an error.
pub fn read_token(path: &Path) -> Result<String, TokenError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TokenError::Unreadable(format!("cannot read token file {}: {e}", path.display())))?;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [token] => return Ok((*token).to_owned()),
            ["operator" | "admin", token] => return Ok((*token).to_owned()),
            // Roles that may not report links (the controller's tokens
            // file has them too).
            ["viewer" | "scheduler", _] => continue,
            _ => {
                return Err(TokenError::Invalid(format!(
                    "{}:{}: expected a token, or `<role> <token>` as in the controller's tokens file",
                    path.display(),
                    n + 1
                )))
            }
        }
    }
    Err(TokenError::Invalid(format!(
        "{} has no operator or admin token; reporting links needs one (viewer and scheduler tokens cannot)",
        path.display()
    )))
}

impl LinkReporter {
    pub fn new(authority: String, token: String) -> Self {
        LinkReporter { authority, token }
    }

    /// The name the API takes for topology link `link`: its first end.
    pub fn link_name(topo: &Topology, link: usize) -> Option<String> {
        let l = topo.links.get(link)?;
        let s = topo.switches.get(l.a.switch)?;
        Some(format!("{}:{}", s.name, l.a.port))
    }

    /// Reports one change; a few tries, since the controller may be busy.
    /// The error says what the controller answered, or why it could not
    /// be reached.
    pub async fn report(&self, topo: &Topology, c: LinkChange) -> Result<String, String> {
        let name =
            Self::link_name(topo, c.link).ok_or_else(|| format!("link {} is not in the topology", c.link))?;
        let state = if c.up { "up" } else { "down" };
        // A failure that happened: the controller must apply it even if it
        // partitions the fabric (it refuses an operator's unforced one).
        let body = serde_json::json!({ "link": name, "state": state, "force": true }).to_string();
        let mut last = String::new();
        for attempt in 0..3u32 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
            }
            match tokio::time::timeout(Duration::from_secs(5), self.post("/api/v1/links", &body)).await {
                Ok(Ok((200, _))) => return Ok(format!("{name} {state}")),
                // A refusal will not change on a retry.
                Ok(Ok((code @ 400..=499, answer))) => {
                    return Err(format!("the controller refused link {name} {state}: HTTP {code} {answer}"))
                }
                Ok(Ok((code, answer))) => last = format!("HTTP {code} {answer}"),
                Ok(Err(e)) => last = e,
                Err(_) => last = "no answer within 5 s".to_owned(),
            }
        }
        Err(format!("could not report link {name} {state} to the controller at {}: {last}", self.authority))
    }

    /// One HTTP/1.1 POST; (status, body).
    async fn post(&self, path: &str, body: &str) -> Result<(u16, String), String> {
        let mut s = TcpStream::connect(&self.authority).await.map_err(|e| format!("cannot connect: {e}"))?;
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.authority,
            self.token,
            body.len()
        );
        s.write_all(req.as_bytes()).await.map_err(|e| format!("cannot send: {e}"))?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.map_err(|e| format!("cannot read the answer: {e}"))?;
        let text = String::from_utf8_lossy(&out);
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse::<u16>().ok())
            .ok_or_else(|| "the answer is not HTTP".to_owned())?;
        let answer = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).trim().to_owned();
        Ok((status, answer))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn api_urls_name_a_host_and_port() {
        assert_eq!(parse_api("http://127.0.0.1:9100").unwrap(), "127.0.0.1:9100");
        assert_eq!(parse_api("http://localhost:9100/").unwrap(), "localhost:9100");
        assert_eq!(parse_api("127.0.0.1:9100").unwrap(), "127.0.0.1:9100");
        assert!(parse_api("https://x:1").unwrap_err().contains("plain http"));
        assert!(parse_api("http://127.0.0.1").unwrap_err().contains("no host and port"));
        assert!(parse_api("http://:9100").is_err());
        assert!(parse_api("http://h:99999").is_err());
    }

    #[test]
    fn tokens_come_from_a_bare_file_or_the_controllers_tokens_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "abcdefghijklmnop0123\n").unwrap();
        assert_eq!(read_token(&p).unwrap(), "abcdefghijklmnop0123");
        std::fs::write(&p, "# roles\nviewer vvvvvvvvvvvvvvvvvvvv\noperator oooooooooooooooooooo\n").unwrap();
        assert_eq!(read_token(&p).unwrap(), "oooooooooooooooooooo");
        // The controller's own file, as the README shows it: a scheduler line before the operator's.
        let tokens =
            "viewer vvvvvvvvvvvvvvvvvvvv\nscheduler ssssssssssssssssssss\nadmin aaaaaaaaaaaaaaaaaaaa\n";
        std::fs::write(&p, tokens).unwrap();
        assert_eq!(read_token(&p).unwrap(), "aaaaaaaaaaaaaaaaaaaa");
        std::fs::write(&p, "viewer vvvvvvvvvvvvvvvvvvvv\n").unwrap();
        let e = read_token(&p).unwrap_err().to_string();
        assert!(e.contains("no operator or admin token") && !e.contains("vvvv"), "{e}");
        std::fs::write(&p, "operator a b\n").unwrap();
        let e = read_token(&p).unwrap_err();
        assert!(matches!(&e, TokenError::Invalid(m) if m.contains(":1:")), "{e}");
        let e = read_token(&dir.path().join("none")).unwrap_err();
        assert!(matches!(&e, TokenError::Unreadable(m) if m.contains("cannot read token file")), "{e}");
    }
}
