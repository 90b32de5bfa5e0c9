"""Facebook Messenger (``type = "messenger"``): "Download Your Information" and encrypted-chat exports in a folder.

``exports`` finds complete exports (zip or unpacked), ``parse`` reads their JSON (repairing its latin-1
mojibake) into records; ``poller`` ties them to the cursor.
"""

from __future__ import annotations

from pollers.messenger.poller import make

__all__ = ["make"]
