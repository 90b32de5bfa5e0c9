"""A source whose first batch takes longer to read than the poll's time limit (a plug-in reading one big export).

What it read used to be dropped at the deadline, the poll said ``idle: 0 new`` (exit 0) and the source showed IDLE for
ever. Now the batch is stored in the grace after the read (the poll says it was slow) or, if none of it could be,
the poll is an error (exit 1) and the source FAILING at once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memex import config as config_mod
from memex import registry, runner
from memex.observe import status
from tests.conftest import read_log, write_config

SLOW = 3.0  # seconds each fetch of the plug-in takes; the polls below get --max-seconds 2 (the start-up before it has 2 s)


@pytest.fixture
def slow_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> config_mod.Config:
    """A config with one plug-in source ``f`` holding 2,000 waiting messages, each fetch slower than the time limit."""
    monkeypatch.setitem(registry.BUILTIN, "fake", "tests.core.fake_poller:make")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"count": 2000, "read_seconds": SLOW}))
    return config_mod.load(write_config(tmp_path, {"f": {"type": "fake", "spec": str(spec)}}))


def test_a_first_batch_read_past_the_time_limit_is_stored_and_each_poll_moves_on(slow_source: config_mod.Config) -> None:
    """Each poll stores the batch it read past --max-seconds (in the grace), warns that it was slow, and the next goes further."""
    first = runner.poll(slow_source, "f", max_seconds=2)
    assert (first.status, first.exit_code, first.stopped) == ("ok", 0, "deadline"), first.error
    assert first.new > 0 and first.slow_read_s is not None and first.slow_read_s >= SLOW
    second = runner.poll(slow_source, "f", max_seconds=2)
    assert second.status == "ok" and second.positions_after["n"] > first.positions_after["n"] == first.new
    slow = [e for e in read_log(slow_source.state_dir, "f") if e["event"] == "poll.slow"]
    assert len(slow) == 2 and slow[0]["level"] == "warning" and "longer than the poll's time limit" in slow[0]["reason"]
    assert [row["state"] for row in status.collect(slow_source)] == ["OK"]


def test_a_first_batch_none_of_which_can_be_stored_in_time_is_an_error_and_failing_not_idle(
    slow_source: config_mod.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No grace left to store any of it: the poll is an error (exit 1) naming the fix, and the source FAILING at once."""
    monkeypatch.setattr(runner, "SLOW_GRACE", 0.0)
    result = runner.poll(slow_source, "f", max_seconds=2)
    assert (result.status, result.exit_code, result.new) == ("error", 1, 0)
    assert result.error is not None and "took" in result.error and "raise --max-seconds" in result.error
    [row] = status.collect(slow_source)
    assert row["state"] == "FAILING" and "longer than the poll's time limit" in row["state_reason"]
