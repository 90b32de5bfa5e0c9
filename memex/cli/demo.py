"""``memex demo``: the whole pipeline on generated sample data, in one folder."""

from __future__ import annotations

import sys
from pathlib import Path

DEMO_CONFIG = """\
# memex demo configuration (written by `memex demo`)
state_dir = "state"            # cursors.json, locks/, logs/ live here

[store]
url = "store"                  # a local folder mirroring the S3 layout; or "s3://bucket/prefix"

[sources.imessage]
type = "imessage"
db = "chat.db"                 # on a Mac: "~/Library/Messages/chat.db"
"""


def run_demo(directory: Path, messages: int) -> int:
    """Create or extend the demo folder, poll it, print the status table; return the exit code."""
    from memex import config
    from memex.fs_errors import at_path, explain
    from memex.observe.status import collect, render_table
    from memex.registry import sample_for
    from memex.runner import poll

    directory.mkdir(parents=True, exist_ok=True)
    cfg_path = directory / "config.toml"
    if not cfg_path.exists():
        try:
            cfg_path.write_text(DEMO_CONFIG)
        except OSError as exc:
            at_path(exc, cfg_path)  # a full disk on write names no file (memex.fs_errors)
            raise
    sample = sample_for("imessage")
    assert sample is not None  # a built-in
    try:
        made = sample(directory / "chat.db", messages)
    except Exception as exc:  # SQLite on a full or read-only disk names no file
        raise (explain(exc, None if isinstance(exc, OSError) else directory / "chat.db") or exc) from None
    print(f"demo: {made}", file=sys.stderr)
    cfg = config.load(cfg_path)
    result = poll(cfg, "imessage", console=sys.stderr)
    print(render_table(collect(cfg)))
    print(f"\nobjects are in {cfg.store.url}; config: {cfg_path}", file=sys.stderr)
    return result.exit_code
