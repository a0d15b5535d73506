"""The robot computer's install runs the robot's jobs: a virtualenv with only ``robot-grpo[robot]``, installed from
a copy of this checkout as a wheel (``benchmarks.robot_footprint.build_robot_env``: no editable install, no
PYTHONPATH), driven from a folder that is not the checkout against the simulated robot, which this test serves on
a pty from its own (full) environment.

- the training side (torch, mujoco, stable_baselines3, gymnasium, robot_grpo) does not import there, and a training
  job says in one line which extra it needs;
- ``calibrate`` over the link, ``run`` over ``robot.kind=serial`` with the spec it wrote and with the shipped one:
  exit 0, no traceback, run_report.json and the tick log written, the plot skipped with one line, peak memory under
  the 200 MB goal; the tick log is read by the fine-tuner's reader here, on the training side;
- package verification: a package with a changed byte is refused by name;
- a package store: installed, promoted, followed by a running controller (the promoted package swapped in between
  ticks), rolled back with the store's command.

Building the environment takes ~15 s with a warm pip cache (minutes on a cold one), the runs ~30 s: slow.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.robot_footprint import (
    GOALS,
    RSS_GOAL_MB,
    TRAINING_SIDE,
    RobotEnv,
    build_robot_env,
    importable,
    run_measured,
)
from deploy.finetune.dataset import load_log_dataset
from deploy.runtime.package import load_package
from envs.sim_robot_process import SimRobotProcess

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def robot_env(tmp_path_factory: pytest.TempPathFactory) -> RobotEnv:
    return build_robot_env(tmp_path_factory.mktemp("robot_env"))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The robot computer's working folder: not the checkout, with the line's goals file."""
    (tmp_path / "goals.yaml").write_text(GOALS)
    return tmp_path


@pytest.fixture
def sim_robot(request: pytest.FixtureRequest) -> Iterator[SimRobotProcess]:
    """The simulated robot on a pty, served from this environment (``mode``: realtime unless parametrized)."""
    robot = SimRobotProcess(mode=getattr(request, "param", "realtime"))
    try:
        yield robot
    finally:
        robot.stop()


def robot_grpo(env: RobotEnv, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The robot-only environment's own ``robot-grpo`` script, in ``home``; never a traceback."""
    done = subprocess.run(
        [str(env.robot_grpo), *args], cwd=home, env=env.environ(), capture_output=True, text=True, timeout=JOB_TIMEOUT_S
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done


def robot_python(env: RobotEnv, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(env.python), *args], cwd=home, env=env.environ(), capture_output=True, text=True, timeout=JOB_TIMEOUT_S
    )


def serial_run(port: str, name: str, *extra: str) -> list[str]:
    return [
        "run",
        "--config",
        "shipped:launch/run_serial.yaml",
        "--name",
        name,
        "--set",
        f"robot.port={port}",
        "--set",
        "goals_file=goals.yaml",
        *extra,
    ]


def test_the_training_side_is_not_there_and_training_jobs_name_their_extra(robot_env: RobotEnv, home: Path):
    assert importable(robot_env, TRAINING_SIDE, home) == dict.fromkeys(TRAINING_SIDE, False)
    where = robot_python(robot_env, home, "-c", "import launch.cli, deploy; print(launch.cli.__file__)")
    assert Path(where.stdout.strip()).is_relative_to(robot_env.root), where  # the installed copy, not the checkout
    for job in ("train", "run"):  # run's default robot is the simulated one, which needs MuJoCo
        done = robot_grpo(robot_env, home, job)
        assert done.returncode == 2, done.stderr
        [line] = [line for line in done.stderr.splitlines() if line.startswith("robot-grpo: error:")]
        assert f"{job} needs " in line and "pip install 'robot-grpo[sim]'" in line, line


@pytest.mark.parametrize("sim_robot", ["lockstep"], indirect=True)
def test_calibrate_over_the_link_then_run_with_the_spec_it_wrote(robot_env, home, sim_robot):
    port = sim_robot.port_name
    calibrate = robot_grpo(
        robot_env,
        home,
        "calibrate",
        "--config",
        "shipped:launch/calibrate_serial.yaml",
        "--set",
        f"robot.port={port}",
        "--set",
        "robot_id=lab_arm",
        "--set",
        "repeats=2",
    )
    assert calibrate.returncode == 0, calibrate.stderr
    spec = home / "runs" / "calibrate_serial" / "lab_arm.yaml"
    assert spec.is_file() and (home / "runs" / "calibrate_serial" / "calibration_report.json").is_file()

    run = robot_grpo(
        robot_env, home, *serial_run(port, "calibrated", "--set", f"calibration={spec}", "--set", "episodes=2")
    )
    assert run.returncode == 0, run.stderr
    report = json.loads((home / "runs" / "calibrated" / "run_report.json").read_text())
    assert report["episodes"] == 2 and report["robot_spec"]["robot_id"] == "lab_arm"


def test_run_on_the_shipped_spec_writes_a_log_the_fine_tuner_reads(robot_env, home, sim_robot):
    run = run_measured(
        robot_env.python, serial_run(sim_robot.port_name, "line", "--set", "episodes=3"), home, robot_env.environ()
    )
    assert run["rc"] == 0 and "Traceback" not in run["stderr"], run["stderr"]
    assert "latency.png skipped: matplotlib is not installed" in run["stdout"], run["stdout"]
    assert run["peak_rss_mb"] < RSS_GOAL_MB, run["peak_rss_mb"]
    folder = home / "runs" / "line"
    report = json.loads((folder / "run_report.json").read_text())
    assert report["episodes"] == 3 and report["robot_spec"]["robot_id"] == "sim_fetch"
    assert not (folder / "latency.png").exists()

    package = load_package(ROOT / "models" / "default")  # the training side reads what the robot wrote
    dataset = load_log_dataset(folder / "ticks.mcap", package.contract, policy_id=package.policy_id)
    assert dataset.n_records > 0 and dataset.episodes
    assert len(dataset.episodes) + sum(dataset.skipped().values()) == report["episodes"]


STORE_SETUP = """
import sys
from deploy.finetune.promote import PackageStore
from deploy.shipped import shipped_path

store = PackageStore(sys.argv[1])
for name in ("v1", "v2"):
    store.install(shipped_path("models/default"), name)
"""


def test_verification_store_promotion_following_and_rollback(robot_env, home, sim_robot):
    tampered = home / "tampered"
    setup = robot_python(robot_env, home, "-c", STORE_SETUP, "store")
    assert setup.returncode == 0, setup.stderr

    def store_command(*args: str) -> subprocess.CompletedProcess[str]:
        return robot_python(robot_env, home, "-m", "deploy.finetune.promote", *args, "--store", "store")

    assert store_command("promote", "v1").returncode == 0
    # a copy of the package with one changed byte is refused by name before the robot moves
    shutil.copytree(home / "store" / "packages" / "v1", tampered)
    model = tampered / "policy.onnx"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    refused = robot_grpo(robot_env, home, *serial_run("loop://", "tampered", "--set", f"package={tampered}"))
    assert refused.returncode == 2
    assert f"robot-grpo: error: {model}: sha256 mismatch" in refused.stderr, refused.stderr

    # the controller runs v1 and follows the store, where v2 is now current: v2 is swapped in between ticks
    assert store_command("promote", "v2").returncode == 0
    run = robot_grpo(
        robot_env,
        home,
        *serial_run(
            sim_robot.port_name,
            "follow",
            "--set",
            "package=store/packages/v1",
            "--set",
            "follow_store=store",
            "--set",
            "episodes=3",
        ),
    )
    assert run.returncode == 0, run.stderr
    report = json.loads((home / "runs" / "follow" / "run_report.json").read_text())
    assert report["swaps"] == ["v2"] and report["follower"]["refusals"] == 0, report["follower"]

    rollback = store_command("rollback")
    assert rollback.returncode == 0, rollback.stderr
    status = json.loads(store_command("status").stdout)
    assert status["current"] == "v1" and status["previous"] == "v2"
