"""Poller types are found by name: built-ins directly, and every built-in is also an entry point."""

from __future__ import annotations

from importlib.metadata import entry_points

from memex import registry


def test_every_builtin_is_declared_as_an_entry_point() -> None:
    """pyproject's memex.pollers group lists each built-in type with the same target, so plugins and built-ins are one mechanism."""
    declared = {ep.name: ep.value for ep in entry_points(group=registry.ENTRY_POINT_GROUP)}
    for name, target in registry.BUILTIN.items():
        assert declared.get(name) == target


def test_unknown_type_is_none_and_known_types_lists_builtins() -> None:
    """An unknown type finds no factory; known_types names every built-in."""
    assert registry.factory_for("no-such-type") is None
    assert set(registry.BUILTIN) <= set(registry.known_types())


def test_the_lean_entry_point_scan_agrees_with_importlib_metadata() -> None:
    """Every ``memex.pollers`` entry point installed here (memex's own declarations among them) is found by the scan
    that spares a plug-in's poll importlib.metadata, with the same target; an unknown name is None."""
    from importlib.metadata import entry_points

    declared = {ep.name: ep.value for ep in entry_points(group=registry.ENTRY_POINT_GROUP)}
    assert {"imessage", "imap", "signal"} <= declared.keys()
    assert {name: registry.scan_entry_point(name) for name in declared} == declared
    assert registry.scan_entry_point("no-such-type") is None
