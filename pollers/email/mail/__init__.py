"""The mail renderer the three transports share: a raw mail to a record (headers, parts, searchable words, identity)."""
