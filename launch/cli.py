"""The ``robot-grpo`` command: the composition root that ties the layers together.

Each subcommand reads its launch file (the shipped ``launch/<job>.yaml`` by default, or ``--config FILE``; a path
relative to the current folder, or ``shipped:launch/<file>.yaml`` for one that ships with robot-grpo), applies
``--set key.sub=value`` overrides, validates, writes the resolved config under ``runs/<name>/`` and runs the job.
Heavy imports (torch, MuJoCo, SB3) happen only inside the job that needs them, so ``robot-grpo run`` on the
robot needs no torch.

An expected error (a bad launch file or override, a package that fails its checks, a bad robot spec, a robot that
does not fit the package, a port that will not open, a silent robot, a bad goals file) prints one line naming the
key or file and the fix, and exits with status 2; ``--debug`` shows the traceback instead. So does a job whose
optional dependencies are not installed (``train`` on the robot computer's ``[robot]`` install): the line names
the missing package and the extra that brings it.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import warnings
from typing import Any

import yaml

from deploy.shipped import INSTALL_ROOT, ShippedFileError, resolve_path
from launch.jobs import JOBS, read_launch_yaml, validate_launch
from launch.schema import LaunchError

EXIT_USAGE = 2  # an expected error: bad input, named in one line
# Library loggers whose chatter buries the jobs' own progress lines (the jobs log through ``launch``/``deploy``):
# INFO and WARNING notices about optional pieces we do not use (torchvision ops, symbolic shape inference).
QUIET_LOGGERS = ("torch", "onnxscript", "onnx_ir", "onnxruntime", "matplotlib", "PIL", "ray", "stable_baselines3")
# Third-party packages a job may need that an install can lack, and the pyproject extra that brings each one.
EXTRA_OF_PACKAGE = {
    "torch": "sim",
    "mujoco": "sim",
    "gymnasium": "sim",
    "gymnasium_robotics": "sim",
    "stable_baselines3": "sim",
    "tqdm": "sim",
    "rich": "sim",
    "matplotlib": "sim",
    "tensorboard": "sim",
    "onnx": "export",
    "onnxscript": "export",
    "onnxruntime": "robot",
    "serial": "robot",
    "cobs": "robot",
    "ray": "cluster",
    "tensorrt": "trt",
    "cuda": "trt",
}
ROBOT_ONLY_NOTE = " (the robot computer's [robot] install runs run and calibrate on a serial port)"


def expected_errors() -> tuple[type[BaseException], ...]:
    """The exception types that mean bad input or a bad environment, not a bug (imported lazily: robot side)."""
    from deploy.robot_spec import RobotSpecError
    from deploy.runtime.backends import BackendUnavailableError
    from deploy.runtime.compatibility import CompatibilityError
    from deploy.runtime.package import PackageError
    from deploy.wire import LinkError

    errors: list[type[BaseException]] = [
        LaunchError,
        RobotSpecError,
        PackageError,
        CompatibilityError,
        BackendUnavailableError,
        LinkError,
        TimeoutError,
        FileNotFoundError,
        ShippedFileError,
    ]
    try:
        from calibration.probe_session import CalibrationError

        errors.append(CalibrationError)
    except ImportError:  # pragma: no cover - the calibration package is always installed with the runtime
        pass
    try:  # a policy whose export fails its checks is a verdict on the policy, not a bug: one line, the report named
        from deploy.export.exporter import ExportCheckError

        errors.append(ExportCheckError)
    except ImportError:  # the robot-only install has no exporter (torch, onnx)
        pass
    return tuple(errors)


def quiet_libraries() -> None:
    """Keep third-party warnings and INFO logs out of the jobs' output (they are still raised as errors)."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    # torch sets its own loggers' levels when it is imported (later, inside a job): tell it through its variable
    os.environ.setdefault("TORCH_LOGS", "-onnx")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(torch|onnxscript|gymnasium|stable_baselines3)")


LAUNCH_DIR = INSTALL_ROOT / "launch"  # the shipped launch files, found from any folder
DEFAULT_LAUNCH_FILES = {
    "train": "train_fetch_reach.yaml",
    "eval": "eval.yaml",
    "export": "export.yaml",
    "run": "run_sim_robot.yaml",
    "cell": "run_cell.yaml",
    "calibrate": "calibrate.yaml",
    "finetune": "finetune.yaml",
    "demo": "demo.yaml",
    "population": "population.yaml",
    "campaign": "campaign.yaml",
}
JOB_MODULES = {job: f"launch.job_{job}" for job in JOBS}
# Subcommands that take paths, not a launch file
TOOLS = {
    "report": "plot a run's tick log: positions vs the workspace box, interventions, timing, transitions",
    "convert-logs": "convert old .tlog tick logs to MCAP (once; the old files stay)",
}
HELP = {
    "train": "train GRPO + hindsight on the simulated task",
    "eval": "evaluate a checkpoint or a policy package in simulation",
    "export": "export a checkpoint to a verified policy package (ONNX fp32/fp16/int8, TensorRT command)",
    "run": "run the safe controller on the simulated robot or a serial port",
    "cell": "run the two-arm cell on the simulated robots: the cell, its supervisor and one runtime per arm",
    "calibrate": "measure delay, noise and workspace through the robot link; write a calibration file",
    "finetune": "fine-tune from the robot's tick logs with EWC; promote only through the gate",
    "demo": "the whole pipeline on the simulated robot (--quick starts from the shipped model)",
    "population": "population-based training (PBT) of GRPO learners on Ray Tune; the best ends as model.zip",
    "campaign": "fault campaign: seeded fault schedules x policies x goals over the real wire, invariants checked",
}


def _parse_override(text: str) -> tuple[list[str], Any]:
    if "=" not in text:
        raise LaunchError(f"--set expects key.sub=value, got {text!r}")
    key, raw = text.split("=", 1)
    return key.strip().split("."), yaml.safe_load(raw)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key.sub=value`` overrides (values parsed as YAML) to a raw launch mapping."""
    for text in overrides:
        path, value = _parse_override(text)
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise LaunchError(f"--set {text}: '{part}' is not a section")
            node = child
        node[path[-1]] = value
    return data


def resolve_config(job: str | None, config_path: str | None, overrides: list[str]) -> dict[str, Any]:
    """The validated launch config of a job: its launch file, then the overrides."""
    path = resolve_path(config_path) if config_path else LAUNCH_DIR / DEFAULT_LAUNCH_FILES[job or ""]
    raw = read_launch_yaml(path)
    if not isinstance(raw, dict):
        raise LaunchError(f"{path}: the top level must be a mapping with 'job'")
    if job is not None and raw.get("job") != job:
        raise LaunchError(f"{path}: 'job' is {raw.get('job')!r} but the subcommand is {job!r}")
    source = f"{path} (with --set)" if overrides else str(path)
    return validate_launch(apply_overrides(raw, overrides), source=source)


def run_job(config: dict[str, Any]) -> int:
    module = importlib.import_module(JOB_MODULES[config["job"]])
    return int(module.main(config) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="robot-grpo", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for job in JOBS:
        p = sub.add_parser(job, help=HELP[job], description=HELP[job])
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show an error's traceback")
        p.add_argument("--config", help=f"launch file (default: shipped:launch/{DEFAULT_LAUNCH_FILES[job]})")
        p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a launch key")
        p.add_argument("--name", help="run name (runs/<name>/)")
        if job == "demo":
            p.add_argument("--quick", action="store_true", help="start from the shipped default model")
        if job == "campaign":
            p.add_argument("--runs", type=int, help="samples to run (runs)")
            p.add_argument("--seed", type=int, help="the first sample's seed (seed)")
    p = sub.add_parser("report", help=TOOLS["report"], description=TOOLS["report"])
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show an error's traceback")
    p.add_argument("run", help="a run folder (runs/<name>/, holding ticks.mcap) or a tick log file")
    p.add_argument("--out", help="where the PNGs and report.md go (default: <run folder>/report/)")
    p = sub.add_parser("convert-logs", help=TOOLS["convert-logs"], description=TOOLS["convert-logs"])
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show an error's traceback")
    p.add_argument("paths", nargs="+", help="old *.tlog logs, or folders of them")
    p = sub.add_parser("launch", help="run a launch file (its 'job' picks the subcommand)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show an error's traceback")
    p.add_argument("file", help="a launch file, e.g. shipped:launch/train_hard_reach.yaml")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a launch key")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    commands = (*JOBS, *TOOLS, "launch")
    if argv and not argv[0].startswith("-") and argv[0] not in commands:
        print(f"robot-grpo: error: unknown command {argv[0]!r}; choose from {', '.join(commands)}", file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    quiet_libraries()
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        if args.command == "report":
            from launch.tick_report import main as report_main

            return report_main(args.run, args.out)
        if args.command == "convert-logs":
            from launch.convert_logs import main as convert_main

            return convert_main(args.paths)
        if args.command == "launch":
            config = resolve_config(None, args.file, args.set)
        else:
            overrides = list(args.set)
            if args.name:
                overrides.append(f"name={args.name}")
            if getattr(args, "quick", False):
                overrides.append("quick=true")
            for key in ("runs", "seed"):
                if getattr(args, key, None) is not None:
                    overrides.append(f"{key}={getattr(args, key)}")
            config = resolve_config(args.command, args.config, overrides)
        return run_job(config)
    except expected_errors() as err:
        if args.debug:
            raise
        print(f"robot-grpo: error: {one_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as err:
        extra = EXTRA_OF_PACKAGE.get((err.name or "").partition(".")[0])
        if extra is None or args.debug:
            raise
        robot_note = ROBOT_ONLY_NOTE if extra in ("sim", "export") else ""
        print(
            f"robot-grpo: error: {args.command} needs {err.name}, which this installation lacks: install it with "
            f"pip install 'robot-grpo[{extra}]'{robot_note}",
            file=sys.stderr,
        )
        return EXIT_USAGE


def one_line(err: BaseException) -> str:
    """The error's message on one line (a multi-line message is joined with '; ')."""
    text = str(err) or type(err).__name__
    if isinstance(err, FileNotFoundError) and err.filename:
        text = f"{err.filename}: {err.strerror or 'not found'}"
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(main())
