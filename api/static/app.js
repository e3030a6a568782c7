// rockroll env-health page: polls /v1/overview every 2 s and renders the tables (no build step).
"use strict";
const params = new URLSearchParams(location.search);
if (params.get("token")) {
  // keep the token out of the address bar and history once it is stored
  localStorage.setItem("rockroll-token", params.get("token"));
  history.replaceState(null, "", location.pathname);
}
let token = localStorage.getItem("rockroll-token") || "";

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
function dur(s) {
  s = Math.round(s || 0);
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m${s % 60}s` : `${Math.floor(s / 3600)}h${Math.floor(s % 3600 / 60)}m`;
}
function mb(b) { return `${((b || 0) / 1048576).toFixed(1)} MiB`; }
function stateCell(state) { const td = el("td", state, `state-${state}`); td.dataset.state = state; return td; }

function render(o) {
  document.getElementById("status").textContent =
    `backend ${o.backend} · ${o.principal.owner}${o.principal.admin ? " (admin)" : ""} · updated ${new Date(o.time * 1000).toLocaleTimeString()}`;
  fill("sandboxes", o.sandboxes.map((s) => {
    const tr = [el("td", s.id), stateCell(s.state), s.state === "ready" ? "healthy" : "not ready", s.pool,
      s.owner || "-", dur(s.uptime_s), s.restarts, (s.cpu_seconds || 0).toFixed(2), mb(s.memory_bytes),
      `${s.sessions}/${s.max_sessions}`];
    tr[0].dataset.sandbox = s.id;
    return tr;
  }));
  fill("pools", o.pools.map((p) => [p.name, p.members, p.ready, p.min_idle ?? "-", p.max_total ?? "-", p.sessions]));
  fill("jobs", o.jobs.map((j) => [j.id, j.kind, stateCell(j.state), `${Math.round(j.progress * 100)}%`, j.owner,
    JSON.stringify(j.metrics)]));
  fill("envs", o.envs.map((e) => [e.id, e.kind, e.owner, e.max_steps ?? "-", (e.tags || []).join(", "), e.description]));
}

async function refresh() {
  try {
    const r = await fetch("/v1/overview", { headers: token ? { Authorization: `Bearer ${token}` } : {} });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error ? `${body.error.code}: ${body.error.message}` : r.statusText);
    render(body);
    document.body.dataset.loaded = "1";
  } catch (e) {
    const s = document.getElementById("status");
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
setInterval(refresh, 2000);
