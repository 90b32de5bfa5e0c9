"""Poller types are found by name: built-ins in the registry's one list, plug-ins through entry points."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

from memex import registry


def test_the_builtin_types_are_declared_once_in_the_registry() -> None:
    """memex declares its built-in types in ``registry.BUILTIN`` alone: no ``memex.pollers`` entry point of its own
    (a second list that could drift), and each built-in resolves to a factory."""
    ours = [ep for ep in entry_points(group=registry.ENTRY_POINT_GROUP) if ep.value.startswith("pollers.")]
    assert ours == []
    assert all(callable(registry.factory_for(name)) for name in registry.BUILTIN)


def test_unknown_type_is_none_and_known_types_lists_builtins() -> None:
    """An unknown type finds no factory; known_types names every built-in."""
    assert registry.factory_for("no-such-type") is None
    assert set(registry.BUILTIN) <= set(registry.known_types())


def test_the_lean_entry_point_scan_agrees_with_importlib_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``memex.pollers`` entry point installed here (a probe distribution's among them) is found by the scan
    that spares a plug-in's poll importlib.metadata, with the same target; an unknown name is None."""
    dist = tmp_path / "memex_scan_probe-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: memex-scan-probe\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[memex.pollers]\nprobe = probe_pkg:make\nother = probe_pkg.sub:make [extra]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    declared = {ep.name: ep.value.split("[")[0].strip() for ep in entry_points(group=registry.ENTRY_POINT_GROUP)}
    assert {"probe", "other"} <= declared.keys()
    assert {name: registry.scan_entry_point(name) for name in declared} == declared
    assert registry.scan_entry_point("no-such-type") is None
