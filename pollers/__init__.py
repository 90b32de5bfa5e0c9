"""Pollers: one package per source, each exposing ``make(source) -> Poller`` (the ``memex.pollers`` entry points)."""
