"""Bad input from a careless user: every expected error is one line naming the key or file and the fix, exit 2,
no traceback (``--debug`` shows it). Table-driven, in-process (the CLI's own ``main``)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from spec_edit import edited_spec

from launch.cli import main

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "models" / "default"


def package_with_extra_file(tmp: Path) -> Path:
    copy = tmp / "pkg"
    shutil.copytree(PACKAGE, copy)
    (copy / "notes.txt").write_text("left here by mistake")
    return copy


def goals_file(tmp: Path, text: str) -> Path:
    path = tmp / "goals.yaml"
    path.write_text(text)
    return path


Case = Callable[[Path], list[str]]
SERIAL = ["run", "--config", str(ROOT / "launch" / "run_serial.yaml")]
CASES: dict[str, tuple[Case, str]] = {
    "unknown_key": (lambda t: ["run", "--set", "robot.baud=9600"], "unknown key 'robot.baud'; allowed keys:"),
    "bad_choice": (lambda t: ["run", "--set", "backend=gpu"], "'backend' = 'gpu' is not allowed; allowed values:"),
    "set_without_value": (lambda t: ["run", "--set", "episodes"], "--set expects key.sub=value"),
    "missing_launch_file": (lambda t: ["run", "--config", str(t / "nope.yaml")], "nope.yaml does not exist"),
    "unsafe_run_name": (lambda t: ["run", "--name", "../../x"], "'name' = '../../x' is not a safe folder name"),
    "unsafe_robot_id": (
        lambda t: ["calibrate", "--set", "robot_id=../../etc/x"],
        "'robot_id' = '../../etc/x' is not a safe file name",
    ),
    "missing_package": (lambda t: ["run", "--set", f"package={t / 'nope'}"], "is not a policy package folder"),
    "package_extra_file": (
        lambda t: ["run", "--set", f"package={package_with_extra_file(t)}"],
        "notes.txt: is a file the manifest does not list",
    ),
    "missing_spec": (lambda t: ["run", "--set", f"calibration={t / 'nope.yaml'}"], "nope.yaml does not exist; run"),
    "spec_version_1": (
        lambda t: ["run", "--set", f"calibration={edited_spec(t, schema_version=1)}"],
        "'schema_version' = 1: this file has no actuator gain",
    ),
    "spec_misspelt_limit": (
        lambda t: ["run", "--set", f"calibration={edited_spec(t, limits__max_acton=0.5)}"],
        "unknown key 'limits.max_acton'",
    ),
    "robot_delay_6_vs_package_2": (
        lambda t: [
            "run",
            "--set",
            f"calibration={edited_spec(t, action_delay__steps=6, action_delay__ms=240.0, action_delay__range=[6, 6])}",
        ],
        "action delay of 6 control steps (240 ms), package",
    ),
    "goals_file_missing": (
        lambda t: [*SERIAL, "--set", "robot.port=loop://", "--set", f"goals_file={t / 'nope.yaml'}"],
        "goals file",
    ),
    "goals_file_garbage": (
        lambda t: [*SERIAL, "--set", "robot.port=loop://", "--set", f"goals_file={goals_file(t, 'x: [1, 2')}"],
        "expected a YAML list of finite [x, y, z] targets",
    ),
    "goals_file_wrong_shape": (
        lambda t: [*SERIAL, "--set", "robot.port=loop://", "--set", f"goals_file={goals_file(t, '- [1, 2]')}"],
        "expected a YAML list of finite [x, y, z] targets",
    ),
    "goal_outside_the_workspace": (
        lambda t: [
            *SERIAL,
            "--set",
            "robot.port=loop://",
            "--set",
            f"goals_file={goals_file(t, '- [5.0, 0.75, 0.55]')}",
        ],
        "goal 0 = [5.0, 0.75, 0.55] m lies outside the workspace box",
    ),
    "seed_past_the_wire_range": (
        lambda t: [
            *SERIAL,
            "--set",
            "robot.port=loop://",
            "--set",
            f"goals_file={goals_file(t, '- [1.3, 0.75, 0.55]')}",
            "--set",
            f"seed={2**64 - 1}",
            "--set",
            "episodes=2",
        ],
        "'seed' = 18446744073709551615: the targets are seeded",
    ),
    "follow_store_missing": (
        lambda t: [
            *SERIAL,
            "--set",
            "robot.port=loop://",
            "--set",
            f"goals_file={goals_file(t, '- [1.3, 0.75, 0.55]')}",
            "--set",
            f"follow_store={t / 'no_store'}",
        ],
        "no_store is not a folder",
    ),
    "calibrate_inverted_safe_box": (
        lambda t: ["calibrate", "--set", "safe_box_low=[1.65, 0.4, 0.4]", "--set", "safe_box_high=[1.05, 1.1, 0.95]"],
        "safe box [1.65, 0.4, 0.4] .. [1.05, 1.1, 0.95] must be 3-D with low + 2 x margin_m",
    ),
    "calibrate_bound_of_no_field": (
        lambda t: ["calibrate", "--set", "state_bounds.finger=[0, 1]"],
        "state_bounds names 'finger', which is not a field",
    ),
    "shipped_path_outside_the_project": (
        lambda t: ["run", "--set", "package=shipped:../../etc"],
        "'package': shipped:../../etc must name a path inside the project",
    ),
    "shipped_file_missing": (
        lambda t: ["run", "--config", "shipped:launch/nope.yaml"],
        "this installation of robot-grpo has no launch/nope.yaml",
    ),
    "serial_port_missing": (
        lambda t: [
            *SERIAL,
            "--set",
            "robot.port=/dev/ttyDOESNOTEXIST",
            "--set",
            f"goals_file={goals_file(t, '- [1.3, 0.75, 0.55]')}",
        ],
        "/dev/ttyDOESNOTEXIST",
    ),
    "sim_settings_on_serial": (
        lambda t: [
            *SERIAL,
            "--set",
            "robot.port=loop://",
            "--set",
            "robot.delay=3",
            "--set",
            "robot.byte_error_rate=0.01",
            "--set",
            f"goals_file={goals_file(t, '- [1.3, 0.75, 0.55]')}",
        ],
        "robot.delay, robot.byte_error_rate: simulated-robot settings, but 'robot.kind' is serial",
    ),
    "eval_missing_checkpoint": (lambda t: ["eval", "--set", f"checkpoint={t / 'nope.zip'}"], "nope.zip"),
    "export_missing_checkpoint": (
        lambda t: ["export", "--set", f"checkpoint={t / 'nope.zip'}", "--set", f"out_dir={t / 'pkg'}"],
        "nope.zip does not exist; train one first",
    ),
    "export_checks_too_small": (
        lambda t: [
            "export",
            "--set",
            f"checkpoint={ROOT / 'models' / 'default_checkpoint.zip'}",
            "--set",
            f"out_dir={t / 'pkg'}",
            "--set",
            "parity_observations=100",
        ],
        "'parity_observations' / 'closed_loop_episodes': a package needs >= 10000 parity observations",
    ),
    "finetune_missing_logs": (
        lambda t: ["finetune", "--set", f"logs={t / 'nope.mcap'}", "--set", f"store={t / 'store'}"],
        "nope.mcap",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_exit_2_no_traceback(name: str, tmp_path: Path, capsys):
    make_args, expected = CASES[name]
    args = [*make_args(tmp_path), "--set", f"output={tmp_path / 'runs'}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("robot-grpo: error:")]
    assert len(lines) == 1, err
    assert expected in lines[0], lines[0]
    assert "Traceback" not in err


def test_debug_shows_the_traceback(tmp_path: Path):
    with pytest.raises(Exception, match="is not a policy package folder"):
        main(["run", "--debug", "--set", f"package={tmp_path / 'nope'}", "--set", f"output={tmp_path}"])


@pytest.mark.parametrize(("missing", "extra"), [("torch", "sim"), ("mujoco.viewer", "sim"), ("ray", "cluster")])
def test_a_job_whose_extra_is_not_installed_names_it(monkeypatch, capsys, missing: str, extra: str):
    def job_without(config):
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    monkeypatch.setattr("launch.cli.run_job", job_without)
    assert main(["train"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"robot-grpo: error: train needs {missing}, which this installation lacks: install it ")
    assert f"pip install 'robot-grpo[{extra}]'" in err and len(err.strip().splitlines()) == 1


def test_a_missing_module_that_is_no_optional_dependency_is_a_bug_and_raises(monkeypatch):
    def job_without(config):
        raise ModuleNotFoundError("No module named 'launch.job_nope'", name="launch.job_nope")

    monkeypatch.setattr("launch.cli.run_job", job_without)
    with pytest.raises(ModuleNotFoundError, match="launch.job_nope"):
        main(["train"])


def test_a_package_that_fails_its_export_checks_is_one_line_naming_the_report(monkeypatch, capsys):
    from deploy.export.exporter import ExportCheckError

    def failing_export(config):  # what export_package raises when a variant breaks a tolerance
        raise ExportCheckError(
            "the exported package fails its checks and was not installed (kept for inspection in "
            "runs/cell_packages/arm_1.rejected, see its report.md):\n  int8: max |action - torch| 0.302 > 0.03"
        )

    monkeypatch.setattr("launch.cli.run_job", failing_export)
    assert main(["export"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "arm_1.rejected, see its report.md" in err and "int8: max |action - torch| 0.302 > 0.03" in err
