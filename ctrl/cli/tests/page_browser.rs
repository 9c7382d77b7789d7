//! L2, in a real browser: the live fabric page of the real controller (act
//! mode) while `metaroce sim serve` plays the hot-spot scenario, driven in
//! headless Chromium over WebDriver. The page must draw every link, colour
//! a link the traffic heats within a few seconds, list an event, refuse a
//! bad token with its login box, and show operator controls to operators
//! only. A screenshot lands in `target/page/`.
//!
//! Without `chromium` and `chromedriver` (Debian: `apt-get install chromium
//! chromium-driver`) it prints one skip line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::repo;
use common::serve::{both_logs, controller, fabric, spawn};
use common::webdriver::{which, Browser};

use std::time::{Duration, Instant};

use serde_json::json;

const VIEWER: &str = "viewer-token-of-the-page-test-0001";
const OPERATOR: &str = "operator-token-of-the-page-test-0001";
const SCHEDULER: &str = "scheduler-token-of-the-page-test-001";

/// Links drawn, and the indices of those whose colour or marks differ from
/// the quiet fabric.
const LINKS: &str = r#"
  const gs = Array.from(document.querySelectorAll('#fabric g.linkg'));
  const idle = '#b8c0cc';
  return { drawn: gs.length,
    changed: gs.filter(g => { const l = g.querySelector('line.link');
      return l.getAttribute('stroke') !== idle || l.classList.contains('hot'); }).map(g => Number(g.dataset.link)),
    frames: Number(document.body.dataset.frames || 0),
    conn: (document.getElementById('conn') || {}).textContent,
    conn_title: (document.getElementById('conn') || {}).title,
    errors: document.body.dataset.errors || '',
    last_links: MR.app.frame ? MR.app.frame.links : null,
    last_seq: MR.app.frame ? MR.app.frame.seq : null };
"#;

fn visible(b: &Browser, css: &str) -> bool {
    b.js(
        "const e = document.querySelector(arguments[0]); return !!e && e.offsetParent !== null;",
        json!([css]),
    ) == true
}

#[test]
fn the_page_shows_the_served_fabric_live() {
    let (Some(chromium), Some(driver)) =
        (which(&["chromium", "chromium-browser", "google-chrome"]), which(&["chromedriver"]))
    else {
        println!("skipped: the page browser test needs chromium and chromedriver (apt-get install chromium chromium-driver)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (topo, sc, _) = fabric(dir.path(), "serve-hotspot.yaml");
    let tokens = dir.path().join("tokens.txt");
    std::fs::write(&tokens, format!("viewer {VIEWER}\noperator {OPERATOR}\nscheduler {SCHEDULER}\n"))
        .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    // The controller first, so the page is open before the traffic; a long
    // hold-down keeps the derate on screen, and a long flow idle time keeps
    // the placement listed: the traffic lasts 0.8 s, and with the default
    // 1 s the steered paths were gone before a loaded machine reached the
    // step that looks for them.
    let (topo_s, sc_s) = (topo.to_str().unwrap(), sc.to_str().unwrap());
    let ctl = controller(
        dir.path(),
        topo_s,
        &["--tokens", tokens.to_str().unwrap(), "--hold-down-ms", "3000", "--flow-idle-ms", "120000"],
    );
    let url = format!("http://{}/", ctl.api);
    let b = Browser::start(&driver, &chromium, &dir.path().join("chromedriver.log"), 1400, 860);

    // No token: the login box. A wrong one: the login box again, saying so.
    b.goto(&url);
    b.wait_for(
        "the login box",
        Duration::from_secs(10),
        "return document.getElementById('login').hidden === false",
    );
    b.type_into("#token", "not-a-token-this-controller-knows");
    b.click("#sign-in");
    let why = b.wait_for(
        "the refusal",
        Duration::from_secs(10),
        "const l = document.getElementById('login'); return !l.hidden && /not known/.test(l.textContent) && l.textContent;",
    );
    assert!(!why.to_string().contains("Error"), "a message, not a stack trace: {why}");

    // The viewer sees the whole fabric and no operator controls.
    b.type_into("#token", VIEWER);
    b.click("#sign-in");
    let links = metaroce_topo::load_file(&topo).unwrap().links.len();
    let drawn = format!("return document.querySelectorAll('#fabric g.linkg').length === {links}");
    b.wait_for("every link", Duration::from_secs(15), &drawn);
    let now = b.js(LINKS, json!([]));
    assert_eq!(now["drawn"], links, "one drawn link per topology link: {now}");
    assert!(
        b.js("return document.getElementById('operator')", json!([])).is_null(),
        "no operator controls for a viewer"
    );
    assert!(!visible(&b, "#mode-apply"));
    b.wait_for(
        "the live stream",
        Duration::from_secs(10),
        "return document.getElementById('conn').textContent === 'live'",
    );
    // Colour by utilisation (placed flows over capacity): the page's
    // default, queue depth, shows a link only while its queue holds
    // packets, which in this scenario are bursts a loaded machine's
    // frames can miss (the reason this test failed now and then: every
    // link placed at 100%, none coloured). Placed flows stay listed (the
    // long flow idle time above), so utilisation colours them for good.
    b.js(
        "const m = document.getElementById('metric'); m.value = 'util'; m.dispatchEvent(new Event('change'));",
        json!([]),
    );
    let before = b.js(LINKS, json!([]));
    assert_eq!(before["changed"], json!([]), "a quiet fabric before the traffic: {before}");

    // Traffic: a link heats up and the page shows it within a few seconds.
    let serve_log = dir.path().join("serve.log");
    let out = dir.path().join("report");
    // Four wall seconds per simulated one, so each of the scenario's
    // few-ms bursts stays on the page longer.
    let _serve = spawn(
        &["sim", "serve", topo_s, sc_s, "-o", out.to_str().unwrap(), "--wait", "120", "--dilation", "4"],
        &serve_log,
    );
    let logs = || both_logs(&serve_log, &ctl.log);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut started: Option<Instant> = None;
    let changed = loop {
        let now = b.js(LINKS, json!([]));
        if now["changed"].as_array().is_some_and(|c| !c.is_empty()) {
            break now;
        }
        let serve = std::fs::read_to_string(&serve_log).unwrap_or_default();
        if started.is_none() && serve.contains("fabric programmed") {
            started = Some(Instant::now());
        }
        if let Some(t) = started {
            if t.elapsed() >= Duration::from_secs(10) {
                let flows = common::serve::request(ctl.api, "GET", "/api/v1/flows", Some(VIEWER), "");
                let screenshot = repo().join("target/page/page-no-colour.png");
                b.screenshot(&screenshot);
                panic!(
                    "no link changed colour 10 s after the traffic began: {now}\n--- the controller's flows\n{flows}\n(screenshot {})\n{}",
                    screenshot.display(),
                    logs()
                );
            }
        }
        assert!(Instant::now() < deadline, "the traffic never started\n{}", logs());
        std::thread::sleep(Duration::from_millis(100));
    };
    // The side panel lists the controller's reaction: it derates the hot
    // uplink, with its reason.
    let kinds = b.wait_for(
        "a derate event in the side panel",
        Duration::from_secs(30),
        "const k = Array.from(document.querySelectorAll('#events li .kind')).map(e => e.textContent); return k.includes('derate') ? k : null;",
    );
    // A link's details: its history chart and lists.
    let first = changed["changed"][0].as_u64().unwrap();
    // (A vertical line has no width, which WebDriver will not click.)
    b.js(
        "document.querySelector(`#fabric g.linkg[data-link=\"${arguments[0]}\"] line.hit`).dispatchEvent(new MouseEvent('click', {bubbles: true}))",
        json!([first]),
    );
    b.wait_for("the link's details", Duration::from_secs(10), "return document.querySelector('#link-detail svg.chart path.series') && /flows on it/.test(document.getElementById('link-detail').textContent)");
    // The colour switch and its legend; the steered flows drawn.
    let metric = |m: &str| {
        b.js(
            "const m = document.getElementById('metric'); m.value = arguments[0]; m.dispatchEvent(new Event('change')); return document.querySelector('#legend .legend-title').textContent;",
            json!([m]),
        )
    };
    assert!(metric("util").as_str().unwrap().starts_with("Utilisation"));
    assert!(metric("queue").as_str().unwrap().starts_with("Queue depth"));
    assert_eq!(
        b.js(
            "return MR.colour({util: 50, depth: 8, flags: 0}, 'queue') !== '#b8c0cc' \
             && MR.colour({util: 50, depth: 0, flags: 0}, 'queue') === '#b8c0cc'",
            json!([])
        ),
        true,
        "by queue depth a queue colours its link and an empty one does not, whatever the utilisation"
    );
    b.js(
        "const f = document.getElementById('flows'); f.value = 'all'; f.dispatchEvent(new Event('change'));",
        json!([]),
    );
    b.wait_for(
        "a steered path",
        Duration::from_secs(10),
        "return document.querySelector('#fabric .halo.steered')",
    );
    let target = repo().join("target/page");
    b.screenshot(&target.join("page-hotspot.png"));
    println!(
        "page: links changed {}, events {kinds}; screenshot {}",
        changed["changed"],
        target.join("page-hotspot.png").display()
    );
    let errors = b.js("return document.body.dataset.errors || ''", json!([]));
    assert_eq!(errors, "", "no script errors");

    // An operator gets the controls.
    b.click("#logout");
    b.wait_for(
        "the login box",
        Duration::from_secs(10),
        "return document.getElementById('login').hidden === false",
    );
    b.type_into("#token", OPERATOR);
    b.click("#sign-in");
    b.wait_for(
        "operator controls",
        Duration::from_secs(15),
        "const e = document.getElementById('mode-apply'); return !!e && e.offsetParent !== null",
    );
    // Its mode switch reaches the controller, and the page shows the new mode.
    b.js("document.getElementById('mode-set').value = 'advise';", json!([]));
    b.click("#mode-apply");
    b.wait_for(
        "the new mode",
        Duration::from_secs(10),
        "return document.getElementById('mode').textContent === 'advise'",
    );
    b.screenshot(&target.join("page-operator.png"));
    let events = std::fs::read_to_string(&ctl.events).unwrap();
    assert!(events.contains("\"kind\":\"mode\""), "the mode change is in the event log\n{events}");

    // Two periodic jobs that share the uplinks: the page draws each one's
    // communication phases on one time axis, from its recommended offset.
    for (name, a, b2) in [("timeline-a", "h1", "h3"), ("timeline-b", "h2", "h4")] {
        let body = format!(
            r#"{{"name": "{name}", "pattern": "all-to-all", "hosts": ["{a}", "{b2}"], "bytes": 1048576, "period_ms": 400}}"#
        );
        let answer = common::serve::request(ctl.api, "POST", "/api/v1/jobs", Some(SCHEDULER), &body);
        assert!(answer.contains("recommendation"), "job {name} registered with advice: {answer}");
    }
    b.wait_for(
        "the jobs' phases on one axis",
        Duration::from_secs(15),
        "return document.querySelectorAll('#phases rect.phase-comm').length >= 2 \
             && document.querySelectorAll('#phases .phase-name').length === 2",
    );
    b.screenshot(&target.join("page-phases.png"));
    let errors = b.js("return document.body.dataset.errors || ''", json!([]));
    assert_eq!(errors, "", "no script errors with the timeline");
}
