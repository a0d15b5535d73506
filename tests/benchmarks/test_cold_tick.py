"""benchmarks/cold_tick.py times what it says: every piece runs under every condition it could hold, the cut it
times binds, and the table names each piece once."""

from __future__ import annotations

import pytest

from benchmarks import cold_tick


def test_every_piece_is_timed_under_each_condition_and_the_table_lists_them(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(cold_tick, "PERIOD_S", 0.0005)  # the gaps' length is not what this checks
    conditions = cold_tick.run(cold_tick.BLOCK_CALLS)
    assert {cold_tick.HOT, cold_tick.SLEEP, cold_tick.SPIN} <= set(conditions)
    for by_piece in conditions.values():
        assert len(by_piece) == 3
        for row in by_piece.values():
            assert row["n"] == cold_tick.BLOCK_CALLS and 0 < row["p50_us"] <= row["p99_us"]
    results = {
        "machine": "test",
        "cpu": 0,
        "calls": cold_tick.BLOCK_CALLS,
        "conditions": conditions,
        "peak_rss_mb": 1.0,
        "command": "x",
    }
    out = tmp_path / "cold.md"
    cold_tick.write(results, out)
    text = out.read_text()
    for name in conditions[cold_tick.HOT]:
        assert text.count(name) == 1


def test_a_cut_that_passes_is_refused_as_the_timed_piece(monkeypatch) -> None:
    monkeypatch.setattr(cold_tick, "MOVE_PER_UNIT_M", 1e-6)  # a command too small to come near: nothing to cut
    with pytest.raises(RuntimeError, match="must make it bind"):
        cold_tick._pieces()
