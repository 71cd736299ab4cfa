"""email_worker (``.eml``): every corpus message has its documented
outcome; identities are deterministic (messages, people, attachments); headers and bodies in
any charset; replies point at their parent's id; the Date/body ambiguity."""

from __future__ import annotations

import base64
import json
from email.message import EmailMessage
from typing import Any

import email_worker
import pytest
from email_worker.names import attachment_names

from telha.domain.submission import decode_submission, to_projection
from tests.conftest import CORPUS
from workers_common import Job, classify
from workers_common.ids import child_root_id


def _run(raw: bytes, name: str = "m.eml", options: dict[str, Any] | None = None) -> dict[str, Any]:
    out = email_worker.handle(Job("id", "ingest:eml", "eml", name, raw, None, options or {}, 0,
                                  "t", "o"))  # fmt: skip
    to_projection(decode_submission(json.dumps(out).encode()))  # core accepts it
    return out


def _count(out: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in out["nodes"]:
        counts[node["labels"][0]] = counts.get(node["labels"][0], 0) + 1
    return counts


def _check_attachment_edges(out: dict[str, Any], parent: str) -> None:
    """One HAS_ATTACHMENT per attachment: to the child's root id for an ingested one (an
    attached message: its MESSAGE id), to its ATTACHMENT node otherwise; each ingested one's
    child is named ``<parent>/<file name>`` (``name (2).ext`` for a second file of that name
    with other bytes)."""
    children = {c["name"]: c for c in out.get("childJobs", [])}
    edges = [r for r in out["relationships"] if r["type"] == "HAS_ATTACHMENT"]
    nodes = [n for n in out["nodes"] if n["labels"] == ["ATTACHMENT"]]
    ingested = [e["properties"] for e in edges if e["properties"]["format"] is not None]
    names = attachment_names(parent, [(p["name"], p["blake3"]) for p in ingested])
    assert set(names) == set(children) and len(edges) == len(names) + len(nodes)
    named = iter(names)
    for edge in edges:
        props = edge["properties"]
        if props["format"] is None:
            assert out["nodes"][edge["toRef"]]["labels"] == ["ATTACHMENT"]
            continue
        child = children[next(named)]
        assert child["name"].startswith(f"{parent}/")
        assert child["rootNodeId"] == child_root_id(child["name"])
        content = base64.b64decode(child["contentB64"])
        if props["format"] in ("eml", "msg"):
            assert edge["toId"] == email_worker.message_node_id(
                content, props["format"], child["rootNodeId"]
            )
        else:
            assert edge["toId"] == child["rootNodeId"]
        assert props["size"] == len(content)


# Per corpus file: node counts, the subject, child jobs (attachments Telha ingests).
EXPECTED: dict[str, tuple[dict[str, int], str, int]] = {
    "attachment_message_rfc822.eml": ({"MESSAGE": 1, "PERSON": 2}, "testing", 1),
    "attachment_nonascii_filename.eml": ({"MESSAGE": 1, "PERSON": 2}, "testing", 1),
    "bad_encoded_subject.eml": ({"MESSAGE": 1}, "TEST", 0),
    "cpython_msg_02.eml": (
        {"MESSAGE": 1, "PERSON": 2}, "Ppp digest, Vol 1 #2 - 5 msgs", 7,
    ),
    "email_with_similar_boundaries.eml": (
        {"MESSAGE": 1, "PERSON": 2, "ATTACHMENT": 1}, "Xxxxxx", 0,
    ),
    "eml_with_attachment.eml": ({"MESSAGE": 1, "PERSON": 2}, "Email with Attachment", 1),
    "japanese_iso_2022.eml": ({"MESSAGE": 1, "PERSON": 1}, "まみむめも", 0),
    "raw_email.eml": ({"MESSAGE": 1, "PERSON": 2}, "NOTE: 한국말로 하는 것", 0),
    "raw_email_reply.eml": ({"MESSAGE": 1, "PERSON": 2}, "Re: Test reply email", 0),
    "raw_email_with_partially_quoted_subject.eml": (
        {"MESSAGE": 1, "PERSON": 1}, 'Re: Test: "漢字" mid "漢字" tail', 0,
    ),
    "utf8_headers.eml": ({"MESSAGE": 1, "PERSON": 2}, "Säying Hello", 0),
}  # fmt: skip


def test_every_corpus_message_has_an_expectation() -> None:
    assert {p.name for p in (CORPUS / "eml").iterdir()} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_message(name: str) -> None:
    counts, subject, children = EXPECTED[name]
    raw = (CORPUS / "eml" / name).read_bytes()
    out = _run(raw, name)
    assert _count(out) == counts
    (message,) = [n for n in out["nodes"] if n["labels"] == ["MESSAGE"]]
    assert message["properties"]["subject"] == subject
    assert len(out.get("childJobs", [])) == children
    _check_attachment_edges(out, name)
    text = out["canonicalText"].encode()
    for span in out["spans"]:  # header lines and paragraphs slice on their own text
        piece = text[span["start"] : span["end"]].decode()
        assert piece == piece.strip() and "\n\n" not in piece
    assert _run(raw, name) == out  # deterministic


def _message(**headers: str) -> bytes:
    msg = EmailMessage()
    for key, value in headers.items():
        msg[key.replace("_", "-")] = value
    msg.set_content("First paragraph.\n\nThe invoice is dated 3 March 2026.\n")
    return bytes(msg)


def test_identities_replies_and_people() -> None:
    parent = _run(
        _message(
            From="Ana <ANA@example.test>",
            To="bo@example.test",
            Subject="Plan",
            Message_ID="<p1@example.test>",
            Date="Tue, 03 Mar 2026 10:00:00 +0000",
        )
    )
    reply = _run(
        _message(
            From="Bo <bo@example.test>",
            To="ana@example.test",
            Subject="RE: [team] Plan",
            Message_ID="<r1@example.test>",
            In_Reply_To="<P1@example.test>",
            References="<p1@example.test>",
            Date="Wed, 04 Mar 2026 09:00:00 +0000",
        )
    )
    parent_id = parent["nodes"][0]["id"]
    threads = {"IN_REPLY_TO", "REFERENCES"}
    edges = {r["type"]: r for r in reply["relationships"] if r["type"] in threads}
    assert edges["IN_REPLY_TO"]["toId"] == parent_id == edges["REFERENCES"]["toId"]
    assert reply["nodes"][0]["properties"]["subject_normalized"] == "Plan"
    people = {
        n["properties"]["address"]: n["id"]
        for out in (parent, reply)
        for n in out["nodes"]
        if n["labels"] == ["PERSON"]
    }
    assert set(people) == {"ana@example.test", "bo@example.test"}  # one id per address, any case
    assert parent["nodes"][0]["properties"]["sent_at"] == 1_772_532_000_000_000


@pytest.mark.parametrize(
    ("headers", "kind", "labels"),
    [
        ({"Date": "Tue, 10 Feb 2026 10:00:00 +0000"}, "conflicting_dates",
         ["2026-02-10 (Date header)", "2026-03-03 (in body)"]),
        ({"Date": "Tue, 03 Mar 2026 10:00:00 +0000"}, None, []),
        ({}, "undated", ["No usable Date header"]),
    ],
)  # fmt: skip
def test_date_ambiguity(headers: dict[str, str], kind: str | None, labels: list[str]) -> None:
    out = _run(_message(From="a@example.test", Subject="x", **headers), options={"clarify": True})
    if kind is None:
        assert "ambiguities" not in out
        return
    (amb,) = out["ambiguities"]
    assert amb["kind"] == kind and [c["label"] for c in amb["candidates"]] == labels
    assert "ambiguities" not in _run(_message(From="a@example.test", **headers))


def test_attachments_are_named_under_their_message() -> None:
    """``<message name>/<file name>``: the same file in two messages is two sources; two
    files of one name in one message are two sources (``r (2).csv``); a file attached twice
    is one child; the names are the same for the same bytes."""
    names = []
    for sender in ("a@example.test", "b@example.test"):
        msg = EmailMessage()
        msg["From"], msg["Subject"] = sender, "report"
        msg.set_content("See attached.")
        msg.add_attachment(b"id,v\n1,2\n", maintype="text", subtype="csv", filename="r.csv")
        (child,) = _run(bytes(msg), name=f"inbox/{sender}.eml")["childJobs"]
        assert child["format"] == "csv"
        names.append(child["name"])
    assert names == ["inbox/a@example.test.eml/r.csv", "inbox/b@example.test.eml/r.csv"]
    msg = EmailMessage()
    msg["From"], msg["Subject"] = "a@example.test", "two of a name"
    msg.set_content("See attached.")
    for data, filename in (
        (b"a\n", "r.csv"),
        (b"b\n", "r.csv"),
        (b"a\n", "r.csv"),
        (b"c\n", "r (2).csv"),
        (b"d\n", "dir/x.txt"),
        (b"e\n", ""),
    ):
        msg.add_attachment(data, maintype="text", subtype="csv", filename=filename)
    out = _run(bytes(msg), name="m.eml")
    children = [c["name"] for c in out["childJobs"]]
    assert children == ["m.eml/r.csv", "m.eml/r (2).csv", "m.eml/r (2) (2).csv",
                        "m.eml/dir_x.txt", "m.eml/attachment"]  # fmt: skip
    assert out["stats"]["child_jobs"] == 5
    _check_attachment_edges(out, "m.eml")
    assert _run(bytes(msg), name="m.eml") == out  # deterministic


def test_attachment_names_rules() -> None:
    assert attachment_names("p", []) == []
    assert attachment_names("p", [(".profile", "1"), (".profile", "2"), ("noext", "1"),
                                  ("noext", "2"), ("a\x00\tb\\c", "1")]) == [
        "p/.profile", "p/.profile (2)", "p/noext", "p/noext (2)", "p/ab_c",
    ]  # fmt: skip


def test_unknown_option_is_refused() -> None:
    with pytest.raises(Exception) as failure:
        _run(_message(From="a@example.test"), options={"thread": True})
    assert classify(failure.value)[0].startswith("unsupported_feature: option")


# Outlook .msg files: node counts, the subject, the formats of the attachments' child jobs.
# testMSG_chinese.msg is an ANSI message in code page 950 (Big5), named by PR_INTERNET_CPID.
MSG_EXPECTED: dict[str, tuple[dict[str, int], str, list[str]]] = {
    "msg_with_attachment.msg": (
        {"MESSAGE": 1, "PERSON": 1}, "Email with Attachment", ["text", "pdf"],
    ),
    "test-outlook.msg": ({"MESSAGE": 1, "PERSON": 1}, "Microsoft Outlook Express 6", []),
    "testMSG_att_doc.msg": (
        {"MESSAGE": 1, "PERSON": 1, "ATTACHMENT": 1}, "test pièce jointe 1", ["text"],
    ),
    "testMSG_att_msg.msg": (
        {"MESSAGE": 1, "PERSON": 1}, "test email", ["msg", "pdf"],
    ),
    "testMSG_chinese.msg": (
        {"MESSAGE": 1, "PERSON": 1}, "Alfresco MSG format testing ( MSG 格式測試 )", [],
    ),
}  # fmt: skip


def _run_msg(raw: bytes, name: str) -> dict[str, Any]:
    out = email_worker.handle(Job("id", "ingest:msg", "msg", name, raw, None, {}, 0, "t", "o"))
    to_projection(decode_submission(json.dumps(out).encode()))
    return out


def test_every_corpus_msg_has_an_expectation() -> None:
    assert {p.name for p in (CORPUS / "msg").iterdir()} == set(MSG_EXPECTED)


@pytest.mark.parametrize("name", sorted(MSG_EXPECTED))
def test_corpus_msg(name: str) -> None:
    counts, subject, formats = MSG_EXPECTED[name]
    raw = (CORPUS / "msg" / name).read_bytes()
    out = _run_msg(raw, name)
    assert _count(out) == counts
    assert out["nodes"][0]["properties"]["subject"].startswith(subject)
    assert [c["format"] for c in out.get("childJobs", [])] == formats
    _check_attachment_edges(out, name)
    assert _run_msg(raw, name) == out  # deterministic


def test_msg_that_is_rfc822_text_and_a_broken_msg() -> None:
    rfc822 = _run_msg(_message(From="a@example.test", Subject="plain"), "really-eml.msg")
    assert rfc822["nodes"][0]["properties"]["subject"] == "plain"
    with pytest.raises(Exception) as failure:
        _run_msg(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "broken.msg")
    assert classify(failure.value)[0].startswith("corrupt_input")


def test_ansi_msg_is_decoded_with_its_code_page() -> None:
    out = _run_msg((CORPUS / "msg" / "testMSG_chinese.msg").read_bytes(), "c.msg")
    assert "中文測試" in out["canonicalText"]  # the body, Big5 (code page 950)
    # A Unicode message is read as it is, its code-page property notwithstanding.
    att = _run_msg((CORPUS / "msg" / "testMSG_att_doc.msg").read_bytes(), "d.msg")
    assert att["nodes"][0]["properties"]["subject"] == "test pièce jointe 1"
