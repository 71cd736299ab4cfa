"""The ``slack`` format (docs/connectors.md, "The Slack shape"): one Slack message, as the
``slack-export`` connector hands it over, projected into the graph.

**Input.** One JSON object with Slack's own field names: ``ts`` (required, ``"<s>.<µs>"``),
``channel`` (required: ``{"id", "name"?, "private"?}``), ``thread_ts``, ``user``,
``username`` and ``bot_id`` (a bot's), ``subtype``, ``text`` (Slack markup), ``edited``
(``{"user", "ts"}``), ``files`` (file objects: ``id``, ``name``, ``title``, ``mimetype``,
``filetype``, ``size``, ``url_private``, ``url_private_download``, ``permalink``, ``mode``),
``user_profile`` (as exports carry it) and ``users`` (``{user id: {"name", "real_name"}}``:
the author and the people the text mentions, from the export's ``users.json``). Any other
key is ignored.

**Projection.** A ``MESSAGE`` node (id: uuid5 of ``<channel id>/<ts>``, so a thread reply can
name its parent before the parent's job ran, and a new version keeps it) with
``channel_id``, ``channel_name``, ``ts``, ``thread_ts``, ``sent_at`` (µs, from ``ts``),
``edited_at`` (µs), ``subtype``, ``user_id``; a ``CHANNEL`` node (id: uuid5 of the channel
id; ``slack_id``, ``name``, ``private``) and ``POSTED_IN`` message → channel; a ``PERSON``
per Slack user (id: uuid5 of the user id; ``slack_id``, ``name``, ``real_name``) with
``FROM`` (the author) and ``MENTIONS`` (``<@U…>`` in the text) edges; ``IN_REPLY_TO`` from
a thread reply (``thread_ts`` ≠ ``ts``) to its thread's parent message (dangling until the
parent is ingested); an ``ATTACHMENT`` node per file (id: uuid5 of the Slack file id; its
metadata and URLs recorded, never fetched) with ``HAS_ATTACHMENT`` (``name``, ``size``,
``media_type``).

**Canonical text.** A heading line ``#<channel> · <author> · <ISO time>`` (``· edited``
when edited), a blank line, the text with Slack's markup rendered (``<@U1>`` → ``@name``,
``<#C1|general>`` → ``#general``, ``<https://x|label>`` → ``label (https://x)``, ``&amp;``
``&lt;`` ``&gt;`` unescaped), one ``paragraph`` span per paragraph, then one ``File:`` line
per file (span kind ``attachment``).

Pure: nothing from ``telha``; the connector imports :func:`check_message` and the id
helpers so what it lists is what this projects.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Mapping
from typing import Any

import msgspec

from workers_common import CorruptInput, IngestionResultBuilder, Job
from workers_common.empty import is_empty

__all__ = [
    "FILE_FIELDS",
    "MENTION",
    "check_message",
    "handle",
    "message_node_id",
    "ts_us",
]

#: Namespace of the Slack shape's deterministic node ids.
NAMESPACE = uuid.UUID("5f1c3a52-8d7e-5b0a-9c41-736c61636b21")
_TS = re.compile(r"^[0-9]{1,12}(?:\.[0-9]{1,6})?$")
#: The file fields the shape keeps (exports hold URLs, not bytes).
FILE_FIELDS = ("id", "name", "title", "mimetype", "filetype", "size", "url_private",
               "url_private_download", "permalink", "mode")  # fmt: skip
_STRINGS = ("user", "username", "bot_id", "subtype", "text")
_MARKUP = re.compile(r"<([^<>\n]*)>")
#: A user mention in Slack markup (``<@U123>``, ``<@U123|ann>``): the user id.
MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^<>]*)?>")


def _id(kind: str, key: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{kind}:{key}"))


def message_node_id(channel_id: str, ts: str) -> str:
    """The ``MESSAGE`` node id of message ``ts`` of channel ``channel_id`` (uuid5 string)."""
    return _id("message", f"{channel_id}/{ts}")


def ts_us(ts: Any) -> int:
    """A Slack timestamp (``"1700000000.000100"``) in µs since the epoch.

    :raises ValueError: not a Slack timestamp.
    """
    if not isinstance(ts, str) or not _TS.match(ts):
        raise ValueError(f"ts: {ts!r} is not a Slack timestamp")
    sec, _, frac = ts.partition(".")
    return int(sec) * 1_000_000 + int(frac.ljust(6, "0") or 0)


def check_message(msg: Any) -> None:
    """Check the fields of a Slack message object this shape reads (their types; ``ts``
    and ``thread_ts`` Slack timestamps; ``files`` a list of objects with a string ``id``).

    :raises ValueError: the first field that is wrong, named.
    """
    if not isinstance(msg, dict):
        raise ValueError("a message must be a JSON object")
    ts_us(msg.get("ts"))
    if msg.get("thread_ts") is not None:
        ts_us(msg["thread_ts"])
    for key in _STRINGS:
        if msg.get(key) is not None and not isinstance(msg[key], str):
            raise ValueError(f"{key}: a string is required")
    edited = msg.get("edited")
    if edited is not None and (not isinstance(edited, dict) or "ts" not in edited):
        raise ValueError("edited: an object with ts is required")
    if edited is not None:
        ts_us(edited["ts"])
    if msg.get("files") is not None:
        _check_files(msg["files"])
    for key in ("users", "user_profile"):
        if msg.get(key) is not None and not isinstance(msg[key], dict):
            raise ValueError(f"{key}: an object is required")


def _check_files(files: Any) -> None:
    if not isinstance(files, list):
        raise ValueError("files: a list is required")
    for f in files:
        if not isinstance(f, dict) or not isinstance(f.get("id"), str):
            raise ValueError("files: each file must be an object with a string id")
        size = f.get("size")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int)):
            raise ValueError("files: size must be an integer")


def _iso(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1_000_000, dt.UTC).isoformat()


class _People:
    """The PERSON nodes of one message, one per user id."""

    def __init__(self, b: IngestionResultBuilder, msg: dict[str, Any]) -> None:
        self._b = b
        self._users: dict[str, Any] = dict(msg.get("users") or {})
        profile = msg.get("user_profile")
        if isinstance(msg.get("user"), str) and isinstance(profile, dict):
            self._users.setdefault(msg["user"], profile)
        self._refs: dict[str, int] = {}

    def name(self, uid: str) -> str | None:
        """A user's display name: ``real_name``, else ``name``, else ``None``."""
        entry = self._users.get(uid)
        if not isinstance(entry, dict):
            return None
        for key in ("real_name", "name", "display_name"):
            if isinstance(entry.get(key), str) and entry[key]:
                return str(entry[key])
        return None

    def handle(self, uid: str) -> str:
        """How the text shows ``<@uid>``: ``name`` (the handle), else the display name."""
        entry = self._users.get(uid)
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"]:
            return str(entry["name"])
        return self.name(uid) or uid

    def ref(self, uid: str, spans: list[int]) -> int:
        if uid not in self._refs:
            entry = self._users.get(uid)
            entry = entry if isinstance(entry, dict) else {}
            props = {"slack_id": uid, "name": entry.get("name"),
                     "real_name": entry.get("real_name")}  # fmt: skip
            props = {k: v for k, v in props.items() if isinstance(v, str)}
            self._refs[uid] = self._b.add_node(["PERSON"], props, spans=spans, id=_id("user", uid))
        return self._refs[uid]


def render(text: str, people: _People) -> str:
    """Slack markup as plain text (module docstring)."""

    def one(m: re.Match[str]) -> str:
        inner = m.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            return "@" + (label or people.handle(target[1:]))
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            return label or "@" + target[1:].split("^")[0]
        return f"{label} ({target})" if label and label != target else target

    rendered = _MARKUP.sub(one, text)
    return rendered.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def _read(job: Job) -> dict[str, Any]:
    try:
        msg = msgspec.json.decode(job.content)
    except msgspec.DecodeError as exc:
        raise CorruptInput(f"slack message is not JSON: {exc}") from None
    try:
        check_message(msg)
        channel = msg.get("channel")
        if not isinstance(channel, dict) or not isinstance(channel.get("id"), str):
            raise ValueError("channel: an object with a string id is required")
    except ValueError as exc:
        raise CorruptInput(f"slack message: {exc}") from None
    return dict(msg)


def _files(b: IngestionResultBuilder, message: int, files: list[dict[str, Any]]) -> None:
    for i, f in enumerate(files):
        media = f.get("mimetype")
        label = f.get("name") or f.get("title") or f["id"]
        size = f.get("size")
        line = f"File: {label}" + (f" ({media}, {size} bytes)" if media and size is not None
                                    else f" ({media})" if media else "")  # fmt: skip
        b.add_text("\n\n" if i == 0 else "\n")
        span = b.add_span_text(line, "attachment")
        b.attach_span(message, span)
        props = {k: f[k] for k in FILE_FIELDS if f.get(k) is not None and k != "id"}
        props["slack_id"] = f["id"]
        node = b.add_node(["ATTACHMENT"], props, spans=[span], id=_id("file", f["id"]))
        edge = {"name": label, "size": size, "media_type": media}
        b.add_relationship("HAS_ATTACHMENT", from_ref=message, to_ref=node, properties=edge)


def handle(job: Job) -> dict[str, Any]:
    """Project one ``slack`` job (module docstring).

    :raises CorruptInput: not JSON, or a field of the wrong type (named).
    """
    b = IngestionResultBuilder()
    if is_empty(job):  # workers_common.empty: a MESSAGE alone
        b.add_node(["MESSAGE"], {}, id=job.root_node_id or _id("source", job.name))
        b.set_stats({"empty": True, "paragraphs": 0, "files": 0})
        return b.build()
    msg = _read(job)
    channel: Mapping[str, Any] = msg["channel"]
    cid, ts = channel["id"], msg["ts"]
    cname = channel.get("name") if isinstance(channel.get("name"), str) else None
    people = _People(b, msg)
    uid = msg.get("user")
    author = (people.name(uid) if uid else None) or msg.get("username") or uid or "unknown"
    sent = ts_us(ts)
    edited = msg.get("edited")
    head = f"#{cname or cid} · {author} · {_iso(sent)}" + (" · edited" if edited else "")
    heading = b.add_span_text(head, "heading")
    spans = [heading]
    text = render(msg.get("text") or "", people)
    paragraphs = _paragraphs(text)
    for para in paragraphs:
        b.add_text("\n\n")
        spans.append(b.add_span_text(para, "paragraph"))
    props: dict[str, Any] = {"channel_id": cid, "channel_name": cname, "ts": ts,
                             "thread_ts": msg.get("thread_ts"), "sent_at": sent,
                             "subtype": msg.get("subtype"), "user_id": uid}  # fmt: skip
    if edited:
        props["edited_at"] = ts_us(edited["ts"])
    props = {k: v for k, v in props.items() if v is not None}
    message = b.add_node(["MESSAGE"], props, spans=spans, id=message_node_id(cid, ts))
    chan_props = {"slack_id": cid, "name": cname, "private": channel.get("private")}
    chan = b.add_node(
        ["CHANNEL"], {k: v for k, v in chan_props.items() if v is not None},
        spans=[heading], id=_id("channel", cid),
    )  # fmt: skip
    b.add_relationship("POSTED_IN", from_ref=message, to_ref=chan)
    if uid:
        b.add_relationship("FROM", from_ref=message, to_ref=people.ref(uid, [heading]))
    mentioned = sorted(set(MENTION.findall(msg.get("text") or "")) - {uid})
    for other in mentioned:
        b.add_relationship("MENTIONS", from_ref=message, to_ref=people.ref(other, []))
    thread = msg.get("thread_ts")
    if thread and thread != ts:
        b.add_relationship("IN_REPLY_TO", from_ref=message, to_id=message_node_id(cid, thread))
    files = msg.get("files") or []
    _files(b, message, files)
    b.set_stats({"paragraphs": len(paragraphs), "files": len(files),
                 "mentions": len(mentioned)})  # fmt: skip
    return b.build()
