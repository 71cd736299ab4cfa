"""HTTP outcomes and network errors as failure kinds (docs/formats.md, "Web pages"); pure.

- 2xx (after redirects): fetched.
- 404, 410 → ``corrupt_input`` (``http_status 404 …``): the page is not there.
- 401, 403 → ``unsupported_feature`` tagged ``auth_required``.
- 429, 5xx → ``transient``, with the response's ``Retry-After`` (seconds or an HTTP date) as
  the least retry delay.
- any other status (other 4xx, an unfollowed 3xx, 1xx) → ``corrupt_input`` with the status.
- a connection refused or reset, a DNS failure, a timeout → ``transient``.
"""

from __future__ import annotations

import email.utils
import time

from workers_common import CorruptInput, TransientFailure, UnsupportedFeature, WorkerFailure

__all__ = ["network_failure", "retry_after_s", "status_failure"]


def retry_after_s(value: str | None, *, now_s: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta seconds or an HTTP date, never
    negative); ``None`` when absent or unreadable."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    now = time.time() if now_s is None else now_s
    return max(0.0, when.timestamp() - now)


def status_failure(status: int, url: str, retry_after: str | None = None) -> WorkerFailure | None:
    """The failure an HTTP ``status`` of the page at ``url`` maps to, ``None`` for 2xx."""
    if 200 <= status < 300:
        return None
    what = f"http_status {status} for {url}"
    if status in (401, 403):
        return UnsupportedFeature(f"auth_required: {what}")
    if status == 429 or 500 <= status < 600:
        return TransientFailure(what, retry_after_s=retry_after_s(retry_after))
    return CorruptInput(what)


def network_failure(message: str, url: str) -> WorkerFailure:
    """A navigation error (Playwright's message, e.g. ``net::ERR_CONNECTION_REFUSED``) as a
    failure: a request the allow-list blocked (its refusing proxy) is ``unsupported_feature``
    (``host_not_allowed``), anything else ``transient``."""
    first = message.strip().splitlines()[0] if message.strip() else "navigation failed"
    if "ERR_BLOCKED_BY_CLIENT" in message or "ERR_PROXY_CONNECTION_FAILED" in message:
        return UnsupportedFeature(f"host_not_allowed: {url} (redirected off the allowed hosts)")
    return TransientFailure(f"fetch failed for {url}: {first}")
