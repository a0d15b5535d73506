"""benchmarks/cell_retract.py: on a goal pair that ends crossed, an arm homed at once touches its partner and the
retract under both barriers first touches nothing; a small end-to-end run writes its tables."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.cell_retract import main, run
from deploy.runtime.retract_detour import Detour

CROSSED_PAIR = 7011  # a goal pair (cell_goals seed) whose arms end crossed
FACING_PAIR = 7265  # one whose arms, retracting, close inside the separation side by side and freeze without giving way


def test_homing_at_once_touches_and_retracting_first_does_not() -> None:
    counts = run(1, CROSSED_PAIR, reserve=True)["counts"]
    assert counts.get("home_at_once_contact", 0) == 1
    assert counts.get("retract_then_home_contact", 0) == 0 and counts.get("retract_contact", 0) == 0
    assert counts["retract_complete"] == 1


def test_arms_that_freeze_face_to_face_get_home_by_giving_way(monkeypatch) -> None:
    counts = run(1, FACING_PAIR, reserve=True)["counts"]
    assert counts["retract_complete"] == 1 and counts["give_ways"] > 0
    assert counts.get("retract_then_home_contact", 0) == 0 and counts.get("retract_contact", 0) == 0
    monkeypatch.setattr(Detour, "command", lambda self, offset, from_partner: None)  # never give way
    counts = run(1, FACING_PAIR, reserve=True)["counts"]
    assert counts["retract_stalled"] == 1 and counts["retract_then_home_contact"] == 1  # its HOME then touches


def test_a_small_run_writes_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "retract"
    assert main(["--pairs", "2", "--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    assert [r["reserve_m"] > 0 for r in result["runs"]] == [True, False]  # shipped reserve, then none
    assert "| 0.0 | 2 |" in out.with_suffix(".md").read_text()
    assert main(["--pairs", "0", "--out", str(out)]) == 2
