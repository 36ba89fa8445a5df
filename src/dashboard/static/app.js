// The Manta dashboard page: tabs over the dashboard server's JSON routes (/api/list,
// /api/summary, /api/metrics, /api/logs, /api/log, /api/timeline, /api/jobs/).
//
// One timer refreshes the visible tab every 2 s, skipping a tab whose load is still in
// flight; a 401 from any route stops the timer and shows the login form (the session
// cookie is HttpOnly: the page only learns it is missing from a 401).
// Everything from the API reaches the DOM as text nodes or attribute values through
// el()/svg() below; nothing is ever assigned to innerHTML.
//
// document.body.dataset.loaded names the visible tab once its data has loaded: the
// browser test waits on it, and it is cleared on every tab switch.
'use strict';

const REFRESH_MS = 2000;
const LOG_TAIL_LINES = 1000;
const MAX_SLICES = 20000;  // an SVG with more gets slow; the download has them all
const STANDARD_METRICS = ['ray_tasks', 'ray_actors', 'ray_resources', 'ray_object_store_memory', 'ray_scheduler_tasks'];
const TASK_STATES = [
  'PENDING_ARGS_AVAIL', 'PENDING_NODE_ASSIGNMENT', 'SUBMITTED_TO_WORKER', 'RUNNING', 'FINISHED', 'FAILED', 'CANCELLED',
];
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];
const SVG_NS = 'http://www.w3.org/2000/svg';

// ---------- DOM helpers: the only way this file builds elements ----------

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];

function build(e, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false || c === '') continue;
    e.append(c instanceof Node ? c : String(c));  // a string becomes a Text node
  }
  return e;
}
const el = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
const svg = (tag, attrs, ...children) => build(document.createElementNS(SVG_NS, tag), attrs, children);

// ---------- formatting ----------

// [min, max] of numbers without spreading them into arguments (series can be long).
function extent(values) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) if (isFinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; }
  return [lo, hi];
}

function fmtBytes(n) {
  if (n == null || !isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  let v = Math.abs(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${n < 0 ? '-' : ''}${i === 0 ? v : v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

function fmtNum(n) {
  if (n == null || !isFinite(n)) return '—';
  const a = Math.abs(n);
  if (a >= 1e9) return `${+(n / 1e9).toPrecision(3)}G`;
  if (a >= 1e6) return `${+(n / 1e6).toPrecision(3)}M`;
  if (a >= 1e4) return `${+(n / 1e3).toPrecision(3)}k`;
  return String(+n.toPrecision(4));
}

const pad2 = (n) => String(n).padStart(2, '0');
function fmtClock(ms) {
  const d = new Date(ms);
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}
function fmtTime(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today ? fmtClock(ms) : `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${fmtClock(ms)}`;
}

function fmtDur(ms) {
  if (ms == null || !isFinite(ms) || ms < 0) return '';
  if (ms < 1) return `${Math.round(ms * 1000)} µs`;
  if (ms < 1000) return `${+ms.toPrecision(3)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${+s.toPrecision(3)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

// A resource quantity: memory resources are bytes, the rest plain numbers.
const fmtRes = (name, v) => (/memory/.test(name) ? fmtBytes(v) : fmtNum(v));

// Ray's nil IDs are all 'f'; unplaced actors and bundles report all '0' or ''.
const isNil = (id) => !id || /^(f+|0+)$/i.test(id);

function stateBadge(state) {
  if (!state) return '';
  let kind = 'wait';
  if (/^(ALIVE|RUNNING|CREATED)$/.test(state)) kind = 'good';
  else if (/^(FINISHED|REMOVED|CANCELLED)$/.test(state)) kind = 'done';
  else if (/^(DEAD|FAILED)$/.test(state)) kind = 'bad';
  return el('span', { class: `state ${kind}` }, state);
}

// Full IDs in the DOM (copyable), cut short by CSS with the whole in a tooltip.
const idSpan = (id) => (isNil(id) ? '' : el('span', { class: 'id', title: id }, id));

// ---------- API ----------

class AuthError extends Error {}

// Fetches a JSON route. Throws AuthError on 401 (unless `login`, whose 401 means a
// wrong token), and Error with the server's {"error"} message on any other failure.
async function api(path, { method = 'GET', body, login = false } = {}) {
  let res;
  try {
    res = await fetch(path, {
      method,
      credentials: 'same-origin',
      headers: body ? { 'Content-Type': 'application/json' } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
  } catch (e) {
    throw new Error(`cannot reach the dashboard server (${e.message})`);
  }
  let data = null;
  try { data = JSON.parse(await res.text()); } catch { /* not JSON: reported below */ }
  const message = data && typeof data.error === 'string' ? data.error : null;
  if (res.status === 401 && !login) throw new AuthError(message || 'not logged in');
  if (!res.ok) throw new Error(message || `${method} ${path}: HTTP ${res.status}`);
  if (data === null) throw new Error(`${method} ${path}: the answer is not JSON`);
  return data;
}

// A URL from a path and [key, value] pairs (pairs, since `filter` repeats).
function url(path, params = []) {
  const q = new URLSearchParams();
  for (const [k, v] of params) if (v != null && v !== '') q.append(k, String(v));
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

const list = (resource, params = []) => api(url('/api/list', [['resource', resource], ...params]));
const summary = (resource, params = []) => api(url('/api/summary', [['resource', resource], ...params]));

// "N of M matching", dropped rows and warnings of a list or summary reply.
function showListInfo(span, reply) {
  const rows = reply.rows || [];
  const parts = [];
  if (reply.num_matched != null) parts.push(`${reply.num_returned ?? rows.length} of ${reply.num_matched} matching`);
  if (reply.num_dropped) parts.push(`${reply.num_dropped} dropped (not kept by the cluster)`);
  const warnings = reply.warnings || [];
  span.replaceChildren(parts.join(' · '), ...warnings.map((w) => el('span', { class: 'warn' }, `⚠ ${w}`)));
}

// ---------- error banner ----------

// The banner shows one message and remembers its source, so that a tab's successful
// refresh clears the error that tab's refresh raised but not, say, a failed click.
let errorSource = null;
function showError(message, source) {
  errorSource = source;
  $('#error-text').textContent = message;
  $('#error-banner').hidden = false;
}
function clearError(source) {
  if (source !== undefined && source !== errorSource) return;
  errorSource = null;
  $('#error-banner').hidden = true;
}
function report(e, source) {
  if (e instanceof AuthError) showLogin();
  else showError(e.message, source);
}

// ---------- tables ----------

// Fills `table` with a header from `cols` ({h: title, f: row => content, c: class or
// row => class}) and one <tr data-id> per row. Skips the work when nothing changed,
// so a refresh does not undo the user's text selection.
function fillTable(table, cols, rows, idOf, rowClass) {
  const sig = JSON.stringify(rows) + nodeCache.key;
  if (table.dataset.sig === sig) return;
  table.dataset.sig = sig;
  const head = el('thead', null, el('tr', null, cols.map((c) => el('th', null, c.h))));
  const body = el('tbody');
  for (const r of rows) {
    const tr = el('tr', { 'data-id': idOf(r), class: rowClass ? rowClass(r) : null });
    for (const c of cols) tr.append(el('td', { class: typeof c.c === 'function' ? c.c(r) : c.c }, c.f(r)));
    body.append(tr);
  }
  if (!rows.length) body.append(el('tr', { class: 'empty' }, el('td', { colspan: cols.length }, 'nothing to show')));
  table.replaceChildren(head, body);
}
const table = (id) => $(`[data-testid="${id}"]`);

// ---------- nodes, shared by every tab that names one ----------

// `key` changes only when a node's IP does, so tables naming nodes redraw then.
const nodeCache = { byId: new Map(), at: 0, key: '' };
function rememberNodes(rows) {
  nodeCache.byId = new Map(rows.map((n) => [n.node_id, n]));
  nodeCache.at = Date.now();
  nodeCache.key = rows.map((n) => `${n.node_id}@${n.node_ip}`).join();
}
async function ensureNodes() {
  if (Date.now() - nodeCache.at > 10000) rememberNodes((await list('nodes')).rows || []);
}
function nodeLabel(id) {
  if (isNil(id)) return '';
  const n = nodeCache.byId.get(id);
  return el('span', { class: 'node', title: id }, n ? `${id.slice(0, 8)} ${n.node_ip}` : id.slice(0, 12));
}

// ---------- Overview ----------

function bar(resource, used, total, fmt) {
  const pct = total > 0 ? Math.min(100, (100 * used) / total) : 0;
  const fill = el('div', { class: pct >= 90 ? 'fill hot' : 'fill' });
  fill.style.width = `${pct.toFixed(1)}%`;
  return el('div', { class: 'bar', 'data-resource': resource, title: `${resource}: ${fmt(used)} of ${fmt(total)} in use` },
    fill, el('span', { class: 'label' }, `${fmt(used)} / ${fmt(total)}`));
}

const usedOf = (n, key) => (n.resources_total?.[key] ?? 0) - (n.resources_available?.[key] ?? n.resources_total?.[key] ?? 0);

function otherResources(n) {
  const skip = /^(CPU|memory|object_store_memory)$|^node:|_group_/;
  return Object.entries(n.resources_total || {}).filter(([k]) => !skip.test(k))
    .map(([k, total]) => `${k} ${fmtRes(k, usedOf(n, k))}/${fmtRes(k, total)}`).join(', ');
}

const NODE_COLS = [
  {
    h: 'Node',
    f: (n) => [idSpan(n.node_id), n.node_name && n.node_name !== n.node_ip ? el('div', { class: 'sub' }, n.node_name) : null,
      n.node_type ? el('div', { class: 'sub' }, `type ${n.node_type} · ${n.instance_id}`) : null],
  },
  { h: 'State', f: (n) => [stateBadge(n.state), n.draining ? ' draining' : '', n.death_reason ? el('div', { class: 'sub' }, n.death_reason) : null] },
  { h: 'IP', f: (n) => n.node_ip },
  { h: 'Head', f: (n) => (n.is_head_node ? 'head' : '') },
  { h: 'CPU', f: (n) => bar('CPU', usedOf(n, 'CPU'), n.resources_total?.CPU ?? 0, fmtNum) },
  { h: 'Memory', f: (n) => bar('memory', usedOf(n, 'memory'), n.resources_total?.memory ?? 0, fmtBytes) },
  {
    h: 'Object store',
    f: (n) => [
      bar('object_store', n.object_store_used_bytes ?? usedOf(n, 'object_store_memory'),
        n.object_store_capacity_bytes ?? n.resources_total?.object_store_memory ?? 0, fmtBytes),
      el('div', { class: 'sub' }, `${n.object_store_num_objects ?? 0} objects`,
        n.object_store_spilled_bytes ? ` · ${fmtBytes(n.object_store_spilled_bytes)} spilled` : ''),
    ],
  },
  { h: 'Other resources', f: otherResources, c: 'small' },
  { h: 'Raylet pid', f: (n) => n.raylet_pid, c: 'num' },
  { h: 'Started', f: (n) => fmtTime(n.start_time_ms) },
];

const JOB_COLS = [
  { h: 'Job ID', f: (j) => idSpan(j.job_id) },
  { h: 'Status', f: (j) => stateBadge(j.status) },
  { h: 'Entrypoint', f: (j) => j.entrypoint, c: 'wrap' },
  { h: 'Driver', f: (j) => `${j.driver_ip_address || ''}${j.driver_pid ? ` pid ${j.driver_pid}` : ''}` },
  { h: 'Started', f: (j) => fmtTime(j.start_time_ms) },
  { h: 'Duration', f: (j) => (j.end_time_ms ? fmtDur(j.end_time_ms - j.start_time_ms) : 'running') },
];

const WORKER_COLS = [
  { h: 'Worker ID', f: (w) => idSpan(w.worker_id) },
  { h: 'Type', f: (w) => w.worker_type },
  { h: 'State', f: (w) => [stateBadge(w.is_alive ? 'ALIVE' : 'DEAD'), w.state ? ` ${w.state}` : ''] },
  { h: 'Node', f: (w) => nodeLabel(w.node_id) },
  { h: 'PID', f: (w) => w.pid, c: 'num' },
  { h: 'Job', f: (w) => idSpan(w.job_id) },
  { h: 'Started', f: (w) => fmtTime(w.start_time_ms) },
  { h: 'Exit', f: (w) => (w.is_alive ? '' : [fmtTime(w.end_time_ms), w.exit_detail ? el('div', { class: 'sub' }, w.exit_detail) : null]), c: 'wrap' },
];

// The autoscaler's nodes (launching, running, draining, terminating), the demand the
// nodes there are do not meet, and what it did last (GET /api/autoscaler).
const INSTANCE_COLS = [
  { h: 'Instance', f: (i) => i.instance_id },
  { h: 'Type', f: (i) => i.node_type },
  { h: 'State', f: (i) => stateBadge(String(i.state).toUpperCase()) },
  { h: 'Node', f: (i) => (i.node_id ? nodeLabel(i.node_id) : '') },
  { h: 'Since', f: (i) => fmtTime(i.since_ms) },
];
const DEMAND_COLS = [
  { h: 'Pending demand', f: (d) => Object.entries(d.shape || {}).map(([k, v]) => `${k}: ${fmtNum(v)}`).join(', ') },
  { h: 'Count', f: (d) => d.count, c: 'num' },
  { h: 'Status', f: (d) => d.status },
];

function showAutoscaler(state) {
  $('#autoscaler').hidden = !state.enabled;
  if (!state.enabled) return;
  const types = Object.entries(state.node_types || {}).map(([name, t]) => `${name}: ${t.count} (min ${t.min_workers}, max ${t.max_workers})`);
  $('#autoscaler-line').textContent = `${(state.instances || []).length} nodes launched · ${types.join(' · ')}`;
  fillTable(table('autoscaler-table'), INSTANCE_COLS, state.instances || [], (i) => i.instance_id);
  fillTable(table('demand-table'), DEMAND_COLS, state.unmet_demand || [], (d) => JSON.stringify(d.shape) + d.status);
  const eventLine = (e) => `${new Date(e.time_ms).toLocaleTimeString()} ${e.message}`;
  $('#autoscaler-events').replaceChildren(...(state.events || []).slice(-8).map((e) => el('li', null, eventLine(e))));
}

async function loadOverview() {
  const [nodes, jobs, workers, autoscaler] = await Promise.all([
    list('nodes', [['detail', 1]]), list('jobs', [['limit', 200]]), list('workers', [['limit', 500]]),
    api('/api/autoscaler')]);
  showAutoscaler(autoscaler);
  const nrows = (nodes.rows || []).sort((a, b) => b.is_head_node - a.is_head_node
    || String(a.state).localeCompare(String(b.state)) || String(a.node_ip).localeCompare(String(b.node_ip)));
  rememberNodes(nrows);
  const alive = nrows.filter((n) => n.state === 'ALIVE');
  const sum = (f) => alive.reduce((s, n) => s + (f(n) || 0), 0);
  $('#cluster-line').textContent = `${alive.length} of ${nrows.length} nodes alive · CPU ${fmtNum(sum((n) => usedOf(n, 'CPU')))}`
    + ` of ${fmtNum(sum((n) => n.resources_total?.CPU))} in use · object store ${fmtBytes(sum((n) => n.object_store_used_bytes))}`
    + ` of ${fmtBytes(sum((n) => n.object_store_capacity_bytes))}`;
  fillTable(table('nodes-table'), NODE_COLS, nrows, (n) => n.node_id, (n) => (n.state === 'DEAD' ? 'dead' : null));
  const jrows = (jobs.rows || []).sort((a, b) => (b.start_time_ms || 0) - (a.start_time_ms || 0));
  fillTable(table('jobs-table'), JOB_COLS, jrows, (j) => j.job_id);
  const wrows = (workers.rows || []).sort((a, b) => b.is_alive - a.is_alive || (b.start_time_ms || 0) - (a.start_time_ms || 0));
  showListInfo($('#workers-info'), workers);
  fillTable(table('workers-table'), WORKER_COLS, wrows, (w) => w.worker_id, (w) => (w.is_alive ? null : 'dead'));
}

// ---------- Actors ----------

const ACTOR_COLS = [
  { h: 'Actor ID', f: (a) => idSpan(a.actor_id) },
  { h: 'Class', f: (a) => a.class_name },
  { h: 'Name', f: (a) => a.name },
  { h: 'State', f: (a) => [stateBadge(a.state), a.detached ? el('div', { class: 'sub' }, 'detached') : null] },
  { h: 'Node', f: (a) => nodeLabel(a.node_id) },
  { h: 'PID', f: (a) => a.pid || '', c: 'num' },
  { h: 'Restarts', f: (a) => `${a.num_restarts ?? 0} / ${a.max_restarts < 0 ? '∞' : a.max_restarts ?? 0}`, c: 'num' },
  { h: 'Job', f: (a) => idSpan(a.job_id) },
  { h: 'Death cause', f: (a) => a.death_cause, c: 'wrap error-text' },
];

function stateChips(container, bySummary) {
  const counts = {};
  for (const entry of Object.values(bySummary || {})) {
    for (const [s, n] of Object.entries(entry.state_counts || {})) counts[s] = (counts[s] || 0) + n;
  }
  container.replaceChildren(...Object.entries(counts).map(([s, n]) => el('span', { class: 'chip' }, stateBadge(s), ` ${n}`)));
}

async function loadActors() {
  const [actors, sum] = await Promise.all([list('actors', [['limit', 1000]]), summary('actors'), ensureNodes()]);
  showListInfo($('#actors-info'), actors);
  stateChips($('#actors-counts'), sum.summary?.by_name);
  fillTable(table('actors-table'), ACTOR_COLS, actors.rows || [], (a) => a.actor_id, (a) => (a.state === 'DEAD' ? 'dead' : null));
}

// ---------- Tasks ----------

const TASK_COLS = [
  { h: 'Task ID', f: (t) => idSpan(t.task_id) },
  { h: 'Try', f: (t) => t.attempt_number, c: 'num' },
  { h: 'Name', f: (t) => el('span', { title: t.func_or_class_name || null }, t.name || t.func_or_class_name) },
  { h: 'State', f: (t) => stateBadge(t.state) },
  { h: 'Type', f: (t) => (t.type || '').replace(/_TASK$/, '').toLowerCase(), c: 'small' },
  { h: 'Job', f: (t) => idSpan(t.job_id) },
  { h: 'Node', f: (t) => nodeLabel(t.node_id) },
  { h: 'Worker pid', f: (t) => t.worker_pid || '', c: 'num' },
  { h: 'Started', f: (t) => fmtTime(t.start_time_ms) },
  { h: 'Duration', f: (t) => (t.end_time_ms && t.start_time_ms ? fmtDur(t.end_time_ms - t.start_time_ms) : ''), c: 'num' },
  {
    h: 'Error',
    f: (t) => (t.error_type || t.error_message ? [el('strong', null, t.error_type || 'error'), ' ', el('span', null, t.error_message || '')] : ''),
    c: (t) => (t.error_type || t.error_message || t.state === 'FAILED' ? 'error-message' : null),
  },
];

function summaryCols(entries, stateOrder) {
  const seen = new Set(entries.flatMap(([, e]) => Object.keys(e.state_counts || {})));
  const states = [...stateOrder.filter((s) => seen.has(s)), ...[...seen].filter((s) => !stateOrder.includes(s)).sort()];
  return states.map((s) => ({ h: stateBadge(s), f: ([, e]) => e.state_counts?.[s] ?? '', c: 'num' }));
}

// The filter last applied (Enter or the state menu), not what is being typed.
const taskQuery = { clauses: [], state: '' };
function applyTaskQuery() {
  taskQuery.clauses = $('#tasks-filter').value.trim().split(/\s+/).filter(Boolean).map((c) => ['filter', c]);
  taskQuery.state = $('#tasks-state').value;
  table('tasks-table').dataset.sig = '';
  refresh('tasks', false);
}

async function loadTasks() {
  const { clauses, state } = taskQuery;
  const input = $('#tasks-filter');
  let sum, tasks;
  try {
    [sum, tasks] = await Promise.all([
      summary('tasks', clauses),
      list('tasks', [...clauses, ['filter', state && `state=${state}`], ['limit', 500]]),
      ensureNodes(),
    ]);
  } catch (e) {
    input.classList.toggle('invalid', !(e instanceof AuthError));  // most likely a bad filter
    throw e;
  }
  input.classList.remove('invalid');
  const entries = Object.entries(sum.summary?.by_name || {}).sort(([a], [b]) => (a < b ? -1 : 1));
  const total = (e) => Object.values(e.state_counts || {}).reduce((s, n) => s + n, 0);
  fillTable(table('tasks-summary'), [
    { h: 'Function', f: ([name]) => name },
    { h: 'Type', f: ([, e]) => (e.type || '').replace(/_TASK$/, '').toLowerCase(), c: 'small' },
    ...summaryCols(entries, TASK_STATES),
    { h: 'Total', f: ([, e]) => total(e), c: 'num' },
  ], entries, ([name]) => name);
  showListInfo($('#tasks-info'), tasks);
  // Failed attempts first, then the newest: the errors are what one comes here for.
  const rows = (tasks.rows || []).sort((a, b) => (b.state === 'FAILED') - (a.state === 'FAILED')
    || (b.start_time_ms || 0) - (a.start_time_ms || 0));
  fillTable(table('tasks-table'), TASK_COLS, rows, (t) => t.task_id, (t) => (t.state === 'FAILED' ? 'failed' : null));
}

// ---------- Placement groups ----------

function bundleList(bundles) {
  return el('ul', { class: 'bundles' }, (bundles || []).map((b, i) => el('li', null,
    `#${b.bundle_index ?? i} `,
    Object.entries(b.unit_resources || {}).map(([k, v]) => `${k} ${fmtRes(k, v)}`).join(', ') || '{}',
    isNil(b.node_id) ? '' : [' on ', nodeLabel(b.node_id)])));
}

const PG_COLS = [
  { h: 'ID', f: (g) => idSpan(g.placement_group_id) },
  { h: 'Name', f: (g) => g.name },
  { h: 'Strategy', f: (g) => g.strategy },
  { h: 'State', f: (g) => [stateBadge(g.state), g.infeasible ? el('div', { class: 'sub error-text' }, 'infeasible') : null] },
  { h: 'Creator job', f: (g) => idSpan(g.creator_job_id) },
  { h: 'Bundles', f: (g) => bundleList(g.bundles) },
  { h: 'Pending reason', f: (g) => g.pending_reason || '', c: 'wrap' },
];

async function loadPlacementGroups() {
  const [groups] = await Promise.all([list('placement-groups', [['detail', 1], ['limit', 1000]]), ensureNodes()]);
  showListInfo($('#pgs-info'), groups);
  fillTable(table('placement-groups-table'), PG_COLS, groups.rows || [], (g) => g.placement_group_id);
}

// ---------- Objects ----------

const OBJECT_COLS = [
  { h: 'Object ID', f: (o) => idSpan(o.object_id) },
  { h: 'Size', f: (o) => fmtBytes(o.object_size), c: 'num' },
  { h: 'Reference', f: (o) => o.reference_type, c: 'small' },
  { h: 'Task status', f: (o) => o.task_status, c: 'small' },
  { h: 'Owner', f: (o) => `${(o.type || '').toLowerCase()} pid ${o.pid} @ ${o.ip}` },
  { h: 'Owner node', f: (o) => nodeLabel(o.node_id) },
  { h: 'Pinned at', f: (o) => nodeLabel(o.pinned_at) },
  { h: 'Copies', f: (o) => el('span', { title: (o.locations || []).join('\n') || null }, (o.locations || []).length), c: 'num' },
  { h: 'Spilled', f: (o) => (o.spilled ? 'yes' : '') },
  { h: 'Borrowers', f: (o) => o.num_borrowers || '', c: 'num' },
];

async function loadObjects() {
  const [sum, objects] = await Promise.all([summary('objects'), list('objects', [['limit', 1000]]), ensureNodes()]);
  const s = sum.summary || {};
  const entries = Object.entries(s.by_name || {});
  const count = (e) => Object.values(e.state_counts || {}).reduce((a, n) => a + n, 0);
  $('#objects-total').textContent = `${s.total ?? 0} objects · ${fmtBytes(s.total_bytes ?? 0)}`
    + (sum.num_dropped ? ` · ${sum.num_dropped} dropped` : '') + (sum.warnings || []).map((w) => ` ⚠ ${w}`).join('');
  fillTable(table('objects-summary'), [
    { h: 'Reference type', f: ([name]) => name },
    { h: 'Objects', f: ([, e]) => count(e), c: 'num' },
    { h: 'Size', f: ([, e]) => fmtBytes(e.bytes), c: 'num' },
    { h: 'By task status', f: ([, e]) => Object.entries(e.state_counts || {}).map(([k, n]) => `${k} ${n}`).join(', ') },
  ], entries, ([name]) => name);
  showListInfo($('#objects-info'), objects);
  fillTable(table('objects-table'), OBJECT_COLS, objects.rows || [], (o) => o.object_id);
}

// ---------- Metrics ----------

const plots = new Map();  // metric name -> its <figure>, kept across refreshes

function legendText(labels, showInstance) {
  return Object.entries(labels || {}).filter(([k]) => showInstance || k !== 'instance')
    .map(([k, v]) => `${k}=${v}`).join(' ');
}

// Draws one metric: a line and circles per series on shared axes, and a legend.
function drawPlot(fig, name, series, showInstance) {
  const W = 560, H = 200, L = 58, R = 12, T = 10, B = 22;
  const pts = series.flatMap((s) => s.points || []);
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': name });
  const legend = el('ul', { class: 'legend' });
  const fmt = /memory|bytes/i.test(name) && name !== 'ray_resources' ? fmtBytes : fmtNum;
  chart.append(svg('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }),
    svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }));
  if (!pts.length) {
    chart.append(svg('text', { x: (L + W) / 2, y: H / 2, class: 'nodata' }, 'no data yet'));
  } else {
    const [x0, xMax] = extent(pts.map((p) => p[0]));
    const x1 = Math.max(x0 + 1, xMax);
    const [yMin, yMax] = extent(pts.map((p) => p[1]));
    const y0 = Math.min(0, isFinite(yMin) ? yMin : 0);
    const y1 = yMax > y0 ? yMax : y0 + 1;
    const px = (t) => L + ((t - x0) / (x1 - x0)) * (W - L - R);
    const py = (v) => H - B - ((v - y0) / (y1 - y0)) * (H - B - T);
    chart.append(
      svg('line', { x1: L, y1: T, x2: W - R, y2: T, class: 'grid' }),
      svg('text', { x: L - 4, y: T + 4, class: 'ylabel' }, fmt(y1)),
      svg('text', { x: L - 4, y: H - B, class: 'ylabel' }, fmt(y0)),
      svg('text', { x: L, y: H - 6, class: 'xlabel' }, fmtClock(x0)),
      svg('text', { x: W - R, y: H - 6, class: 'xlabel end' }, fmtClock(x1)));
    // Circles for at most ~3000 points in all, so a long history stays cheap to redraw.
    const step = Math.max(1, Math.ceil(pts.length / 3000));
    series.forEach((s, i) => {
      const colour = PALETTE[i % PALETTE.length];
      const text = legendText(s.labels, showInstance) || name;
      const good = (s.points || []).filter((p) => isFinite(p[1]));
      const d = good.map((p, k) => `${k ? 'L' : 'M'}${px(p[0]).toFixed(1)},${py(p[1]).toFixed(1)}`).join('');
      const g = svg('g', { class: 'line' }, svg('path', { d, class: 'series', stroke: colour, 'data-labels': text }));
      good.forEach((p, k) => {
        if (k % step && k !== good.length - 1) return;
        g.append(svg('circle', { cx: px(p[0]).toFixed(1), cy: py(p[1]).toFixed(1), r: 2, fill: colour },
          svg('title', null, `${text}\n${fmt(p[1])} at ${fmtClock(p[0])}`)));
      });
      chart.append(g);
      const last = good.length ? fmt(good[good.length - 1][1]) : '—';
      const swatch = el('span', { class: 'swatch' });
      swatch.style.background = colour;
      legend.append(el('li', null, swatch, text, el('span', { class: 'muted' }, ` ${last}`)));
    });
  }
  fig.replaceChildren(el('figcaption', null, name), chart, legend);
}

// The history already fetched: each poll asks only for points newer than the last.
const metricsCache = { since: 0, series: new Map() };

async function loadMetrics() {
  const m = await api(`/api/metrics?since_ms=${metricsCache.since}`);
  const keep = m.history_points || 300;
  for (const s of m.series || []) {
    const key = s.name + '\u001f' + JSON.stringify(s.labels);
    if (!metricsCache.series.has(key)) metricsCache.series.set(key, { name: s.name, labels: s.labels, points: [] });
    const cached = metricsCache.series.get(key);
    for (const p of s.points) {
      cached.points.push(p);
      metricsCache.since = Math.max(metricsCache.since, p[0]);
    }
    if (cached.points.length > keep) cached.points.splice(0, cached.points.length - keep);
  }
  const groups = new Map(STANDARD_METRICS.map((n) => [n, []]));
  const all = [...metricsCache.series.values()];
  for (const s of all) {
    if (!groups.has(s.name)) groups.set(s.name, []);
    groups.get(s.name).push(s);
  }
  const showInstance = new Set(all.map((s) => s.labels?.instance)).size > 1;
  const names = [...STANDARD_METRICS, ...[...groups.keys()].filter((n) => !STANDARD_METRICS.includes(n)).sort()];
  const root = $('#plots');
  for (const [n, fig] of plots) if (!groups.has(n)) { fig.remove(); plots.delete(n); }
  for (const n of names) {
    if (!plots.has(n)) plots.set(n, el('figure', { class: 'plot', 'data-testid': `plot-${n}` }));
    const sorted = groups.get(n).sort((a, b) => (legendText(a.labels, true) < legendText(b.labels, true) ? -1 : 1));
    drawPlot(plots.get(n), n, sorted, showInstance);
    root.append(plots.get(n));  // re-appending keeps the order of `names`
  }
  $('#metrics-info').textContent = `${all.length} series, a point every ${fmtDur(m.period_ms || REFRESH_MS)}.`
    + (all.length ? '' : ' The server has not scraped any daemon yet.');
}

// ---------- Logs ----------

const logs = { node: '', file: '', files: [], busy: false, again: false };

function fillSelect(select, options, keep) {
  const previous = keep ?? select.value;
  select.replaceChildren(...options.map(([value, text]) => el('option', { value }, text)));
  if (options.some(([v]) => v === previous)) select.value = previous;
}

// Updates the file list in place, item by item (keyed by name): replacing an item
// between a mousedown and its mouseup would swallow the click.
const logItems = new Map();
function renderLogFiles() {
  const grep = $('#logs-grep').value.trim().toLowerCase();
  const files = logs.files.filter((f) => f.name.toLowerCase().includes(grep));
  const items = files.map((f) => {
    if (!logItems.has(f.name)) {
      logItems.set(f.name, el('li', {
        'data-name': f.name, title: f.name, tabindex: 0,
        onclick: () => { logs.file = f.name; renderLogFiles(); loadLogFile(true); },
        onkeydown: (ev) => { if (ev.key === 'Enter') ev.currentTarget.click(); },
      }, el('div', { class: 'fname' }, f.name), el('div', { class: 'sub' })));
    }
    const li = logItems.get(f.name);
    li.classList.toggle('active', f.name === logs.file);
    li.lastChild.textContent = [fmtBytes(f.size_bytes), fmtTime(f.modified_ms), f.pid ? `pid ${f.pid}` : '',
      f.worker_id ? (f.alive ? 'alive' : 'exited') : '', f.job_id ? `job ${f.job_id.slice(0, 8)}` : ''].filter(Boolean).join(' · ');
    return li;
  });
  const root = $('[data-testid="log-files"]');
  let ul = $('ul', root);
  if (!ul) root.replaceChildren(ul = el('ul'));
  ul.replaceChildren(...items);
  root.classList.toggle('none', !items.length);
}

async function loadLogFiles() {
  if (!logs.node) { logs.files = []; renderLogFiles(); return; }
  const reply = await api(url('/api/logs', [['node_id', logs.node]]));
  // Daemon logs first, then worker logs, newest first.
  logs.files = (reply.files || []).sort((a, b) => !!a.worker_id - !!b.worker_id || (b.modified_ms || 0) - (a.modified_ms || 0));
  renderLogFiles();
}

// Shows the tail of the chosen file; `jump` scrolls to its end, as does a refresh
// while the view already sits at the end (so following works like `tail -f`).
// A call made while one is in flight runs once that one is done.
async function loadLogFile(jump) {
  const view = $('[data-testid="log-view"]');
  if (!logs.file) return;
  if (logs.busy) { logs.again = logs.again || jump || 'yes'; return; }
  logs.busy = true;
  const { node, file } = logs;
  try {
    const atEnd = view.scrollTop + view.clientHeight >= view.scrollHeight - 4;
    const r = await api(url('/api/log', [['node_id', node], ['name', file], ['tail', LOG_TAIL_LINES]]));
    if (file !== logs.file || node !== logs.node) return;  // the user has moved on
    $('#log-title').textContent = `${file} — last ${LOG_TAIL_LINES} lines of ${fmtBytes(r.size_bytes)}, read ${fmtClock(Date.now())}`;
    if (view.textContent !== r.data) view.textContent = r.data || '';
    if (jump || atEnd) view.scrollTop = view.scrollHeight;
    clearError('log');
  } catch (e) {
    report(e, 'log');
  } finally {
    logs.busy = false;
    const again = logs.again;
    logs.again = false;
    if (again) loadLogFile(again === true);
  }
}

async function loadLogs(first) {
  if (first) {
    const nodes = (await list('nodes')).rows || [];
    rememberNodes(nodes);
    const head = nodes.find((n) => n.is_head_node && n.state === 'ALIVE') || nodes[0];
    fillSelect($('#logs-node'), nodes.map((n) => [n.node_id,
      `${n.node_ip} ${n.node_id.slice(0, 8)}${n.is_head_node ? ' (head)' : ''}${n.state === 'DEAD' ? ' (dead)' : ''}`]),
    logs.node || (head && head.node_id));
    logs.node = $('#logs-node').value;
  }
  await loadLogFiles();
  if ($('#logs-follow').checked) await loadLogFile(false);
}

// ---------- Timeline ----------

let trace = null;  // the last /api/timeline reply, redrawn on zoom without a fetch

function hue(s) {
  let h = 0;
  for (const c of s) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return h % 360;
}

// Ticks 1, 2 or 5 times a power of ten apart, about ten across `span` (µs).
function tickStep(span) {
  const raw = span / 10;
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
}

function drawTimeline() {
  const view = $('[data-testid="timeline-view"]');
  const events = Array.isArray(trace) ? trace : trace?.traceEvents || [];
  const procs = new Map(), threads = new Map(), tracks = new Map();
  const key = (e) => `${e.pid}:${e.tid}`;
  const track = (e) => {
    if (!tracks.has(key(e))) tracks.set(key(e), { pid: e.pid, tid: e.tid, slices: [] });
    return tracks.get(key(e));
  };
  let slices = [];
  const flows = new Map();
  for (const e of events) {
    if (e.ph === 'M' && e.name === 'process_name') procs.set(e.pid, e.args?.name);
    else if (e.ph === 'M' && e.name === 'thread_name') threads.set(key(e), e.args?.name);
    else if (e.ph === 'X') { track(e).slices.push(e); slices.push(e); }
    else if (e.ph === 's' || e.ph === 'f') {
      track(e);
      if (!flows.has(e.id)) flows.set(e.id, {});
      flows.get(e.id)[e.ph] = e;
    }
  }
  const total = slices.length;
  if (total > MAX_SLICES) slices = slices.sort((a, b) => a.ts - b.ts).slice(0, MAX_SLICES);
  const rows = [...tracks.values()].sort((a, b) => a.pid - b.pid || a.tid - b.tid);
  const rowOf = new Map(rows.map((t, i) => [`${t.pid}:${t.tid}`, i]));
  const times = slices.flatMap((e) => [e.ts, e.ts + (e.dur || 0)]);
  for (const f of flows.values()) for (const e of Object.values(f)) times.push(e.ts);
  const [lo, hi] = extent(times);
  const t0 = isFinite(lo) ? lo : 0;
  const span = Math.max(1, (isFinite(hi) ? hi : 1) - t0);

  const LABEL = 210, ROW = 20, TOP = 24, zoom = Number($('#timeline-zoom').value) || 1;
  const width = Math.max(600, (view.clientWidth || 1100) - 2) * zoom;
  const height = TOP + Math.max(1, rows.length) * ROW + 6;
  const x = (ts) => LABEL + ((ts - t0) / span) * (width - LABEL - 10);
  const y = (e) => TOP + rowOf.get(key(e)) * ROW;
  const chart = svg('svg', { width, height, class: 'tl' },
    svg('defs', null, svg('marker', { id: 'arrow', viewBox: '0 0 6 6', refX: 6, refY: 3, markerWidth: 6, markerHeight: 6, orient: 'auto' },
      svg('path', { d: 'M0,0L6,3L0,6z', class: 'flow-head' }))));
  const step = tickStep(span);
  for (let t = 0; t <= span; t += step) {
    chart.append(svg('line', { x1: x(t0 + t), y1: TOP - 4, x2: x(t0 + t), y2: height, class: 'grid' }));
    if (x(t0 + t) < width - 50) chart.append(svg('text', { x: x(t0 + t) + 2, y: TOP - 8, class: 'xlabel' }, t ? `+${fmtDur(t / 1000)}` : '0'));
  }
  rows.forEach((t, i) => {
    if (i % 2) chart.append(svg('rect', { x: 0, y: TOP + i * ROW, width, height: ROW, class: 'stripe' }));
  });
  for (const e of slices) {
    const w = Math.max(1, x(e.ts + (e.dur || 0)) - x(e.ts));
    const args = Object.entries(e.args || {}).map(([k, v]) => `\n${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join('');
    const g = svg('g', { class: 'slice' },
      svg('rect', { x: x(e.ts).toFixed(1), y: y(e) + 2, width: w.toFixed(1), height: ROW - 4, fill: `hsl(${hue(String(e.name))},55%,62%)` }),
      svg('title', null, `${e.name} — ${fmtDur((e.dur || 0) / 1000)}\nstart +${fmtDur((e.ts - t0) / 1000)}${args}`));
    if (w > String(e.name).length * 6.5 + 6) g.append(svg('text', { x: x(e.ts) + 3, y: y(e) + ROW - 6 }, e.name));
    chart.append(g);
  }
  for (const { s, f } of flows.values()) {
    if (!s || !f) continue;
    chart.append(svg('line', { x1: x(s.ts), y1: y(s) + ROW / 2, x2: x(f.ts), y2: y(f) + ROW / 2, class: 'flow', 'marker-end': 'url(#arrow)' }));
  }
  // Track names stay in view when the drawing scrolls sideways (see the scroll handler).
  const labels = svg('g', { class: 'labels' }, svg('rect', { x: 0, y: 0, width: LABEL - 4, height, class: 'label-bg' }));
  rows.forEach((t, i) => {
    const name = `${procs.get(t.pid) ?? `pid ${t.pid}`} · ${threads.get(`${t.pid}:${t.tid}`) ?? `tid ${t.tid}`}`;
    labels.append(svg('text', { x: 4, y: TOP + i * ROW + ROW - 6 }, svg('title', null, name), name));
  });
  if (!rows.length) labels.append(svg('text', { x: 4, y: TOP + ROW - 6, class: 'nodata' }, 'no task events'));
  chart.append(labels);
  view.replaceChildren(chart);
  view.scrollLeft = 0;
  $('#timeline-info').textContent = `${total > slices.length ? `the first ${slices.length} of ${total}` : total} slices on ${rows.length} tracks over ${fmtDur(span / 1000)}`
    + ' — hover a slice for its name and duration; arrows run from submission to start.';
}

async function loadTimeline() {
  const jobs = ((await list('jobs', [['limit', 200]])).rows || []).sort((a, b) => (b.start_time_ms || 0) - (a.start_time_ms || 0));
  fillSelect($('#timeline-job'), [['', 'all jobs'], ...jobs.map((j) => [j.job_id,
    `${j.job_id} ${j.status}${j.entrypoint ? ` — ${j.entrypoint.slice(0, 60)}` : ''}`])]);
  const job = $('#timeline-job').value;
  $('#timeline-download').href = url('/api/timeline', [['job_id', job], ['download', 1]]);
  trace = await api(url('/api/timeline', [['job_id', job]]));
  drawTimeline();
}

// ---------- Jobs (manta job submit) ----------

let jobShown = null;  // the submission id whose output is shown

const SUBMISSION_COLS = [
  { h: 'Submission ID', f: (j) => el('a', { href: '#jobs', 'data-job': j.submission_id }, j.submission_id) },
  { h: 'Status', f: (j) => stateBadge(j.status) },
  { h: 'Entrypoint', f: (j) => j.entrypoint, c: 'wrap' },
  { h: 'Message', f: (j) => j.message, c: 'wrap' },
  { h: 'Started', f: (j) => fmtTime(j.start_time), c: 'small' },
  { h: 'Ended', f: (j) => fmtTime(j.end_time), c: 'small' },
  { h: 'Exit code', f: (j) => (j.driver_exit_code == null ? '' : String(j.driver_exit_code)), c: 'num' },
  { h: '', f: (j) => (j.status === 'RUNNING' || j.status === 'PENDING'
    ? el('button', { type: 'button', 'data-stop': j.submission_id }, 'Stop') : '') },
];

async function loadSubmittedJobs() {
  const jobs = await api('/api/jobs/');
  jobs.sort((a, b) => (b.start_time || 0) - (a.start_time || 0));
  fillTable(table('submitted-jobs-table'), SUBMISSION_COLS, jobs, (j) => j.submission_id);
  if (jobShown) {
    const logs = await api(`/api/jobs/${encodeURIComponent(jobShown)}/logs`);
    $('#job-log-title').textContent = `output of ${jobShown}`;
    table('job-log-view').textContent = logs.logs;
  }
}

table('submitted-jobs-table').addEventListener('click', async (e) => {
  const pick = e.target.closest('[data-job]');
  const stop = e.target.closest('[data-stop]');
  if (pick) {
    e.preventDefault();
    jobShown = pick.dataset.job;
  } else if (stop) {
    try {
      await api(`/api/jobs/${encodeURIComponent(stop.dataset.stop)}/stop`, { method: 'POST', body: {} });
    } catch (err) {
      report(err, 'click');
      return;
    }
  } else {
    return;
  }
  refresh('jobs', false);
});

// ---------- tabs, timer, login ----------

// live: refreshed by the timer; load(first) fetches and draws the tab.
const tabs = {
  overview: { live: true, load: loadOverview },
  actors: { live: true, load: loadActors },
  tasks: { live: true, load: loadTasks },
  'placement-groups': { live: true, load: loadPlacementGroups },
  objects: { live: true, load: loadObjects },
  metrics: { live: true, load: loadMetrics },
  logs: { live: true, load: loadLogs },
  timeline: { live: false, load: loadTimeline },
  jobs: { live: true, load: loadSubmittedJobs },
};
let current = null;
let timer = null;

const tabFromHash = () => (tabs[location.hash.slice(1)] ? location.hash.slice(1) : 'overview');

// Loads tab `name`; a call made while a load is in flight runs once that one is done,
// so a filter applied or a job picked mid-load is not lost.
async function refresh(name, first) {
  const tab = tabs[name];
  if (document.body.dataset.auth === 'out') return;
  if (tab.busy) { tab.again = tab.again === 'first' || first ? 'first' : 'yes'; return; }
  tab.busy = true;
  try {
    await tab.load(first);
    document.body.dataset.auth = 'in';
    clearError(`tab:${name}`);
    if (current === name) {
      document.body.dataset.loaded = name;
      $('#updated').textContent = `updated ${fmtClock(Date.now())}`;
    }
  } catch (e) {
    report(e, `tab:${name}`);
  } finally {
    tab.busy = false;
    const again = tab.again;
    tab.again = null;
    if (again) refresh(name, again === 'first');
  }
}

function showTab(name) {
  current = name;
  delete document.body.dataset.loaded;
  for (const a of $$('#tabs a')) a.classList.toggle('active', a.dataset.tab === name);
  for (const p of $$('.panel')) p.hidden = p.id !== `panel-${name}`;
  refresh(name, true);
}

function startTimer() {
  clearInterval(timer);
  timer = setInterval(() => {
    const tab = tabs[current];
    if (!document.hidden && tab.live && !tab.busy) refresh(current, false);
  }, REFRESH_MS);
}

function showLogin() {
  clearInterval(timer);
  timer = null;
  document.body.dataset.auth = 'out';
  delete document.body.dataset.loaded;
  $('#login').hidden = false;
  $('#login-token').focus();
}

async function login(ev) {
  ev.preventDefault();
  const msg = $('#login-error');
  msg.hidden = true;
  try {
    await api('/api/login', { method: 'POST', body: { token: $('#login-token').value }, login: true });
  } catch (e) {
    msg.textContent = e.message;
    msg.hidden = false;
    return;
  }
  $('#login-token').value = '';
  $('#login').hidden = true;
  document.body.dataset.auth = 'in';
  clearError();
  showTab(tabFromHash());
  startTimer();
}

async function logout() {
  try { await api('/api/logout', { method: 'POST' }); } catch (e) { if (!(e instanceof AuthError)) showError(e.message, 'logout'); }
  showLogin();
}

function init() {
  $('#login').addEventListener('submit', login);
  $('#logout').addEventListener('click', logout);
  $('#error-close').addEventListener('click', () => clearError());
  window.addEventListener('hashchange', () => showTab(tabFromHash()));
  document.addEventListener('visibilitychange', () => { if (!document.hidden && timer) refresh(current, false); });
  $('#tasks-form').addEventListener('submit', (ev) => { ev.preventDefault(); applyTaskQuery(); });
  $('#tasks-state').addEventListener('change', applyTaskQuery);
  $('#logs-node').addEventListener('change', (ev) => {
    logs.node = ev.target.value;
    logs.file = '';
    logItems.clear();
    $('[data-testid="log-view"]').textContent = '';
    $('#log-title').textContent = 'Pick a file.';
    loadLogFiles().catch((e) => report(e, 'log'));
  });
  $('#logs-grep').addEventListener('input', renderLogFiles);
  $('#logs-follow').addEventListener('change', (ev) => { if (ev.target.checked) loadLogFile(true); });
  $('#timeline-job').addEventListener('change', () => refresh('timeline', false));
  $('#timeline-reload').addEventListener('click', () => refresh('timeline', false));
  $('#timeline-zoom').addEventListener('change', () => { if (trace) drawTimeline(); });
  const tl = $('[data-testid="timeline-view"]');
  tl.addEventListener('scroll', () => {
    const g = $('g.labels', tl);
    if (g) g.setAttribute('transform', `translate(${tl.scrollLeft},0)`);
  });
  // The first load doubles as the session check: a 401 brings up the login form.
  showTab(tabFromHash());
  startTimer();
}

init();
