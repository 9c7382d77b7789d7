// metaroce page: drawing the fabric (plain SVG), colouring links from the
// stream's frames, zoom and pan. The layout comes from GET /api/v1/layout,
// the same as `metaroce topo render`. No library; see obs/page/mod.rs.
"use strict";

const MR = (window.MR = window.MR || {});
const SVG = "http://www.w3.org/2000/svg";

// Flag bits, as in obs/page/frame.rs.
MR.HOT = 1;
MR.DERATED = 2;
MR.FAILED = 4;
MR.TREE = 8;
MR.STEERED = 16;

const ROLE_FILL = { super_spine: ["#efe3f7", "#7b3fa0"], spine: ["#e2ecf9", "#2f5f9e"], leaf: ["#e3f4e6", "#2f7d43"] };
const IDLE = "#b8c0cc";
// Colour ramp from cool to hot: [position 0..1, colour].
const RAMP = [[0, "#2c9c4a"], [0.4, "#9acd32"], [0.65, "#f2c12e"], [0.85, "#f07f1a"], [1, "#d62020"]];
// Queue depth (target units, packets on BMv2) mapped on a log scale up to this.
const DEPTH_TOP = 256;

function el(name, attrs, parent) {
  const e = document.createElementNS(SVG, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
MR.el = el;

function hex(c) {
  return [1, 3, 5].map((i) => parseInt(c.slice(i, i + 2), 16));
}
function ramp(t) {
  t = Math.max(0, Math.min(1, t));
  for (let i = 1; i < RAMP.length; i++) {
    if (t <= RAMP[i][0]) {
      const [p0, c0] = RAMP[i - 1], [p1, c1] = RAMP[i];
      const f = (t - p0) / (p1 - p0 || 1), a = hex(c0), b = hex(c1);
      return "#" + a.map((v, k) => Math.round(v + (b[k] - v) * f).toString(16).padStart(2, "0")).join("");
    }
  }
  return RAMP[RAMP.length - 1][1];
}

// The colour of a link state {util, depth, flags} under the chosen metric.
MR.colour = function (st, metric) {
  if (!st) return IDLE;
  if (st.flags & MR.FAILED) return "#222";
  if (metric === "queue") return st.depth > 0 ? ramp(Math.log2(1 + st.depth) / Math.log2(1 + DEPTH_TOP)) : IDLE;
  return st.util > 0 ? ramp(st.util / 100) : IDLE;
};

// The legend for the chosen metric.
MR.legend = function (box, metric) {
  box.textContent = "";
  const title = document.createElement("div");
  title.className = "legend-title";
  title.textContent = metric === "queue" ? "Queue depth (packets, log scale)" : "Utilisation (placed flows / capacity)";
  box.appendChild(title);
  const stops = metric === "queue" ? [0, 4, 16, 64, 256] : [0, 25, 50, 75, 100];
  const row = document.createElement("div");
  row.className = "legend-ramp";
  for (const v of stops) {
    const st = metric === "queue" ? { depth: v, util: 0, flags: 0 } : { util: v, depth: 0, flags: 0 };
    const c = document.createElement("span");
    c.style.background = MR.colour(st, metric);
    c.textContent = metric === "queue" ? (v === 256 ? "≥256" : String(v)) : v + "%";
    row.appendChild(c);
  }
  box.appendChild(row);
  const marks = [
    ["hot", "hot (thick): queue above its threshold"],
    ["derated", "derated: weight lowered by the policy"],
    ["tree", "in a congestion tree"],
    ["failed", "failed link"],
    ["steered", "steered flows (selected above)"],
    ["pfc", "host NIC sends or gets PFC pauses"],
  ];
  for (const [cls, text] of marks) {
    const m = document.createElement("div");
    m.className = "legend-mark";
    const s = el("svg", { width: 34, height: 14 });
    if (cls === "pfc") {
      el("circle", { cx: 17, cy: 7, r: 5, class: "host pfc" }, s);
    } else {
      if (cls === "tree" || cls === "steered") el("line", { x1: 2, y1: 7, x2: 32, y2: 7, class: "halo " + cls }, s);
      el("line", { x1: 2, y1: 7, x2: 32, y2: 7, class: "link" + (cls === "hot" || cls === "failed" ? " " + cls : ""),
        stroke: cls === "failed" ? "#222" : cls === "hot" ? ramp(0.8) : IDLE }, s);
      if (cls === "derated") el("circle", { cx: 17, cy: 7, r: 4, class: "derate" }, s);
    }
    m.appendChild(s);
    m.appendChild(document.createTextNode(text));
    box.appendChild(m);
  }
};

// Draws the detailed fabric into `svg`; returns the link elements by index.
function drawDetail(svg, L, onLink) {
  const [nw, nh] = L.node;
  const gl = el("g", { class: "links" }, svg);
  const items = L.links.map((l, pos) => {
    const i = L.linkIdx ? L.linkIdx[pos] : pos;
    const a = L.switches[l[0]], b = L.switches[l[2]];
    const [up, low] = a.y <= b.y ? [a, b] : [b, a];
    const c = { x1: up.x, y1: up.y + nh / 2, x2: low.x, y2: low.y - nh / 2 };
    const g = el("g", { class: "linkg", "data-link": i }, gl);
    const tree = el("line", Object.assign({ class: "halo" }, c), g);
    const halo = el("line", Object.assign({ class: "halo" }, c), g);
    const line = el("line", Object.assign({ class: "link", stroke: IDLE }, c), g);
    const mark = el("circle", { class: "derate", cx: c.x1 + (c.x2 - c.x1) * 0.3, cy: c.y1 + (c.y2 - c.y1) * 0.3, r: 4, visibility: "hidden" }, g);
    const hit = el("line", Object.assign({ class: "hit" }, c), g);
    el("title", {}, hit).textContent = `${a.name}:${l[1]} – ${b.name}:${l[3]} (${l[4] / 1e9} Gb/s)`;
    hit.addEventListener("click", () => onLink(i));
    return { idx: i, g, tree, halo, line, mark };
  });
  drawHosts(svg, L);
  const gs = el("g", { class: "switches" }, svg);
  for (const s of L.switches) {
    if (!s) continue;
    const [fill, stroke] = ROLE_FILL[s.role] || ROLE_FILL.leaf;
    const g = el("g", {}, gs);
    el("rect", { x: s.x - nw / 2, y: s.y - nh / 2, width: nw, height: nh, rx: 6, fill, stroke, "stroke-width": 1.5 }, g);
    el("text", { x: s.x, y: s.y, class: "label" }, g).textContent = s.name;
    el("title", {}, g).textContent = `${s.name} (${s.role})`;
  }
  return items;
}

// Hosts under their leaves, or one box per leaf when there are many.
function drawHosts(svg, L) {
  const [nw, nh] = L.node;
  const g = el("g", { class: "hosts" }, svg);
  const per = new Map();
  L.hosts.forEach((h, i) => (per.get(h[2]) || per.set(h[2], []).get(h[2])).push(i));
  const fold = L.hosts.length > 96;
  MR.hostEls = new Map();
  for (const [leaf, hs] of per) {
    const s = L.switches[leaf];
    if (fold) {
      el("line", { x1: s.x, y1: s.y + nh / 2, x2: s.x, y2: L.hosts_y - 11, class: "drop" }, g);
      const r = el("rect", { x: s.x - nw / 2, y: L.hosts_y - 11, width: nw, height: 22, rx: 4, class: "hostbox" }, g);
      el("text", { x: s.x, y: L.hosts_y, class: "small" }, g).textContent = hs.length + " hosts";
      for (const h of hs) MR.hostEls.set(L.hosts[h][0], r);
      continue;
    }
    const w = nw / hs.length;
    hs.forEach((h, k) => {
      const x = s.x - nw / 2 + w * (k + 0.5);
      el("line", { x1: x, y1: s.y + nh / 2, x2: x, y2: L.hosts_y - 6, class: "drop" }, g);
      const c = el("circle", { cx: x, cy: L.hosts_y, r: 6, class: "host" }, g);
      el("title", {}, c).textContent = `${L.hosts[h][0]} ${L.hosts[h][1]} via ${s.name}:${L.hosts[h][3]}`;
      if (w >= 28) el("text", { x, y: L.hosts_y + 18, class: "small" }, g).textContent = L.hosts[h][0];
      MR.hostEls.set(L.hosts[h][0], c);
    });
  }
}

// Draws the overview (pods or blocks as boxes, links bundled between them).
function drawOverview(svg, L, onBundle, onBox) {
  const O = L.overview, [bw, bh] = O.box;
  const of = new Map();
  O.boxes.forEach((b, k) => b.members.forEach((s) => of.set(s, k)));
  const bundles = new Map();
  L.links.forEach((l, i) => {
    let [ga, gb] = [of.get(l[0]), of.get(l[2])];
    if (ga === gb) return;
    if (O.boxes[ga].y > O.boxes[gb].y) [ga, gb] = [gb, ga];
    const key = ga + "-" + gb;
    if (!bundles.has(key)) bundles.set(key, { up: ga, low: gb, links: [] });
    bundles.get(key).links.push(i);
  });
  const gl = el("g", { class: "links" }, svg);
  const items = [];
  for (const b of bundles.values()) {
    const u = O.boxes[b.up], d = O.boxes[b.low];
    const c = { x1: u.x, y1: u.y + bh / 2, x2: d.x, y2: d.y - bh / 2 };
    const g = el("g", { class: "linkg bundle" }, gl);
    const tree = el("line", Object.assign({ class: "halo" }, c), g);
    const halo = el("line", Object.assign({ class: "halo" }, c), g);
    const line = el("line", Object.assign({ class: "link", stroke: IDLE }, c), g);
    line.style.strokeWidth = 1.5 + Math.log2(b.links.length) * 0.6;
    const mark = el("circle", { class: "derate", cx: c.x1 + (c.x2 - c.x1) * 0.3, cy: c.y1 + (c.y2 - c.y1) * 0.3, r: 4, visibility: "hidden" }, g);
    const hit = el("line", Object.assign({ class: "hit" }, c), g);
    el("title", {}, hit).textContent = `${u.title} – ${d.title}: ${b.links.length} links`;
    hit.addEventListener("click", () => onBundle(b));
    items.push(Object.assign(b, { g, tree, halo, line, mark }));
  }
  const gs = el("g", { class: "switches" }, svg);
  O.boxes.forEach((b, k) => {
    const [fill, stroke] = ROLE_FILL[b.role] || ROLE_FILL.leaf;
    const g = el("g", { class: "box" }, gs);
    el("rect", { x: b.x - bw / 2, y: b.y - bh / 2, width: bw, height: bh, rx: 6, fill, stroke, "stroke-width": 1.5 }, g);
    el("text", { x: b.x, y: b.y - 6, class: "label bold" }, g).textContent = b.title;
    el("text", { x: b.x, y: b.y + 10, class: "small" }, g).textContent = b.detail;
    el("title", {}, g).textContent = `${b.title}: ${b.detail}. Click to draw its switches.`;
    g.addEventListener("click", () => onBox(k));
  });
  MR.hostEls = new Map();
  return items;
}

// The switches of one overview box and those right above them, laid out
// like the detailed picture (same rows, each row in the full picture's
// order) but side by side; links among them only.
MR.subLayout = function (L, box) {
  const keep = new Set(box.members);
  for (const l of L.links) {
    const [a, b] = [l[0], l[2]];
    if (keep.has(a) && L.switches[b].y < L.switches[a].y) keep.add(b);
    else if (keep.has(b) && L.switches[a].y < L.switches[b].y) keep.add(a);
  }
  const rows = new Map();
  for (const s of keep) (rows.get(L.switches[s].y) || rows.set(L.switches[s].y, []).get(L.switches[s].y)).push(s);
  const step = L.node[0] + 18, widest = Math.max(...Array.from(rows.values(), (r) => r.length));
  const width = Math.max(620, 80 + widest * step);
  const switches = L.switches.map(() => null);
  for (const [y, r] of rows) {
    r.sort((a, b) => L.switches[a].x - L.switches[b].x);
    const x0 = (width - r.length * step) / 2 + step / 2;
    r.forEach((s, i) => (switches[s] = Object.assign({}, L.switches[s], { x: x0 + i * step, y })));
  }
  const links = [], linkIdx = [];
  L.links.forEach((l, i) => { if (keep.has(l[0]) && keep.has(l[2])) { links.push(l); linkIdx.push(i); } });
  const hosts = L.hosts.filter((h) => keep.has(h[2]));
  return Object.assign({}, L, { name: `${L.name}: ${box.title}`, width, switches, links, linkIdx, hosts, count: keep.size, overview: null });
};

// (Re)draws the fabric for view "detail" or "overview"; returns a drawing
// with update(states, metric) and the canvas size.
MR.draw = function (svg, L, view, handlers) {
  svg.textContent = "";
  const overview = view === "overview" && L.overview;
  const w = overview ? L.overview.width : L.width, h = overview ? L.overview.height : L.height;
  el("rect", { x: 0, y: 0, width: w, height: h, class: "canvas-bg" }, svg);
  const t = el("text", { x: 40, y: 28, class: "title" }, svg);
  t.textContent = L.name;
  const sub = el("text", { x: 40, y: 48, class: "small left" }, svg);
  sub.textContent = `${L.count || L.switches.length} switches, ${L.links.length} links, ${L.hosts.length} hosts` +
    (overview ? " — each box is a pod or a block of switches; click one to draw its switches" : "");
  const items = overview ? drawOverview(svg, L, handlers.bundle, handlers.box) : drawDetail(svg, L, handlers.link);
  return { overview: !!overview, items, width: w, height: h };
};

// Applies link states (Map index → {util, depth, flags}) to a drawing.
MR.paint = function (d, states, metric, steered) {
  for (let k = 0; k < d.items.length; k++) {
    const it = d.items[k];
    let st;
    if (d.overview) {
      st = { util: 0, depth: 0, flags: 0 };
      let any = false;
      for (const i of it.links) {
        const s = states.get(i);
        const f = steered.has(i) ? MR.STEERED : 0;
        if (!s && !f) continue;
        any = true;
        if (s) {
          st.util = Math.max(st.util, s.util);
          st.depth = Math.max(st.depth, s.depth);
          st.flags |= s.flags & ~MR.STEERED;
        }
        st.flags |= f;
      }
      if (!any) st = null;
      else if ((st.flags & MR.FAILED) && it.links.some((i) => !((states.get(i) || {}).flags & MR.FAILED))) {
        // Some links of the bundle still work: colour by them, mark as failed.
        st.partial = true;
      }
    } else {
      const i = it.idx;
      st = states.get(i) || null;
      if (steered.has(i)) st = Object.assign({ util: 0, depth: 0, flags: 0 }, st, { flags: ((st && st.flags) || 0) | MR.STEERED });
      else if (st) st = Object.assign({}, st, { flags: st.flags & ~MR.STEERED });
    }
    const flags = st ? st.flags : 0;
    const colour = st && st.partial ? MR.colour(Object.assign({}, st, { flags: 0 }), metric) : MR.colour(st, metric);
    if (it.line.getAttribute("stroke") !== colour) it.line.setAttribute("stroke", colour);
    it.line.classList.toggle("idle", !st);
    it.line.classList.toggle("hot", !!(flags & MR.HOT));
    it.line.classList.toggle("failed", !!(flags & MR.FAILED));
    it.tree.classList.toggle("tree", !!(flags & MR.TREE));
    it.halo.classList.toggle("steered", !!(flags & MR.STEERED));
    it.mark.setAttribute("visibility", flags & MR.DERATED ? "visible" : "hidden");
  }
};

// Zoom (wheel, buttons) and pan (drag) by changing the viewBox.
MR.zoomable = function (svg) {
  const z = { x: 0, y: 0, w: 1, h: 1, full: [1, 1] };
  const apply = () => svg.setAttribute("viewBox", `${z.x} ${z.y} ${z.w} ${z.h}`);
  z.fit = (w, h) => { z.full = [w, h]; Object.assign(z, { x: 0, y: 0, w, h }); apply(); };
  // Fits, unless that would shrink below `min`: then a readable middle part.
  z.fitReadable = (w, h, min) => {
    const r = svg.getBoundingClientRect(), scale = Math.min(r.width / w, r.height / h);
    z.fit(w, h);
    if (scale >= min || !r.width || !r.height) return;
    const vw = r.width / min, vh = Math.min(h, r.height / min);
    z.show((w - vw) / 2, (h - vh) / 2, vw, vh);
  };
  z.show = (x, y, w, h) => { Object.assign(z, { x, y, w, h }); apply(); };
  z.by = (f, cx, cy) => {
    const nw = Math.max(40, Math.min(z.full[0] * 4, z.w * f)), s = nw / z.w;
    if (cx === undefined) { cx = z.x + z.w / 2; cy = z.y + z.h / 2; }
    z.x = cx - (cx - z.x) * s; z.y = cy - (cy - z.y) * s; z.w = nw; z.h *= s;
    apply();
  };
  const point = (ev) => {
    const r = svg.getBoundingClientRect(), sx = z.w / r.width, sy = z.h / r.height, s = Math.max(sx, sy);
    // preserveAspectRatio centres the viewBox in the element.
    return [z.x + (ev.clientX - r.left - (r.width - z.w / s) / 2) * s, z.y + (ev.clientY - r.top - (r.height - z.h / s) / 2) * s];
  };
  svg.addEventListener("wheel", (ev) => { ev.preventDefault(); const [x, y] = point(ev); z.by(ev.deltaY > 0 ? 1.2 : 1 / 1.2, x, y); }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (ev) => { drag = { p: point(ev), moved: false }; });
  svg.addEventListener("pointermove", (ev) => {
    if (!drag || !(ev.buttons & 1)) return;
    const [x, y] = point(ev);
    if (Math.abs(x - drag.p[0]) + Math.abs(y - drag.p[1]) > 2) drag.moved = true;
    z.x -= x - drag.p[0]; z.y -= y - drag.p[1]; apply();
  });
  svg.addEventListener("pointerup", () => { drag = null; });
  return z;
};
