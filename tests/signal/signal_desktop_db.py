"""Build a Signal Desktop folder for tests: ``config.json``, an SQLCipher 4 ``sql/db.sqlite`` and attachment files.

The tables and columns are Signal Desktop's own (``ts/sql/migrations`` in signalapp/Signal-Desktop: ``messages``
after migration 1270, ``conversations``, ``items``, ``message_attachments`` from migration 1360), cut to the
columns memex reads plus their neighbours; the message JSON follows ``MessageAttributesType``
(``ts/model-types.d.ts``): ``editHistory`` newest first, ``reactions`` with ``fromId`` a conversation id,
``quote.authorAci``, ``deletedForEveryone`` and ``deletedForEveryoneTimestamp``. The key is stored the two
ways Signal Desktop stores it: plain ``key``, or ``encryptedKey`` wrapped like Chromium's safe storage
(``v10`` macOS, ``v11`` Linux). Attachments are written both plain (older layout, listed in the JSON) and
encrypted at rest (``version`` 2 with a ``localKey``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

SCHEMA = """
CREATE TABLE conversations(
  id STRING PRIMARY KEY ASC, json TEXT, active_at INTEGER, type STRING, members TEXT, name TEXT, profileName TEXT,
  profileFamilyName TEXT, profileFullName TEXT, e164 TEXT, serviceId TEXT, groupId TEXT, profileLastFetchedAt INTEGER,
  expireTimerVersion INTEGER NOT NULL DEFAULT 1);
CREATE TABLE items(id STRING PRIMARY KEY ASC, json TEXT);
CREATE TABLE messages(
  rowid INTEGER PRIMARY KEY ASC, id STRING UNIQUE, json TEXT, readStatus INTEGER, expires_at INTEGER, sent_at INTEGER,
  schemaVersion INTEGER, conversationId STRING, received_at INTEGER, hasAttachments INTEGER, hasFileAttachments INTEGER,
  hasVisualMediaAttachments INTEGER, expireTimer INTEGER, expirationStartTimestamp INTEGER, type STRING, body TEXT,
  messageTimer INTEGER, messageTimerStart INTEGER, messageTimerExpiresAt INTEGER, isErased INTEGER, isViewOnce INTEGER,
  sourceServiceId TEXT, serverGuid STRING NULL, sourceDevice INTEGER, storyId STRING, isStory INTEGER,
  isChangeCreatedByUs INTEGER NOT NULL DEFAULT 0, seenStatus NUMBER default 0, timestamp INTEGER, received_at_ms INTEGER,
  unidentifiedDeliveryReceived INTEGER, serverTimestamp INTEGER, source TEXT);
CREATE INDEX messages_conversation ON messages (conversationId, isStory, received_at, sent_at);
CREATE TABLE message_attachments (
  messageId TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE, editHistoryIndex INTEGER NOT NULL,
  attachmentType TEXT NOT NULL, orderInMessage INTEGER NOT NULL, conversationId TEXT NOT NULL, sentAt INTEGER NOT NULL,
  clientUuid TEXT, size INTEGER NOT NULL, contentType TEXT NOT NULL, path TEXT, plaintextHash TEXT, localKey TEXT,
  caption TEXT, fileName TEXT, blurHash TEXT, height INTEGER, width INTEGER, digest TEXT, key TEXT, iv TEXT,
  downloadPath TEXT, version INTEGER, pending INTEGER,
  PRIMARY KEY (messageId, editHistoryIndex, attachmentType, orderInMessage)) STRICT;
PRAGMA user_version = 1360;
"""


def wrap_key(key_hex: str, password: bytes, scheme: str) -> str:
    """``encryptedKey`` as Signal Desktop writes it: ``v10``/``v11`` + AES-128-CBC(PBKDF2-SHA1(password)), hex."""
    iterations = {"v10": 1003, "v11": 1}[scheme]
    aes = PBKDF2HMAC(algorithm=hashes.SHA1(), length=16, salt=b"saltysalt", iterations=iterations).derive(password)
    padder = padding.PKCS7(128).padder()
    plain = padder.update(key_hex.encode()) + padder.finalize()
    enc = Cipher(algorithms.AES(aes), modes.CBC(b" " * 16)).encryptor()
    return (scheme.encode() + enc.update(plain) + enc.finalize()).hex()


def encrypt_at_rest(data: bytes, keys: bytes) -> bytes:
    """An attachment file as Signal Desktop keeps it since 2024: IV | AES-256-CBC(data + zero padding, PKCS7) | HMAC-SHA256."""
    iv = os.urandom(16)
    padded = data + b"\0" * (-len(data) % 64)  # padding past the size, cut off by the reader
    padder = padding.PKCS7(128).padder()
    plain = padder.update(padded) + padder.finalize()
    enc = Cipher(algorithms.AES(keys[:32]), modes.CBC(iv)).encryptor()
    body = iv + enc.update(plain) + enc.finalize()
    return body + hmac.new(keys[32:], body, hashlib.sha256).digest()


def key_cmd_script(folder: Path, password: bytes) -> Path:
    """An executable that prints ``password`` (as ``security find-generic-password -w`` would), newline-terminated."""
    path = folder / "print-password"
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.buffer.write({password!r} + b'\\n')\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@dataclass
class Desktop:
    """A Signal Desktop folder under construction (``add_*`` then :meth:`write`)."""

    root: Path
    me: str
    key_hex: str = field(default_factory=lambda: os.urandom(32).hex())
    conversations: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    attachment_rows: list[dict[str, Any]] = field(default_factory=list)
    received: int = 1000

    def conversation(self, kind: str, *, service_id: str | None = None, group_id: str | None = None, name: str | None = None,
                     profile: str | None = None, e164: str | None = None) -> str:  # fmt: skip
        """Add a conversation (``private`` or ``group``); returns its local id."""
        cid = str(uuid.uuid4())
        doc = {"id": cid, "type": kind, "serviceId": service_id, "groupId": group_id, "name": name, "profileName": profile,
               "e164": e164, "version": 2}  # fmt: skip
        self.conversations.append({"doc": {k: v for k, v in doc.items() if v is not None}, "profileFullName": profile})
        return cid

    def message(self, conversation: str, kind: str, sent: int, body: str | None, *, author: str | None = None,
                **extra: Any) -> str:  # fmt: skip
        """Add a message row (``incoming``/``outgoing``/other types); ``extra`` goes into its JSON; returns its id."""
        mid = str(uuid.uuid4())
        self.received += 1
        doc: dict[str, Any] = {"id": mid, "conversationId": conversation, "type": kind, "sent_at": sent, "timestamp": sent,
                               "received_at": self.received, "schemaVersion": 14, "attachments": [], **extra}  # fmt: skip
        if body is not None:
            doc["body"] = body
        if kind == "incoming":
            doc["sourceServiceId"], doc["sourceDevice"] = author, 1
        self.messages.append(doc)
        return mid

    def plain_file(self, data: bytes) -> dict[str, Any]:
        """Write an attachment file the old way (plain bytes); returns its JSON entry (path relative to attachments.noindex)."""
        rel = f"{os.urandom(1).hex()}/{os.urandom(32).hex()}"
        path = self.root / "attachments.noindex" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return {"path": rel, "size": len(data), "contentType": "image/jpeg", "fileName": "photo.jpg", "cdnKey": os.urandom(8).hex()}

    def encrypted_file(self, data: bytes, content_type: str = "image/png", file_name: str | None = "pic.png") -> dict[str, Any]:
        """Write an attachment file encrypted at rest (version 2); returns its fields."""
        keys = os.urandom(64)
        entry = self.plain_file(b"")
        (self.root / "attachments.noindex" / entry["path"]).write_bytes(encrypt_at_rest(data, keys))
        entry.update(size=len(data), contentType=content_type, fileName=file_name, localKey=base64.b64encode(keys).decode(), version=2,
                     plaintextHash=hashlib.sha256(data).hexdigest())  # fmt: skip
        return entry

    def attach_row(self, message_id: str, entry: dict[str, Any], *, index: int = -1, order: int = 0, kind: str = "attachment") -> None:
        """List an attachment in message_attachments (the layout since migration 1360)."""
        msg = next(m for m in self.messages if m["id"] == message_id)
        self.attachment_rows.append({"messageId": message_id, "editHistoryIndex": index, "attachmentType": kind, "orderInMessage": order,
                                     "conversationId": msg["conversationId"], "sentAt": msg["sent_at"], "size": entry["size"],
                                     "contentType": entry["contentType"], "path": entry["path"], "localKey": entry.get("localKey"),
                                     "fileName": entry.get("fileName"), "version": entry.get("version"),
                                     "plaintextHash": entry.get("plaintextHash")})  # fmt: skip

    def write(self, *, config: dict[str, Any] | None = None, wal: bool = True) -> Path:
        """Write config.json (plain ``key`` unless ``config`` is given) and the encrypted database; returns the folder."""
        import sqlcipher3

        (self.root / "sql").mkdir(parents=True, exist_ok=True)
        (self.root / "config.json").write_text(json.dumps(config if config is not None else {"key": self.key_hex}))
        db = self.root / "sql" / "db.sqlite"
        conn = sqlcipher3.connect(str(db))
        conn.execute(f"PRAGMA key = \"x'{self.key_hex}'\"")
        if wal:
            conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(SCHEMA)
        conn.execute("INSERT INTO items VALUES ('uuid_id', ?)", (json.dumps({"id": "uuid_id", "value": f"{self.me}.2"}),))
        for c in self.conversations:
            d = c["doc"]
            conn.execute("INSERT INTO conversations (id, json, type, name, profileName, profileFullName, e164, serviceId, groupId) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (d["id"], json.dumps(d), d["type"], d.get("name"), d.get("profileName"), c["profileFullName"], d.get("e164"),
                          d.get("serviceId"), d.get("groupId")))  # fmt: skip
        for m in self.messages:
            conn.execute("INSERT INTO messages (id, json, sent_at, conversationId, received_at, type, body, sourceServiceId, timestamp, "
                         "hasAttachments, isErased, isStory, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (m["id"], json.dumps(m), m["sent_at"], m["conversationId"], m["received_at"], m["type"], m.get("body"),
                          m.get("sourceServiceId"), m["timestamp"], int(bool(m.get("attachments"))), int(bool(m.get("isErased"))),
                          int(bool(m.get("isStory"))), m.get("source")))  # fmt: skip
        for a in self.attachment_rows:
            cols = ", ".join(a)
            conn.execute(f"INSERT INTO message_attachments ({cols}) VALUES ({', '.join('?' * len(a))})", tuple(a.values()))
        conn.commit()
        conn.close()
        return self.root
