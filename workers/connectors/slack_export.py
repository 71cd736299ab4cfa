"""The ``slack-export`` connector (docs/connectors.md, "The slack-export kind"): a Slack
workspace export zip, each message one item of format ``slack`` (the Slack shape,
:mod:`connectors.slack_message`).

Settings: ``path`` (absolute: the export zip; a later export replaces the file), ``channels``
(channel names to sync; none: all), ``maxEntryBytes`` (largest uncompressed member, default
256 MiB) and ``maxTotalBytes`` (largest uncompressed export, default 16 GiB); either may only
lower its default (a value above it fails the run :class:`~workers_common.CorruptInput`).

The layout is Slack's: ``users.json``, ``channels.json`` (public), optional ``groups.json``
(private), ``mpims.json`` and ``dms.json``, and ``<channel folder>/<YYYY-MM-DD>.json`` files of
messages (the folder is the channel's ``name``, a DM's ``id``); those files may sit in one
top-level folder. External id: ``<channel id>/<ts>``; name ``#<channel>/<ts>``. Change
marker: the BLAKE3 of the item's bytes (the message's fields the shape keeps, with the
channel and the people it names), so an edited message is a new version, a new thread
reply leaves its parent unchanged, and an unchanged message is never re-ingested. Every run
is a full listing: a message no longer in the export (deleted, or a ``tombstone``) is retired.
ACL: a private channel's or DM's ``members`` as ``user:<Slack user id>``; none for a public
channel. Join and leave notices are not items. Nothing is extracted to disk; no URL is fetched.

Bad input — each a typed failure, nothing retired for it:

- the zip missing: :class:`~workers_common.TransientFailure` (retried);
- not a zip, an entry name that escapes the archive (``../x``, absolute, a drive), a repeated
  entry name, a declared total over ``maxTotalBytes`` (a zip bomb), ``channels.json`` missing or
  unreadable: :class:`~workers_common.CorruptInput` — the run fails before listing anything;
- a day file that is malformed JSON, not a list, over ``maxEntryBytes``, fails its CRC, or
  holds a message without a usable ``ts``: listed past, the listing then ends incomplete
  (:class:`~connectors.sdk.ListingIncomplete`) naming it — the rest is ingested, nothing retired;
- a message whose fields have the wrong types: a failed item of the run.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import blake3

from connectors.sdk import ItemUnreadable, ListingIncomplete, RemoteItem, Removed
from connectors.slack_message import FILE_FIELDS, MENTION, check_message, ts_us
from workers_common import CorruptInput, TransientFailure

__all__ = ["DEFAULT_MAX_ENTRY_BYTES", "DEFAULT_MAX_TOTAL_BYTES", "SlackExportConnector"]

DEFAULT_MAX_ENTRY_BYTES = 256 << 20
DEFAULT_MAX_TOTAL_BYTES = 16 << 30
_DAY = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\.json$")
#: Channel lists in an export, and whether their channels are private.
_LISTS = (("channels.json", False), ("groups.json", True), ("mpims.json", True), ("dms.json", True))
#: Notices that are not messages anyone wrote (and deleted messages still holding replies).
_SKIP_SUBTYPES = frozenset({"channel_join", "channel_leave", "group_join", "group_leave",
                            "tombstone"})  # fmt: skip
_KEEP = ("ts", "thread_ts", "user", "username", "bot_id", "subtype", "text", "edited")
#: Bad day files named in the incomplete listing's error, at most.
_NAMED = 5


def _unsafe(name: str) -> bool:
    """Whether a zip entry name could escape an extraction directory."""
    parts = re.split(r"[\\/]", name)
    return (
        name.startswith(("/", "\\")) or "\x00" in name or ".." in parts
        or bool(re.match(r"^[A-Za-z]:", name))
    )  # fmt: skip


class _Export:
    """An open export: its members checked, its channel lists and users read."""

    def __init__(self, path: str, max_entry: int, max_total: int) -> None:
        self.max_entry = max_entry
        if not os.path.isfile(path):
            raise TransientFailure(f"settings.path: {path} is not a file")
        try:
            self.zip = zipfile.ZipFile(path)
        except zipfile.BadZipFile as exc:
            raise CorruptInput(f"export is not a zip: {exc}") from None
        except OSError as exc:
            raise TransientFailure(f"export cannot be opened: {exc.strerror}") from None
        try:
            self._check(max_total)
        except BaseException:
            self.zip.close()
            raise

    def _check(self, max_total: int) -> None:
        names: set[str] = set()
        total = 0
        for info in self.zip.infolist():
            if _unsafe(info.filename):
                raise CorruptInput(f"export entry {info.filename!r} escapes the archive")
            if info.filename in names:
                raise CorruptInput(f"export entry {info.filename!r} appears twice")
            names.add(info.filename)
            total += info.file_size
        if total > max_total:
            raise CorruptInput(
                f"export unpacks to {total} bytes, over maxTotalBytes {max_total} (a zip bomb?)"
            )
        roots = sorted((n for n in names if PurePosixPath(n).name == "channels.json"
                        and n.count("/") <= 1), key=len)  # fmt: skip
        if not roots:
            raise CorruptInput("export has no channels.json")
        self.prefix = roots[0][: -len("channels.json")]
        self.names = names
        self._days: dict[str, list[str]] | None = None

    def close(self) -> None:
        self.zip.close()

    def read_json(self, name: str) -> Any:
        """A member's JSON.

        :raises ValueError: too large, unreadable, or not JSON (the message says which).
        """
        info = self.zip.getinfo(name)
        if info.file_size > self.max_entry:
            raise ValueError(f"{info.file_size} bytes, over maxEntryBytes {self.max_entry}")
        try:
            with self.zip.open(info) as f:
                raw = f.read(self.max_entry + 1)
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
            raise ValueError(f"unreadable: {exc}") from None
        if len(raw) > self.max_entry:
            raise ValueError(f"over maxEntryBytes {self.max_entry}")
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"malformed JSON: {exc}") from None

    def head(self, name: str, required: bool) -> list[dict[str, Any]]:
        """A top-level list (``channels.json``, ``users.json``…): its objects.

        :raises CorruptInput: unreadable, or missing when ``required``.
        """
        full = self.prefix + name
        if full not in self.names:
            if required:
                raise CorruptInput(f"export has no {name}")
            return []
        try:
            value = self.read_json(full)
        except ValueError as exc:
            raise CorruptInput(f"{name}: {exc}") from None
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise CorruptInput(f"{name}: a JSON list of objects is required")
        return value

    def days(self, folder: str) -> list[str]:
        """The day files of a channel folder, in date order (every folder's indexed once)."""
        if self._days is None:
            self._days = {}
            for name in sorted(self.names):
                folder_of, _, day = name[len(self.prefix) :].partition("/")
                if name.startswith(self.prefix) and _DAY.match(day):
                    self._days.setdefault(folder_of, []).append(name)
        return self._days.get(folder, [])


def _usable_ts(ts: Any) -> bool:
    try:
        ts_us(ts)
    except ValueError:
        return False
    return True


def _text_ok(value: Any) -> bool:
    """Whether ``value`` is a non-empty string that can be UTF-8, without NUL (an id or a
    name core can take)."""
    if not isinstance(value, str) or not value or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _user(entry: dict[str, Any]) -> dict[str, str]:
    profile = entry.get("profile")
    if not isinstance(profile, dict):
        profile = {}
    out = {"name": entry.get("name"),
           "real_name": entry.get("real_name") or profile.get("real_name")}  # fmt: skip
    return {k: v for k, v in out.items() if isinstance(v, str) and v}


def _file(f: Any) -> Any:
    return {k: f[k] for k in FILE_FIELDS if k in f} if isinstance(f, dict) else f


def _limit(settings: dict[str, Any], key: str, default: int) -> int:
    """A size limit of the settings: it may only lower ``default`` (the ceiling).

    :raises CorruptInput: not a positive integer, or over the default.
    """
    value = settings.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= default:
        raise CorruptInput(f"settings.{key}: a positive number of bytes, at most {default}")
    return value


class SlackExportConnector:
    """A Slack export zip as a :class:`~connectors.sdk.Connector` (a full listing every run;
    module docstring for the rules).

    :raises TransientFailure: (from ``list``) the zip is missing or cannot be opened.
    :raises CorruptInput: (from ``list``) the export as a whole is unusable (module docstring).
    """

    def __init__(self, settings: dict[str, Any]) -> None:
        self._path = str(settings["path"])
        self._channels = set(settings.get("channels") or [])
        self._max_entry = _limit(settings, "maxEntryBytes", DEFAULT_MAX_ENTRY_BYTES)
        self._max_total = _limit(settings, "maxTotalBytes", DEFAULT_MAX_TOTAL_BYTES)

    def full_listing(self, checkpoint: str | None) -> bool:
        """Always: an export is a whole snapshot."""
        return True

    def next_checkpoint(self) -> str | None:
        """None: markers tell what changed."""
        return None

    def read(self, item: RemoteItem) -> bytes:
        """The item's bytes, made while listing.

        :raises ItemUnreadable: the message's fields could not be read (the reason).
        """
        if isinstance(item.ref, bytes):
            return item.ref
        raise ItemUnreadable(f"{item.external_id}: {item.ref}")

    def list(self, checkpoint: str | None) -> Iterator[RemoteItem | Removed]:
        """Every message of every wanted channel, channel by channel, in date order."""
        export = _Export(self._path, self._max_entry, self._max_total)
        try:
            users = {u["id"]: _user(u) for u in export.head("users.json", False)
                     if isinstance(u.get("id"), str)}  # fmt: skip
            channels = []
            for name, private in _LISTS:
                for ch in export.head(name, name == "channels.json"):
                    if not _text_ok(ch.get("id")):
                        raise CorruptInput(f"{name}: a channel without a usable id")
                    channels.append((ch, private))
            bad: list[str] = []
            for ch, private in sorted(channels, key=lambda c: str(c[0].get("name") or c[0]["id"])):
                folder = str(ch["name"] if _text_ok(ch.get("name")) else ch["id"])
                if self._channels and folder not in self._channels:
                    continue
                yield from _channel(export, ch, folder, private, users, bad)
            if bad:
                more = f" (and {len(bad) - _NAMED} more)" if len(bad) > _NAMED else ""
                raise ListingIncomplete("; ".join(bad[:_NAMED]) + more)
        finally:
            export.close()


def _channel(
    export: _Export, ch: dict[str, Any], folder: str, private: bool,
    users: dict[str, dict[str, str]], bad: list[str],
) -> Iterator[RemoteItem]:  # fmt: skip
    """The items of one channel's day files; a day file or message that cannot be listed
    is named in ``bad``."""
    cid = ch["id"]
    members = ch.get("members")
    acl = None
    if private and isinstance(members, list):
        acl = sorted({f"user:{m}" for m in members if isinstance(m, str) and m})
    channel = {"id": cid, "name": folder, "private": private}
    seen: set[str] = set()
    for day in export.days(folder):
        rel = day[len(export.prefix) :]
        try:
            messages = export.read_json(day)
            if not isinstance(messages, list):
                raise ValueError("not a JSON list of messages")
        except ValueError as exc:
            bad.append(f"{rel}: {exc}")
            continue
        for i, msg in enumerate(messages):
            if not isinstance(msg, dict) or not _usable_ts(msg.get("ts")):
                bad.append(f"{rel}: message {i} has no usable ts")
                continue
            if msg.get("subtype") in _SKIP_SUBTYPES or msg.get("hidden") is True:
                continue
            ext = f"{cid}/{msg['ts']}"
            if ext in seen:
                continue
            seen.add(ext)
            yield _item(ext, folder, channel, msg, users, acl)


def _item(
    ext: str, folder: str, channel: dict[str, Any], msg: dict[str, Any],
    users: dict[str, dict[str, str]], acl: list[str] | None,
) -> RemoteItem:  # fmt: skip
    """One message as an item: its bytes (the Slack shape) and their marker, or, for a
    message of the wrong shape, the reason its read fails."""
    name = f"#{folder}/{msg['ts']}"
    try:
        check_message(msg)
    except ValueError as exc:
        return RemoteItem(ext, name, None, format="slack", acl=acl, ref=str(exc))
    item: dict[str, Any] = {k: msg[k] for k in _KEEP if msg.get(k) is not None}
    item["channel"] = channel
    if msg.get("files"):
        item["files"] = [_file(f) for f in msg["files"]]
    named = set(MENTION.findall(msg.get("text") or ""))
    if isinstance(msg.get("user"), str):
        named.add(msg["user"])
    people = {u: users[u] for u in sorted(named) if u in users}
    if people:
        item["users"] = people
    elif isinstance(msg.get("user_profile"), dict):
        item["user_profile"] = _user(msg["user_profile"])
    raw = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        data = raw.encode("utf-8")
    except UnicodeEncodeError:
        return RemoteItem(ext, name, None, format="slack", acl=acl,
                          ref="a text holds a lone surrogate")  # fmt: skip
    edited = msg.get("edited")
    modified = ts_us(edited["ts"] if edited else msg["ts"])
    return RemoteItem(
        external_id=ext, name=name, marker="b3:" + blake3.blake3(data).hexdigest()[:32],
        modified_us=modified, size=len(data), acl=acl, format="slack", ref=data,
    )  # fmt: skip
