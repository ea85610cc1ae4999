// audition dashboard: one page, hash routes, polling the JSON API and redrawing in place (no reload).
"use strict";

const POLL_MS = window.AUDITION_POLL_MS || 1500;
const $ = (sel, root) => (root || document).querySelector(sel);
const enc = encodeURIComponent;
const ui = { sort: "trial_id", desc: false, status: "", q: "", offset: 0, limit: 50, selected: new Set(),
             metric: "", x: "training_iteration", bestX: "n", onlySelected: false, built: "" };
const MARKS = {  // kind -> [plotly symbol, size, legend text]
  pause: ["circle-open", 11, "paused by the scheduler"], exploit: ["star", 13, "PBT exploit"],
  stop: ["x-thin-open", 12, "stopped by the scheduler or a stopper"], failure: ["diamond", 10, "run failed"],
  paused: ["square", 10, "paused (now)"], error: ["x", 12, "ended in ERROR"],
};
let timer = null, lastRead = 0, generation = 0;

function esc(s) {
  return String(s == null ? "" : s).replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function fmt(v) {
  if (v == null) return "–";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(5).replace(/\.?0+(e|$)/, "$1");
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}
async function api(path) {
  const r = await fetch(path, { cache: "no-store" });
  let body;
  try { body = await r.json(); } catch (e) { body = { error: `${r.status} ${r.statusText}` }; }
  if (!r.ok) throw new Error(body.error || `${r.status} ${r.statusText}`);
  lastRead = Date.now();
  return body;
}
function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] !== "e" || !parts[1]) return { page: "home" };
  if (parts[2] === "trial" && parts[3]) return { page: "trial", exp: parts[1], trial: parts[3] };
  return { page: "exp", exp: parts[1], view: ["curves", "best", "parallel"].includes(parts[2]) ? parts[2] : "trials" };
}
let plotlyLoading = null;
function plotly() {  // loaded on first use: the table shows before its 4 MB are parsed
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!plotlyLoading) {
    plotlyLoading = new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = "static/plotly.min.js";
      s.onload = () => resolve(window.Plotly);
      s.onerror = () => { plotlyLoading = null; reject(new Error("could not load static/plotly.min.js from the dashboard")); };
      document.head.appendChild(s);
    });
  }
  return plotlyLoading;
}
function showError(msg) { const e = $("#error"); e.hidden = !msg; e.textContent = msg || ""; }
function schedule() { clearTimeout(timer); timer = setTimeout(refresh, POLL_MS); }
async function refresh() {
  const mine = ++generation;
  try {
    await render(route());
    if (mine === generation) showError("");
    if (!plotlyLoading) setTimeout(() => plotly().catch(() => {}), 0);  // ready before the first plot is asked for
  } catch (e) {
    if (mine === generation) showError(e.message);
  } finally {
    if (mine === generation) schedule();
  }
}
setInterval(() => {
  $("#live").textContent = lastRead ? `read ${Math.round((Date.now() - lastRead) / 1000)} s ago` : "";
}, 500);
window.addEventListener("hashchange", () => { ui.built = ""; ui.offset = 0; refresh(); });
document.addEventListener("DOMContentLoaded", refresh);

async function render(r) {
  if (r.page === "home") return renderHome();
  const base = `/api/e/${enc(r.exp)}`;
  const ov = await api(`${base}/overview`);
  if (!ui.metric || (!ov.metrics.includes(ui.metric) && ov.metrics.length)) ui.metric = ov.metric || ov.metrics[0] || "";
  $("#crumbs").innerHTML = `/ <a href="#/e/${enc(r.exp)}">${esc(r.exp)}</a>` +
    (r.page === "trial" ? ` / trial <span id="crumb-trial">${esc(r.trial)}</span>` : "");
  const key = `${r.page}:${r.exp}:${r.view || r.trial}`;
  if (ui.built !== key) { buildSkeleton(r, ov); ui.built = key; }
  $("#summary").innerHTML = summary(ov);
  syncMetricSelect(ov);
  if (r.page === "trial") return renderTrial(base, r.trial);
  if (r.view === "trials") return renderTable(base, ov);
  if (r.view === "curves") return renderCurves(base);
  if (r.view === "best") return renderBest(base, ov);
  return renderParallel(base);
}

async function renderHome() {
  const d = await api("/api/experiments");
  if (d.single && d.experiments.length === 1) { location.replace(`#/e/${enc(d.experiments[0].name)}`); return; }
  $("#crumbs").textContent = `/ ${d.where}`;
  ui.built = "home";
  const rows = d.experiments.map(e => e.error
    ? `<tr><td>${esc(e.name)}</td><td colspan="4" class="muted">${esc(e.error)}</td></tr>`
    : `<tr data-exp="${esc(e.name)}"><td><a href="#/e/${enc(e.name)}">${esc(e.name)}</a></td>` +
      `<td class="num">${e.num_trials}</td><td>${Object.entries(e.counts).map(([s, n]) => `${n} ${s}`).join(", ")}</td>` +
      `<td>${esc(e.metric || "")}${e.best ? ` ${e.mode} = ${fmt(e.best.value)}` : ""}</td>` +
      `<td>${e.written_at ? new Date(e.written_at * 1000).toLocaleString() : "not yet"}</td></tr>`).join("");
  $("#main").innerHTML = `<h2>Experiments in ${esc(d.where)}</h2><table id="exp-list"><thead><tr><th>experiment</th>` +
    `<th>trials</th><th>status</th><th>best</th><th>state saved</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function summary(ov) {
  const counts = Object.entries(ov.counts).map(([s, n]) => `<span class="status ${s}">${n} ${s}</span>`).join(" ");
  const best = ov.best ? `best <a href="#/e/${enc(ov.name)}/trial/${enc(ov.best.trial_id)}">${esc(ov.best.trial_id)}</a>` +
    ` ${esc(ov.metric)} = <b id="best-value">${fmt(ov.best.value)}</b>` : (ov.metric ? "no best yet" : "no metric recorded: pick one below");
  const saved = ov.written_at ? `state saved ${Math.round(ov.age_s)} s ago` : "no state saved yet (starting?)";
  const run = !ov.started ? "starting" : ov.finished ? "finished" : "running or interrupted";
  return `<span><b id="num-trials">${ov.num_trials}</b> trials</span><span id="counts">${counts}</span>` +
    `<span>${best}</span><span class="muted">${saved}; ${run}</span>`;
}

function buildSkeleton(r, ov) {
  const tabs = ["trials", "curves", "best", "parallel"].map(v =>
    `<a class="tab${r.view === v ? " on" : ""}" id="tab-${v}" href="#/e/${enc(r.exp)}/${v}">` +
    { trials: "Trials", curves: "Learning curves", best: "Best so far", parallel: "Parallel coordinates" }[v] + "</a>").join("");
  const metricSel = `<label>metric <select id="metric"></select></label>`;
  let body = "";
  if (r.page === "trial") {
    body = `<h2>Trial <span id="trial-id">${esc(r.trial)}</span> <span id="trial-status" class="status"></span></h2>
      <div class="controls">${metricSel}</div><div id="trial-curve" class="plot short"></div>
      <div class="cols"><div><h3>Config</h3><pre id="trial-config"></pre></div>
      <div><h3>Last result</h3><div class="tablewrap"><table id="trial-last"></table></div></div></div>
      <h3>Checkpoints</h3><div class="tablewrap"><table id="trial-checkpoints"></table></div>
      <h3>Marks</h3><div id="trial-marks" class="muted"></div>
      <h3>Error</h3><pre id="trial-error" class="muted"></pre>
      <div class="cols"><div><h3>stdout (tail)</h3><pre id="trial-stdout"></pre></div>
      <div><h3>stderr (tail)</h3><pre id="trial-stderr"></pre></div></div>`;
  } else if (r.view === "trials") {
    body = `<div class="controls"><label>status <select id="status-filter"><option value="">all</option>` +
      ["RUNNING", "PENDING", "PAUSED", "TERMINATED", "ERROR"].map(s => `<option>${s}</option>`).join("") +
      `</select></label><label>search <input id="search" type="search" placeholder="trial id or config"></label>` +
      `${metricSel}<button id="prev">‹ prev</button><span id="pager"></span><button id="next">next ›</button>` +
      `<a id="curves-of-selected" href="#/e/${enc(r.exp)}/curves">curves of selected trials</a></div>` +
      `<div class="tablewrap"><table id="trial-table"><thead></thead><tbody></tbody></table></div>`;
  } else if (r.view === "curves") {
    body = `<div class="controls">${metricSel}<label>x <select id="xkey"><option>training_iteration</option>` +
      `<option>time_total_s</option></select></label><label><input type="checkbox" id="only-selected"> only ` +
      `selected trials (<span id="n-selected">0</span>)</label><span id="curves-note" class="muted"></span></div>` +
      `<div id="curves" class="plot"></div>`;
  } else if (r.view === "best") {
    body = `<div class="controls">${metricSel}<label>x <select id="best-x"><option value="n">results reported</option>` +
      `<option value="x">seconds since the first result</option></select></label><span id="best-note" class="muted"></span></div>` +
      `<div id="best" class="plot"></div>`;
  } else {
    body = `<div class="controls">${metricSel}<span id="parallel-note" class="muted"></span></div><div id="parallel" class="plot"></div>`;
  }
  $("#main").innerHTML = `<div class="summary" id="summary"></div>` + (r.page === "trial" ? "" : `<nav class="tabs">${tabs}</nav>`) + body;
  const m = $("#metric");
  if (m) m.addEventListener("change", () => { ui.metric = m.value; refresh(); });
  const sf = $("#status-filter");
  if (sf) {
    sf.value = ui.status;
    sf.addEventListener("change", () => { ui.status = sf.value; ui.offset = 0; refresh(); });
    const s = $("#search");
    s.value = ui.q;
    s.addEventListener("input", () => { ui.q = s.value; ui.offset = 0; refresh(); });
    $("#prev").addEventListener("click", () => { ui.offset = Math.max(0, ui.offset - ui.limit); refresh(); });
    $("#next").addEventListener("click", () => { ui.offset += ui.limit; refresh(); });
  }
  const bx = $("#best-x");
  if (bx) {
    bx.value = ui.bestX;
    bx.addEventListener("change", () => { ui.bestX = bx.value; refresh(); });
  }
  const xk = $("#xkey");
  if (xk) {
    xk.value = ui.x;
    xk.addEventListener("change", () => { ui.x = xk.value; refresh(); });
    const only = $("#only-selected");
    only.checked = ui.onlySelected && ui.selected.size > 0;
    only.addEventListener("change", () => { ui.onlySelected = only.checked; refresh(); });
    $("#n-selected").textContent = ui.selected.size;
  }
}

function syncMetricSelect(ov) {
  const m = $("#metric");
  if (!m) return;
  const want = ov.metrics.join("\n");
  if (m.dataset.options !== want) {
    m.innerHTML = ov.metrics.map(k => `<option>${esc(k)}</option>`).join("");
    m.dataset.options = want;
  }
  m.value = ui.metric;
}

async function renderTable(base, ov) {
  const q = `sort=${enc(ui.sort)}&desc=${ui.desc ? 1 : 0}&status=${enc(ui.status)}&q=${enc(ui.q)}` +
    `&offset=${ui.offset}&limit=${ui.limit}&metric=${enc(ui.metric)}`;
  const d = await api(`${base}/trials?${q}`);
  if (d.total && ui.offset >= d.total) { ui.offset = Math.max(0, d.total - ui.limit); return; }
  const cols = [["", null], ["trial", "trial_id"], ["status", "status"], ["iter", "iteration"],
    [ui.metric || "metric", "metric"], ["total s", "time_total_s"], ["failures", "num_failures"],
    ...d.columns.map(c => [c, `config:${c}`])];
  const head = `<tr>${cols.map(([label, key]) => key
    ? `<th data-sort="${esc(key)}" class="${ui.sort === key ? "sorted" + (ui.desc ? " desc" : "") : ""}">${esc(label)}</th>`
    : `<th></th>`).join("")}</tr>`;
  const thead = $("#trial-table thead");
  if (thead.dataset.html !== head) {
    thead.innerHTML = head;
    thead.dataset.html = head;
    thead.querySelectorAll("th[data-sort]").forEach(th => th.addEventListener("click", () => {
      const k = th.dataset.sort;
      ui.desc = ui.sort === k ? !ui.desc : false;
      ui.sort = k;
      refresh();
    }));
  }
  const exp = ov.name;
  $("#trial-table tbody").innerHTML = d.rows.map(t =>
    `<tr data-trial="${esc(t.trial_id)}" data-status="${esc(t.status)}">` +
    `<td><input type="checkbox" class="pick"${ui.selected.has(t.trial_id) ? " checked" : ""}></td>` +
    `<td><a href="#/e/${enc(exp)}/trial/${enc(t.trial_id)}">${esc(t.name || t.trial_id)}</a></td>` +
    `<td><span class="status ${esc(t.status)}">${esc(t.status)}</span></td>` +
    `<td class="num iter">${fmt(t.iteration)}</td><td class="num metric">${fmt(t.metric)}</td>` +
    `<td class="num">${t.time_total_s == null ? "–" : Number(t.time_total_s).toFixed(1)}</td>` +
    `<td class="num">${fmt(t.num_failures)}</td>` +
    d.columns.map(c => `<td class="num">${esc(fmt(t.config[c]))}</td>`).join("") + "</tr>").join("");
  $("#trial-table tbody").querySelectorAll("input.pick").forEach(box => box.addEventListener("change", () => {
    const id = box.closest("tr").dataset.trial;
    if (box.checked) ui.selected.add(id); else ui.selected.delete(id);
    ui.onlySelected = ui.selected.size > 0;
  }));
  const end = Math.min(d.total, d.offset + d.rows.length);
  $("#pager").textContent = d.total ? `${d.offset + 1}–${end} of ${d.total}` : "no trials match";
  $("#pager").dataset.total = d.total;
  $("#prev").disabled = d.offset === 0;
  $("#next").disabled = end >= d.total;
}

const PLOT_CONFIG = { responsive: true, displaylogo: false };

async function renderCurves(base) {
  const picked = ui.onlySelected && ui.selected.size ? `&trials=${enc([...ui.selected].join(","))}` : "";
  const d = await api(`${base}/curves?metric=${enc(ui.metric)}&x=${enc(ui.x)}${picked}`);
  const many = d.traces.length > 12;
  const traces = d.traces.map(t => ({
    type: "scatter", mode: t.x.length > 150 ? "lines" : "lines+markers", name: `${t.trial_id} (${t.status})`,
    x: t.x, y: t.y, marker: { size: 4 }, line: { width: 1.3 }, showlegend: !many, meta: t.trial_id,
    hovertemplate: `${t.trial_id}<br>%{x}: %{y}<extra></extra>`,
  }));
  for (const [kind, [symbol, size, text]] of Object.entries(MARKS)) {
    const ms = d.marks.filter(m => m.kind === kind);
    if (!ms.length) continue;
    traces.push({ type: "scatter", mode: "markers", name: text, meta: `mark:${kind}`, x: ms.map(m => m.x),
      y: ms.map(m => m.y), customdata: ms.map(m => m.trial_id), marker: { symbol, size, color: kind === "error" ? "red" : "black",
        line: { width: 1.5, color: kind === "error" ? "red" : "black" } },
      hovertemplate: `${text}: %{customdata} at %{x}<extra></extra>` });
  }
  const down = d.traces.filter(t => t.downsampled).length;
  $("#curves-note").textContent = `${d.shown} of ${d.total} trials` + (d.shown < d.total ? " (the best by the metric; select trials in the table for others)" : "") +
    (down ? `; ${down} curve(s) downsampled on the server` : "");
  $("#n-selected").textContent = ui.selected.size;
  await (await plotly()).react("curves", traces, { margin: { t: 20 }, xaxis: { title: { text: d.x } }, yaxis: { title: { text: d.metric } },
    legend: { font: { size: 10 } }, uirevision: `${d.metric}:${d.x}` }, PLOT_CONFIG);
}

async function renderBest(base, ov) {
  const d = await api(`${base}/best?metric=${enc(ui.metric)}&mode=${enc(ov.mode || "min")}`);
  $("#best-note").textContent = d.note || `${d.mode} of ${d.metric} over ${d.results} results` + (ov.mode ? "" : " (mode unknown: min assumed)");
  const byN = ui.bestX === "n";
  await (await plotly()).react("best", [{ type: "scatter", mode: "lines+markers", line: { shape: "hv" }, x: byN ? d.n : d.x, y: d.y,
    customdata: d.trial_id, hovertemplate: "%{y} by %{customdata} at %{x}<extra></extra>" }],
    { margin: { t: 20 }, xaxis: { title: { text: byN ? "results reported" : "seconds since the first result" } },
      yaxis: { title: { text: `best ${d.metric}` } }, uirevision: `${d.metric}:${ui.bestX}` }, PLOT_CONFIG);
}

async function renderParallel(base) {
  const d = await api(`${base}/parallel?metric=${enc(ui.metric)}`);
  $("#parallel-note").textContent = `${d.trial_ids.length} trials with a value of ${d.metric || "the metric"}`;
  const line = d.color.length ? { color: d.color, colorscale: "Viridis", showscale: true } : {};
  await (await plotly()).react("parallel", [{ type: "parcoords", line, dimensions: d.dimensions }], { margin: { t: 40, l: 60, r: 60 } }, PLOT_CONFIG);
}

async function renderTrial(base, tid) {
  const [t, c] = await Promise.all([api(`${base}/trial/${enc(tid)}`),
    api(`${base}/curves?metric=${enc(ui.metric)}&trials=${enc(tid)}&max_points=2000`)]);
  const st = $("#trial-status");
  st.textContent = t.status;
  st.className = `status ${t.status}`;
  $("#trial-config").textContent = JSON.stringify(t.config, null, 2);
  $("#trial-last").innerHTML = Object.entries(t.last_result).filter(([k]) => k !== "config")
    .map(([k, v]) => `<tr><td>${esc(k)}</td><td class="num">${esc(fmt(v))}</td></tr>`).join("");
  const keys = [...new Set(t.checkpoints.flatMap(k => Object.keys(k.metrics || {})))].filter(k => !["config", "trial_id", "date", "hostname", "node_ip", "pid", "timestamp", "done", "checkpoint_dir_name"].includes(k)).slice(0, 8);
  $("#trial-checkpoints").innerHTML = t.checkpoints.length
    ? `<thead><tr><th>index</th><th>iteration</th>${keys.map(k => `<th>${esc(k)}</th>`).join("")}</tr></thead><tbody>` +
      t.checkpoints.map(k => `<tr><td class="num">${k.index}</td><td class="num">${fmt(k.iteration)}</td>` +
        keys.map(m => `<td class="num">${esc(fmt((k.metrics || {})[m]))}</td>`).join("") + "</tr>").join("") + "</tbody>"
    : `<tr><td class="muted">no committed checkpoint</td></tr>`;
  $("#trial-marks").textContent = t.marks.length ? t.marks.map(m => `${m.kind} at iteration ${m.iteration}` + (m.source ? ` (from ${m.source})` : "")).join("; ") : "none";
  $("#trial-error").textContent = t.error ? `${t.error}\n\n${t.traceback || ""}` : "none";
  $("#trial-stdout").textContent = t.stdout == null ? "(no stdout.txt)" : t.stdout;
  $("#trial-stderr").textContent = t.stderr == null ? "(no stderr.txt)" : t.stderr;
  const traces = c.traces.map(tr => ({ type: "scatter", mode: "lines+markers", name: c.metric, x: tr.x, y: tr.y, meta: tr.trial_id }));
  for (const [kind, [symbol, size, text]] of Object.entries(MARKS)) {
    const ms = c.marks.filter(m => m.kind === kind);
    if (ms.length) traces.push({ type: "scatter", mode: "markers", name: text, meta: `mark:${kind}`, x: ms.map(m => m.x), y: ms.map(m => m.y),
      marker: { symbol, size, color: "black", line: { width: 1.5, color: "black" } } });
  }
  await (await plotly()).react("trial-curve", traces, { margin: { t: 20 }, height: 320, xaxis: { title: { text: c.x } },
    yaxis: { title: { text: c.metric } }, uirevision: c.metric }, PLOT_CONFIG);
}
