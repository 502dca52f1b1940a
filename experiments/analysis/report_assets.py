"""The report page's own style and script, inlined into every ``report.html`` (no network)."""

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:14px;margin:0;
color:#1b1b1b;background:#fff}
nav{position:sticky;top:0;background:#24292f;color:#fff;padding:6px 16px;z-index:5}
nav a{color:#c9d1d9;margin-left:14px;text-decoration:none}nav a:hover{color:#fff}
main{padding:8px 20px 60px;max-width:1500px}
h1{font-size:22px;margin:12px 0 2px}h2{font-size:18px;border-bottom:1px solid #ddd;
padding-bottom:3px;margin-top:28px}h2 small{font-weight:normal;font-size:12px;color:#666}
h3{font-size:15px;margin:16px 0 6px}h4{margin:12px 0 4px}
.muted{color:#666}
table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #d0d7de;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f3f5f7}
table.md td{white-space:nowrap}#headline table.md td{white-space:normal;min-width:6em}
.scroll{overflow:auto;max-width:100%}.tall{max-height:70vh;border:1px solid #d0d7de}
details.sec{margin:4px 0;border:1px solid #e1e4e8;border-radius:4px;padding:2px 8px}
details.sec>summary{cursor:pointer;font-weight:600;padding:3px 0}
.figs{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
figure{margin:0;border:1px solid #e1e4e8;padding:6px;background:#fff;max-width:100%}
figure img{max-width:100%;height:auto;display:block;cursor:zoom-in}
figure img.zoom{max-width:none;cursor:zoom-out}figcaption{font-size:11px;color:#555}
#filters{display:flex;flex-wrap:wrap;gap:8px 14px;align-items:center;margin:8px 0}
#filters select,#filters input{font-size:12px}
#episodes thead th{position:sticky;top:0;cursor:pointer;user-select:none;z-index:1}
#episodes th.asc::after{content:' \\25B2'}#episodes th.desc::after{content:' \\25BC'}
#episodes tbody tr:hover{background:#f6f8fa;cursor:pointer}
#episodes tbody tr.current{background:#fff5b1}
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}
pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:12px}
code{font-size:12px}
#trace{position:fixed;inset:0;background:rgba(0,0,0,.35);z-index:10;display:flex;
justify-content:center;align-items:flex-start;padding:24px}
#trace[hidden]{display:none}
#trace .panel{background:#fff;max-width:1200px;width:100%;max-height:calc(100vh - 48px);
overflow:auto;padding:12px 20px;border-radius:6px;box-shadow:0 4px 24px rgba(0,0,0,.3);
position:relative}
#close{position:sticky;top:0;float:right;font-size:22px;border:0;background:#fff;cursor:pointer}
#trace-body table{margin-bottom:14px}
#trace-body td code{white-space:pre-wrap;word-break:break-all;font-size:11px}
#trace-body tr.failed td{background:#ffebe9}#trace-body tr.never td{color:#888}
#trace-body tr.fault td{background:#fff1d6}
dl.record{display:grid;grid-template-columns:repeat(3,max-content minmax(0,1fr));gap:1px 10px;
font-size:12px;margin:0}dl.record dt{font-weight:600;color:#444}dl.record dd{margin:0;
word-break:break-all}
#trace-body .why td:nth-child(4){font-weight:600}
"""

JS = r"""
(function () {
"use strict";
const $ = (s, r) => (r || document).querySelector(s);
const table = $("#episodes"), tbody = table.tBodies[0];
const rows = Array.from(tbody.rows);
const heads = Array.from(table.tHead.rows[0].cells);
const cols = heads.map(th => th.dataset.col);
const selects = Array.from(document.querySelectorAll("#filters select"));
const q = $("#q"), count = $("#count");
const dirs = JSON.parse($("#run-dirs").textContent);
rows.forEach((r, i) => { r._i = i; r._text = r.textContent.toLowerCase(); });

function cell(r, col) { return r.cells[cols.indexOf(col)].textContent; }
function matches(r) {
  for (const s of selects) {
    if (s.value !== "" && cell(r, s.dataset.col) !== s.value) return false;
  }
  const terms = q.value.toLowerCase().split(/\s+/).filter(Boolean);
  return terms.every(t => r._text.includes(t));
}
function num(t) { const v = parseFloat(t); return isNaN(v) ? 0 : v; }
function applyFilters() {
  let n = 0, ok = 0, tokens = 0, lat = 0, cost = 0;
  for (const r of rows) {
    const m = matches(r);
    r.hidden = !m;
    if (!m) continue;
    n += 1; ok += cell(r, "success") === "yes" ? 1 : 0;
    tokens += num(cell(r, "tokens_total")); lat += num(cell(r, "latency_s"));
    cost += num(cell(r, "cost_usd"));
  }
  count.textContent = n === 0 ? `0 of ${rows.length} episodes shown` :
    `${n} of ${rows.length} episodes shown: success ${(100 * ok / n).toFixed(1)}%, ` +
    `mean tokens ${Math.round(tokens / n)}, mean latency ${(lat / n).toFixed(1)} s, ` +
    `total cost $${cost.toFixed(4)}`;
}
function sortBy(i, desc) {
  const numeric = rows.every(r => r.cells[i].textContent === "" ||
    !isNaN(Number(r.cells[i].textContent)));
  const key = r => numeric ? num(r.cells[i].textContent) : r.cells[i].textContent;
  const sorted = rows.slice().sort((a, b) => {
    const x = key(a), y = key(b);
    const c = x < y ? -1 : x > y ? 1 : 0;
    return (desc ? -c : c) || a._i - b._i;
  });
  heads.forEach(h => h.classList.remove("asc", "desc"));
  heads[i].classList.add(desc ? "desc" : "asc");
  tbody.append(...sorted);
}
heads.forEach((h, i) => h.addEventListener("click", () => sortBy(i, h.classList.contains("asc"))));
selects.forEach(s => s.addEventListener("change", applyFilters));
q.addEventListener("input", applyFilters);
$("#reset").addEventListener("click", () => {
  q.value = ""; selects.forEach(s => { s.value = ""; }); applyFilters();
});
$("#expand").addEventListener("click", e => {
  e.preventDefault();
  document.querySelectorAll("#tables details").forEach(d => { d.open = true; });
});
document.querySelectorAll("figure img").forEach(img => img.addEventListener("click", () => {
  img.classList.toggle("zoom");
  if (img.classList.contains("zoom")) img.removeAttribute("width");
  else img.setAttribute("width", Math.round(img.naturalWidth / 2));
}));
tbody.addEventListener("click", e => {
  const tr = e.target.closest("tr");
  if (tr && !e.target.closest("a")) location.hash = "episode=" + encodeURIComponent(tr.dataset.k);
});

// ---- the trace view (rendered from the episode's record and trace line)
const chunks = new Map();
async function chunk(i) {
  if (!chunks.has(i)) {
    chunks.set(i, (async () => {
      const text = $("#chunk-" + i).textContent.trim();
      const bytes = Uint8Array.from(atob(text), c => c.charCodeAt(0));
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      return JSON.parse(await new Response(stream).text());
    })());
  }
  return chunks.get(i);
}
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) {
    if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  }
  return e;
}
function tbl(head, body, cls) {
  const t = el("table", cls ? { class: cls } : null);
  t.append(el("tr", null, ...head.map(h => el("th", null, h))));
  for (const r of body) {
    const tr = el("tr", r.cls ? { class: r.cls } : null);
    for (const c of r.cells) tr.append(el("td", null, c));
    t.append(tr);
  }
  return t;
}
const fmtT = v => typeof v === "number" ? v.toFixed(3) : "";
const js = v => JSON.stringify(v);
const code = t => el("code", null, t);
const WHY = {
  tool_error: "the tool call failed (after the retries and fallback the policy allows)",
  precondition: "a pre-condition did not hold, so the tool was not called",
  condition: "a pre-condition could not be evaluated, so the step did not run",
  unresolved_input: "an argument names a result that does not exist (a failed or absent step)",
  postcondition: "the tool answered but a post-condition rejected its result",
};
function callOf(tr, e) {
  return (tr.tool_calls || []).find(c => c.tool === e.tool && Math.abs(c.t1 - e.t1) < 1e-9);
}
function problems(tr) {
  const out = [];
  const add = (t, id, tool, what, detail) => out.push({ cls: "", cells: [fmtT(t), id || "",
    tool || "", what, detail === undefined ? "" : code(detail)] });
  for (const e of tr.events || []) {
    switch (e.event) {
      case "step": if (!e.ok) {
        const c = callOf(tr, e);
        let what = (e.failure || "failed") + (e.error_kind ? " (" + e.error_kind + ")" : "");
        if (c && c.injected) what += "; the call met an injected fault (" + c.error_kind + ")";
        add(e.t0, e.id, e.tool, what, (WHY[e.failure] || "") + (c ? "; args " + js(c.args) : ""));
      } break;
      case "retry":
        add(e.t, e.id, e.tool, "retried after " + e.error_kind, "waited " + e.wait_s + " s");
        break;
      case "fallback":
        add(e.t, e.id, e.from, "fell back to " + e.to,
          e.reason ? "reason: " + e.reason : "after its errors");
        break;
      case "skip":
        add(e.t, e.id, "", "failed step skipped", "no remaining step needs it: the plan goes on");
        break;
      case "plan_rejected": case "replan_rejected":
        add(e.t, "", "", e.event + ": " + e.reason, e.message);
        break;
      case "replan_unreachable": add(e.t, "", "", "replanner judged the goal unreachable"); break;
      case "line_rejected": add(null, "", "", "line rejected: " + e.reason); break;
      case "parse_error": add(null, "", "", "parse error", e.error); break;
      case "hallucinated_tool": add(null, "", e.tool, "called a tool that does not exist"); break;
      case "budget_exhausted": add(null, "", "", "budget exhausted", e.detail); break;
      case "infrastructure_error": add(null, "", "", "LLM endpoint failed", e.error); break;
      case "harness_error": add(null, "", "", "harness error: " + e.error, e.traceback); break;
    }
  }
  return out;
}
function steps(tr) {
  const evs = tr.events || [];
  const plans = evs.filter(e => e.event === "plan" || e.event === "replan");
  const out = [];
  plans.forEach((plan, n) => {
    const until = n + 1 < plans.length ? plans[n + 1].t : Infinity;
    const last = {};
    for (const e of evs) {
      if (e.event === "step" && e.t0 >= plan.t && e.t0 < until) last[e.id] = e;
    }
    const label = n === 0 ? "plan" : "replan " + n;
    for (const s of plan.steps) {
      const e = last[s.id];
      const outcome = !e ? "never run" : e.ok ? "ok" : "failed: " + (e.failure || "") +
        (e.error_kind ? " (" + e.error_kind + ")" : "");
      out.push({ cls: !e ? "never" : e.ok ? "" : "failed",
        cells: [label, s.id, e ? e.tool : s.tool, (s.depends_on || []).join(", "), outcome,
          e && !e.ok ? WHY[e.failure] || "" : ""] });
    }
  });
  return out.length ? out : null;
}
function details(e) {
  const rest = Object.assign({}, e);
  for (const k of ["event", "t", "t0", "t1"]) delete rest[k];
  const text = JSON.stringify(rest);
  if (text.length < 600) return code(text);
  return el("details", null, el("summary", null, text.slice(0, 120) + "..."), code(text));
}
function shell(s) { return /^[\w@%+=:,./-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'"; }
function renderTrace(item) {
  const rec = item.record || {}, tr = item.trace;
  const body = $("#trace-body");
  body.replaceChildren();
  const title = `${rec.planner} / ${rec.task_id} / trial ${rec.trial}`;
  const outcome = rec.success ? "success" : (rec.failure_mode || "failed");
  body.append(el("h2", null, title + (item.run ? "  [" + item.run + "]" : "")));
  body.append(el("p", null, el("strong", { class: rec.success ? "ok" : "bad" }, outcome),
    ` (stop: ${rec.stop_reason || "?"})`, tr ? ` — grade: ${tr.grade}` : "",
    rec.detail ? ` — ${rec.detail}` : ""));
  const cmd = ["planarena-trace", dirs[item.run] || ".", rec.task_id, "--planner", rec.planner,
    "--trial", String(rec.trial), "--format", "html"].map(shell).join(" ");
  body.append(el("p", { class: "muted" }, "Plan DAG and timeline figure: ", code(cmd),
    " (paths relative to this page)."));
  if (!tr) { body.append(el("p", null, "No trace recorded (write_traces=false?).")); }
  else {
    const why = problems(tr);
    body.append(el("h3", null, `What went wrong (${why.length})`));
    body.append(why.length ? tbl(["t", "step", "tool", "what", "why / details"], why, "why") :
      el("p", { class: "muted" }, "No failed step, retry, fallback or rejected plan."));
    const st = steps(tr);
    if (st) {
      body.append(el("h3", null, "Steps of each plan"));
      body.append(tbl(["plan", "step", "tool", "depends on", "outcome", "why"], st));
    }
  }
  if (tr) {
    const calls = tr.tool_calls || [];
    body.append(el("h3", null, `Tool calls (${calls.length})`));
    body.append(tbl(["#", "tool", "t0", "t1", "ok", "error", "injected", "args"],
      calls.map((c, i) => ({ cls: c.injected ? "fault" : c.ok ? "" : "failed",
        cells: [i, c.tool, fmtT(c.t0),
        fmtT(c.t1), String(c.ok), c.error_kind || "", String(c.injected), code(js(c.args))] }))));
    const evs = tr.events || [];
    body.append(el("h3", null, `Events (${evs.length})`));
    body.append(tbl(["#", "event", "t / t0", "t1", "details"], evs.map((e, i) => ({
      cls: e.ok === false ? "failed" : "", cells: [i, e.event, fmtT(e.t !== undefined ? e.t : e.t0),
        fmtT(e.t1), details(e)] }))));
  }
  const fields = Object.entries(rec);
  body.append(el("h3", null, `Episode record (${fields.length} fields)`));
  const dl = el("dl", { class: "record" });
  for (const [k, v] of fields) {
    dl.append(el("dt", null, k), el("dd", null, typeof v === "object" ? js(v) : String(v)));
  }
  body.append(dl);
}
const panel = $("#trace");
async function openEpisode(key) {
  const tr = rows.find(r => r.dataset.k === key);
  const body = $("#trace-body");
  panel.hidden = false;
  panel.dataset.episode = key;
  rows.forEach(r => r.classList.toggle("current", r === tr));
  if (!tr) {
    body.replaceChildren(el("p", null, "No episode " + key + " in this report."));
    return;
  }
  if (typeof DecompressionStream === "undefined") {
    body.replaceChildren(el("p", null, "This browser cannot inflate the stored traces " +
      "(DecompressionStream: Chrome 80+, Firefox 113+, Safari 16.4+)."));
    return;
  }
  body.replaceChildren(el("p", { class: "muted" }, "loading..."));
  const [c, p] = tr.dataset.at.split(".").map(Number);
  try {
    renderTrace((await chunk(c))[p]);
    panel.dataset.rendered = key;
  } catch (err) {
    body.replaceChildren(el("p", null, "Could not read this trace: " + err));
  }
}
function closeEpisode() {
  panel.hidden = true; delete panel.dataset.episode; delete panel.dataset.rendered;
  rows.forEach(r => r.classList.remove("current"));
  if (location.hash) history.replaceState(null, "", location.pathname + location.search);
}
$("#close").addEventListener("click", closeEpisode);
panel.addEventListener("click", e => { if (e.target === panel) closeEpisode(); });
document.addEventListener("keydown", e => {
  if (e.key === "Escape" && !panel.hidden) closeEpisode();
});
function fromHash() {
  const m = location.hash.match(/^#episode=(.*)$/);
  if (m) openEpisode(decodeURIComponent(m[1])); else if (!panel.hidden) closeEpisode();
}
window.addEventListener("hashchange", fromHash);

// ---- the URL presets: ?q=words&planner=react&sort=latency_s&desc=1&open=<key>
const params = new URLSearchParams(location.search);
if (params.get("q") || params.get("filter")) q.value = params.get("q") || params.get("filter");
for (const s of selects) {
  const v = params.get(s.dataset.col);
  if (v !== null && Array.from(s.options).some(o => o.value === v)) s.value = v;
}
if (params.get("sort") && cols.includes(params.get("sort"))) {
  sortBy(cols.indexOf(params.get("sort")), params.get("desc") === "1");
}
applyFilters();
if (params.get("open")) openEpisode(params.get("open")); else fromHash();
})();
"""
