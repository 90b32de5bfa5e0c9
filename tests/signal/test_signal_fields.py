"""What a Signal message carries besides text and files, kept alike by the live poll (signal-cli's JSON, through the
stand-in) and the Desktop backfill (an encrypted database in Desktop's schema): one message of each kind is sent both
ways, and each field of the two records is compared (pollers/signal/extras.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memex.records import message_key
from tests.conftest import file_objects, run_cli
from tests.signal import signal_standin as sc
from tests.signal.signal_desktop_db import Desktop
from tests.signal.test_signal_desktop import config

T0 = 1744235749734
PACK = "8fcf0b3b5e7c4a1d9e2f60718293a4b5"
STICKER = b"RIFF\x00\x00\x00\x00WEBPVP8 a sticker image" * 20
STICKER_AT, MENTION_AT, QUOTE_AT, PREVIEW_AT, CONTACT_AT, TIMER_AT, ONCE_AT = (T0 + k for k in range(1, 8))


def live_lines() -> list[dict[str, Any]]:
    """The messages as signal-cli prints them (field names of JsonSticker, JsonMention, JsonQuote, JsonPreview,
    JsonSharedContact; every envelope carries serverReceivedTimestamp = sent + 300 and serverDeliveredTimestamp = + 900)."""
    contact = {"name": {"nickname": None, "given": "Carol", "family": "Doe", "prefix": None, "suffix": None, "middle": None},
               "phone": [{"value": "+491700000003", "type": "MOBILE", "label": None}],
               "email": [{"value": "carol@example.org", "type": "HOME", "label": None}], "organization": "ACME"}  # fmt: skip
    quoted = {"id": T0, "author": sc.ALICE, "authorNumber": None, "authorUuid": sc.ALICE, "text": "the original", "attachments": []}
    return [
        sc.message(sc.ALICE, T0, "the original"),
        sc.envelope(sc.ALICE, STICKER_AT, dataMessage=sc.data(STICKER_AT, None, sticker={"packId": PACK, "stickerId": 3})),
        sc.message(sc.ALICE, MENTION_AT, "😀 \ufffc look at this",
                   mentions=[{"name": sc.BOB, "number": None, "uuid": sc.BOB, "start": 3, "length": 1}]),
        sc.message(sc.ALICE, QUOTE_AT, "replying", quote=quoted),
        sc.message(sc.ALICE, PREVIEW_AT, "https://example.org/a",
                   previews=[{"url": "https://example.org/a", "title": "A page", "description": "About A", "image": None}]),
        sc.envelope(sc.ALICE, CONTACT_AT, dataMessage=sc.data(CONTACT_AT, None, contacts=[contact])),
        sc.envelope(sc.ALICE, TIMER_AT, dataMessage={**sc.data(TIMER_AT, "gone in an hour"), "expiresInSeconds": 3600}),
        sc.envelope(sc.ALICE, ONCE_AT, dataMessage={**sc.data(ONCE_AT, None), "viewOnce": True,
                    "attachments": [{"contentType": "image/jpeg", "filename": None, "id": "once.jpg", "size": 3}]}),
    ]  # fmt: skip


def desktop(root: Path) -> Desktop:
    """The same messages as Signal Desktop keeps them (MessageAttributesType; the sticker's image in message_attachments)."""
    d = Desktop(root, me=sc.ME)
    alice = d.conversation("private", service_id=sc.ALICE, profile="Alice")
    d.conversation("private", service_id=sc.BOB, profile="Bob")

    def msg(sent: int, body: str | None, **extra: Any) -> str:
        return d.message(alice, "incoming", sent, body, author=sc.ALICE, serverTimestamp=sent + 300, received_at_ms=sent + 900, **extra)

    msg(T0, "the original")
    sticker = msg(STICKER_AT, None, sticker={"packId": PACK, "stickerId": 3, "packKey": "a" * 64, "emoji": "🐱"})
    d.attach_row(sticker, d.encrypted_file(STICKER, content_type="image/webp", file_name=None), kind="sticker")
    msg(MENTION_AT, "😀 \ufffc look at this", bodyRanges=[{"start": 3, "length": 1, "mentionAci": sc.BOB, "replacementText": "Bob",
                                                          "conversationID": "x"}, {"start": 5, "length": 4, "style": 1}])  # fmt: skip
    msg(QUOTE_AT, "replying", quote={"id": T0, "authorAci": sc.ALICE, "text": "the original", "attachments": [], "isViewOnce": False,
                                     "referencedMessageNotFound": False})  # fmt: skip
    msg(PREVIEW_AT, "https://example.org/a",
        preview=[{"url": "https://example.org/a", "title": "A page", "description": "About A", "date": None}])  # fmt: skip
    msg(CONTACT_AT, None, contact=[{"name": {"givenName": "Carol", "familyName": "Doe", "displayName": "Carol Doe"},
                                    "number": [{"value": "+491700000003", "type": 2}], "email": [{"value": "carol@example.org", "type": 1}],
                                    "organization": "ACME"}])  # fmt: skip
    msg(TIMER_AT, "gone in an hour", expireTimer=3600, expirationStartTimestamp=TIMER_AT + 1000)
    msg(ONCE_AT, None, isViewOnce=True, attachments=[])
    return d


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """Records by native ID: (the live poll's, the Desktop backfill's), each into its own store."""
    tmp = tmp_path_factory.mktemp("fields")
    folder = desktop(tmp / "Signal").write()
    live_cfg = config(tmp / "live", folder)
    stickers = tmp / "live" / "scdata" / "stickers" / PACK
    stickers.mkdir(parents=True)
    (stickers / "3").write_bytes(STICKER)
    (stickers / "manifest.json").write_text(json.dumps({"title": "Cats", "author": "someone", "cover": None, "stickers": [
        {"id": 3, "emoji": "🐱", "file": "3", "contentType": "image/webp"}]}))  # fmt: skip
    sc.queue(tmp / "live" / "sc", *live_lines())
    poll = run_cli("poll", "sig", config=live_cfg)
    assert poll.returncode == 0, poll.stderr
    desk_cfg = config(tmp / "desk", folder)
    done = run_cli("backfill", "sig", "--json", config=desk_cfg)
    assert done.returncode == 0, done.stderr

    def records(root: Path) -> dict[str, Any]:
        objs = file_objects(root / "state" / "store", "messages/")
        return {json.loads(v)["native_id"]: json.loads(v) for k, v in objs.items() if k.endswith(".json")}

    live, desk = records(tmp / "live"), records(tmp / "desk")
    assert set(live) == set(desk) and len(live) == 8
    assert all(message_key("sig", nid) for nid in live)
    return live, desk


def at(ms: int) -> str:
    """A native ID of Alice's message sent at ``ms``."""
    return f"{sc.ALICE}:{ms}"


def check_sticker(live: dict[str, Any], desk: dict[str, Any]) -> None:
    """Pack, sticker number and emoji in extra.sticker; the image is an attachment with one ID and one hash."""
    sha = hashlib.sha256(STICKER).hexdigest()
    for rec in (live, desk):
        assert rec["extra"]["sticker"] == {"pack_id": PACK, "sticker_id": 3, "emoji": "🐱"} and rec["text"] is None
        (att,) = rec["attachments"]
        assert att["id"] == f"sticker:{PACK}:3" and att["sha256"] == sha and att["mime_type"] == "image/webp"


def check_mentions(live: dict[str, Any], desk: dict[str, Any]) -> None:
    """Who was mentioned (the ACI, where in the text) in extra.mentions; Desktop also knows the name shown and puts it
    in the text (offsets in UTF-16 units, as Signal counts them), signal-cli's text keeps the placeholder. A style range
    is not a mention."""
    assert live["extra"]["mentions"] == [{"aci": sc.BOB, "start": 3, "length": 1}]  # UTF-16 units: the emoji counts two
    assert desk["extra"]["mentions"] == [{"aci": sc.BOB, "start": 3, "length": 1, "name": "Bob"}]
    assert live["text"] == "😀 \ufffc look at this" and desk["text"] == "😀 @Bob look at this"


def check_quote(live: dict[str, Any], desk: dict[str, Any]) -> None:
    """The quoted message's time, author and text in extra.quote, and reply_to naming it."""
    for rec in (live, desk):
        assert rec["extra"]["quote"] == {"id": T0, "author": sc.ALICE, "text": "the original"} and rec["reply_to"] == at(T0)


def check_times(live: dict[str, Any], desk: dict[str, Any]) -> None:
    """When the server received it (serverReceivedTimestamp / serverTimestamp) and when this device did
    (serverDeliveredTimestamp / received_at_ms), in extra."""
    for rec in (live, desk):
        assert rec["extra"]["server_at"] == "2025-04-09T21:55:50.037000Z"  # sent + 300 ms
        assert rec["extra"]["received_at"] == "2025-04-09T21:55:50.637000Z"  # sent + 900 ms


def check_previews(live: dict[str, Any], desk: dict[str, Any]) -> None:
    """A link preview's URL, title and description in extra.previews."""
    for rec in (live, desk):
        assert rec["extra"]["previews"] == [{"url": "https://example.org/a", "title": "A page", "description": "About A"}]


def check_contacts(live: dict[str, Any], desk: dict[str, Any]) -> None:
    """A shared contact's name, numbers, addresses and organisation in extra.contacts."""
    for rec in (live, desk):
        assert rec["extra"]["contacts"] == [{"name": "Carol Doe", "phones": ["+491700000003"], "emails": ["carol@example.org"],
                                             "organization": "ACME"}]  # fmt: skip


def check_timer(live: dict[str, Any], desk: dict[str, Any]) -> None:
    """The disappearing-message timer in extra.expires_in_s."""
    for rec in (live, desk):
        assert rec["extra"]["expires_in_s"] == 3600


def check_view_once(live: dict[str, Any], desk: dict[str, Any]) -> None:
    """View-once in extra.view_once."""
    for rec in (live, desk):
        assert rec["extra"]["view_once"] is True


CHECKS: dict[str, tuple[int, Callable[[dict[str, Any], dict[str, Any]], None]]] = {
    "sticker": (STICKER_AT, check_sticker), "mentions": (MENTION_AT, check_mentions), "quote": (QUOTE_AT, check_quote),
    "times": (QUOTE_AT, check_times), "previews": (PREVIEW_AT, check_previews), "contacts": (CONTACT_AT, check_contacts),
    "timer": (TIMER_AT, check_timer), "view_once": (ONCE_AT, check_view_once),
}  # fmt: skip


@pytest.mark.parametrize("field", list(CHECKS))
def test_each_field_is_kept_alike_live_and_from_desktop(both: tuple[dict[str, Any], dict[str, Any]], field: str) -> None:
    """The field of one message, read live from signal-cli and from Signal Desktop's database, is in both records, alike."""
    live, desk = both
    sent, check = CHECKS[field]
    check(live[at(sent)], desk[at(sent)])
