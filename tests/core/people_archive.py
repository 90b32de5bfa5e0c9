"""A generated archive spanning all five sources, with the people it involves and a hand-made answer key.

Each record has the shape its source's poller gives (iMessage: E.164 handles; mail: addresses, ``extra.to``;
Signal: ACIs; Teams: Entra user IDs with UPNs among the participants; Messenger: names only). Anna Berg is on a
contact card with her phone number and mail address; her Signal ACI and Teams ID are hers only once the user says
so (``people.toml``); her Messenger name joins her by name. Anna Schmidt is another Anna, on a card of her own, and
Bob is on no card. ``ANNA_BERG`` lists, by hand, every record Anna Berg sent or received.
"""

from __future__ import annotations

from pathlib import Path

from memex.records import Conversation, Message, Sender

ANNA_PHONE, ANNA_MAIL, ANNA_ACI, ANNA_TEAMS = (
    "+491701234567",
    "anna@example.com",
    "3f1c9a52-7e4b-4d1a-9c55-1b2a3c4d5e6f",
    "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d",
)
SCHMIDT_PHONE, BOB_MAIL, BOB_ACI = "+4915112345678", "bob@example.org", "77777777-aaaa-4bbb-8ccc-999999999999"
ME_PHONE, ME_MAIL, ME_ACI, ME_TEAMS = (
    "+491609876543",
    "me@example.net",
    "11111111-2222-4333-8444-555555555555",
    "99999999-8888-4777-8666-555555555555",
)

VCARD = f"""BEGIN:VCARD
VERSION:3.0
FN:Anna Berg
TEL;TYPE=cell:0170 1234567
EMAIL;TYPE=home:{ANNA_MAIL}
END:VCARD
BEGIN:VCARD
VERSION:2.1
N;CHARSET=UTF-8;ENCODING=QUOTED-PRINTABLE:Schmidt;Anna;;;
TEL;CELL:0151 12345678
END:VCARD
"""

# Your decisions: Anna's Signal ACI, Teams ID and UPN are hers (no card says so); your own handles are `me`.
PEOPLE_TOML = f"""[person.anna-berg]
name = "Anna Berg"
handles = ["{ANNA_MAIL}", "{ANNA_ACI}", "{ANNA_TEAMS}", "anna.berg@contoso.com"]

[person.me]
handles = ["{ME_PHONE}", "{ME_MAIL}", "{ME_ACI}", "{ME_TEAMS}", "me@contoso.com", "Me Myself"]
"""


def _m(source: str, nid: str, sent: str, sender: tuple[str | None, str | None, bool], conv: tuple[str | None, str | None, list[str]],
       text: str, **extra: object) -> Message:  # fmt: skip
    return Message(source=source, type="message", native_id=nid, sent_at=sent, conversation=Conversation(id=conv[0], name=conv[1], participants=conv[2]),
                   sender=Sender(id=sender[0], name=sender[1], is_me=sender[2]), text=text, extra=dict(extra))  # fmt: skip


def records() -> list[Message]:
    """Every record of the archive: Anna Berg's, Anna Schmidt's, Bob's and the user's, across five sources."""
    anna_chat = ("chat-anna", None, [ANNA_PHONE])
    return [
        # iMessage: Anna's number in a 1:1 chat, the user's replies, Anna Schmidt in another chat, a group with both Annas
        _m("phone", "im-1", "2025-03-01T10:00:00Z", (ANNA_PHONE, None, False), anna_chat, "lunch on sunday?"),
        _m("phone", "im-2", "2025-03-01T10:01:00Z", (ME_PHONE, None, True), anna_chat, "yes, noon"),
        _m("phone", "im-3", "2025-03-02T09:00:00Z", (SCHMIDT_PHONE, None, False), ("chat-schmidt", None, [SCHMIDT_PHONE]), "the invoice"),
        _m("phone", "im-4", "2025-03-02T09:05:00Z", (ME_PHONE, None, True), ("chat-schmidt", None, [SCHMIDT_PHONE]), "thanks"),
        _m("phone", "im-5", "2025-03-03T18:00:00Z", (SCHMIDT_PHONE, None, False), ("chat-annas", "Both Annas", [ANNA_PHONE, SCHMIDT_PHONE]), "hello both"),
        # Mail: from Anna (a differently written address), to Anna, Bob to the user with Anna in cc, Bob alone
        _m("mail", "<a1@example.com>", "2025-03-04T08:00:00Z", ("Anna@Example.COM", "Anna Berg", False), (None, None, ["anna@example.com", ME_MAIL]),
           "the lease", to=[ME_MAIL], cc=[]),
        _m("mail", "<m1@example.net>", "2025-03-04T09:00:00Z", (ME_MAIL, "Me", True), (None, None, [ME_MAIL, ANNA_MAIL]), "re: the lease",
           to=[ANNA_MAIL], cc=[]),
        _m("mail", "<b1@example.org>", "2025-03-05T07:00:00Z", (BOB_MAIL, "Bob", False), (None, None, [BOB_MAIL, ME_MAIL, ANNA_MAIL]), "party",
           to=[ME_MAIL], cc=[ANNA_MAIL]),
        _m("mail", "<b2@example.org>", "2025-03-05T08:00:00Z", (BOB_MAIL, "Bob", False), (None, None, [BOB_MAIL, ME_MAIL]), "just us",
           to=[ME_MAIL], cc=[]),
        # Signal: Anna's ACI (hers by your decision), Bob's
        _m("sig", f"{ANNA_ACI}:1741000000000", "2025-03-06T10:00:00Z", (ANNA_ACI, "Anna", False), (ANNA_ACI, "Anna", [ANNA_ACI]), "on my way"),
        _m("sig", f"{ME_ACI}:1741000001000", "2025-03-06T10:01:00Z", (ME_ACI, None, True), (ANNA_ACI, "Anna", [ANNA_ACI]), "ok"),
        _m("sig", f"{BOB_ACI}:1741000002000", "2025-03-06T11:00:00Z", (BOB_ACI, "Bob", False), (BOB_ACI, "Bob", [BOB_ACI]), "hi"),
        # Teams: Anna's Entra ID (hers by your decision), in a chat whose members are listed by UPN
        _m("work", "19:chat/1", "2025-03-07T13:00:00Z", (ANNA_TEAMS, "Anna Berg", False), ("19:chat", "Launch", ["anna.berg@contoso.com", "me@contoso.com"]),
           "launch is friday"),
        _m("work", "19:chat/2", "2025-03-07T13:05:00Z", (ME_TEAMS, "Me", True), ("19:chat", "Launch", ["anna.berg@contoso.com", "me@contoso.com"]),
           "great"),
        # Messenger: names only; Anna Berg joins by her name
        _m("fb", "thread-1/1", "2025-03-08T20:00:00Z", (None, "Anna Berg", False), ("thread-1", "Anna Berg", ["Anna Berg", "Me Myself"]), "photos!"),
        _m("fb", "thread-1/2", "2025-03-08T20:01:00Z", (None, "Me Myself", True), ("thread-1", "Anna Berg", ["Anna Berg", "Me Myself"]), "lovely"),
        _m("fb", "thread-2/1", "2025-03-08T21:00:00Z", (None, "Bob Builder", False), ("thread-2", "Bob Builder", ["Bob Builder", "Me Myself"]), "yo"),
    ]  # fmt: skip


# By hand: what Anna Berg sent or received, as (source, native ID). im-5 (a group with her number), <b1> (she is in
# cc), the user's replies in her chats (she is the other participant), the Teams reply (her UPN is a member).
ANNA_BERG = {
    ("phone", "im-1"), ("phone", "im-2"), ("phone", "im-5"),
    ("mail", "<a1@example.com>"), ("mail", "<m1@example.net>"), ("mail", "<b1@example.org>"),
    ("sig", f"{ANNA_ACI}:1741000000000"), ("sig", f"{ME_ACI}:1741000001000"),
    ("work", "19:chat/1"), ("work", "19:chat/2"),
    ("fb", "thread-1/1"), ("fb", "thread-1/2"),
}  # fmt: skip
ANNA_BERG_FROM = {
    ("phone", "im-1"),
    ("mail", "<a1@example.com>"),
    ("sig", f"{ANNA_ACI}:1741000000000"),
    ("work", "19:chat/1"),
    ("fb", "thread-1/1"),
}


def write(root: Path) -> dict[str, str]:
    """Store every record under ``root`` (a file store's folder) at its key; returns native_id -> key."""
    out: dict[str, str] = {}
    for message in records():
        key = message.key()
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(message.to_json())
        out[message.native_id] = key
    return out


def indexed(tmp: Path) -> Path:
    """The archive stored under ``tmp`` and indexed, Anna's card and the user's people file beside the config; the
    config's path."""
    from tests.conftest import run_cli

    write(tmp / "store")
    (tmp / "contacts.vcf").write_text(VCARD)
    (tmp / "people.toml").write_text(PEOPLE_TOML)
    cfg = tmp / "config.toml"
    cfg.write_text(f'state_dir = "{tmp / "state"}"\n[store]\nurl = "{(tmp / "store").as_uri()}"\n'
                   f'[people]\nvcards = ["{tmp / "contacts.vcf"}"]\nregion = "DE"\n')  # fmt: skip
    built = run_cli("index", "rebuild", config=cfg)
    assert built.returncode == 0, built.stderr
    return cfg
