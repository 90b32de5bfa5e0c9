"""Pollers: one module per source type, each exposing ``make(source) -> Poller``."""
