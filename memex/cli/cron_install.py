"""``memex cron --install`` / ``--uninstall``: memex's own block in the user's crontab, and nothing else of it.

``memex cron | crontab -`` replaced the user's whole crontab. Here the current crontab is read with ``crontab -l``
("no crontab for USER", exit 1, is an empty one), the lines between :data:`BEGIN` and :data:`END` are replaced (or the
block appended, or removed), and the result is installed with ``crontab -`` only if it changed: running it twice is
a no-op. Every other line, and its order, is kept byte for byte, in whatever encoding it is (a crontab is bytes: a
Latin-1 comment is read with ``surrogateescape`` and written back as it was). The block sets no ``PATH=`` or ``MAILTO=`` line, since
those would change how cron runs every later line of the user's crontab; each memex line carries its PATH itself.
"""

from __future__ import annotations

import subprocess

from memex.errors import MemexError

BEGIN = "# >>> memex: managed by `memex cron --install`; edit the config and run it again, not these lines >>>"
END = "# <<< memex <<<"


class CrontabError(MemexError):
    """``crontab`` is missing, failed, or the installed crontab holds a broken memex block (exit 1)."""


def read_crontab() -> str:
    """The user's crontab as ``crontab -l`` prints it; none yet is ``""``."""
    out = _crontab(["-l"], None)
    if out.returncode == 0:
        return out.stdout
    if out.returncode == 1 and "no crontab for" in out.stderr:
        return ""
    raise CrontabError(f"crontab -l failed (exit {out.returncode}: {_first_line(out.stderr)}); nothing was changed")


def write_crontab(text: str) -> None:
    """Install ``text`` as the user's crontab with ``crontab -``."""
    out = _crontab(["-"], text)
    if out.returncode != 0:
        raise CrontabError(f"crontab - refused the new crontab (exit {out.returncode}: {_first_line(out.stderr)}); "
                           "the installed one is unchanged")  # fmt: skip


def with_block(current: str, block: str | None) -> str:
    """``current`` with memex's block replaced by ``block`` (None: removed; no block yet: appended at the end)."""
    lines = current.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.rstrip("\n") == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.rstrip("\n") == END]
    if len(begins) > 1 or len(ends) > 1 or len(begins) != len(ends) or (begins and ends[0] < begins[0]):
        raise CrontabError(f"the crontab holds a broken memex block (its marker lines {BEGIN[:12]}... and {END!r} do not pair up); "
                           "fix it with crontab -e, then run memex cron --install again")  # fmt: skip
    new = [] if block is None else [BEGIN + "\n", *block.splitlines(keepends=True), END + "\n"]
    if begins:
        lines[begins[0] : ends[0] + 1] = new
    elif new:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        lines += (["\n"] if lines and lines[-1].strip() else []) + new
    return "".join(lines)


def install(block: str | None) -> bool:
    """Put ``block`` (None: no block) into the user's crontab; True if the crontab changed."""
    current = read_crontab()
    new = with_block(current, block)
    if new == current:
        return False
    write_crontab(new)
    return True


def _crontab(args: list[str], text: str | None) -> subprocess.CompletedProcess[str]:
    try:
        out = subprocess.run(["crontab", *args], input=(text or "").encode("utf-8", "surrogateescape"), capture_output=True, timeout=60)
        return subprocess.CompletedProcess(out.args, out.returncode, out.stdout.decode("utf-8", "surrogateescape"),
                                           out.stderr.decode("utf-8", "replace"))  # fmt: skip
    except FileNotFoundError:
        raise CrontabError(
            "no crontab program on PATH (is cron installed?); print the lines with memex cron and add them by hand"
        ) from None
    except subprocess.TimeoutExpired:
        raise CrontabError(f"crontab {' '.join(args)} did not finish within 60 s; nothing was changed") from None


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "no message")
