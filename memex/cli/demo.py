"""``memex demo``: the whole pipeline on generated sample data, in one folder."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
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
    from memex.observe.status import collect, render_table
    from memex.runner import poll
    from pollers import imessage_samples

    directory.mkdir(parents=True, exist_ok=True)
    cfg_path = directory / "config.toml"
    if not cfg_path.exists():
        cfg_path.write_text(DEMO_CONFIG)
    db = directory / "chat.db"
    if not db.exists():
        start = datetime.now(UTC) - timedelta(seconds=97 * messages)
        imessage_samples.build(db, messages, seed=1, start=start)
        print(f"demo: created {db} with {messages} sample messages", file=sys.stderr)
    else:
        added = imessage_samples.append(db, 5, seed=int(datetime.now(UTC).timestamp()))
        print(f"demo: {added} new messages arrived in {db}", file=sys.stderr)
    cfg = config.load(cfg_path)
    result = poll(cfg, "imessage", console=sys.stderr)
    print(render_table(collect(cfg)))
    print(f"\nobjects are in {cfg.store.url}; config: {cfg_path}", file=sys.stderr)
    return result.exit_code
