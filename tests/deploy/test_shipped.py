"""Files that ship with robot-grpo are found beside the packages; the user's paths stay relative to the current
folder; a ``shipped:`` name cannot leave the project and must exist; launch "path" fields resolve it."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.robot_spec import DEFAULT_SIM_SPEC
from deploy.shipped import INSTALL_ROOT, ShippedFileError, resolve_path, shipped_path
from launch.jobs import validate_launch
from launch.schema import LaunchError

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_names_resolve_beside_the_packages_and_user_paths_stay_relative(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert INSTALL_ROOT == ROOT
    assert shipped_path("calibration/sim_fetch.yaml") == ROOT / "calibration" / "sim_fetch.yaml" == DEFAULT_SIM_SPEC
    assert resolve_path("shipped:models/default") == ROOT / "models" / "default"
    assert resolve_path("models/default") == Path("models/default")  # the user's: relative to this folder
    assert resolve_path(tmp_path / "x.yaml") == tmp_path / "x.yaml"


@pytest.mark.parametrize("bad", ["../etc/passwd", "/etc/passwd", "", "models/../../x"])
def test_a_shipped_name_cannot_leave_the_project(bad: str):
    with pytest.raises(ShippedFileError, match="must name a path inside the project"):
        shipped_path(bad)


def test_a_shipped_name_of_nothing_says_where_it_looked():
    with pytest.raises(ShippedFileError, match=f"has no models/nope \\(looked in {ROOT}\\)"):
        resolve_path("shipped:models/nope")


def test_launch_path_fields_resolve_shipped_names_and_defaults_and_keep_the_users(tmp_path: Path):
    config = validate_launch(
        {"job": "run", "calibration": "shipped:calibration/sim_fetch.yaml", "goals_file": "g.yaml"}
    )
    assert config["calibration"] == str(ROOT / "calibration" / "sim_fetch.yaml")
    assert config["package"] == str(ROOT / "models" / "default")  # the schema default, shipped
    assert config["goals_file"] == "g.yaml" and config["output"] == "runs"
    with pytest.raises(LaunchError, match="'calibration': shipped:calibration/nope.yaml: this installation"):
        validate_launch({"job": "run", "calibration": "shipped:calibration/nope.yaml"})
