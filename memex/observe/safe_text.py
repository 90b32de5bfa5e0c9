"""The old home of :mod:`memex.safe_text` (text safety is not observation): its names, re-exported for modules that
still import them from here. New code imports :mod:`memex.safe_text`."""

from __future__ import annotations

from memex.safe_text import inert_json, json_text, visible

__all__ = ["inert_json", "json_text", "visible"]
