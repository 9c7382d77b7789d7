// metaroce page: sign-in, the live stream, the side panel and the link
// details. The token lives in sessionStorage and goes in the Authorization
// header only; the stream is read with fetch() so it never enters a URL.
"use strict";

(function () {
  const MR = window.MR;
  const $ = (id) => document.getElementById(id);
  const KEY = "metaroce-token";
  const HISTORY_MS = 5 * 60 * 1000;
  const app = {
    token: sessionStorage.getItem(KEY) || "",
    layout: null, drawing: null, zoom: null,
    states: new Map(), history: new Map(), steered: new Set(),
    frame: null, frames: 0, selected: null, abort: null,
  };
  window.MR.app = app;
  // Script errors are counted where a test (or a person) can see them.
  window.addEventListener("error", (ev) => {
    document.body.dataset.errors = (document.body.dataset.errors || "") + ev.message + "\n";
  });

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    if (app.token) h.Authorization = "Bearer " + app.token;
    return h;
  }

  // GET or POST JSON; a 401 brings the login box back.
  async function api(path, opts) {
    const resp = await fetch(path, Object.assign({ cache: "no-store" }, opts || {}, { headers: headers((opts || {}).headers) }));
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (resp.status === 401) { login((body && body.error) || "Sign in"); throw new Error("unauthorized"); }
    if (!resp.ok) throw new Error((body && body.error) || resp.status + " " + resp.statusText);
    return body;
  }

  function login(why) {
    if (app.abort) app.abort.abort();
    $("login-why").textContent = why === "missing bearer token" ? "This controller needs an API token." :
      why === "unknown token" ? "That token is not known to this controller." : why;
    $("login").hidden = false;
    $("app").hidden = true;
    $("token").focus();
  }

  async function start() {
    let me;
    try { me = await api("/api/v1/whoami"); } catch (e) { if (e.message !== "unauthorized") fatal(e); return; }
    $("login").hidden = true;
    $("app").hidden = false;
    $("who").textContent = me.read_only ? "read-only API (no tokens)" : "signed in as " + me.role;
    $("logout").hidden = me.read_only;
    $("operator").hidden = !me.may_operate;
    if (!me.may_operate) $("operator").remove();
    try { app.layout = await api("/api/v1/layout"); } catch (e) { if (e.message !== "unauthorized") fatal(e); return; }
    $("view").value = app.layout.overview ? "overview" : "detail";
    if (!app.layout.overview) $("view").querySelector("[value=overview]").disabled = true;
    redraw(true);
    stream(1000);
  }

  function fatal(e) { $("conn").textContent = "error: " + e.message; $("conn").className = "badge bad"; }

  function redraw(fit) {
    const svg = $("fabric");
    if (!app.zoom) app.zoom = MR.zoomable(svg);
    const view = $("view").value, layout = view === "box" && app.box ? app.box : app.layout;
    app.drawing = MR.draw(svg, layout, view, { link: showLink, bundle: showBundle, box: zoomToBox });
    // The overview shows everything; a drawing of switches stays readable.
    if (fit && view === "overview") app.zoom.fit(app.drawing.width, app.drawing.height);
    else if (fit) app.zoom.fitReadable(app.drawing.width, app.drawing.height, 0.5);
    MR.legend($("legend"), $("metric").value);
    paint();
  }

  function paint() {
    if (!app.drawing) return;
    MR.paint(app.drawing, app.states, $("metric").value, app.steered);
    for (const [, e] of MR.hostEls) e.classList.remove("pfc");
    for (const h of (app.frame && app.frame.paused_hosts) || []) { const e = MR.hostEls.get(h); if (e) e.classList.add("pfc"); }
  }

  // Reads the SSE body: "event: frame\ndata: {...}\n\n" records.
  async function stream(backoff) {
    app.abort = new AbortController();
    const conn = $("conn");
    try {
      const resp = await fetch("/api/v1/stream", { headers: headers(), cache: "no-store", signal: app.abort.signal });
      if (resp.status === 401) { login("Sign in"); return; }
      if (!resp.ok) throw new Error(((await resp.json().catch(() => null)) || {}).error || String(resp.status));
      conn.textContent = "live"; conn.className = "badge ok";
      backoff = 1000;
      const reader = resp.body.getReader(), dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const rec = buf.slice(0, cut); buf = buf.slice(cut + 2);
          const data = rec.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
          if (data) frameOrNote(data);
        }
      }
    } catch (e) {
      if (app.abort.signal.aborted) return;
      conn.title = e.message;
    }
    conn.textContent = "reconnecting…"; conn.className = "badge bad";
    setTimeout(() => stream(Math.min(backoff * 2, 10000)), backoff);
  }

  // A frame the page cannot show is noted where a test (or a person) can
  // see it; the stream goes on, so one bad frame does not freeze the page.
  function frameOrNote(data) {
    try {
      onFrame(JSON.parse(data));
    } catch (e) {
      document.body.dataset.errors = (document.body.dataset.errors || "") + "frame: " + e.message + "\n";
      $("conn").title = "a frame could not be shown: " + e.message;
    }
  }

  function onFrame(f) {
    const now = Date.now();
    const next = new Map();
    for (const [i, util, depth, flags] of f.links) next.set(i, { util, depth, flags });
    for (const [i, st] of next) record(i, now, st);
    for (const i of app.states.keys()) if (!next.has(i)) record(i, now, { util: 0, depth: 0, flags: 0 });
    app.states = next;
    app.frame = f;
    app.frames++;
    document.body.dataset.frames = String(app.frames);
    paint();
    side(f);
    if (app.selected) detailNumbers();
    if ($("flows").value && (!app.flowsAt || now - app.flowsAt > 2000)) loadSteered();
  }

  function record(i, t, st) {
    let h = app.history.get(i);
    if (!h) app.history.set(i, (h = []));
    h.push([t, st.depth, st.util]);
    while (h.length > 2 && h[0][0] < t - HISTORY_MS) h.shift();
  }

  // ---- side panel ----
  function text(tag, s, cls) { const e = document.createElement(tag); e.textContent = s; if (cls) e.className = cls; return e; }

  function side(f) {
    $("mode").textContent = f.mode ? f.mode + (f.pinned ? " (pinned to a rolled-back snapshot)" : "") : "starting: no state published yet";
    $("mode").className = "mode " + (f.mode || "muted");
    const s = f.sessions, box = $("sessions");
    box.textContent = "";
    box.appendChild(text("div", `${s.connected}/${s.total} connected, ${s.primary} primary, ${s.programmed} programmed`));
    const ul = document.createElement("ul");
    const shown = s.listed.slice(0, 12);
    for (const w of shown) {
      const ok = w.connected && w.primary;
      const li = text("li", `${w.name}: ${w.connected ? "connected" : "down"}${w.connected ? (w.primary ? ", primary" : ", backup") : ""}` +
        (w.last_error ? ` — ${w.last_error}` : ""), ok ? "ok" : "bad");
      ul.appendChild(li);
    }
    if (s.listed.length > shown.length || !s.all_listed) {
      const more = s.all_listed ? s.listed.length - shown.length : s.total - s.connected - shown.length;
      if (more > 0) ul.appendChild(text("li", `… and ${more} more not connected`, "muted"));
    }
    box.appendChild(ul);
    const recs = $("recs");
    recs.textContent = "";
    if (!f.recommended) recs.appendChild(text("div", "none", "muted"));
    else recs.appendChild(text("div", `${f.recommended} group override(s)` + (f.mode === "act" ? ", applied" : ", not applied (" + f.mode + " mode)")));
    for (const r of f.recommendations) {
      recs.appendChild(text("div", `${r.switch} → ${r.toward}: ` + r.weights.map((w) => `port ${w.port}×${w.weight}`).join(", "), "rec"));
    }
    phases(f.job_phases);
    const ev = $("events");
    ev.textContent = "";
    for (const e of f.events) {
      const li = document.createElement("li");
      li.className = "ev ev-" + e.kind;
      li.appendChild(text("span", e.ts.slice(11, 19), "ts"));
      li.appendChild(text("span", e.kind, "kind"));
      li.appendChild(text("span", (e.switch ? e.switch + ": " : "") + e.reason, "reason"));
      if (e.details) li.title = JSON.stringify(e.details);
      ev.appendChild(li);
    }
    if (!f.events.length) ev.appendChild(text("li", "no events yet", "muted"));
    const jobs = new Set(f.jobs);
    const sel = $("flows");
    for (const o of Array.from(sel.options)) if (o.value.startsWith("job:") && !jobs.has(o.value.slice(4)) && !o.selected) o.remove();
    for (const j of jobs) if (!sel.querySelector(`option[value="job:${CSS.escape(j)}"]`)) sel.appendChild(new Option("job " + j, "job:" + j));
  }

  // ---- jobs in time ----
  // Each periodic job's communication phases over the plan's common
  // period, from its recommended start offset: one row per job on a
  // shared time axis, so the operator sees which jobs are kept apart.
  function phases(p) {
    const box = $("phases");
    if (!p || !p.jobs || !p.jobs.length || !(p.common_period_ms > 0)) {
      if (box.dataset.jobs !== "0") { box.textContent = "No periodic job announced."; box.className = "muted"; box.dataset.jobs = "0"; }
      return;
    }
    const key = JSON.stringify(p);
    if (box.dataset.key === key) return;
    box.dataset.key = key; box.dataset.jobs = String(p.jobs.length); box.className = "";
    box.textContent = "";
    const ns = "http://www.w3.org/2000/svg", T = p.common_period_ms, row = 16, left = 70, width = 230;
    const svg = document.createElementNS(ns, "svg");
    const h = p.jobs.length * row + 22;
    svg.setAttribute("viewBox", `0 0 ${left + width + 6} ${h}`);
    svg.setAttribute("class", "phases");
    const el = (tag, attrs, txt) => { const e = document.createElementNS(ns, tag); for (const k in attrs) e.setAttribute(k, attrs[k]); if (txt !== undefined) e.textContent = txt; svg.appendChild(e); return e; };
    const x = (ms) => left + (ms / T) * width;
    p.jobs.forEach((j, i) => {
      const y = i * row + 2;
      el("text", { x: left - 4, y: y + 11, "text-anchor": "end", class: "phase-name" }, j.name);
      el("rect", { x: left, y: y + 2, width, height: row - 5, class: "phase-idle" });
      for (let t = j.offset_ms % j.period_ms; t < T && j.period_ms > 0; t += j.period_ms) {
        const w = Math.max(1, x(Math.min(t + j.communication_ms, T)) - x(t));
        el("rect", { x: x(t), y: y + 2, width: w, height: row - 5, class: "phase-comm" }).appendChild(
          Object.assign(document.createElementNS(ns, "title"), { textContent: `${j.name}: communication ${j.communication_ms.toFixed(3)} ms from ${t.toFixed(3)} ms (offset ${j.offset_ms.toFixed(3)} ms)` }));
      }
    });
    const axis = p.jobs.length * row + 4;
    el("line", { x1: left, y1: axis, x2: left + width, y2: axis, class: "phase-axis" });
    el("text", { x: left, y: axis + 12, class: "phase-tick" }, "0");
    el("text", { x: left + width, y: axis + 12, "text-anchor": "end", class: "phase-tick" }, `${T.toFixed(3)} ms (common period)`);
    box.appendChild(svg);
    box.appendChild(text("div", "dark: communication, from each job's recommended start offset" + (p.verdict ? ` — plan: ${p.verdict}` : ""), "muted"));
  }

  // ---- link details ----
  const flags = (f) => ["hot", "derated", "failed", "in a congestion tree", "steered"].filter((_, k) => f & (1 << k));

  function endName(i) {
    const l = app.layout.links[i];
    return [`${app.layout.switches[l[0]].name}:${l[1]}`, `${app.layout.switches[l[2]].name}:${l[3]}`];
  }

  function showLink(i) {
    app.selected = i;
    const box = $("link-detail");
    box.textContent = "";
    const [a, b] = endName(i);
    box.appendChild(text("div", `${a} ↔ ${b}`, "bold"));
    box.appendChild(text("div", "", "numbers"));
    const chart = MR.el("svg", { class: "chart", viewBox: "0 0 300 90", id: "chart" });
    box.appendChild(chart);
    box.appendChild(text("div", "groups: loading…", "groups"));
    box.appendChild(text("div", "flows: loading…", "flowlist"));
    detailNumbers();
    linkLists(i, box);
  }

  function detailNumbers() {
    const i = app.selected, box = $("link-detail");
    const st = app.states.get(i) || { util: 0, depth: 0, flags: 0 };
    const n = box.querySelector(".numbers");
    if (!n) return;
    const bw = app.layout.links[i][4] / 1e9;
    n.textContent = `${bw} Gb/s · utilisation ${st.util}% · queue ${st.depth}` + (st.flags ? " · " + flags(st.flags).join(", ") : "");
    chart(box.querySelector("svg.chart"), app.history.get(i) || []);
  }

  // Queue depth over the last five minutes, as steps.
  function chart(svg, h) {
    svg.textContent = "";
    const now = Date.now(), t0 = now - HISTORY_MS, W = 300, H = 90, top = Math.max(4, ...h.map((p) => p[1]));
    const x = (t) => 30 + ((t - t0) / HISTORY_MS) * (W - 35), y = (d) => H - 14 - (d / top) * (H - 22);
    MR.el("line", { x1: 30, y1: H - 14, x2: W - 5, y2: H - 14, class: "axis" }, svg);
    MR.el("line", { x1: 30, y1: 6, x2: 30, y2: H - 14, class: "axis" }, svg);
    MR.el("text", { x: 26, y: 10, class: "tick end" }, svg).textContent = String(top);
    MR.el("text", { x: 26, y: H - 14, class: "tick end" }, svg).textContent = "0";
    MR.el("text", { x: 30, y: H - 2, class: "tick" }, svg).textContent = "−5 min";
    MR.el("text", { x: W - 5, y: H - 2, class: "tick end" }, svg).textContent = "now";
    if (!h.length) { MR.el("text", { x: 160, y: 45, class: "tick" }, svg).textContent = "no queue seen since the page opened"; return; }
    let d = "", prev = null;
    for (const [t, depth] of h) {
      const px = x(Math.max(t, t0));
      d += prev === null ? `M${px},${y(depth)}` : `H${px}V${y(depth)}`;
      prev = depth;
    }
    d += `H${x(now)}`;
    MR.el("path", { d, class: "series" }, svg);
  }

  // Groups that hold the link's ports and flows whose path crosses it.
  async function linkLists(i, box) {
    const l = app.layout.links[i], names = [app.layout.switches[l[0]].name, app.layout.switches[l[2]].name];
    const ends = [[names[0], l[1]], [names[1], l[3]]];
    try {
      const [groups, flows] = await Promise.all([api("/api/v1/groups"), api("/api/v1/flows?limit=10000")]);
      if (app.selected !== i) return;
      const gl = [];
      for (const [sw, port] of ends) {
        for (const g of ((groups || {})[sw] || {}).groups || []) {
          if (!g.members.some((m) => m.port === port)) continue;
          gl.push(`${sw} group ${g.id}: ` + g.members.map((m) => `port ${m.port}×${m.weight}`).join(", "));
        }
      }
      setList(box.querySelector(".groups"), "groups that include it", gl);
      const fl = ((flows || {}).flows || []).filter((f) => (f.path || []).some((h) => ends.some(([sw, p]) => h.switch === sw && h.port === p)));
      setList(box.querySelector(".flowlist"), "flows on it", fl.map(flowText));
    } catch (e) {
      if (e.message !== "unauthorized") box.querySelector(".groups").textContent = "groups: " + e.message;
    }
  }

  function setList(e, title, items) {
    e.textContent = "";
    e.appendChild(text("div", `${title}: ${items.length || "none"}`, "subhead"));
    const ul = document.createElement("ul");
    for (const s of items.slice(0, 20)) ul.appendChild(text("li", s));
    if (items.length > 20) ul.appendChild(text("li", `… and ${items.length - 20} more`, "muted"));
    e.appendChild(ul);
  }

  function hostName(ip) { const h = app.layout.hosts.find((x) => x[1] === ip); return h ? h[0] : ip; }
  function flowText(f) {
    const k = f.flow || {};
    const rate = f.rate_bps ? ` ${(f.rate_bps / 1e9).toFixed(1)} Gb/s` : "";
    return `${hostName(k.src)} → ${hostName(k.dst)}` + (k.kind === "flow" ? ` qp ${k.qp}` : "") + (f.job ? ` (job ${f.job})` : "") + rate +
      ((f.path || []).some((h) => h.steered !== null && h.steered !== false && h.steered !== undefined) ? ", steered" : "");
  }

  function showBundle(b) {
    const box = $("link-detail");
    box.textContent = "";
    box.appendChild(text("div", `${b.links.length} links between two boxes`, "bold"));
    const ranked = b.links.map((i) => [i, app.states.get(i) || { util: 0, depth: 0, flags: 0 }])
      .sort((x, y) => (y[1].flags - x[1].flags) || (y[1].depth - x[1].depth) || (y[1].util - x[1].util)).slice(0, 12);
    const ul = document.createElement("ul");
    for (const [i, st] of ranked) {
      const li = text("li", `${endName(i).join(" ↔ ")}: ${st.util}%, queue ${st.depth}` + (st.flags ? ", " + flags(st.flags).join(", ") : ""), "clickable");
      li.addEventListener("click", () => showLink(i));
      ul.appendChild(li);
    }
    box.appendChild(text("div", "busiest first; click one for its history", "muted"));
    box.appendChild(ul);
  }

  // Draws the switches of one overview box (and those above them).
  function zoomToBox(k) {
    const box = app.layout.overview.boxes[k], sel = $("view");
    let o = sel.querySelector("option[value=box]");
    if (!o) sel.appendChild((o = new Option("", "box")));
    o.textContent = box.title;
    app.box = MR.subLayout(app.layout, box);
    sel.value = "box";
    redraw(true);
  }

  // ---- steered flows on demand ----
  // Fetches the placement: offers its host pairs in the menu and marks the
  // paths of the flows selected there (the first 10000: the API's largest page).
  async function loadSteered() {
    app.flowsAt = Date.now();
    let doc;
    try { doc = await api("/api/v1/flows?limit=10000"); } catch (e) { return; }
    const sel = $("flows"), want = sel.value, flows = doc.flows || [];
    for (const f of flows) {
      const k = f.flow || {}, v = `pair:${hostName(k.src)}>${hostName(k.dst)}`;
      if (!sel.querySelector(`option[value="${CSS.escape(v)}"]`)) sel.appendChild(new Option(`${hostName(k.src)} → ${hostName(k.dst)}`, v));
    }
    const idx = new Map();
    app.layout.links.forEach((l, i) => { idx.set(app.layout.switches[l[0]].name + ":" + l[1], i); idx.set(app.layout.switches[l[2]].name + ":" + l[3], i); });
    app.steered = new Set();
    for (const f of want ? flows : []) {
      const k = f.flow || {};
      if (!(want === "all" || want === "job:" + f.job || want === `pair:${hostName(k.src)}>${hostName(k.dst)}`)) continue;
      for (const h of f.path || []) { const i = idx.get(h.switch + ":" + h.port); if (i !== undefined) app.steered.add(i); }
    }
    paint();
  }

  // ---- operator actions (the API checks the role again) ----
  async function setMode() {
    const msg = $("op-msg");
    try { await api("/api/v1/mode", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ mode: $("mode-set").value }) }); msg.textContent = "mode set"; }
    catch (e) { msg.textContent = "refused: " + e.message; }
  }
  async function rollback(ev) {
    const file = ev.target.files[0], msg = $("op-msg");
    if (!file) return;
    if (!window.confirm(`Roll the fabric back to ${file.name}?`)) { ev.target.value = ""; return; }
    try { await api("/api/v1/rollback", { method: "POST", headers: { "Content-Type": "application/json" }, body: await file.text() }); msg.textContent = "rolled back to " + file.name; }
    catch (e) { msg.textContent = "refused: " + e.message; }
    ev.target.value = "";
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("login-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      app.token = $("token").value.trim();
      $("token").value = "";
      sessionStorage.setItem(KEY, app.token);
      // A fresh page for the new role (operator controls are removed for others).
      window.location.reload();
    });
    $("logout").addEventListener("click", () => { sessionStorage.removeItem(KEY); app.token = ""; login("Signed out."); });
    $("metric").addEventListener("change", () => { MR.legend($("legend"), $("metric").value); paint(); });
    $("view").addEventListener("change", () => redraw(true));
    $("flows").addEventListener("change", loadSteered);
    $("flows").addEventListener("focus", () => { if (!app.flowsAt || Date.now() - app.flowsAt > 2000) loadSteered(); });
    $("zoom-in").addEventListener("click", () => app.zoom && app.zoom.by(1 / 1.5));
    $("zoom-out").addEventListener("click", () => app.zoom && app.zoom.by(1.5));
    $("zoom-fit").addEventListener("click", () => app.drawing && app.zoom.fit(app.drawing.width, app.drawing.height));
    if ($("mode-apply")) $("mode-apply").addEventListener("click", setMode);
    if ($("rollback-file")) $("rollback-file").addEventListener("change", rollback);
    start();
  });
})();
