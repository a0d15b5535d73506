"""A real cluster as a user starts one: a head and a second node from ``ray start`` (subprocesses, loopback only,
token auth on as Ray turns it on when the machine has a token), and ``robot-grpo train`` run against it from a
folder that is not the checkout. One rollout worker is killed by its pid in the middle of a run; the run ends with
the weights of an undisturbed run and names the lost worker. A driver without the token, and an address where
nothing listens, each get their own one-line error.

The nodes get their own HOME (their token lives in ``HOME/.ray/auth_token``) and their own Ray temp dir; teardown
ends exactly the processes whose command line names that temp dir (never ``ray stop``, which would end every Ray
of this user).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch as th

pytestmark = pytest.mark.slow

CHECKOUT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).parent / "ray"
SPEC_FILE = CHECKOUT / "calibration" / "sim_fetch.yaml"  # absolute until launch defaults resolve from the package
RAY_VARIABLES = (
    "RAY_AUTH_MODE",
    "RAY_AUTH_TOKEN",
    "RAY_AUTH_TOKEN_PATH",
    "RAY_ADDRESS",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
)
# The driver runs on the machine of the nodes, which listen on 127.0.0.1: this makes Ray look for its raylet there
# (the nodes must not have it: with it Ray refuses a second node).
DRIVER_LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
NODE_START_TIMEOUT_S = 120.0
RUN_TIMEOUT_S = 600.0
POLL_S = 0.01  # how often the killer looks for a worker in the middle of a group
STOP_GRACE_S = 5.0
UPDATES = 5
TINY_TRAIN = [
    "--set",
    "env.id=DelayedFetchReach-v0",
    "--set",
    f"env.calibration={SPEC_FILE}",
    "--set",
    f"train.total_timesteps={UPDATES * 400}",  # 2 groups x 4 members x 50 steps = 400 env steps per update
    "--set",
    "train.eval_episodes=2",
    "--set",
    "train.target_success=1.0",
    "--set",
    "train.hyperparameters={group_size: 4, n_groups: 2, batch_size: 512, n_epochs: 2, policy_kwargs: {net_arch: [16]}}",
    "--set",
    "scale.backend=ray",
    "--set",
    "scale.workers=2",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RayStartCluster:
    address: str
    temp_dir: Path
    env: dict[str, str]  # the driver's: HOME with the cluster's token, the worktree on PYTHONPATH, no RAY_AUTH_*

    def processes(self) -> dict[int, str]:
        """pid -> command line of every process of this cluster (its temp dir is on their command lines)."""
        found = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if str(self.temp_dir) in cmdline:
                    found[int(entry.name)] = cmdline
        return found

    def rollout_workers_in_a_group(self) -> list[int]:
        """pids of this cluster's rollout workers that are playing a group right now (Ray's process titles)."""
        raylets = [pid for pid, cmd in self.processes().items() if "/raylet" in cmd.split(" ", 1)[0]]
        busy = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                title = (entry / "cmdline").read_bytes().decode(errors="replace")
            except (OSError, IndexError, ValueError):
                continue
            if parent in raylets and title.startswith("ray::RolloutWorker.run_group"):
                busy.append(int(entry.name))
        return busy

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in self.processes():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + STOP_GRACE_S
            while self.processes() and time.monotonic() < deadline:
                time.sleep(0.1)


def ray_start(args: list[str], env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(
        [str(RAY), "start", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=NODE_START_TIMEOUT_S
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayStartCluster]:
    root = tmp_path_factory.mktemp("cluster")
    home, temp_dir, node_cwd = root / "home", root / "ray", root / "node_cwd"
    for folder in (home, temp_dir, node_cwd):
        folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in RAY_VARIABLES}
    env.update({"HOME": str(home), "PYTHONPATH": str(CHECKOUT)})
    token = subprocess.run(
        [str(RAY), "get-auth-token", "--generate"], env=env, capture_output=True, text=True, timeout=60
    )
    assert token.returncode == 0 and (home / ".ray" / "auth_token").is_file(), token.stderr
    port = free_port()
    node = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats"]
    cluster = RayStartCluster(f"127.0.0.1:{port}", temp_dir, {**env, **DRIVER_LOOPBACK})
    try:
        ray_start(
            ["--head", f"--port={port}", f"--temp-dir={temp_dir}", "--include-dashboard=false", *node], env, node_cwd
        )
        # A node that joins does not turn token auth on by itself (the head does, when a token exists): as the
        # cluster guide says, it is started with RAY_AUTH_MODE=token and the head's token in its ~/.ray/auth_token.
        ray_start([f"--address={cluster.address}", *node], {**env, "RAY_AUTH_MODE": "token"}, node_cwd)
        yield cluster
    finally:
        cluster.stop()


def train_cli(cluster: RayStartCluster, cwd: Path, name: str, env: dict[str, str] | None = None, *extra: str):
    """``robot-grpo train`` (as ``python -m launch.cli``) in ``cwd``, against the cluster; returns the process."""
    args = [sys.executable, "-m", "launch.cli", "train", "--name", name, *TINY_TRAIN]
    args += ["--set", f"scale.address={cluster.address}", "--set", f"output={cwd / 'runs'}", *extra]
    return subprocess.Popen(
        args, cwd=cwd, env=cluster.env if env is None else env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def finish(process: subprocess.Popen) -> str:
    output, _ = process.communicate(timeout=RUN_TIMEOUT_S)
    return output.decode(errors="replace")


def weights(run_dir: Path) -> dict[str, th.Tensor]:
    from robot_grpo.grpo import GRPO

    return GRPO.load(str(run_dir / "model.zip"), device="cpu").policy.state_dict()


def test_a_killed_worker_costs_nothing_on_a_ray_start_cluster(cluster: RayStartCluster, tmp_path: Path):
    elsewhere = tmp_path / "not_the_checkout"
    elsewhere.mkdir()
    undisturbed = train_cli(cluster, elsewhere, "undisturbed")
    output = finish(undisturbed)
    assert undisturbed.returncode in (0, 1), output  # 1: the tiny budget does not reach the success target

    disturbed = train_cli(cluster, elsewhere, "disturbed")
    victim = None
    while victim is None and disturbed.poll() is None:
        busy = cluster.rollout_workers_in_a_group()
        if busy:
            victim = busy[0]
            os.kill(victim, signal.SIGKILL)
        else:
            time.sleep(POLL_S)
    output = finish(disturbed)
    assert victim is not None, f"no rollout worker was seen in a group: {output}"
    assert disturbed.returncode in (0, 1), output

    summary = json.loads((elsewhere / "runs" / "disturbed" / "train_summary.json").read_text())
    assert summary["scale"]["address"] == cluster.address
    assert summary["scale"]["workers"] == 2 and len(summary["scale"]["workers_lost"]) == 1
    assert summary["env_steps"] == UPDATES * 400
    a, b = weights(elsewhere / "runs" / "undisturbed"), weights(elsewhere / "runs" / "disturbed")
    assert a.keys() == b.keys()
    for key in a:
        assert th.equal(a[key], b[key]), f"{key} differs"


def test_a_driver_without_the_token_is_told_so(cluster: RayStartCluster, tmp_path: Path):
    no_token_home = tmp_path / "home"
    no_token_home.mkdir()
    process = train_cli(cluster, tmp_path, "no_token", {**cluster.env, "HOME": str(no_token_home)})
    output = finish(process)
    assert process.returncode == 2, output
    assert "the head requires a Ray token and this driver has none" in output
    assert "Traceback" not in output


def test_a_wrong_token_is_named_as_the_cause(cluster: RayStartCluster, tmp_path: Path):
    process = train_cli(cluster, tmp_path, "bad_token", {**cluster.env, "RAY_AUTH_TOKEN": "0" * 32})
    output = finish(process)
    assert process.returncode == 2, output
    assert "the head refused the Ray token from RAY_AUTH_TOKEN" in output


def test_an_address_where_nothing_listens_is_named_as_the_cause(cluster: RayStartCluster, tmp_path: Path):
    wrong = f"127.0.0.1:{free_port()}"
    process = train_cli(cluster, tmp_path, "no_head", None, "--set", f"scale.address={wrong}")
    output = finish(process)
    assert process.returncode == 2, output
    assert f"'scale.address' = '{wrong}': nothing answers there" in output
