"""What the Messenger poller hands the runner is pinned byte for byte: every record, failure, media stream and cursor
of two exports that take every path of the renderer (issue 25: the speed work on the renderer, the poller and the
core types must not change one byte of what is stored, nor where a stopped poll resumes)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memex.source import Item
from memex.store.attachments import digest
from pollers.messenger.poller import MessengerPoller
from tests.messenger.messenger_fixtures import ALICE, ME, T0, Export, Thread, e2ee_files, e2ee_msg, msg, write_zip

BOB = "Bob Ørsted"
FAR = 2**32 * 1000 + 123  # after 2106: the sent time is formatted the slow way
# The sha256 of every line :func:`_lines` writes for these exports, computed with the code before issue 25's changes.
PINNED = "b862a5d4d8dc0d06349783ea29849f584d33ac5909c470a61d40935149b473ac"


def _exports(inbox: Path) -> None:
    """A standard export (a group split over several files, same-millisecond groups across a file boundary, media
    present and missing, a sticker, a video, a share, reactions, unsent messages with and without reactions, calls and
    joins, a malformed message, a thread file that is not JSON, an anonymous 1:1, a time after 2106) and an
    encrypted-chat export, with fixed modification times (the cursor holds each zip's signature)."""
    base = "messages/inbox/group_1"
    group = [
        msg(ALICE, T0, "hello 🎉 ünïcødé"),
        msg(ALICE, T0, "same millisecond, same sender"),
        msg(ALICE, T0 + 1, "ok"),
        msg(ALICE, T0 + 1, "ok"),
        msg(BOB, T0 + 1, "ok"),
        msg(BOB, T0 + 1000, "look", photos=[f"{base}/photos/1.jpg", f"{base}/photos/missing.jpg"]),
        msg(ME, T0 + 60_000, "reacted to", reactions=[(ALICE, "❤"), (BOB, "😂")]),
        msg(ALICE, T0 + 60_001, unsent=True),
        msg(BOB, T0 + 60_002, unsent=True, reactions=[(ME, "👍")]),
        {**msg(ALICE, T0 + 120_000, "The video call ended."), "type": "Call", "call_duration": 61},
        {**msg(BOB, T0 + 120_001, "Bob added Zoë to the group."), "type": "Subscribe"},
        {**msg(ALICE, T0 + 120_002, "a link"), "share": {"link": "https://example.com/ü", "share_text": "shared ü"}},
        {**msg(ME, T0 + 120_003), "sticker": {"uri": f"{base}/stickers/s.png"}},
        {**msg(ALICE, T0 + 120_004, "a video"), "videos": [{"uri": f"{base}/videos/v.mp4"}], "type": "Generic"},
        {"sender_name": 5, "timestamp_ms": T0 + 120_005, "content": "not a message"},
        msg(ALICE, T0 + 120_006, "split", photos=["../outside.jpg", "https://example.com/x.jpg"]),
        msg(BOB, FAR, "far future"),
    ]
    anonymous = [msg("Facebook User", T0 + 5, "who am I"), msg(ME, T0 + 6, "nobody")]
    standard = Export(
        [
            Thread("group_1", [ALICE, BOB, ME], group, title="Gruppe ü", per_file=4),
            Thread("facebookuser_2", ["Facebook User", ME], anonymous, section="archived_threads"),
        ],
        media={f"{base}/photos/1.jpg": b"\xff\xd8\xff photo", f"{base}/stickers/s.png": b"png", f"{base}/videos/v.mp4": b"mp4" * 500},
        extra={"messages/inbox/broken_3/message_1.json": b'{"participants": [{"name": "x"}], "messages": [{'},
    )
    e2ee = e2ee_files(
        {
            "Alice_1.json": (
                [ALICE, ME],
                [
                    e2ee_msg(ALICE, T0, "hello 🎉 ünïcødé"),
                    e2ee_msg(ALICE, T0 + 10, "encrypted 日本", reactions=[(ME, "👍")]),
                    e2ee_msg(ME, T0 + 20, media=["./media/abc.jpeg"]),
                    e2ee_msg(ME, T0 + 30, media=["Failed to download media"]),
                    e2ee_msg(ALICE, T0 + 40, unsent=True),
                ],
            )
        },
        media={"media/abc.jpeg": b"jpegbytes"},
    )
    for n, (name, files) in enumerate((("facebook-a.zip", standard.files()), ("messages-b.zip", e2ee))):
        path = write_zip(inbox / name, files)
        os.utime(path, ns=(1_600_000_000_000_000_000 + n, 1_600_000_000_000_000_000 + n))


def _item_lines(item: Item, cursor: Any) -> Iterator[str]:
    """One item as text: its cursor (a live batch makes it on demand: ``Batch.after``), its record (or failure), its
    media's digests and flags."""
    yield json.dumps(cursor, sort_keys=True)
    if item.message is not None:
        yield item.message.key()
        yield item.message.to_json().decode()
    if item.failure is not None:
        f = item.failure
        yield json.dumps([f.native_id, f.reason, f.ref, (f.raw or b"").decode(errors="replace")])
    yield json.dumps([[c.index, *digest(c.open)] for c in item.contents] + [sorted(item.blobs), item.expected_dup, item.whole])


def _lines(inbox: Path) -> Iterator[str]:
    """Every batch of a live read (3 items a batch), a live read from a ``floor_ms`` cursor, and a history walk."""
    for start in (None, {"floor_ms": T0 + 60_000}):
        poller = MessengerPoller("fbm", inbox, settle_seconds=0, me=ME)
        cursor: Any = start
        for _ in range(100):
            batch = poller.fetch(cursor, 3)
            for n, item in enumerate(batch.items, 1):
                assert item.cursor is None or item.cursor == batch.after(n, cursor)
                yield from _item_lines(item, batch.after(n, cursor))
            yield json.dumps([batch.cursor, batch.warnings, batch.reset], sort_keys=True)
            if not batch.items and batch.cursor == cursor:
                break
            cursor = batch.cursor
        poller.close()
    poller = MessengerPoller("fbm", inbox, settle_seconds=0, me=ME)
    try:
        for item in poller.history(None, None, None):
            yield from _item_lines(item, item.cursor)
    except Exception as exc:  # the broken thread file is reported at the end of the walk
        yield f"{type(exc).__name__}: {exc}"
    poller.close()


def test_records_cursors_and_media_of_the_exports_are_unchanged(tmp_path: Path) -> None:
    """Every line the poller yields for the two exports hashes to the digest pinned before the speed work: a
    changed record byte, media stream, item order or cursor fails it."""
    (tmp_path / "inbox").mkdir()
    _exports(tmp_path / "inbox")
    lines = list(_lines(tmp_path / "inbox"))
    assert len(lines) > 150
    assert hashlib.sha256("\n".join(lines).encode()).hexdigest() == PINNED
