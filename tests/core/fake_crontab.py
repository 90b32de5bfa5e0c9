"""A stand-in for ``crontab`` (cronie / Debian cron) at the process boundary, storing the crontab in ``$FAKE_CRONTAB``.

Behaves like the real program where memex depends on it: ``crontab -l`` with no crontab prints
``no crontab for USER`` and exits 1; ``crontab -`` installs stdin, refusing (exit 1, nothing changed) a file missing
its last newline ("new crontab file is missing newline before EOF, can't install.") or a job line with fewer than six
fields (two for ``@reboot``-style lines) ("errors in crontab file, can't install."); ``crontab -r`` removes it. Each call is appended to
``$FAKE_CRONTAB.calls`` (one line: its arguments), so a test can tell whether a crontab was written.
"""

from __future__ import annotations

import getpass
import os
import re
import sys

ENV_LINE = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*\s*=")


def main(argv: list[str]) -> int:
    """Run one ``crontab`` command line; the exit status."""
    store = os.environ["FAKE_CRONTAB"]
    with open(store + ".calls", "a") as calls:
        calls.write(" ".join(argv) + "\n")
    if argv == ["-l"]:
        if not os.path.exists(store):
            print(f"no crontab for {getpass.getuser()}", file=sys.stderr)
            return 1
        with open(store, "rb") as fh:  # bytes, as the real one: a crontab need not be UTF-8
            sys.stdout.buffer.write(fh.read())
        return 0
    if argv == ["-"]:
        raw = sys.stdin.buffer.read()
        data = raw.decode("utf-8", "surrogateescape")
        if os.environ.get("FAKE_CRONTAB_REFUSE"):
            print("crontab: cannot install: permission denied (cron.deny)", file=sys.stderr)
            return 1
        if data and not data.endswith("\n"):
            print("new crontab file is missing newline before EOF, can't install.", file=sys.stderr)
            return 1
        for n, line in enumerate(data.splitlines(), 1):
            fields = 2 if line.lstrip().startswith("@") else 6  # "@reboot CMD" or five time fields and the command
            if line.strip() and not line.lstrip().startswith("#") and not ENV_LINE.match(line) and len(line.split()) < fields:
                print(f'"-":{n}: bad command\nerrors in crontab file, can\'t install.', file=sys.stderr)
                return 1
        with open(store + ".new", "wb") as fh:
            fh.write(raw)
        os.replace(store + ".new", store)
        return 0
    if argv == ["-r"]:
        if not os.path.exists(store):
            print(f"no crontab for {getpass.getuser()}", file=sys.stderr)
            return 1
        os.unlink(store)
        return 0
    print("usage: crontab [-u user] [-l | -r | -e] [file]", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
