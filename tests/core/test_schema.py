"""The published record schema (memex/schema/message-1.json): what it says, that the core enforces it before a record
is stored, and that ``memex schema`` prints it."""

from __future__ import annotations

import copy
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from memex import config as memex_config
from memex import registry
from memex.records import REVISION_KINDS, SCHEMA, TYPES, Message
from memex.runner import poll
from memex.schema import problem, schema, schema_text
from tests.conftest import file_objects, read_log, run_cli, stored_records, write_config

SECRET = "the secret plan for friday"

GOOD: dict[str, Any] = {
    "schema": SCHEMA, "source": "imessage", "type": "message", "native_id": "G-1", "sent_at": "2024-05-01T12:00:00.250000Z",
    "conversation": {"id": "chat1", "name": None, "participants": ["+15550100"]},
    "sender": {"id": "+15550100", "name": None, "is_me": False}, "text": SECRET,
    "attachments": [{"id": "A-1", "filename": "a.jpg", "mime_type": "image/jpeg", "size": 3, "sha256": "ab" * 32, "missing": False,
                     "message": {"subject": "fwd", "from": None}}],
    "reply_to": None, "edited_at": None, "deleted": False, "extra": {"anything": [1, {"goes": SECRET}]},
}  # fmt: skip


def with_(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``doc`` with the field at dotted ``path`` set to ``value`` (``...`` deletes it)."""
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    here: Any = out
    for part in parents:
        here = here[int(part)] if isinstance(here, list) else here[part]
    if value is ...:
        del here[last]
    else:
        here[last] = value
    return out


REVISION = {**GOOD, "revision": {"id": "edit-1", "kind": "edit", "at": "2024-05-01T12:01:00Z"}, "type": "reaction"}
BAD = {
    "invented type": with_(GOOD, "type", "teams"),
    "a date that is not RFC 3339 UTC": with_(GOOD, "sent_at", "2024-05-01 12:00:00+02:00"),
    "a year of one digit": with_(GOOD, "edited_at", "5-01-01T00:00:00Z"),
    "a missing field": with_(GOOD, "reply_to", ...),
    "a field the schema lacks": {**GOOD, "subject": SECRET},
    "extra not an object": with_(GOOD, "extra", [SECRET]),
    "text not a string": with_(GOOD, "text", [SECRET]),
    "participants not strings": with_(GOOD, "conversation.participants", [None]),
    "is_me not a boolean": with_(GOOD, "sender.is_me", "yes"),
    "an attachment without an id": with_(GOOD, "attachments.0.id", ...),
    "a sha256 that is not 64 hex": with_(GOOD, "attachments.0.sha256", SECRET),
    "a negative size": with_(GOOD, "attachments.0.size", -1),
    "another schema": with_(GOOD, "schema", "memex.message/2"),
    "a revision of an unknown kind": with_(REVISION, "revision.kind", "rename"),
    "a revision without its time": with_(REVISION, "revision.at", ...),
    "not an object": [SECRET],
}


def test_the_file_is_draft_2020_12_and_names_exactly_what_the_core_writes() -> None:
    """The shipped file is a valid Draft 2020-12 schema with $id memex.message/1; its fields are the Message fields
    (all required but ``revision``, nothing else allowed), its ``type`` and revision kinds the core's constants."""
    doc = schema()
    jsonschema.Draft202012Validator.check_schema(doc)
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema" and doc["$id"] == SCHEMA
    names = {f.name for f in fields(Message)} | {"schema"}
    assert set(doc["properties"]) == names and set(doc["required"]) == names - {"revision"}
    assert doc["additionalProperties"] is False
    assert tuple(doc["properties"]["type"]["enum"]) == TYPES == ("message", "reaction", "event")
    assert tuple(doc["properties"]["revision"]["properties"]["kind"]["enum"]) == REVISION_KINDS
    assert json.loads(schema_text()) == doc


@pytest.mark.parametrize("name", list(BAD))
def test_the_core_validator_agrees_with_jsonschema_and_never_quotes_a_value(name: str) -> None:
    """Each broken record is refused by the core's check and by jsonschema (the reference validator) alike, with a one-line
    message naming the field and the rule, never the value; the good original and revision pass both."""
    reference = jsonschema.Draft202012Validator(schema())
    for good in (GOOD, REVISION):
        assert problem(good) is None and reference.is_valid(good)
    bad = BAD[name]
    why = problem(bad)
    assert why is not None and not reference.is_valid(bad)
    assert "\n" not in why and SECRET not in why and why.startswith("data")


def test_a_record_that_breaks_the_schema_is_quarantined_never_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A poller inventing a ``type``, and one handing over a revision of an unknown kind: neither is stored; each is
    quarantined with the validator's message (no message text) and its record as raw bytes; the rest is stored and the
    cursor moves past all of them."""
    monkeypatch.setitem(registry.BUILTIN, "fake", "tests.core.fake_poller:make")
    spec = tmp_path / "spec.json"
    bad_revision = {"id": "r1", "kind": "rename", "at": None}
    spec.write_text(json.dumps({"count": 5, "fields": {"2": {"type": "teams", "text": SECRET}, "4": {"revision": bad_revision}}}))
    cfg = memex_config.load(write_config(tmp_path, {"f": {"type": "fake", "spec": str(spec)}}))
    result = poll(cfg, "f")
    assert (result.status, result.new, result.quarantined, result.positions_after) == ("ok", 3, 2, {"n": 5})
    store = tmp_path / "state" / "store"
    assert sorted(stored_records(store)) == ["messages/f/m1.json", "messages/f/m3.json", "messages/f/m5.json"]
    quarantine = file_objects(store, prefix="quarantine/")
    meta = json.loads(quarantine["quarantine/f/m2.json"])
    why = "data.type must be one of ['message', 'reaction', 'event']"
    assert meta["reason"] == f"the record does not conform to the schema memex.message/1: {why}"
    assert json.loads(quarantine["quarantine/f/m2.raw"])["text"] == SECRET  # nothing lost: the record is kept as it was
    rev = json.loads(quarantine["quarantine/f/m4%20revision%20r1.json"])
    assert rev["native_id"] == "m4 revision r1" and "data.revision.kind must be one of" in rev["reason"]
    events = [e for e in read_log(tmp_path / "state", "f") if e.get("event") == "record.quarantined"]
    assert [e["native_id"] for e in events] == ["m2", "m4 revision r1"]
    assert SECRET not in (tmp_path / "state" / "logs").joinpath("f.jsonl").read_text()


def test_memex_schema_prints_the_published_file(tmp_path: Path) -> None:
    """``memex schema`` prints the shipped file byte for byte on stdout, nothing on stderr, exit 0 (no config needed)."""
    out = run_cli("schema", env={"MEMEX_CONFIG": str(tmp_path / "none.toml")})
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout == schema_text() and json.loads(out.stdout)["$id"] == SCHEMA
