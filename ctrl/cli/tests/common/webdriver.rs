//! A minimal W3C WebDriver client for Debian's `chromedriver`, over plain
//! HTTP/1.1 on a TCP socket: new session, navigate, find, type, click,
//! run a script, screenshot. Enough for the page test, without pulling an
//! HTTP client stack into the dev-dependencies.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::serve::{free_port, Proc};

/// W3C's key for an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The first of `names` found on `PATH`.
pub fn which(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|n| std::env::split_paths(&path).map(|d| d.join(n)).find(|p| p.is_file()))
}

/// A chromedriver process and one headless Chromium session.
pub struct Browser {
    addr: SocketAddr,
    session: String,
    _driver: Proc,
    _profile: tempfile::TempDir,
}

fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| e.to_string())?;
    // chromedriver keeps the connection open: read the header, then
    // Content-Length bytes (or chunks up to the last one).
    let mut raw = Vec::new();
    let mut buf = [0u8; 65536];
    let (head, mut rest) = loop {
        let n = s.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed before the header".into());
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break (String::from_utf8_lossy(&raw[..at]).to_ascii_lowercase(), raw[at + 4..].to_vec());
        }
    };
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok()));
    let chunked = head.contains("transfer-encoding: chunked");
    while length.is_some_and(|n| rest.len() < n) || (chunked && !rest.ends_with(b"0\r\n\r\n")) {
        let n = s.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        rest.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&rest).into_owned();
    let body = if chunked { dechunk(&body) } else { body };
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if v["value"]["error"].is_string() {
        return Err(format!("{method} {path}: {}: {}", v["value"]["error"], v["value"]["message"]));
    }
    Ok(v["value"].clone())
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

impl Browser {
    /// Starts `chromedriver` and a headless `chromium` (flags that work as
    /// root in a container), `width`×`height` pixels.
    pub fn start(driver: &Path, chromium: &Path, log: &Path, width: u32, height: u32) -> Browser {
        let port = free_port();
        let err = std::fs::File::create(log).unwrap();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", driver.display()));
        let driver_proc = Proc(child);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(20);
        while http(addr, "GET", "/status", None).map(|v| v["ready"] != true).unwrap_or(true) {
            assert!(Instant::now() < deadline, "chromedriver did not get ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
        let args = json!([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.path().display()),
        ]);
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chromium.to_str().unwrap(), "args": args },
        }}});
        let v = http(addr, "POST", "/session", Some(&caps)).unwrap_or_else(|e| panic!("new session: {e}"));
        let session = v["sessionId"].as_str().unwrap().to_string();
        Browser { addr, session, _driver: driver_proc, _profile: profile }
    }

    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        http(self.addr, method, &format!("/session/{}{path}", self.session), body.as_ref())
    }

    pub fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url }))).unwrap();
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page.
    pub fn js(&self, script: &str, args: Value) -> Value {
        self.cmd("POST", "/execute/sync", Some(json!({ "script": script, "args": args })))
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    fn find(&self, css: &str) -> String {
        let v = self.cmd("POST", "/element", Some(json!({ "using": "css selector", "value": css }))).unwrap();
        v[ELEMENT].as_str().unwrap_or_else(|| panic!("no element {css}: {v}")).to_string()
    }

    /// Types `text` into the element `css`, as a user would.
    pub fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css);
        self.cmd("POST", &format!("/element/{id}/value"), Some(json!({ "text": text }))).unwrap();
    }

    pub fn click(&self, css: &str) {
        let id = self.find(css);
        self.cmd("POST", &format!("/element/{id}/click"), Some(json!({}))).unwrap();
    }

    /// Waits until `script` returns something truthy; returns it.
    pub fn wait_for(&self, what: &str, timeout: Duration, script: &str) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.js(script, json!([]));
            if !(v.is_null() || v == false || v == 0 || v == "") {
                return v;
            }
            assert!(Instant::now() < deadline, "the page did not show {what} within {timeout:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Saves a PNG of the window to `path`.
    pub fn screenshot(&self, path: &Path) {
        let v = self.cmd("GET", "/screenshot", None).unwrap();
        let png = base64(v.as_str().unwrap());
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ends Chromium before chromedriver is killed.
        let _ = self.cmd("DELETE", "", None);
    }
}

fn base64(text: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let digits: Vec<u8> = text.bytes().filter_map(val).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, &d)| acc | (u32::from(d) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
