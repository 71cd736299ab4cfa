// Building elements. Text is always a text node (never markup): a document's bytes
// can hold "<script>" or "<img onerror=…>" and must show as those characters.

/** h("a", {href: "#/"}, "text", child, …): an element; attributes set as attributes,
 *  `on*` functions as listeners, `class` as the class list; strings become text nodes. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

/** Append children (strings as text nodes, arrays flattened, null skipped). */
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** Replace el's children. */
export function put(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A µs timestamp as local ISO-like text. */
export function when(us) {
  if (us === null || us === undefined) return "";
  return new Date(Number(us) / 1000).toISOString().replace("T", " ").replace("Z", " UTC");
}

/** The first `n` characters of s on one line. */
export function firstWords(s, n = 80) {
  const one = String(s || "").replace(/\s+/g, " ").trim();
  return one.length > n ? one.slice(0, n - 1) + "…" : one;
}

/** A size in bytes as people read it: "812 bytes", "1 byte", "14.2 kB", "3.1 MB" (decimal units). */
export function count(bytes) {
  const n = Number(bytes);
  if (n < 1000) return `${n} ${n === 1 ? "byte" : "bytes"}`;
  const units = ["kB", "MB", "GB", "TB"];
  let v = n, i = -1;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}
