"""The connector worker's own checks at run time (docs/connectors.md, "Allowed roots"):
``connectors.roots.check_run`` and the slack-export limits, which may only lower the
defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connectors.roots import ENV_NAME, check_run
from connectors.slack_export import DEFAULT_MAX_ENTRY_BYTES, SlackExportConnector
from workers_common import CorruptInput


def test_check_run_resolves_links_and_dots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "out").symlink_to("/etc")
    env = {ENV_NAME: json.dumps([str(root)])}
    for ok in (str(root), str(root / "sub"), f"{root}/sub/../sub"):
        check_run("folder", {"root": ok}, env)
    for bad in ("/etc", str(root / "out"), f"{root}/sub/../..", f"{root}x"):
        with pytest.raises(CorruptInput, match="allowed_roots"):
            check_run("folder", {"root": bad}, env)
    with pytest.raises(CorruptInput, match=r"settings\.path"):
        check_run("slack-export", {"path": "/etc/passwd"}, env)
    with pytest.raises(CorruptInput, match="allowed_roots is empty"):
        check_run("folder", {"root": str(root)}, {})
    with pytest.raises(CorruptInput, match=ENV_NAME):
        check_run("folder", {"root": str(root)}, {ENV_NAME: "/tmp,/srv"})
    check_run("imap", {"host": "mail.example.com"}, {})  # not a path kind


def test_slack_limits_above_the_default_refused() -> None:
    SlackExportConnector({"path": "/x.zip", "maxEntryBytes": DEFAULT_MAX_ENTRY_BYTES})
    with pytest.raises(CorruptInput, match="maxEntryBytes"):
        SlackExportConnector({"path": "/x.zip", "maxEntryBytes": DEFAULT_MAX_ENTRY_BYTES + 1})
    with pytest.raises(CorruptInput, match="maxTotalBytes"):
        SlackExportConnector({"path": "/x.zip", "maxTotalBytes": 0})
