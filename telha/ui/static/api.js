// Calls to /v1 with the key from sessionStorage in the x-api-key header (never in a URL).

const KEY = "telha.apiKey";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || `HTTP_${status}`;
  }
}

export function getKey() { return sessionStorage.getItem(KEY); }
export function setKey(k) { sessionStorage.setItem(KEY, k); }
export function forgetKey() { sessionStorage.removeItem(KEY); }

/** fetch(path) with the key; rejects with ApiError on a non-2xx answer (its error body). */
export async function call(path, init = {}) {
  const headers = new Headers(init.headers || {});
  const key = getKey();
  if (key) headers.set("x-api-key", key);
  const res = await fetch(path, { ...init, headers, cache: "no-store" });
  if (!res.ok) {
    let err = null;
    try { err = (await res.json()).error; } catch { err = null; }
    throw new ApiError(res.status, err && err.code, err && err.message);
  }
  return res;
}

export async function json(path, init) { return (await call(path, init)).json(); }

/** Query string of the defined values of obj. */
export function qs(obj) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(obj)) if (v !== undefined && v !== null && v !== "") p.set(k, v);
  const s = p.toString();
  return s ? "?" + s : "";
}

/** Read a job's Server-Sent Events with fetch streaming (EventSource cannot send the key):
 *  onEvent({id, at, transition, detail}) per message; resolves when the stream ends. */
export async function streamEvents(jobId, onEvent, signal) {
  const res = await call(`/v1/ingest/${encodeURIComponent(jobId)}/events`, { signal });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    // sse-starlette ends lines with CRLF; a lone CR at the end may be half of one.
    const tail = buf.endsWith("\r") ? "\r" : "";
    buf = buf.slice(0, buf.length - tail.length).replace(/\r\n?/g, "\n") + tail;
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let id = null, data = "";
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trimStart();
      }
      if (data) onEvent({ id, ...JSON.parse(data) });
    }
  }
}
