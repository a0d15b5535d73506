"""The robot computer's footprint: what ``pip install .[robot]`` installs, and the runtime's peak memory in a run.

    python benchmarks/robot_footprint.py [--episodes 10]

Builds a fresh virtualenv with only the ``[robot]`` extra from a copy of this checkout (a plain, non-editable
install: pip builds the wheel and installs it, as on a Jetson), measures the installed size (the whole environment,
and per distribution), then serves the simulated robot on a pty from this (full) environment and runs
``robot-grpo run`` on it as the robot would: the robot-only environment's ``launch.cli:main`` (what its
``robot-grpo`` script calls), started from a folder that is not the checkout, over ``robot.kind=serial``. Its peak
resident memory is the kernel's high-water mark of that process (``VmHWM``, read as it ends). The same run in this
full environment is measured beside it.
Writes ``benchmarks/results/robot_footprint.{json,md}``.

``tests/launch/test_robot_install.py`` builds its environment with :func:`build_robot_env` from here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
#: What a plain install needs from the checkout (pyproject's packages and package data, and its readme).
SOURCE_ITEMS = ("pyproject.toml", "README.md", "robot_grpo", "envs", "deploy", "calibration", "launch", "models")
SOURCE_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache")
#: The training side: none of these may be importable in the robot-only environment.
TRAINING_SIDE = ("torch", "mujoco", "stable_baselines3", "gymnasium", "robot_grpo")
PIP_TIMEOUT_S = 900.0  # a cold pip cache on a slow link: onnxruntime and numpy are ~40 MB of wheels
RSS_GOAL_MB = 200.0
INSTALLERS = ("pip", "setuptools")  # in every virtualenv; nothing on the robot runs them
MB = 1024.0 * 1024.0
GOALS = "- [1.30, 0.75, 0.55]\n- [1.25, 0.70, 0.60]\n- [1.40, 0.80, 0.50]\n"


@dataclass(frozen=True)
class RobotEnv:
    """A robot-only virtualenv: ``python`` and ``robot_grpo`` (the ``robot-grpo`` script) in ``root``."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def robot_grpo(self) -> Path:
        return self.root / "bin" / "robot-grpo"

    def environ(self) -> dict[str, str]:
        """This process's environment without anything that would put the checkout (or another venv) on the path."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env


def copy_source(dest: Path) -> Path:
    """Copy what a plain install builds from into ``dest`` (no build/ or egg-info leftovers of the checkout)."""
    dest.mkdir(parents=True)
    for name in SOURCE_ITEMS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=SOURCE_IGNORE)
        else:
            shutil.copy2(source, dest / name)
    return dest


def build_robot_env(work: Path) -> RobotEnv:
    """A fresh virtualenv in ``work/venv`` with ``robot-grpo[robot]`` installed from a copy of the checkout.

    pip builds a wheel from the copy and installs it (no editable install, no path tricks): the environment holds
    exactly what the wheel and the ``[robot]`` extra bring. Uses the package index pip is configured with.
    """
    source = copy_source(work / "source")
    env = RobotEnv(work / "venv")
    subprocess.run([sys.executable, "-m", "venv", str(env.root)], check=True, timeout=PIP_TIMEOUT_S)
    subprocess.run(
        [str(env.python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{source}[robot]"],
        check=True,
        timeout=PIP_TIMEOUT_S,
        env=env.environ(),
        cwd=work,
    )
    return env


def importable(env: RobotEnv, modules: tuple[str, ...], cwd: Path) -> dict[str, bool]:
    """Which of ``modules`` import in ``env`` (a fresh interpreter started in ``cwd``)."""
    code = (
        "import importlib, json, sys\n"
        "out = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "        out[name] = True\n"
        "    except ImportError:\n"
        "        out[name] = False\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [str(env.python), "-c", code, *modules], cwd=cwd, env=env.environ(), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def installed_size(env: RobotEnv) -> dict[str, object]:
    """Bytes on disk: the whole environment, and per installed distribution (its RECORD's files)."""
    code = (
        "import json, importlib.metadata as md\n"
        "sizes = {}\n"
        "for dist in md.distributions():\n"
        "    total = 0\n"
        "    for f in dist.files or []:\n"
        "        p = f.locate()\n"
        "        total += p.stat().st_size if p.is_file() else 0\n"
        "    sizes[dist.metadata['Name']] = total\n"
        "print(json.dumps(sizes))\n"
    )
    done = subprocess.run(
        [str(env.python), "-c", code], env=env.environ(), capture_output=True, text=True, check=True, cwd=env.root
    )
    per_dist = dict(sorted(json.loads(done.stdout).items(), key=lambda kv: -kv[1]))
    total = sum(p.stat().st_size for p in env.root.rglob("*") if p.is_file() and not p.is_symlink())
    return {"venv_bytes": total, "distributions": per_dist}


#: ``robot-grpo`` (``launch.cli:main``, what the console script calls) in this interpreter, reporting at its end the
#: kernel's high-water mark of its resident memory. VmHWM belongs to the address space that exec starts afresh, so it
#: is the run's own peak; ``ru_maxrss`` from ``wait4`` would also count the parent's memory at the fork.
PEAK_RSS_PROBE = """
import sys
from launch.cli import main

rc = main(sys.argv[1:])
with open("/proc/self/status") as status:
    peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(f"peak_rss_kib {peak_kib}", file=sys.stderr)
sys.exit(rc)
"""


def run_measured(python: str | Path, args: list[str], cwd: Path, env: dict[str, str]) -> dict[str, object]:
    """``robot-grpo <args>`` with ``python``: its exit status, output, wall time and peak resident memory (MB)."""
    start = time.perf_counter()
    done = subprocess.run([str(python), "-c", PEAK_RSS_PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True)
    lines = done.stderr.splitlines()
    if not lines or not lines[-1].startswith("peak_rss_kib "):
        raise RuntimeError(f"robot-grpo {' '.join(args)} ended without its memory figure: {done.stderr[-2000:]}")
    return {
        "rc": done.returncode,
        "wall_s": time.perf_counter() - start,
        "peak_rss_mb": int(lines[-1].split()[1]) * 1024 / MB,
        "stdout": done.stdout,
        "stderr": "\n".join(lines[:-1]),
    }


def serial_run_args(port: str, goals: Path, episodes: int, name: str) -> list[str]:
    """``robot-grpo run`` on a serial port with the shipped launch file, package and robot spec."""
    return [
        "run",
        "--config",
        "shipped:launch/run_serial.yaml",
        "--name",
        name,
        "--set",
        f"robot.port={port}",
        "--set",
        f"goals_file={goals}",
        "--set",
        f"episodes={episodes}",
    ]


def measure(episodes: int, work: Path) -> dict[str, object]:
    from envs.sim_robot_process import SimRobotProcess

    started = time.perf_counter()
    env = build_robot_env(work)
    build_s = time.perf_counter() - started
    outside = work / "robot_home"  # not the checkout: the shipped defaults must be found from here
    outside.mkdir()
    goals = outside / "goals.yaml"
    goals.write_text(GOALS)
    training_side = importable(env, TRAINING_SIDE, outside)
    size = installed_size(env)
    runs = {}
    full_env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for label, python, environ in (
        ("robot-only [robot] install", env.python, env.environ()),
        ("full environment (training side installed)", sys.executable, full_env),
    ):
        robot = SimRobotProcess(mode="realtime")
        try:
            name = "robot_only" if "robot-only" in label else "full"
            result = run_measured(python, serial_run_args(robot.port_name, goals, episodes, name), outside, environ)
        finally:
            robot.stop()
        if result["rc"] != 0:
            raise RuntimeError(f"{label}: robot-grpo run exited {result['rc']}: {result['stderr'][-2000:]}")
        report = json.loads((outside / "runs" / name / "run_report.json").read_text())
        runs[label] = {
            "peak_rss_mb": round(result["peak_rss_mb"], 1),
            "wall_s": round(result["wall_s"], 1),
            "episodes": report["episodes"],
            "success_rate": report["success_rate"],
            "latency_ms_p99": round(report["timing"]["latency_s_p99"] * 1e3, 3),
        }
    return {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "episodes_per_run": episodes,
        "build_s": round(build_s, 1),
        "training_side_importable": training_side,
        "venv_mb": round(size["venv_bytes"] / MB, 1),
        "venv_without_installers_mb": round(
            (size["venv_bytes"] - sum(size["distributions"].get(name, 0) for name in INSTALLERS)) / MB, 1
        ),
        "distributions_mb": {k: round(v / MB, 2) for k, v in size["distributions"].items()},
        "runs": runs,
        "rss_goal_mb": RSS_GOAL_MB,
    }


def write_results(results: dict[str, object], stem: str = "robot_footprint") -> tuple[Path, Path]:
    from launch.report import markdown_table

    RESULTS.mkdir(exist_ok=True)
    json_path = RESULTS / f"{stem}.json"
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    dists = results["distributions_mb"]
    runs = results["runs"]
    lines = [
        "# Robot computer footprint (`pip install .[robot]`)",
        "",
        f"A fresh virtualenv with only the `[robot]` extra, installed from this checkout as a wheel (built and "
        f"installed in {results['build_s']} s with a warm pip cache). Training side importable there: "
        + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in results["training_side_importable"].items())
        + ".",
        "",
        f"Installed size: **{results['venv_mb']} MB** (the whole virtualenv), "
        f"{results['venv_without_installers_mb']} MB without pip and setuptools.",
        "",
        markdown_table(["distribution", "MB"], [[k, v] for k, v in dists.items()]),
        "",
        f"`robot-grpo run` over `robot.kind=serial` against the simulated robot (served on a pty from the full "
        f"environment, real time, 25 Hz), {results['episodes_per_run']} episodes, started outside the checkout. "
        f"Peak RSS is the runtime process's high-water mark (goal < {results['rss_goal_mb']:.0f} MB). The full "
        "environment's run also draws latency.png with matplotlib, which the robot-only run skips: importing "
        "matplotlib and drawing the histogram adds ~50 MB to a process holding numpy and onnxruntime. Tick latency "
        "here is on a shared 2-core machine loaded by other jobs (the loop's own figures: control_loop.md).",
        "",
        markdown_table(
            ["environment", "peak RSS (MB)", "episodes", "success", "tick latency p99 (ms)", "wall (s)"],
            [
                [
                    k,
                    v["peak_rss_mb"],
                    v["episodes"],
                    f"{100 * v['success_rate']:.0f}%",
                    v["latency_ms_p99"],
                    v["wall_s"],
                ]
                for k, v in runs.items()
            ],
        ),
        "",
        f"Machine: Python {results['machine']['python']}, {results['machine']['platform']}. "
        "Command: `python benchmarks/robot_footprint.py`.",
        "",
    ]
    md_path = RESULTS / f"{stem}.md"
    md_path.write_text("\n".join(lines))
    return json_path, md_path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10, help="episodes per measured run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="robot_footprint_") as tmp:
        results = measure(args.episodes, Path(tmp))
    for path in write_results(results):
        print(f"wrote {path}")
    print(json.dumps({k: results[k] for k in ("venv_mb", "runs")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
