"""benchmarks/cell_reach.py: the simulated Fetch holds still near its start and sags far out over the table (what
the cell study's hold-drift table rests on); a spec's workspace capped; the tables written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.cell_reach import capped, hold_drift_at, main
from deploy.robot_spec import load_robot_spec
from envs.cell_scene import CellScene


def test_the_arm_holds_near_its_start_and_sags_far_out() -> None:
    scene = CellScene(arms=(0,))
    near, near_drift = hold_drift_at(scene, np.array([1.40, 0.60, 0.55]))
    far, far_drift = hold_drift_at(scene, np.array([1.60, 0.60, 0.55]))
    assert near == pytest.approx([1.40, 0.60, 0.55], abs=2e-3) and near_drift < 5e-4  # metres per held step
    assert far[0] < 1.595 and far_drift > 3e-3  # short of the point, and sagging 3+ mm a step


def test_a_capped_spec_moves_only_the_far_face() -> None:
    spec = load_robot_spec()
    cap = capped(spec, 1.52)
    assert cap.workspace_high == (1.52, *spec.workspace_high[1:])
    assert cap.workspace_low == spec.workspace_low and cap.actuator_gain == spec.actuator_gain


def test_without_a_model_it_writes_the_hold_table(tmp_path: Path, capsys) -> None:
    out = tmp_path / "reach"
    assert main(["--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    assert "behind_runtimes" not in result and len(result["hold"]) > 100
    assert "| 1.60 |" in out.with_suffix(".md").read_text() and out.with_suffix(".png").is_file()
    assert main(["--model", str(tmp_path / "none.zip"), "--out", str(out)]) == 2
    assert "is not a file" in capsys.readouterr().err
