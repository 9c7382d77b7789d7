//! Tests of the token file: format, errors, roles and secrecy.

use super::*;
use crate::obs::testutil::capture_logs;

const VIEW: &str = "viewer-token-0123456789";
const OPER: &str = "operator-token-0123456789";
const ADMIN: &str = "admin-token-0123456789abcdef==";

fn text() -> String {
    format!("# who may do what\n\nviewer {VIEW}\n  operator\t{OPER}  \nadmin {ADMIN}\n")
}

fn parse(text: &str) -> Result<Tokens, TokenError> {
    Tokens::parse(Path::new("/etc/metaroce/tokens"), text)
}

#[test]
fn obs_tokens_map_to_roles() {
    let t = parse(&text()).unwrap();
    assert_eq!(t.role_of(VIEW), Some(Role::Viewer));
    assert_eq!(t.role_of(OPER), Some(Role::Operator));
    assert_eq!(t.role_of(ADMIN), Some(Role::Admin));
    assert_eq!(t.role_of("viewer-token-012345678"), None);
    assert_eq!(t.role_of(""), None);
    let may = |r: Role| Role::ALL.into_iter().filter(|&n| r.may(n)).collect::<Vec<_>>();
    assert_eq!(may(Role::Viewer), [Role::Viewer]);
    assert_eq!(may(Role::Scheduler), [Role::Viewer, Role::Scheduler]);
    assert_eq!(may(Role::Operator), [Role::Viewer, Role::Scheduler, Role::Operator]);
    assert_eq!(may(Role::Admin), Role::ALL);
    let t = parse("scheduler scheduler-token-0123456789\n").unwrap();
    assert_eq!(t.role_of("scheduler-token-0123456789"), Some(Role::Scheduler));
}

#[test]
fn obs_token_file_errors_name_file_and_line() {
    let cases = [
        ("viewer\n", 1, "found 1 fields"),
        ("# c\nreader abcdefghijklmnopqrstuvwxyz\n", 2, "unknown role \"reader\""),
        ("viewer short\n", 1, "at least 16"),
        ("viewer abcdefghijklmnop$qrstu\n", 1, "may only contain"),
        ("viewer abcdefghijklmnopqrstu x\n", 1, "found 3 fields"),
        (&format!("viewer {VIEW}\nadmin {VIEW}\n"), 2, "already listed"),
    ];
    for (text, line, want) in cases {
        let err = parse(text).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/etc/metaroce/tokens"), "{msg}");
        assert!(msg.contains(&format!("line {line}:")), "{msg}");
        assert!(msg.contains(want), "{msg} lacks {want}");
    }
    assert!(parse("# nothing\n\n").unwrap_err().to_string().contains("has no tokens"));
    let err = Tokens::load(Path::new("/nonexistent/tokens")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/tokens"));
}

#[test]
fn obs_tokens_never_show_in_debug_errors_or_logs() {
    let (logs, _guard) = capture_logs();
    let t = parse(&text()).unwrap();
    let debug = format!("{t:?} {t:#?}");
    assert!(debug.contains("Operator"), "{debug}");
    // A token swapped into the role field is not echoed either.
    let swapped = parse(&format!("{OPER} operator\n")).unwrap_err();
    let dup = parse(&format!("viewer {VIEW}\nadmin {VIEW}\n")).unwrap_err();
    let shown = format!("{debug} {swapped} {swapped:?} {dup} {dup:?} {}", logs.text());
    for secret in [VIEW, OPER, ADMIN] {
        assert!(!shown.contains(secret), "token leaked: {shown}");
    }
}

#[cfg(unix)]
#[test]
fn obs_shared_token_file_loads_with_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::temp_dir().join(format!("metaroce-obs-tokens-{}", std::process::id()));
    std::fs::write(&path, text()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (logs, guard) = capture_logs();
    let t = Tokens::load(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let _quiet = Tokens::load(&path).unwrap();
    drop(guard);
    let _ = std::fs::remove_file(&path);
    let out = logs.text();
    assert_eq!(out.matches("readable by group or others").count(), 1, "{out}");
    assert!(out.contains("mode=\"644\"") || out.contains("mode=644"), "{out}");
    assert_eq!(t.path(), path.as_path());
    assert!(!out.contains(OPER));
}
