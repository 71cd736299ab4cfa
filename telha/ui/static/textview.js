// The canonical text of a version, cut at every span boundary into segments, rendered
// lazily in chunks of about CHUNK_BYTES (a chunk is filled when it comes near the
// viewport; until then it is an empty block of its estimated height). Offsets are UTF-8
// bytes, as the API's; segment text is decoded from the bytes, never parsed as markup.

const CHUNK_BYTES = 8192;
const dec = new TextDecoder();

function firstAtOrAfter(arr, x) { // first index i with arr[i] >= x
  let lo = 0, hi = arr.length;
  while (lo < hi) { const m = (lo + hi) >> 1; if (arr[m] < x) lo = m + 1; else hi = m; }
  return lo;
}

export class TextView {
  /** box: the container; bytes: Uint8Array of the text; spans: the API's span rows;
   *  mark: [start, end) bytes to mark (a search hit), or null. */
  constructor(box, bytes, spans, mark) {
    this.box = box; this.bytes = bytes; this.spans = spans; this.mark = mark;
    this.ranges = []; this.hover = null; this.onPick = null;
    const cuts = new Set([0, bytes.length]);
    for (const s of spans) { cuts.add(s.start); cuts.add(s.end); }
    if (mark) { cuts.add(mark[0]); cuts.add(mark[1]); }
    const starts = [...cuts].filter((x) => x >= 0 && x <= bytes.length).sort((a, b) => a - b);
    this.segStart = Float64Array.from(starts.slice(0, -1));
    this.segEnd = Float64Array.from(starts.slice(1));
    const n = this.segStart.length;
    // The innermost span with nodes over each segment: spans longest first, each
    // overwriting its segments, so the shortest wins.
    this.segSpan = new Int32Array(n).fill(-1);
    const order = spans.map((s, i) => i).filter((i) => spans[i].linkedNodes.length && spans[i].end > spans[i].start)
      .sort((a, b) => (spans[b].end - spans[b].start) - (spans[a].end - spans[a].start));
    for (const i of order) {
      for (let k = firstAtOrAfter(this.segStart, spans[i].start); k < n && this.segEnd[k] <= spans[i].end; k++) this.segSpan[k] = i;
    }
    this.segEl = new Array(n);
    this.chunks = []; // [firstSeg, endSeg)
    for (let k = 0; k < n;) {
      const first = k, base = this.segStart[k];
      while (k < n && (k === first || this.segEnd[k] - base <= CHUNK_BYTES)) k++;
      this.chunks.push([first, k]);
    }
    this.chunkEl = [];
    this.io = new IntersectionObserver((entries) => {
      for (const e of entries) if (e.isIntersecting) this.fill(Number(e.target.dataset.chunk));
    }, { root: box, rootMargin: "1200px 0px" });
    box.addEventListener("click", (e) => this.click(e));
    box.addEventListener("mouseover", (e) => this.over(e));
    box.addEventListener("mouseleave", () => this.setHover(null));
  }

  /** Lay out the chunks (empty, estimated heights) and fill the first ones. */
  renderFirst() {
    const width = this.box.clientWidth || 600;
    const perLine = Math.max(20, Math.floor((width - 24) / 8.2));
    const lineH = 19;
    const frag = document.createDocumentFragment();
    this.chunks.forEach(([a, b], i) => {
      const div = document.createElement("div");
      div.className = "chunk";
      div.dataset.chunk = String(i);
      const text = dec.decode(this.bytes.subarray(this.segStart[a], this.segEnd[b - 1]));
      let lines = 0;
      for (const line of text.split("\n")) lines += Math.max(1, Math.ceil(line.length / perLine));
      div.style.minHeight = `${lines * lineH}px`;
      this.chunkEl.push(div);
      frag.append(div);
      this.io.observe(div);
    });
    this.box.replaceChildren(frag);
    for (let i = 0; i < Math.min(3, this.chunks.length); i++) this.fill(i);
  }

  /** Render chunk i's segments (once). */
  fill(i) {
    const div = this.chunkEl[i];
    if (!div || div.dataset.filled) return;
    div.dataset.filled = "1";
    const [a, b] = this.chunks[i];
    const frag = document.createDocumentFragment();
    for (let k = a; k < b; k++) {
      const s = document.createElement("span");
      s.className = "seg";
      s.dataset.seg = String(k);
      s.textContent = dec.decode(this.bytes.subarray(this.segStart[k], this.segEnd[k]));
      this.segEl[k] = s;
      this.paint(k);
      frag.append(s);
    }
    div.replaceChildren(frag);
    div.style.minHeight = "";
    this.io.unobserve(div);
  }

  chunkOf(seg) {
    let lo = 0, hi = this.chunks.length - 1;
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (this.chunks[m][0] <= seg) lo = m; else hi = m - 1; }
    return lo;
  }

  inside(k, r) { return r && this.segStart[k] >= r[0] && this.segEnd[k] <= r[1]; }

  paint(k) {
    const el = this.segEl[k];
    if (!el) return;
    el.classList.toggle("hl", this.ranges.some((r) => this.inside(k, r)));
    el.classList.toggle("mark", !!this.mark && this.inside(k, this.mark) && this.mark[1] > this.mark[0]);
    el.classList.toggle("hover", !!this.hover && this.inside(k, this.hover));
  }

  /** Repaint the rendered segments of byte ranges. */
  repaint(ranges) {
    for (const r of ranges) {
      if (!r) continue;
      for (let k = firstAtOrAfter(this.segStart, r[0]); k < this.segStart.length && this.segStart[k] < r[1]; k++) this.paint(k);
    }
  }

  /** Highlight byte ranges (a node's spans) and scroll to the first. */
  highlight(ranges, scroll = true) {
    const old = this.ranges;
    this.ranges = ranges;
    this.repaint([...old, ...ranges]);
    if (ranges.length && scroll) this.scrollTo(ranges[0][0]);
  }

  /** Scroll so byte offset `at` is in view (its chunk filled first). */
  scrollTo(at) {
    const k = Math.min(this.segStart.length - 1, Math.max(0, firstAtOrAfter(this.segEnd, at + 1)));
    if (k < 0 || !this.chunks.length) return;
    const c = this.chunkOf(k);
    for (let i = Math.max(0, c - 1); i <= Math.min(this.chunks.length - 1, c + 1); i++) this.fill(i);
    const el = this.segEl[k];
    if (el) el.scrollIntoView({ block: "center" });
  }

  segOf(e) {
    const el = e.target.closest && e.target.closest(".seg");
    return el && this.box.contains(el) ? Number(el.dataset.seg) : -1;
  }

  setHover(range) {
    const old = this.hover;
    this.hover = range;
    this.repaint([old, range]);
  }

  over(e) {
    const k = this.segOf(e);
    const i = k >= 0 ? this.segSpan[k] : -1;
    this.setHover(i >= 0 ? [this.spans[i].start, this.spans[i].end] : null);
  }

  click(e) {
    const k = this.segOf(e);
    const i = k >= 0 ? this.segSpan[k] : -1;
    if (i >= 0 && this.onPick) this.onPick(this.spans[i].linkedNodes[0]);
  }

  /** The text of the highlighted segments, in order (what a reader sees selected). */
  highlightedText() {
    return [...this.box.querySelectorAll(".seg.hl")].map((s) => s.textContent).join("");
  }
}
