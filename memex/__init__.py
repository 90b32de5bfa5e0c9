"""memex: personal message ingestion into one deduplicated object index."""

from memex.lean_import import import_dataclasses_without_inspect

__version__ = "0.1.0"

import_dataclasses_without_inspect()
