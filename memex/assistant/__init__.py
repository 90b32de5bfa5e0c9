"""``memex mcp``: the archive read by an AI assistant over the Model Context Protocol, and nothing more.

Where things are:

- :mod:`memex.assistant.archive` answers each tool from the search index (a read-only SQLite connection per call)
  and the store (its read paths only): search, one message, a conversation, counts, index status. Each answer is a
  JSON-able dict sized for an assistant's context (snippets, pages, attachments listed, never inlined).
- :mod:`memex.assistant.render` turns an answer into the text an assistant reads: every field that came from a
  message fenced between ``<<<message-data`` and ``<<<end message-data>>>`` markers, controls made visible.
- :mod:`memex.assistant.server` is the MCP server (the official ``mcp`` SDK, an optional extra: ``memex[mcp]``):
  the tools' names and argument schemas, and the instructions that teach an assistant the query language.

Read-only by construction: none of these modules imports what writes (the runner, the uploader, the backfill, the
cursor store, ``memex verify``, the index's writer or its rebuild); the index is opened with SQLite's ``mode=ro``
and ``PRAGMA query_only``. ``tests/core/test_mcp.py`` pins both.
"""
