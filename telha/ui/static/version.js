// A source version: canonical text with span boundaries, node list, node detail (properties,
// edges, ambiguities, exact bytes), the PDF page with the node's box, versions and diffs.
import { ApiError, call, json, qs } from "./api.js";
import { showError } from "./app.js";
import { count, firstWords, h, put, when } from "./dom.js";
import { TextView } from "./textview.js";

const enc = encodeURIComponent;

/** #/node/{id}: open the node in the version its provenance points into. */
export async function showNode(main, nodeId) {
  put(main, h("p", { class: "muted" }, "Loading…"));
  let node;
  try { node = await json(`/v1/nodes/${enc(nodeId)}`); } catch (err) {
    put(main); showError(err); return;
  }
  const span = node.provenance.spans[0];
  if (span) {
    location.replace(`#/source/${span.sourceId}/v/${span.sourceVersionTx}/node/${node.nodeId}`);
    return;
  }
  const panel = h("div", { class: "detail", id: "detail" });
  put(main, h("h1", {}, "Node ", node.nodeId), panel);
  await fillDetail(panel, node, null);
}

function versionLink(sourceId, tx, extra = "") { return `#/source/${sourceId}/v/${tx}${extra}`; }

/** #/source/{id}[/v/{tx}][/node/{nodeId}][/mark/{start}-{end}] */
export async function showVersion(main, sourceId, txText, opts) {
  const t0 = performance.now();
  put(main, h("p", { class: "muted" }, "Loading…"));
  let source;
  try { source = await json(`/v1/sources/${enc(sourceId)}`); } catch (err) {
    put(main); showError(err); return;
  }
  if (!source.versions.length) {
    put(main, h("h1", {}, source.name), h("p", { class: "notice" },
      `No version yet (state ${source.state}).`, source.lastJobId ? [" Last job: ", h("a", { href: `#/jobs/${source.lastJobId}` }, source.lastJobState || "job")] : ""));
    return;
  }
  const tx = txText ? Number(txText) : (source.versions.find((v) => !v.erased) || source.versions[0]).sourceVersionTx;
  const version = source.versions.find((v) => v.sourceVersionTx === tx);
  if (!version) {
    put(main, h("h1", {}, source.name), h("p", { class: "error", role: "alert" }, `Not found: no version ${txText} of this source.`));
    return;
  }
  if (!txText) { location.replace(versionLink(sourceId, tx)); return; }
  const asOf = version.state === "current" ? undefined : version.publishedTx;
  const ctx = { source, version, tx, asOf, sourceId: source.sourceId };

  const picker = h("select", { id: "version", "aria-label": "Version" }, source.versions.map((v) =>
    h("option", { value: v.sourceVersionTx, selected: v.sourceVersionTx === tx }, `${when(v.publishedTx)} · ${v.state}`)));
  picker.addEventListener("change", () => { location.hash = versionLink(sourceId, picker.value); });
  const older = source.versions.filter((v) => v.sourceVersionTx < tx && !v.erased);
  const diffLink = older.length
    ? h("a", { href: `#/source/${sourceId}/diff/${older[0].sourceVersionTx}/${tx}`, id: "diff-link" }, "Changes from the previous version")
    : h("span", { class: "muted" }, "First version");
  const textBox = h("div", { class: "text", id: "text", tabindex: "0", "aria-label": "Canonical text" });
  const detail = h("div", { class: "detail", id: "detail", "aria-live": "polite" },
    h("p", { class: "muted" }, "Select a node in the list or a span in the text (keys j / k move between nodes)."));
  const pagePanel = h("div", { id: "page" });
  const nodeList = h("ul", { class: "nodes", id: "nodes", "aria-label": "Nodes" });
  // The raw file's size, then (once read) the canonical text's beside it: they differ
  // (a PDF's text is a fraction of its bytes; docs/viewer.md).
  const sizes = h("span", { class: "muted", id: "version-size" }, `file ${count(version.size)} · tx ${tx}`);
  put(main,
    h("h1", {}, source.name),
    h("div", { class: "row" }, h("span", { class: "muted" }, source.format), h("label", { for: "version" }, "Version"), picker, diffLink,
      sizes),
    h("div", { class: "version" },
      h("div", {}, textBox),
      h("div", { class: "side" }, detail, pagePanel, h("h2", {}, "Nodes ", h("span", { id: "node-count", class: "muted" })), nodeList)));

  if (version.erased) {
    put(textBox, h("p", { class: "notice" }, `This version was erased (GDPR) ${when(version.erasedAt)}: ${version.erasureReason || ""}`));
    return;
  }
  let bytes, spans;
  try {
    const [textRes, spanList] = await Promise.all([
      call(`/v1/sources/${enc(sourceId)}/versions/${tx}/text`),
      json(`/v1/sources/${enc(sourceId)}/versions/${tx}/spans`),
    ]);
    bytes = new Uint8Array(await textRes.arrayBuffer());
    spans = spanList.spans;
  } catch (err) { showError(err, textBox); return; }
  sizes.textContent = `file ${count(version.size)} · canonical text ${count(bytes.length)} · tx ${tx}`;

  const mark = opts.mark && /^\d+-\d+$/.test(opts.mark) ? opts.mark.split("-").map(Number) : null;
  const view = new TextView(textBox, bytes, spans, mark);
  ctx.view = view;
  const nodes = new NodeList(nodeList, ctx, (id) => select(id));
  ctx.nodes = nodes;
  view.onPick = (nodeId) => select(nodeId);

  let current = null;
  async function select(nodeId, { scroll = true, push = true } = {}) {
    current = nodeId;
    nodes.mark(nodeId);
    if (push) history.replaceState(null, "", versionLink(sourceId, tx, `/node/${nodeId}` + (mark ? `/mark/${mark.join("-")}` : "")));
    put(detail, h("p", { class: "muted" }, "Loading node…"));
    put(pagePanel);
    let node;
    try { node = await json(`/v1/nodes/${enc(nodeId)}` + qs({ asOf })); } catch (err) {
      if (current !== nodeId) return;
      view.highlight([]);
      put(detail);
      if (err instanceof ApiError && err.status === 404) detail.append(h("p", { class: "error", role: "alert" }, `Not found: node ${nodeId} (${err.message}).`));
      else showError(err, detail);
      return;
    }
    if (current !== nodeId) return;
    const here = node.provenance.spans.filter((s) => s.sourceId === ctx.sourceId && s.sourceVersionTx === tx);
    view.highlight(here.map((s) => [s.start, s.end]), scroll);
    await fillDetail(detail, node, ctx);
    const props = node.properties || {};
    if (source.format === "pdf" && props.page && props.bbox) {
      // A paragraph laid out in parts (across columns or pages) has one box per part.
      const parts = Array.isArray(props.boxes) && props.boxes.length ? props.boxes : [{ page: props.page, bbox: props.bbox }];
      showPages(pagePanel, ctx, parts);
    }
  }
  textBox.addEventListener("keydown", (e) => keys(e));
  nodeList.addEventListener("keydown", (e) => keys(e));
  function keys(e) {
    if (e.key === "j" || e.key === "ArrowDown") { const n = nodes.step(current, 1); if (n) { e.preventDefault(); select(n).then(() => nodes.focus(n)); } }
    else if (e.key === "k" || e.key === "ArrowUp") { const n = nodes.step(current, -1); if (n) { e.preventDefault(); select(n).then(() => nodes.focus(n)); } }
    else if (e.key === "Escape") { current = null; view.highlight([]); nodes.mark(null); put(pagePanel); }
  }

  view.renderFirst();
  window.__telhaInteractiveMs = performance.now() - t0; // read by the Chromium test
  if (mark) view.scrollTo(mark[0]);
  if (opts.node) await select(opts.node, { scroll: !mark, push: false });
  nodes.load().catch((err) => showError(err, nodeList));
}

/** The node list: every node of the version in text order, rendered 200 at a time. */
class NodeList {
  constructor(ul, ctx, onSelect) {
    this.ul = ul; this.ctx = ctx; this.onSelect = onSelect;
    this.all = []; this.shown = 0; this.byId = new Map(); this.buttons = new Map();
    this.sentinel = h("li", { "aria-hidden": "true" });
    this.io = new IntersectionObserver((es) => { if (es.some((e) => e.isIntersecting)) this.more(); }, { root: ul });
  }
  async load() {
    let cursor = null;
    const list = [];
    do {
      const page = await json("/v1/nodes" + qs({ sourceId: this.ctx.sourceId, asOf: this.ctx.asOf, limit: 1000, cursor }));
      list.push(...page.nodes);
      cursor = page.nextCursor;
    } while (cursor && list.length < 200000);
    const tx = this.ctx.tx;
    const pos = (n) => {
      const s = n.provenance.spans.find((x) => x.sourceVersionTx === tx);
      return s ? s.start * 1e6 - (s.end - s.start) / 1e9 : Number.MAX_SAFE_INTEGER;
    };
    list.sort((a, b) => pos(a) - pos(b));
    this.all = list;
    for (const n of list) this.byId.set(n.nodeId, n);
    document.getElementById("node-count").textContent = `(${list.length})`;
    this.ul.replaceChildren();
    this.shown = 0;
    this.more();
    if (this.selected) this.mark(this.selected);
  }
  more() {
    const end = Math.min(this.all.length, this.shown + 200);
    const frag = document.createDocumentFragment();
    for (; this.shown < end; this.shown++) {
      const n = this.all[this.shown];
      const s = n.provenance.spans[0];
      const b = h("button", { type: "button", "data-node": n.nodeId, onclick: () => this.onSelect(n.nodeId) },
        h("span", { class: "label" }, n.labels.join(", ")),
        n.properties && n.properties.page ? h("span", { class: "muted" }, ` p.${n.properties.page}`) : "",
        " ", firstWords(s ? s.text : JSON.stringify(n.properties), 70));
      this.buttons.set(n.nodeId, b);
      frag.append(h("li", {}, b));
    }
    this.sentinel.remove();
    this.ul.append(frag);
    if (this.shown < this.all.length) { this.ul.append(this.sentinel); this.io.observe(this.sentinel); }
  }
  mark(id) {
    this.selected = id;
    for (const b of this.ul.querySelectorAll('[aria-current="true"]')) b.removeAttribute("aria-current");
    if (!id) return;
    const i = this.all.findIndex((n) => n.nodeId === id);
    while (i >= this.shown && this.shown < this.all.length) this.more();
    const b = this.buttons.get(id);
    if (b) { b.setAttribute("aria-current", "true"); b.scrollIntoView({ block: "nearest" }); }
  }
  step(id, d) {
    if (!this.all.length) return null;
    const i = id ? this.all.findIndex((n) => n.nodeId === id) : -1;
    const j = i < 0 ? (d > 0 ? 0 : this.all.length - 1) : i + d;
    return j >= 0 && j < this.all.length ? this.all[j].nodeId : null;
  }
  focus(id) { const b = this.buttons.get(id); if (b) b.focus(); }
}

/** Fill the detail panel with a node: labels, properties, times, exact bytes, ambiguities, edges. */
async function fillDetail(panel, node, ctx) {
  const asOf = ctx ? ctx.asOf : undefined;
  const props = Object.entries(node.properties || {});
  const spans = node.provenance.spans.map((s) => {
    const here = ctx && s.sourceId === ctx.sourceId && s.sourceVersionTx === ctx.tx;
    const where = here ? "this version" : h("a", { href: versionLink(s.sourceId, s.sourceVersionTx, `/node/${node.nodeId}`) }, `source ${s.sourceId.slice(0, 8)} version ${s.sourceVersionTx}`);
    return h("li", { class: "span" }, h("span", { class: "bytes" }, `bytes [${s.start}, ${s.end})`), ` (${s.end - s.start} bytes) of `, where,
      h("pre", { class: "span-text" }, s.text));
  });
  const edges = h("ul", { id: "edges" }, h("li", { class: "muted" }, "Loading edges…"));
  put(panel,
    h("h2", { id: "node-title" }, node.labels.join(", ") || "(no label)"),
    h("dl", {},
      h("dt", {}, "node"), h("dd", { id: "node-id" }, node.nodeId),
      h("dt", {}, "valid"), h("dd", {}, `${when(node.validTime.from) || "—"} → ${when(node.validTime.to) || "open"}`),
      h("dt", {}, "recorded"), h("dd", {}, `${when(node.txTime.from)} → ${when(node.txTime.to) || "current"}`),
      props.map(([k, v]) => [h("dt", {}, k), h("dd", { "data-prop": k }, typeof v === "string" ? v : JSON.stringify(v))])),
    h("h2", {}, "Provenance"), spans.length ? h("ul", { id: "provenance" }, spans) : h("p", { class: "muted" }, "No span."),
    node.ambiguities && node.ambiguities.length ? [h("h2", {}, "Ambiguities"), h("ul", { id: "ambiguities" }, node.ambiguities.map((a) =>
      h("li", {}, `${a.kind} (detector ${a.detectorConfidence}, applied ${a.appliedCandidateConfidence}, ${a.severityHint}): `,
        h("pre", {}, JSON.stringify(a.candidates, null, 1)))))] : null,
    h("h2", {}, "Edges"), edges);
  let list;
  try { list = await json(`/v1/nodes/${enc(node.nodeId)}/edges` + qs({ asOf })); } catch (err) { put(edges); showError(err, edges); return; }
  put(edges, list.edges.length ? null : h("li", { class: "muted" }, "No edge."));
  for (const e of list.edges) {
    const out = e.from === node.nodeId;
    const other = out ? e.to : e.from;
    const known = ctx && ctx.nodes && ctx.nodes.byId.get(other);
    const name = h("span", {}, known ? `${known.labels.join(", ")} ${firstWords(known.provenance.spans[0] ? known.provenance.spans[0].text : "", 40)}` : other.slice(0, 8));
    const link = known
      ? h("button", { type: "button", class: "link", onclick: () => ctx.nodes.onSelect(other) }, name)
      : h("a", { href: `#/node/${other}` }, name);
    edges.append(h("li", {}, out ? `→ ${e.type} ` : `← ${e.type} `, link,
      Object.keys(e.properties || {}).length ? h("span", { class: "muted" }, " " + JSON.stringify(e.properties)) : ""));
    if (!known) json(`/v1/nodes/${enc(other)}`).then((n) => {
      name.textContent = `${n.labels.join(", ")} ${firstWords(n.provenance.spans[0] ? n.provenance.spans[0].text : "", 40)}`;
    }).catch(() => {});
  }
}

/** The pages a node lies on (each image fetched with the key as a blob), every part's box
 * drawn on its page; `parts` is `[{page, bbox}, …]` in reading order. The first page's image
 * and the first box carry the ids `page-img` and `bbox`. */
async function showPages(panel, ctx, parts) {
  const scale = 1.5;
  const pages = [...new Set(parts.map((part) => part.page))];
  put(panel, h("p", { class: "muted" }, `Page ${pages.join(", ")}…`));
  try {
    const shown = [];
    for (const page of pages) {
      const res = await call(`/v1/sources/${enc(ctx.sourceId)}/versions/${ctx.tx}/pages/${page}.png` + qs({ scale }));
      const [w, hgt] = (res.headers.get("x-page-size") || "").split(" ").map(Number);
      const url = URL.createObjectURL(await res.blob());
      const img = h("img", { src: url, alt: `Page ${page} of ${ctx.source.name}`, class: "page-img", "data-page": String(page) });
      const boxes = parts.filter((part) => part.page === page).map((part) => {
        const box = h("div", { class: "bbox", "data-page": String(page) });
        const [x0, y0, x1, y1] = part.bbox;
        box.style.left = `${(100 * x0) / w}%`;
        box.style.top = `${(100 * y0) / hgt}%`;
        box.style.width = `${(100 * (x1 - x0)) / w}%`;
        box.style.height = `${(100 * (y1 - y0)) / hgt}%`;
        return box;
      });
      shown.push(h("h2", {}, `Page ${page}`), h("div", { class: "page" }, img, ...boxes));
    }
    shown[1].querySelector("img").id = "page-img";
    shown[1].querySelector(".bbox").id = "bbox";
    put(panel, ...shown);
  } catch (err) { put(panel); showError(err, panel); }
}

/** #/source/{id}/diff/{from}/{to}: added, removed and changed nodes between two versions. */
export async function showDiff(main, sourceId, from, to) {
  put(main, h("p", { class: "muted" }, "Loading…"));
  let source;
  try { source = await json(`/v1/sources/${enc(sourceId)}`); } catch (err) { put(main); showError(err); return; }
  const added = h("ul", { id: "added" }), removed = h("ul", { id: "removed" }), changed = h("ul", { id: "changed" });
  const summary = h("p", { id: "diff-summary" });
  const more = h("button", { type: "button", hidden: true }, "More changes");
  // A heading is drawn only over a list with something in it (shown as pages load).
  const sections = [["Added", added], ["Removed", removed], ["Changed", changed]].flatMap(([title, list]) => {
    const head = h("h2", { id: `${list.id}-heading` }, title);
    head.hidden = list.hidden = true;
    return [head, list];
  });
  const reveal = () => { for (let i = 0; i < sections.length; i += 2) sections[i].hidden = sections[i + 1].hidden = !sections[i + 1].children.length; };
  put(main, h("h1", {}, `${source.name}: changes`),
    h("p", {}, h("a", { href: versionLink(sourceId, to) }, "Open the newer version")), summary,
    h("div", { class: "diff" }, ...sections), more);
  const item = (cls, n, tx, extra) => h("li", { class: cls }, h("a", { href: versionLink(sourceId, tx, `/node/${n.nodeId}`) }, n.labels.join(", ")), " ",
    firstWords(n.provenance.spans[0] ? n.provenance.spans[0].text : "", 80), extra || "");
  let cursor = null;
  const load = async () => {
    let d;
    try { d = await json(`/v1/sources/${enc(sourceId)}/diff` + qs({ from: from === "none" ? undefined : from, to, limit: 200, cursor })); }
    catch (err) { showError(err); return; }
    summary.textContent = `From ${when(d.from) || "nothing"} to ${when(d.to)}: ${d.unchanged} nodes unchanged.`;
    for (const n of d.added) added.append(item("added", n, d.to));
    for (const n of d.removed) removed.append(item("removed", n, d.from));
    for (const c of d.changed) {
      const keys = new Set([...Object.keys(c.before.properties || {}), ...Object.keys(c.after.properties || {})]);
      const diffs = [...keys].filter((k) => JSON.stringify(c.before.properties[k]) !== JSON.stringify(c.after.properties[k]));
      changed.append(item("changed", c.after, d.to, h("div", { class: "muted" }, diffs.map((k) =>
        h("div", {}, `${k}: ${JSON.stringify(c.before.properties[k])} → ${JSON.stringify(c.after.properties[k])}`)))));
    }
    reveal();
    cursor = d.nextCursor; more.hidden = !cursor;
  };
  more.addEventListener("click", load);
  await load();
}
