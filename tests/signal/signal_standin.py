"""A stand-in for ``signal-cli`` at the process boundary, and envelopes in signal-cli's JSON schema.

The field names follow AsamK/signal-cli's ``JsonMessageEnvelope``, ``JsonDataMessage``,
``JsonSyncDataMessage``, ``JsonEditMessage``, ``JsonReaction``, ``JsonRemoteDelete``, ``JsonQuote``,
``JsonGroupInfo``, ``JsonAttachment`` and ``JsonReceiveMessageHandler`` (``{"envelope": ..., "account":
...}`` plus ``exception: {message, type}``). :func:`install` writes an executable that, like
``signal-cli -o json receive``, prints every line queued in ``<dir>/queue.jsonl`` after the offset in
``<dir>/acked`` and acknowledges each line (moves the offset) once it is printed: the server never
delivers it again. ``listGroups`` prints ``<dir>/groups.json`` (:func:`groups`). Each run appends its pid to ``<dir>/pids.log``. ``<dir>/mode`` makes it misbehave: ``busy``
(another instance, e.g. a running ``signal-cli daemon``, holds the account: like the real one it logs
``INFO  SignalAccount - Config file is in use by another instance, waiting…`` on stderr and blocks until killed),
``busy-exit`` (the same words, then exit 3, as where signal-cli does not wait for the lock), ``unlinked``, ``hang`` (print two lines, then never exit), ``die`` (print half a line, exit 1).
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

ACCOUNT = "+491701234567"
ME = "0c5b0e7e-6f3a-4c1e-9d0a-0a1b2c3d4e5f"
ALICE = "4262f93c-14b1-4fa4-8ea3-04499d8ae0af"
BOB = "aaf50e83-2fff-41d5-86e3-a8cdfc3cbb3f"
GROUP = "UIXSwit7KF/RqKfH9jqySnLTgqVCimGcEK25Dbf+yDw="
GROUP2 = "kTCnTKQ8tjxEb3yQpYF2Qcv4QJzgmyz0gHxnmw3rhvU="

SCRIPT = """#!{python}
import os, sys, time
d = {folder!r}
mode = open(os.path.join(d, "mode")).read().strip() if os.path.exists(os.path.join(d, "mode")) else "normal"
with open(os.path.join(d, "argv.log"), "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
with open(os.path.join(d, "pids.log"), "a") as f:
    f.write(str(os.getpid()) + "\\n")
if mode == "busy":  # as signal-cli does while a daemon holds the account: say so, then wait for the lock
    sys.stderr.buffer.write("INFO  SignalAccount - Config file is in use by another instance, waiting\u2026\\n".encode())
    sys.stderr.flush()
    time.sleep(300)  # "forever" for any poll here; a stand-in a failed test left behind (a mutant's) still ends
    sys.exit(1)
if mode == "busy-exit":  # where signal-cli does not wait for the lock, it exits
    sys.stderr.write("Error loading state file for user {account}: Config file is in use by another instance. (IOException)\\n")
    sys.exit(3)
if "listGroups" in sys.argv:  # `-o json listGroups`: one JSON array of groups ({{"id", "name", ...}}), from <dir>/groups.json
    path = os.path.join(d, "groups.json")
    sys.stdout.write(open(path).read().strip() if os.path.exists(path) else "[]")
    sys.stdout.write("\\n")
    sys.exit(0)
if mode == "unlinked":
    sys.stderr.write("User {account} is not registered.\\n")
    sys.exit(1)
acked = os.path.join(d, "acked")
offset = int(open(acked).read() or 0) if os.path.exists(acked) else 0
with open(os.path.join(d, "queue.jsonl"), "rb") as q:
    q.seek(offset)
    lines = q.readlines()
for i, line in enumerate(lines):
    if mode == "die" and i == 1:
        sys.stdout.buffer.write(line[: len(line) // 2])
        sys.stdout.flush()
        os._exit(1)
    sys.stdout.buffer.write(line)
    sys.stdout.flush()
    offset += len(line)
    with open(acked + ".tmp", "w") as f:
        f.write(str(offset))
    os.replace(acked + ".tmp", acked)
    if mode == "hang" and i == 1:
        time.sleep(300)  # never exits, as far as any poll here can tell; a stray one still ends
"""


def install(folder: Path) -> Path:
    """Write the stand-in executable (and an empty queue) into ``folder``; return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "queue.jsonl").touch()
    exe = folder / "signal-cli"
    exe.write_text(SCRIPT.format(python=sys.executable, folder=str(folder), account=ACCOUNT))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def queue(folder: Path, *lines: dict[str, Any] | bytes) -> None:
    """Append lines for the stand-in to hand over (dicts as compact JSON, bytes as they are)."""
    with open(folder / "queue.jsonl", "ab") as f:
        for line in lines:
            f.write((line if isinstance(line, bytes) else json.dumps(line, ensure_ascii=False).encode()) + b"\n")


def groups(folder: Path, names: dict[str, str]) -> None:
    """What ``listGroups`` prints from now on: these groups, in ListGroupsCommand's JSON shape."""
    listed = [{"id": gid, "name": name, "description": "", "isMember": True, "isBlocked": False, "messageExpirationTime": 0,
               "members": [{"number": None, "uuid": ALICE, "isAdmin": True}], "pendingMembers": [], "requestingMembers": [],
               "admins": [{"number": None, "uuid": ALICE}], "banned": [], "permissionAddMember": "EVERY_MEMBER",
               "permissionEditDetails": "EVERY_MEMBER", "permissionSendMessage": "EVERY_MEMBER", "groupInviteLink": None}
              for gid, name in names.items()]  # fmt: skip
    (folder / "groups.json").write_text(json.dumps(listed))


def acked(folder: Path) -> list[bytes]:
    """The lines the stand-in printed and acknowledged (the server will not send them again)."""
    offset = int((folder / "acked").read_text()) if (folder / "acked").exists() else 0
    return (folder / "queue.jsonl").read_bytes()[:offset].splitlines()


def envelope(source: str, ts: int, **payload: Any) -> dict[str, Any]:
    """One line of ``receive`` output: an envelope from ``source`` (an ACI) with one payload field."""
    env: dict[str, Any] = {
        "source": source, "sourceNumber": None, "sourceUuid": source, "sourceName": "Alice" if source == ALICE else "Me",
        "sourceDevice": 1, "timestamp": ts, "serverReceivedTimestamp": ts + 300, "serverDeliveredTimestamp": ts + 900,
    }  # fmt: skip
    env.update(payload)
    return {"envelope": env, "account": ACCOUNT}


def data(ts: int, text: str | None, **more: Any) -> dict[str, Any]:
    """A ``dataMessage`` as signal-cli prints it."""
    return {"timestamp": ts, "message": text, "expiresInSeconds": 0, "viewOnce": False, **more}


def message(source: str, ts: int, text: str, **more: Any) -> dict[str, Any]:
    """An envelope with a plain data message."""
    return envelope(source, ts, dataMessage=data(ts, text, **more))


def main() -> None:  # pragma: no cover - a convenience for trying the stand-in by hand
    """Print a sample envelope."""
    print(json.dumps(message(ALICE, 1700000000000, "hello")))


if __name__ == "__main__":
    main()
