// rockroll env-health page: polls /v1/overview every second and renders it (no build step, no CDN).
"use strict";
const params = new URLSearchParams(location.search);
if (params.get("token")) {
  // keep the token out of the address bar and history once it is stored
  localStorage.setItem("rockroll-token", params.get("token"));
  history.replaceState(null, "", location.pathname);
}
let token = localStorage.getItem("rockroll-token") || "";
const SVG = "http://www.w3.org/2000/svg";
const MAX_PLOTS_PER_JOB = 6;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function fill(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows.map((cells) => {
    const tr = el("tr");
    for (const c of cells) tr.appendChild(c instanceof Node ? c : el("td", c));
    return tr;
  }));
}
function counts(id, entries) {
  // a <dl> of name → count pairs, each <dd> tagged with data-key so tests can read it
  document.getElementById(id).replaceChildren(...entries.flatMap(([k, v]) => {
    const dd = el("dd", v);
    dd.dataset.key = k;
    return [el("dt", k), dd];
  }));
}
function dur(s) {
  s = Math.round(s || 0);
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m${s % 60}s` : `${Math.floor(s / 3600)}h${Math.floor(s % 3600 / 60)}m`;
}
function mb(b) { return `${((b || 0) / 1048576).toFixed(1)} MiB`; }
function num(v) { return typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : String(v); }
function more(id, shown, total) {
  // "first N of M" when the overview holds only the first items of a list (the API pages the rest)
  document.getElementById(`more-${id}`).textContent =
    total !== undefined && total > shown ? `(first ${shown} of ${total})` : "";
}
function stateCell(state) { const td = el("td", state, `state-${state}`); td.dataset.state = state; return td; }
function idCell(value, key) { const td = el("td", value); td.dataset[key] = value; return td; }

function plot(name, points) {
  // one metric of one job: an SVG line over its reports (x: report index, y: value)
  const w = 240, h = 60, pad = 4;
  const ys = points.map((p) => p.metrics[name]);
  const lo = Math.min(...ys), hi = Math.max(...ys), span = hi - lo || 1;
  const xy = ys.map((y, i) => [
    pad + (ys.length > 1 ? i / (ys.length - 1) : 0.5) * (w - 2 * pad),
    h - pad - ((y - lo) / span) * (h - 2 * pad),
  ]);
  const fig = el("figure", undefined, "plot");
  fig.dataset.metric = name;
  fig.dataset.points = String(ys.length);
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" "));
  svg.appendChild(line);
  for (const [x, y] of xy.length === 1 ? xy : []) {
    const dot = document.createElementNS(SVG, "circle");
    dot.setAttribute("cx", x); dot.setAttribute("cy", y); dot.setAttribute("r", 2);
    svg.appendChild(dot);
  }
  fig.appendChild(svg);
  fig.appendChild(el("figcaption", `${name}: ${num(ys[ys.length - 1])} (${ys.length} reports)`));
  return fig;
}

function renderPlots(jobs) {
  const blocks = [];
  for (const j of jobs) {
    const points = j.history && j.history.length ? j.history
      : [{ t: j.finished_at || j.created_at, metrics: j.metrics || {} }];
    const names = [...new Set(points.flatMap((p) => Object.keys(p.metrics)))]
      .filter((n) => points.some((p) => typeof p.metrics[n] === "number")).slice(0, MAX_PLOTS_PER_JOB);
    if (!names.length) continue;
    const div = el("div", undefined, "job-plots");
    div.dataset.job = j.id;
    div.appendChild(el("h3", `${j.id} · ${j.kind} · ${j.state}`));
    for (const n of names) div.appendChild(plot(n, points.filter((p) => typeof p.metrics[n] === "number")));
    blocks.push(div);
  }
  document.getElementById("plots").replaceChildren(...blocks);
}

function renderAlerts(alerts) {
  // a banner per firing alert (the caller's own and platform-wide ones), its reason in plain text
  const box = document.getElementById("alerts");
  box.hidden = alerts.length === 0;
  box.replaceChildren(...alerts.map((a) => {
    const div = el("div", `${a.severity}: ${a.reason}`, `alert alert-${a.severity}`);
    div.dataset.alert = a.key;
    div.dataset.owner = a.owner;
    return div;
  }));
}
function render(o) {
  renderAlerts(o.alerts || []);
  document.getElementById("status").textContent =
    `backend ${o.backend} · isolation ${o.isolation} · ${o.principal.owner}${o.principal.admin ? " (admin)" : ""} · updated ${new Date(o.time * 1000).toLocaleTimeString()}`;
  const sm = o.summary;
  document.getElementById("n-sandboxes").textContent = sm.sandboxes;
  document.getElementById("n-sessions").textContent = sm.sessions;
  counts("by-state", Object.entries(sm.sandboxes_by_state).sort());
  counts("by-env", Object.entries(sm.sessions_by_env).sort());
  counts("by-node", Object.entries(sm.by_node).sort().map(([n, c]) => [n, `${c.sandboxes} sandboxes · ${c.sessions} sessions`]));
  fill("sandboxes", o.sandboxes.map((s) => [idCell(s.id, "sandbox"), stateCell(s.state),
    s.state === "ready" ? "healthy" : "not ready", s.pool, s.owner || "-", dur(s.uptime_s), s.restarts,
    (s.cpu_seconds || 0).toFixed(2), mb(s.memory_bytes), `${s.sessions}/${s.max_sessions}`, s.node || "-"]));
  fill("sessions", o.sessions.map((s) => [idCell(s.id, "session"), s.env, s.owner, s.sandbox_id, s.steps,
    dur(o.time - s.created_at)]));
  fill("restarts", o.restarts.map((r) => [new Date(r.time * 1000).toLocaleTimeString(), idCell(r.sandbox_id, "restarted"),
    r.pool, r.generation, r.owner || "-", r.reason]));
  fill("pools", o.pools.map((p) => [p.name, p.members, p.ready, p.min_idle ?? "-", p.max_total ?? "-", p.sessions]));
  fill("jobs", o.jobs.map((j) => [idCell(j.id, "job"), j.kind, stateCell(j.state), `${Math.round(j.progress * 100)}%`,
    j.owner, Object.entries(j.metrics || {}).map(([k, v]) => `${k}=${num(v)}`).join(" ")]));
  renderPlots(o.jobs);
  for (const k of ["sandboxes", "sessions", "restarts", "pools", "envs"]) more(k, o[k].length, (o.totals || {})[k]);
  fill("envs", o.envs.map((e) => [e.id, e.kind, e.owner, e.max_steps ?? "-", (e.tags || []).join(", "), e.description]));
}

async function refresh() {
  const s = document.getElementById("status");
  try {
    const r = await fetch("/v1/overview", { headers: token ? { Authorization: `Bearer ${token}` } : {} });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error ? `${body.error.code}: ${body.error.message}` : r.statusText);
    render(body);
    s.className = "";
    document.body.dataset.loaded = "1";
    document.body.dataset.updated = String(body.time);
  } catch (e) {
    s.textContent = `error: ${e.message}`;
    s.className = "error";
  }
}
document.getElementById("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  token = document.getElementById("token").value.trim();
  localStorage.setItem("rockroll-token", token);
  refresh();
});
refresh();
setInterval(refresh, 1000);
