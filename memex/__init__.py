"""memex: personal message ingestion into one deduplicated object index."""

__version__ = "0.1.0"
