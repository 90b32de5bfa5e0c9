"""A process that drains a spool into a create-only folder, for the spool's kill -9 tests.

``python tests/core/spool_worker.py SPOOL OUT`` recovers the spool, then claims entries one by one; each
record (a line naming its id) becomes the file ``OUT/<id>`` (create-only, fsynced: a replay is a
duplicate), and only then is the entry removed. It prints ``done`` when the spool is empty. Like memex's own
uploader it honours a test hold (``MEMEX_TEST_HOLD``, :mod:`memex.hold`) before each record it stores.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from memex.hold import hold_from_env
from memex.state.files import fsync_dir, full_fsync
from memex.state.spool import Spool


def store(out: Path, record: bytes) -> None:
    """Create ``out/<record>`` unless it exists, durably."""
    try:
        fd = os.open(out / record.decode(), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    os.write(fd, record)
    full_fsync(fd)
    os.close(fd)
    fsync_dir(out)


def main() -> None:
    """Drain the spool named on the command line."""
    spool, out = Spool(Path(sys.argv[1]), chunk=5), Path(sys.argv[2])
    spool.recover()
    claim = spool.claim()
    hold = hold_from_env()
    while (entry := claim.next()) is not None:
        for record in entry.records():
            if hold is not None:
                hold.reached(None)
            store(out, record)
        claim.remove([entry])
    claim.release()
    print("done", flush=True)


if __name__ == "__main__":
    main()
