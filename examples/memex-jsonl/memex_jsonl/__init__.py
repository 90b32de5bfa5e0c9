"""memex-jsonl: messages as JSON lines in a folder, as a memex source plug-in (the worked example of docs/plugins.md)."""

from __future__ import annotations

from memex.plugin import SourceConfig
from memex_jsonl.poller import JsonlPoller

__all__ = ["JsonlPoller", "make"]


def make(source: SourceConfig) -> JsonlPoller:
    """Check the section's own keys (one clear line naming the key on a mistake) and build the poller; no I/O here."""
    keys = source.keys()
    folder = keys.path("path")
    settle = keys.number("settle_seconds", default=0, minimum=0, maximum=3600)
    keys.finish()  # an unknown key (a typo) is an error naming it, like memex's own sources
    return JsonlPoller(source.name, folder, settle_seconds=settle)
