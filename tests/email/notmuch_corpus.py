"""The same real mails indexed by notmuch and by memex, for comparing their answers (``test_search_vs_notmuch.py``,
``bench/search_vs_notmuch.py``).

The mails are every file under ``tests/email/data/`` and ``tests/email/search_corpus/`` that has a Message-ID (the first file of each ID; notmuch names
a mail by it, memex by the same ID normalized), copied into one Maildir. notmuch gets a config of its own in the
folder (no tags, no excluded tags, UTC), so nothing of the user's is read.
"""

from __future__ import annotations

import email
import email.policy
import json
import os
import subprocess
from pathlib import Path

from tests.conftest import ROOT

DATA = (ROOT / "tests" / "email" / "data", ROOT / "tests" / "email" / "search_corpus")  # the second: only these tests read it
NOTMUCH_CONFIG = """[database]
path={maildir}
[user]
name=Test
primary_email=test@example.com
[new]
tags=
ignore=
[search]
exclude_tags=
[maildir]
synchronize_flags=false
"""


def corpus_files() -> list[Path]:
    """The corpus: one file per Message-ID, in a stable order."""
    seen: set[str] = set()
    out = []
    for path in sorted(
        p for d in DATA for p in d.rglob("*") if p.is_file() and p.suffix not in (".md", ".py", ".json") and "mbox" not in p.parts
    ):
        msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.compat32)
        mid = str(msg.get("Message-ID") or "").strip()
        if not mid.startswith("<") or not mid.endswith(">") or mid.count("<") != 1 or " " in mid or mid.lower() in seen:
            continue
        seen.add(mid.lower())
        out.append(path)
    return out


def make_maildir(root: Path) -> Path:
    """A Maildir holding the corpus (``cur/N:2,``)."""
    maildir = root / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True, exist_ok=True)
    for n, path in enumerate(corpus_files()):
        (maildir / "cur" / f"{n:04d}.corpus:2,").write_bytes(path.read_bytes())
    return maildir


def notmuch_env(root: Path) -> dict[str, str]:
    """The environment notmuch runs in: its own config and home in ``root``, UTC."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTMUCH")}
    env.update(NOTMUCH_CONFIG=str(root / "notmuch-config"), HOME=str(root), TZ="UTC")
    return env


def notmuch_index(root: Path, maildir: Path) -> dict[str, str]:
    """Index ``maildir`` with notmuch; its environment."""
    (root / "notmuch-config").write_text(NOTMUCH_CONFIG.format(maildir=maildir))
    env = notmuch_env(root)
    subprocess.run(["notmuch", "new", "--quiet"], env=env, check=True, capture_output=True, timeout=300)
    return env


def notmuch_ids(env: dict[str, str], query: str) -> set[str]:
    """The Message-IDs notmuch's search answers (every one: --output=messages)."""
    out = subprocess.run(["notmuch", "search", "--output=messages", "--format=json", "--", query], env=env,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    if out.returncode != 0:
        raise AssertionError(f"notmuch refused {query!r}: {out.stderr.strip()}")
    return set(json.loads(out.stdout))
