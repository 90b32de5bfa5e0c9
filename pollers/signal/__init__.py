"""Signal (``type = "signal"``): live through ``signal-cli receive`` as a linked device, history from Signal Desktop.

``cli`` runs signal-cli into a durable spool, ``records`` and ``render`` turn its envelopes into records;
``desktop``, ``desktop_key`` and ``desktop_files`` read Desktop's SQLCipher database for ``memex backfill``.
"""

from __future__ import annotations

from pollers.signal.cli import make

__all__ = ["make"]
