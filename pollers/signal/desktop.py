"""Signal, history: Signal Desktop's database (``<desktop_dir>/sql/db.sqlite``, SQLCipher 4) for ``memex backfill``.

The rows become the records the live poller (:mod:`pollers.signal.cli`) makes of the same messages,
under the same native IDs (``<author ACI>:<sent ms>``, :mod:`pollers.signal.records`), so a message
read live and again from Desktop is one object. One row of ``messages`` (``type`` incoming or
outgoing; stories, calls and notices are not messages) yields, in this order: the original (the first
version, if edited: the last entry of ``json.editHistory``), one ``edit:<ms>`` revision per later
version, a ``delete:<ms>`` tombstone if it was deleted for everyone, and one
``reaction:<reactor ACI>:<ms>`` revision per reaction it carries now.

The database is opened read-only (``mode=ro``, ``PRAGMA query_only``) and read in short
transactions of :data:`CHUNK` rows, so a running Signal Desktop keeps writing. Rows are walked by
``(sent_at, id)``, both stable (``received_at`` is a local counter; the implicit rowid may change);
the history cursor is ``{"sent_at": ms, "id": row id, "part": k}``: resume right after part ``k`` of
that row. The SQLCipher binding (``sqlcipher3``, the ``signal-desktop`` extra) is imported only here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memex.plugin import (
    Attachment,
    Content,
    Conversation,
    Cursor,
    Failure,
    Item,
    Message,
    Revision,
    Sender,
    SourceError,
    SourceMissing,
    describe_exc,
)
from pollers.signal.desktop_fields import fill_extras
from pollers.signal.desktop_files import opener
from pollers.signal.desktop_key import database_key
from pollers.signal.records import delete_revision, edit_revision, native_id, reaction_revision, sent_time

CHUNK = 500  # rows per read transaction
MESSAGE_TYPES = ("incoming", "outgoing")
INSTALL_HINT = "install the SQLCipher binding: pip install 'memex[signal-desktop]'"


class DesktopHistory:
    """One walk over Signal Desktop's messages, as items of the source ``name``."""

    def __init__(self, name: str, desktop_dir: Path, key_cmd: Sequence[str] | None) -> None:
        self.name = name
        self.dir = desktop_dir
        self.db = desktop_dir / "sql" / "db.sqlite"
        self.key_cmd = key_cmd
        self.me: str | None = None  # the account's own ACI
        self.convs: dict[str, dict[str, Any]] = {}
        self.by_service: dict[str, dict[str, Any]] = {}

    # -- opening -----------------------------------------------------------------------------------
    def connect(self) -> Any:
        """A read-only, keyed connection; SourceMissing (one line) when the binding, file or key is wrong."""
        try:
            import sqlcipher3
        except ImportError:
            raise SourceMissing(f"reading Signal Desktop's database needs SQLCipher; {INSTALL_HINT}") from None
        if not self.db.is_file():
            raise SourceMissing(f"{self.db}: not found; set desktop_dir to Signal Desktop's folder (the one holding config.json)")
        key = database_key(self.dir, self.key_cmd)
        try:
            conn = sqlcipher3.connect(f"file:{quote(str(self.db))}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        except sqlcipher3.Error as exc:
            raise SourceMissing(f"{self.db}: cannot open it ({describe_exc(exc)})") from None
        try:
            # SQLCipher logs its own errors on stderr (ERROR CORE sqlcipher_page_cipher: hmac check failed ...) by
            # default; a wrong key is reported here, in one line. (Process-wide; an older SQLCipher ignores the pragma.)
            conn.execute("PRAGMA cipher_log_level = NONE")
            conn.execute(f"PRAGMA key = \"x'{key}'\"")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            conn.execute("PRAGMA query_only = 1")
        except sqlcipher3.DatabaseError:
            conn.close()
            raise SourceMissing(
                f"{self.db}: the key from {self.dir / 'config.json'} did not open it; check key_cmd (it must print Signal's "
                "safe-storage password) and that desktop_dir is the folder this database belongs to"
            ) from None
        conn.row_factory = sqlcipher3.Row
        return conn

    def _load(self, conn: Any) -> tuple[str, bool]:
        """Read the account's ACI and the conversations; return the author column and whether attachments have their table."""
        columns = {r[1] for r in conn.execute("PRAGMA table_info(messages)")}
        if not columns:
            raise SourceMissing(f"{self.db}: has no messages table; is this Signal Desktop's database?")
        author = "sourceServiceId" if "sourceServiceId" in columns else "sourceUuid" if "sourceUuid" in columns else "NULL"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        row = conn.execute("SELECT json FROM items WHERE id = 'uuid_id'").fetchone() if "items" in tables else None
        if row is not None:
            value = _json(row[0]).get("value")
            if isinstance(value, str) and value:
                self.me = value.split(".")[0]  # "<aci>.<device id>"
        for r in conn.execute("SELECT * FROM conversations"):
            names = list(r.keys())  # a Row iterates its values, not its names
            doc = _json(r["json"]) if "json" in names else {}
            conv = {k: r[k] for k in names if k != "json"}
            for k in ("serviceId", "groupId", "name", "profileName", "profileFullName", "e164"):
                if conv.get(k) is None and doc.get(k) is not None:
                    conv[k] = doc[k]
            if conv.get("serviceId") is None and doc.get("uuid"):
                conv["serviceId"] = doc["uuid"]
            self.convs[str(conv["id"])] = conv
            if conv.get("serviceId"):
                self.by_service[str(conv["serviceId"])] = conv
        return author, "message_attachments" in tables

    # -- walking -----------------------------------------------------------------------------------
    def walk(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        """Every item of messages sent in ``[since, until)``, after ``checkpoint``, in ``(sent_at, id)`` order."""
        conn = self.connect()
        try:
            yield from self._walk(conn, since, until, checkpoint)
        finally:
            conn.close()

    def _walk(self, conn: Any, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        where, params = "", []
        if since is not None:
            where += " AND sent_at >= ?"
            params.append(_ms(since))
        if until is not None:
            where += " AND sent_at < ?"
            params.append(_ms(until))
        after: tuple[int, str] | None = None
        skip: tuple[int, str, int] | None = None
        if checkpoint:
            skip = (int(checkpoint["sent_at"]), str(checkpoint["id"]), int(checkpoint.get("part", 0)))
        first = True
        while True:
            try:
                conn.execute("BEGIN")
                try:
                    if first:
                        author, att_table = self._load(conn)
                        first = False
                    if after is not None:
                        cond, args = "(sent_at > ? OR (sent_at = ? AND id > ?))", [after[0], after[0], after[1]]
                    elif skip is not None:
                        cond, args = "(sent_at > ? OR (sent_at = ? AND id >= ?))", [skip[0], skip[0], skip[1]]
                    else:
                        cond, args = "1", []
                    rows = conn.execute(
                        f"SELECT id, json, sent_at, type, conversationId, {author} AS author FROM messages "
                        f"WHERE sent_at IS NOT NULL AND type IN ('incoming', 'outgoing') AND {cond}{where} "
                        "ORDER BY sent_at, id LIMIT ?",
                        (*args, *params, CHUNK),
                    ).fetchall()
                    files = {r["id"]: self._attachment_rows(conn, r["id"]) for r in rows} if att_table else {}
                finally:
                    conn.execute("COMMIT")
            except SourceError:
                raise
            except Exception as exc:
                raise SourceError(
                    f"{self.db}: read failed ({describe_exc(exc)}); rerun the backfill to continue from its checkpoint"
                ) from None
            if not rows:
                return
            for r in rows:
                sent, mid = int(r["sent_at"]), str(r["id"])
                for part, item in enumerate(self.items(r, files.get(mid))):
                    if skip is not None and (sent, mid) == skip[:2] and part <= skip[2]:
                        continue
                    item.cursor = {"sent_at": sent, "id": mid, "part": part}
                    yield item
            last = rows[-1]
            after = (int(last["sent_at"]), str(last["id"]))

    def _attachment_rows(self, conn: Any, message_id: str) -> dict[int, list[dict[str, Any]]]:
        by_version: dict[int, list[dict[str, Any]]] = {}
        for a in conn.execute(
            "SELECT * FROM message_attachments WHERE messageId = ? AND attachmentType IN ('attachment', 'long-message', 'sticker') "
            "ORDER BY editHistoryIndex, attachmentType, orderInMessage",
            (message_id,),
        ):
            by_version.setdefault(int(a["editHistoryIndex"]), []).append(dict(a))
        return by_version

    # -- rendering ---------------------------------------------------------------------------------
    def items(self, row: Any, files: dict[int, list[dict[str, Any]]] | None) -> list[Item]:
        """The items of one ``messages`` row (original, edits, tombstone, reactions); a Failure if it cannot be read."""
        raw = row["json"].encode() if isinstance(row["json"], str) else bytes(row["json"] or b"")
        try:
            return self._items(row, _json(row["json"], strict=True), files)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            reason = f"a Signal Desktop message row could not be read ({type(exc).__name__})"
            return [Item(None, failure=Failure(f"desktop:{row['id']}", reason, raw=raw, ref=f"messages.id {row['id']}"))]

    def _items(self, row: Any, doc: dict[str, Any], files: dict[int, list[dict[str, Any]]] | None) -> list[Item]:
        if doc.get("isStory") or doc.get("storyReaction"):  # stories and reactions to them: live skips them too
            return []
        sent = int(row["sent_at"])
        is_me = row["type"] == "outgoing"
        author = (self.me if is_me else None) or row["author"] or doc.get("sourceServiceId")
        if not isinstance(author, str) or not author:
            raise ValueError("no sender service ID")
        conv = self.convs[str(row["conversationId"])]
        who = self.by_service.get(author, {})
        if conv.get("type") == "group":
            # the group's own title (what listGroups says live), else its ID as live names it; never a member's name
            conversation = Conversation(id=conv.get("groupId"), name=conv.get("name") or conv.get("groupId"), participants=[])
        else:
            peer = conv.get("serviceId")
            conversation = Conversation(id=peer, name=None if is_me else _display(who), participants=[peer] if peer else [])
        sender = Sender(id=author, name=_display(who), is_me=is_me)
        own = native_id(author, sent)
        history = list(doc.get("editHistory") or [])  # newest first; the original is last
        first = next((i for i, e in enumerate(history) if int(e.get("timestamp") or 0) == sent), len(history) - 1)
        versions = [(first, history[first])] if history else [(-1, doc)]
        versions += [(i, history[i]) for i in range(len(history) - 1, -1, -1) if i != first]
        erased = bool(doc.get("deletedForEveryone") or doc.get("isErased"))
        out: list[Item] = []
        for n, (index, version) in enumerate(versions):
            at = sent_time(int(version.get("timestamp") or sent))
            listed = None  # not in message_attachments (older layout, or not migrated yet): the version's JSON lists them
            if files:  # the table: -1 holds the row's own (newest) version, i the editHistory entry i
                listed = files.get(index, files.get(-1, []) if index in (-1, 0) else [])
            message = Message(source=self.name, type="message", native_id=own, sent_at=at, conversation=conversation, sender=sender)
            contents: list[Content] = []
            if erased:
                message.extra["erased"] = True  # Signal Desktop keeps no text or files of it (a view-once message once viewed)
                if doc.get("isViewOnce"):
                    message.extra["view_once"] = True
            else:
                contents = self._fill(message, version, listed)
                contents += fill_extras(message, version, doc, not n, listed, self.dir / "attachments.noindex")
            if n:
                message.revision = edit_revision(int(version["timestamp"]))
                message.edited_at = at
            out.append(Item(None, message=message, contents=contents))
            if erased:
                break
        if doc.get("deletedForEveryone"):
            when = doc.get("deletedForEveryoneTimestamp")
            rev = delete_revision(when) if when else Revision(id="delete:desktop", kind="delete", at=None)
            tomb = Message(source=self.name, type="message", native_id=own, sent_at=sent_time(int(when or sent)),
                           conversation=conversation, sender=sender, deleted=True, revision=rev)  # fmt: skip
            out.append(Item(None, message=tomb))
        for reaction in sorted(doc.get("reactions") or [], key=lambda x: (int(x.get("timestamp") or 0), str(x.get("fromId")))):
            out.append(self._reaction(own, conversation, reaction, row))
        return out

    def _fill(self, message: Message, version: dict[str, Any], listed: list[dict[str, Any]] | None) -> list[Content]:
        """Text, attachments and quote of one version of a message (``listed``: its rows of message_attachments);
        returns the attachments' contents."""
        if listed is None:
            atts = [a for a in version.get("attachments") or [] if isinstance(a, dict)]
            long = version.get("bodyAttachment")
        else:
            atts = [a for a in listed if a.get("attachmentType") == "attachment"]
            long = next((a for a in listed if a.get("attachmentType") == "long-message"), None)
        message.text = version.get("body")
        if isinstance(long, dict):  # a long message: body holds its start, the whole text is a file
            full = _read_text(self.dir / "attachments.noindex", long)
            if full is not None:
                message.text = full
        contents: list[Content] = []
        for i, a in enumerate(atts):
            att = Attachment(id=str(a.get("cdnKey") or a.get("path") or i), filename=a.get("fileName"), mime_type=a.get("contentType"),
                             size=a.get("size"))  # fmt: skip
            message.attachments.append(att)
            open_it = opener(self.dir / "attachments.noindex", a)
            if open_it is None:
                att["missing"] = True
            else:
                contents.append(Content(index=i, open=open_it))
        quote_ = version.get("quote")
        if isinstance(quote_, dict):
            author = quote_.get("authorAci") or quote_.get("authorUuid")
            if author and quote_.get("id"):
                message.reply_to = native_id(author, quote_["id"])
        return contents

    def _reaction(self, target: str, conversation: Conversation, reaction: dict[str, Any], row: Any) -> Item:
        reactor = self.convs.get(str(reaction.get("fromId")), {})
        aci = reactor.get("serviceId")
        ts = reaction.get("timestamp")
        if not aci or not ts:
            reason = "a reaction in Signal Desktop names no reactor or time it can be stored under"
            raw = json.dumps(reaction).encode()
            return Item(None, failure=Failure(f"desktop:{row['id']}:reaction:{reaction.get('fromId')}", reason, raw=raw,
                                              ref=f"messages.id {row['id']}"))  # fmt: skip
        how = {"emoji": reaction.get("emoji"), "by": aci, "remove": False}
        message = Message(source=self.name, type="reaction", native_id=target, sent_at=sent_time(int(ts)), conversation=conversation,
                          sender=Sender(id=aci, name=_display(reactor), is_me=aci == self.me),
                          revision=reaction_revision(aci, int(ts)), extra={"reaction": how})  # fmt: skip
        return Item(None, message=message)


def _json(value: Any, *, strict: bool = False) -> dict[str, Any]:
    try:
        doc = json.loads(value) if value else {}
    except ValueError:
        if strict:
            raise
        return {}
    if not isinstance(doc, dict):
        if strict:
            raise ValueError("not an object")
        return {}
    return doc


def _display(conv: dict[str, Any]) -> str | None:
    name = conv.get("profileFullName") or conv.get("profileName") or conv.get("name")
    return str(name) if name else None


def _read_text(root: Path, att: dict[str, Any]) -> str | None:
    open_it = opener(root, att)
    if open_it is None:
        return None
    try:
        with open_it() as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)
