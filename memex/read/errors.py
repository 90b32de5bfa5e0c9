"""The read model's errors: one line each, saying what to do (a front end shows it as it is, or in its own words)."""

from __future__ import annotations

from memex.errors import StateError
from memex.search.parse import QueryError

__all__ = ["IndexMissing", "IndexOtherVersion", "IndexUnreadable", "QueryError", "ReadError"]


class ReadError(StateError):
    """The archive cannot answer: no index, an index of another format, a file that cannot be read (exit 1)."""


class IndexMissing(ReadError):
    """There is no search index yet (``memex index rebuild`` makes one)."""


class IndexOtherVersion(ReadError):
    """The index was made by another version of memex (``version``: its format number)."""

    def __init__(self, message: str, *, path: object, version: int) -> None:
        self.version = version
        super().__init__(message, path=str(path))


class IndexUnreadable(ReadError):
    """SQLite could not read the index (``detail``: its words)."""

    def __init__(self, message: str, *, path: object, detail: str) -> None:
        self.detail = detail
        super().__init__(message, path=str(path))
