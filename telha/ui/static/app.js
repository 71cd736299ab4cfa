// Telha provenance viewer: hash routes, the key form, sources, search, upload and jobs.
// The version view (text, nodes, pages, diff) is in version.js. docs/viewer.md.
import { ApiError, call, forgetKey, getKey, json, qs, setKey, streamEvents } from "./api.js";
import { firstWords, h, put, when } from "./dom.js";
import { showDiff, showNode, showVersion } from "./version.js";

const main = document.getElementById("main");
let leaving = new AbortController(); // aborted when the route changes (open event streams end)

/** A failed call shown in the page: a refused key gets the key form back. */
export function showError(err, where = main) {
  if (err instanceof ApiError && err.status === 401) {
    forgetKey();
    keyForm("This API key was refused (" + err.message + "). Enter a valid key.");
    return;
  }
  if (err && err.name === "AbortError") return;
  const text = err instanceof ApiError
    ? (err.status === 404 ? "Not found: " : `Error ${err.status} ${err.code}: `) + err.message
    : "Error: " + (err && err.message ? err.message : String(err));
  where.append(h("p", { class: "error", role: "alert" }, text));
}

function keyForm(message) {
  document.getElementById("forget").hidden = true;
  const input = h("input", { id: "key", type: "password", autocomplete: "off", required: true,
    "aria-describedby": "key-help" });
  const msg = h("div", { id: "key-message", role: "alert" });
  if (message) msg.append(h("p", { class: "error" }, message));
  const form = h("form", { class: "keyform", onsubmit: async (e) => {
    e.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    setKey(key);
    try {
      await call("/v1/sources?limit=1");
    } catch (err) {
      forgetKey();
      put(msg, h("p", { class: "error" }, err instanceof ApiError && err.status === 401
        ? "This API key was refused (" + err.message + "). Check it and try again."
        : "Could not reach the service: " + err.message));
      return;
    }
    route();
  } },
  h("h1", {}, "Telha provenance viewer"),
  h("label", { for: "key" }, "API key"),
  input,
  h("p", { id: "key-help", class: "muted" },
    "Kept in this tab only (sessionStorage) and sent as the x-api-key header. Make one with `telha api-key create --config config.toml --tenant T --org O`."),
  h("button", { type: "submit" }, "Open"),
  msg);
  put(main, form);
  input.focus();
}

// ---- sources, search, upload ----

async function sourcesView() {
  const filter = h("input", { type: "search", id: "filter", placeholder: "Filter by name",
    "aria-label": "Filter sources by name" });
  const q = h("input", { type: "search", id: "q", placeholder: "Search the text", "aria-label": "Search the text" });
  const hits = h("div", { id: "hits" });
  const searchForm = h("form", { class: "row", role: "search", onsubmit: (e) => {
    e.preventDefault(); search(q.value, hits);
  } }, q, h("button", { type: "submit" }, "Search"));
  const body = h("tbody");
  const table = h("table", { id: "sources" },
    h("thead", {}, h("tr", {}, ["Name", "Format", "Versions", "State", "Last job", "Changed"].map((t) =>
      h("th", { scope: "col", class: WIDE.has(t) ? "wide" : null }, t)))),
    body);
  const more = h("button", { type: "button", hidden: true }, "More sources");
  put(main, h("h1", {}, "Sources"), searchForm, hits, uploadArea(),
    h("h2", {}, "All sources"), h("div", { class: "row" }, filter), table, more);
  let rows = [];
  const paint = () => {
    const f = filter.value.trim().toLowerCase();
    put(body, rows.filter((s) => !f || s.name.toLowerCase().includes(f)).map(sourceRow));
  };
  filter.addEventListener("input", paint);
  let cursor = null;
  const load = async () => {
    try {
      const page = await json("/v1/sources" + qs({ limit: 100, cursor }));
      rows = rows.concat(page.sources);
      cursor = page.nextCursor;
      more.hidden = !cursor;
      paint();
      if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No sources yet: upload a file above, or `telha ingest`.")));
    } catch (err) { showError(err); }
  };
  more.addEventListener("click", load);
  await load();
}

// Columns a narrow window leaves out (app.css).
const WIDE = new Set(["Versions", "Changed", "Attempts", "Created"]);

function sourceRow(s) {
  const job = s.lastJobId
    ? h("a", { href: `#/jobs/${s.lastJobId}` }, s.lastJobState || "job")
    : "";
  return h("tr", {},
    h("td", { class: "name" }, h("a", { href: `#/source/${s.sourceId}` }, s.name)),
    h("td", {}, s.format), h("td", { class: "wide" }, String(s.versionCount)), h("td", {}, s.state),
    h("td", {}, job), h("td", { class: "muted wide" }, when(s.changedAt)));
}

const enc = new TextEncoder();
const dec = new TextDecoder();

async function search(text, out) {
  put(out);
  if (!text.trim()) return;
  let page;
  try {
    page = await json("/v1/search" + qs({ q: text, limit: 20 }));
  } catch (err) {
    if (err instanceof ApiError && err.status === 404 && /disabled/.test(err.message)) {
      out.append(h("p", { class: "notice", role: "status" },
        "Search is turned off on this service: set [search] enabled = true in its config (or TELHA_SEARCH__ENABLED=true) and restart it."));
    } else showError(err, out);
    return;
  }
  if (!page.hits.length) { out.append(h("p", { class: "muted", role: "status" }, "No hit.")); return; }
  const list = h("ul", { class: "hits" });
  out.append(list);
  for (const item of await Promise.all(page.hits.map(hitItem))) list.append(item);
  if (page.nextCursor) out.append(h("p", { class: "muted" }, "Showing the best 20 hits."));
}

/** A hit: "name p.N" and a snippet cut from the span's own bytes, the matched words marked
 *  exactly by their byte ranges (the API's snippet when the text cannot be read). */
async function hitItem(hit) {
  const m = hit.matches[0] || { start: hit.start, end: hit.start };
  const node = hit.nodeIds.length ? `/node/${hit.nodeIds[0]}` : "";
  const link = `#/source/${hit.sourceId}/v/${hit.sourceVersionTx}${node}/mark/${m.start}-${m.end}`;
  const title = hit.name + (hit.page ? ` p.${hit.page}` : "");
  const snippet = h("div", { class: "snippet" });
  try {
    const lo = Math.max(hit.start, m.start - 160), hi = Math.min(hit.end, m.end + 160);
    const res = await call(`/v1/sources/${hit.sourceId}/versions/${hit.sourceVersionTx}/text` + qs({ start: hit.start, end: hit.end }));
    const bytes = new Uint8Array(await res.arrayBuffer());
    const cuts = [lo, ...hit.matches.filter((x) => x.start >= lo && x.end <= hi).flatMap((x) => [x.start, x.end]), hi];
    let safeLo = lo, safeHi = hi; // move off UTF-8 continuation bytes
    while (safeLo > hit.start && (bytes[safeLo - hit.start] & 0xc0) === 0x80) safeLo--;
    while (safeHi < hit.end && (bytes[safeHi - hit.start] & 0xc0) === 0x80) safeHi++;
    cuts[0] = safeLo; cuts[cuts.length - 1] = safeHi;
    if (safeLo > hit.start) snippet.append("…");
    for (let i = 0; i + 1 < cuts.length; i++) {
      const t = dec.decode(bytes.subarray(cuts[i] - hit.start, cuts[i + 1] - hit.start));
      snippet.append(i % 2 ? h("mark", {}, t) : t);
    }
    if (safeHi < hit.end) snippet.append("…");
  } catch {
    snippet.append(hit.snippet);
  }
  return h("li", {}, h("a", { href: link, class: "hit" }, title), " ",
    h("span", { class: "label" }, hit.labels.join(", ")), snippet);
}

// ---- upload ----

let formatsCache = null;
async function formats() {
  if (!formatsCache) {
    const doc = await (await fetch("/openapi.json")).json();
    formatsCache = doc.paths["/v1/ingest"].post.requestBody.content["application/json"].schema.properties.format.enum;
  }
  return formatsCache;
}

function uploadArea() {
  const file = h("input", { type: "file", id: "file", "aria-label": "File to ingest" });
  const fmt = h("select", { id: "format", "aria-label": "Format" });
  const log = h("div", { class: "events", "aria-live": "polite" });
  formats().then((fs) => {
    put(fmt, fs.filter((f) => f !== "web").map((f) => h("option", { value: f }, f)));
  }).catch(() => put(fmt, h("option", { value: "text" }, "text")));
  const pick = (f) => {
    if (!f) return;
    const ext = (f.name.split(".").pop() || "").toLowerCase();
    const guess = { txt: "text", md: "markdown", htm: "html", py: "code", js: "code", ts: "code", rs: "code", go: "code" }[ext] || ext;
    if ([...fmt.options].some((o) => o.value === guess)) fmt.value = guess;
  };
  file.addEventListener("change", () => pick(file.files[0]));
  const drop = h("div", { class: "drop", id: "drop" }, "Drop a file here, or ", file);
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault(); drop.classList.remove("over");
    if (e.dataTransfer.files.length) { file.files = e.dataTransfer.files; pick(file.files[0]); }
  });
  const send = async () => {
    const f = file.files[0];
    if (!f) { put(log, h("p", { class: "error" }, "Choose a file first.")); return; }
    const form = new FormData();
    form.append("format", fmt.value); form.append("name", f.name); form.append("file", f);
    put(log, `Uploading ${f.name} as ${fmt.value}…\n`);
    try {
      const res = await (await call("/v1/ingest", { method: "POST", body: form })).json();
      if (!res.jobId) {
        log.append(res.deduplicated ? "Unchanged: already ingested.\n" : "Ingested.\n",
          h("a", { href: `#/source/${res.sourceId}` }, "Open the source"));
        return;
      }
      log.append("Job ", h("a", { href: `#/jobs/${res.jobId}` }, res.jobId), "\n");
      let last = null;
      await streamEvents(res.jobId, (ev) => {
        last = ev.transition;
        log.append(`${when(ev.at)}  ${ev.transition}${ev.detail ? "  " + ev.detail : ""}\n`);
      }, leaving.signal);
      if (last === "completed") log.append(h("a", { href: `#/source/${res.sourceId}` }, "Open the source"));
    } catch (err) { showError(err, log); }
  };
  return h("details", { class: "upload" }, h("summary", {}, "Upload a file"),
    drop, h("div", { class: "row" }, h("label", { for: "format" }, "Format"), fmt,
      h("button", { type: "button", onclick: send }, "Ingest")), log);
}

// ---- jobs ----

const STATES = ["", "pending", "leased", "completed", "dead", "cancelled"];

async function jobsView() {
  const sel = h("select", { id: "state", "aria-label": "Job state" },
    STATES.map((s) => h("option", { value: s }, s || "any state")));
  const body = h("tbody");
  const more = h("button", { type: "button", hidden: true }, "More jobs");
  put(main, h("h1", {}, "Jobs"), h("div", { class: "row" }, h("label", { for: "state" }, "State"), sel),
    h("table", { id: "jobs" }, h("thead", {}, h("tr", {},
      ["Job", "Kind", "State", "Source", "Attempts", "Created"].map((t) =>
        h("th", { scope: "col", class: WIDE.has(t) ? "wide" : null }, t)))), body), more);
  let cursor = null;
  const load = async (fresh) => {
    if (fresh) { cursor = null; put(body); }
    try {
      const page = await json("/v1/ingest" + qs({ state: sel.value, limit: 50, cursor }));
      for (const j of page.jobs) {
        body.append(h("tr", {},
          // A job id is a UUIDv7: its first digits are its time, its last ones tell jobs apart.
          h("td", {}, h("a", { href: `#/jobs/${j.jobId}`, title: j.jobId, class: "id" }, "…" + j.jobId.slice(-12))),
          h("td", {}, j.kind), h("td", {}, j.state),
          h("td", { class: "name" }, j.sourceId ? h("a", { href: `#/source/${j.sourceId}` }, j.name || j.sourceId) : ""),
          h("td", { class: "wide" }, String(j.attempts)), h("td", { class: "muted wide" }, when(j.createdAt))));
      }
      cursor = page.nextCursor; more.hidden = !cursor;
    } catch (err) { showError(err); }
  };
  sel.addEventListener("change", () => load(true));
  more.addEventListener("click", () => load(false));
  await load(true);
}

async function jobView(jobId) {
  put(main, h("p", { class: "muted" }, "Loading…"));
  let job;
  try { job = await json(`/v1/ingest/${encodeURIComponent(jobId)}`); } catch (err) { put(main); showError(err); return; }
  const state = h("dd", { id: "job-state" }, job.state);
  const events = h("div", { class: "events", id: "job-events", "aria-live": "polite" });
  const cancel = h("button", { type: "button", id: "cancel", onclick: async () => {
    try { const j = await json(`/v1/ingest/${jobId}/cancel`, { method: "POST" }); state.textContent = j.state; }
    catch (err) { showError(err, events); }
  } }, "Cancel job");
  cancel.hidden = !["pending", "leased"].includes(job.state);
  put(main, h("h1", {}, "Job ", job.jobId),
    h("div", { class: "detail" }, h("dl", {},
      h("dt", {}, "kind"), h("dd", {}, job.kind),
      h("dt", {}, "state"), state,
      h("dt", {}, "attempts"), h("dd", {}, String(job.attempts)),
      h("dt", {}, "source"), h("dd", {}, job.sourceId ? h("a", { href: `#/source/${job.sourceId}` }, job.sourceId) : "—"),
      job.failureReason ? [h("dt", {}, "failure"), h("dd", { class: "error" }, JSON.stringify(job.failureReason, null, 1))] : null,
      job.stats ? [h("dt", {}, "stats"), h("dd", {}, h("pre", {}, JSON.stringify(job.stats, null, 1)))] : null)),
    cancel, h("h2", {}, "Events"), events);
  try {
    await streamEvents(jobId, (ev) => {
      events.append(`${ev.id}  ${when(ev.at)}  ${ev.transition}${ev.detail ? "  " + ev.detail : ""}\n`);
      if (["completed", "dead", "cancelled", "leased", "pending"].includes(ev.transition)) state.textContent = ev.transition;
      if (["completed", "dead", "cancelled"].includes(ev.transition)) cancel.hidden = true;
    }, leaving.signal);
  } catch (err) { showError(err, events); }
}

// ---- routing ----

async function route() {
  leaving.abort();
  leaving = new AbortController();
  if (!getKey()) { keyForm(); return; }
  document.getElementById("forget").hidden = false;
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (!parts.length) await sourcesView();
    else if (parts[0] === "jobs" && parts.length === 1) await jobsView();
    else if (parts[0] === "jobs") await jobView(parts[1]);
    else if (parts[0] === "node") await showNode(main, parts[1]);
    else if (parts[0] === "source" && parts[2] === "diff") await showDiff(main, parts[1], parts[3], parts[4]);
    else if (parts[0] === "source") {
      const opts = {};
      for (let i = 4; i + 1 < parts.length; i += 2) opts[parts[i]] = parts[i + 1];
      await showVersion(main, parts[1], parts[2] === "v" ? parts[3] : null, opts);
    } else put(main, h("p", { class: "error", role: "alert" }, "Not found: no view " + location.hash));
  } catch (err) { showError(err); }
}

document.getElementById("forget").addEventListener("click", () => { forgetKey(); keyForm(); });
window.addEventListener("hashchange", route);
route();
