"""Static checks of a docs command against the code: options that exist, launch keys in the schema, targets, extras.

``problems(command)`` returns what is wrong with one command (empty: nothing). ``run_problem(command)`` says why an
unmarked command could not be run by ``test_run_blocks.py`` (None: it can). Nothing here runs a command.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import io
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml
from doc_blocks import PLACEHOLDER, ROOT, Command

ROBOT_GRPO = ("robot-grpo", ".venv/bin/robot-grpo")
PYTHON = ("python", "python3", ".venv/bin/python")
MKDOCS = ("mkdocs", ".venv/bin/mkdocs")
MKDOCS_SUBCOMMANDS = ("build", "serve")
# Other projects' tools, checked by themselves: each only in blocks marked with its marker
EXTERNAL = {"ray": "cluster", "mcap": "install"}
RUNNABLE_MODULES = ("deploy.finetune.promote",)  # python -m modules the run test may run (they are quick)
# What the run test appends to each robot-grpo job it runs (docs/about-these-docs.md shows the same table).
BUDGETS: dict[str, tuple[str, ...]] = {
    "train": ("train.total_timesteps=1", "train.eval_episodes=2", "train.target_success=0.0"),
    "eval": ("episodes=2",),
    "export": (),
    "calibrate": ("repeats=1",),
    # A lock-step robot and a 20 ms tick: at 5 ms a loaded 2-core machine overran the ticks and the state-rate
    # check took the lock-step robot for one at another rate. + episodes: two groups, see budget_overrides.
    "run": ("robot.lockstep=true", "period_s=0.02"),
    "finetune": ("n_updates=1", "gate_episodes=10"),
    "cell": ("episodes=1", "episode_steps=10"),
    "report": (),  # a tool over a run folder an earlier block of the page made
}
MIN_RUN_EPISODES = 2
RUN_GROUPS = 2  # groups of attempts a budgeted run logs: one episode held by the filter must not leave none whole


def strip_nice(tokens: list[str]) -> list[str]:
    """The command without a leading ``nice [-n N]``."""
    if tokens[:1] == ["nice"]:
        tokens = tokens[1:]
        if tokens[:1] == ["-n"]:
            tokens = tokens[2:]
    return tokens


@functools.cache
def _parser() -> argparse.ArgumentParser:
    from launch.cli import build_parser

    return build_parser()


def parse_robot_grpo(tokens: list[str]) -> tuple[argparse.Namespace | None, str]:
    """The CLI's own parse of ``robot-grpo ...`` tokens: (namespace, "") or (None, argparse's complaint)."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            return _parser().parse_args(tokens[1:]), ""
    except SystemExit:
        return None, errors.getvalue().strip().splitlines()[-1] if errors.getvalue().strip() else "argparse refused it"


def job_of(args: argparse.Namespace) -> str | None:
    """The job a parsed command runs (``launch FILE``: the file's ``job``)."""
    if args.command != "launch":
        return args.command
    from deploy.shipped import resolve_path

    path = ROOT / resolve_path(args.file)
    data = yaml.safe_load(path.read_text()) if path.is_file() else None
    return data.get("job") if isinstance(data, dict) else None


def schema_key_problem(job: str, dotted: str) -> str | None:
    """Why ``--set dotted=...`` names no key of the job's launch schema (None: it does)."""
    from launch.jobs import SCHEMAS
    from launch.schema import Section

    if dotted == "name":
        return None
    node: Any = SCHEMAS[job]
    parts = dotted.split(".")
    for depth, part in enumerate(parts):
        if not isinstance(node, Section):
            if node.kind == "mapping":  # free-form (GRPO hyperparameters: checked against GRPO's signature)
                return None
            return f"'{'.'.join(parts[:depth])}' is not a section of the {job} launch file"
        if part not in node.fields:
            allowed = ", ".join(sorted(node.fields))
            return f"--set {dotted}: the {job} launch file has no key '{dotted}' (allowed here: {allowed})"
        node = node.fields[part]
    return None


def robot_grpo_problems(command: Command) -> list[str]:
    """Options, the launch file, every --set key, and (without placeholders) the whole resolved config."""
    from launch.cli import resolve_config
    from launch.schema import LaunchError

    everything = strip_nice(command.everything())
    args, complaint = parse_robot_grpo(everything)
    if args is None:
        return [f"robot-grpo refuses the options: {complaint}"]
    if args.command is None:
        return ["robot-grpo without a subcommand"]
    from launch.cli import TOOLS

    if args.command in TOOLS:  # paths, no launch file: argparse's parse is the check
        return []
    config = getattr(args, "config", None) or getattr(args, "file", None)
    if config is not None:
        from deploy.shipped import resolve_path

        config = str(resolve_path(config))
        if not (ROOT / config).is_file():
            return [f"launch file {config} does not exist"]
    job = job_of(args)
    if job is None:
        return [f"{config} names no job"]
    found = [problem for text in args.set if (problem := schema_key_problem(job, text.split("=", 1)[0]))]
    if found or command.has_placeholder():
        return found
    required, _ = parse_robot_grpo(strip_nice(command.required()))
    overrides = list(required.set) + ([f"name={required.name}"] if getattr(required, "name", None) else [])
    if getattr(required, "quick", False):
        overrides.append("quick=true")
    try:
        resolve_config(None if required.command == "launch" else job, str(ROOT / config) if config else None, overrides)
    except LaunchError as err:
        return [f"the launch config does not validate: {err}"]
    return []


@functools.cache
def script_options(path: Path) -> frozenset[str]:
    """The option strings a script's argparse definitions name (``add_argument("--x", ...)``), read from its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("-"):
                    found.add(arg.value)
    return frozenset(found)


def python_target(tokens: list[str]) -> Path | None:
    """The file a ``python -m module`` or ``python script.py`` command runs (None: not in this repository)."""
    if tokens[1:2] == ["-m"]:
        base = ROOT / tokens[2].replace(".", "/")
        for candidate in (base.with_suffix(".py"), base / "__main__.py"):
            if candidate.is_file():
                return candidate
        return None
    script = ROOT / tokens[1]
    return script if script.is_file() else None


def python_problems(command: Command) -> list[str]:
    tokens = strip_nice(command.everything())
    target = python_target(tokens)
    if target is None:
        return [f"{' '.join(tokens[1:3])}: no such module or script in the repository"]
    known = script_options(target)
    options = [token.split("=", 1)[0] for token in tokens[2:] if token.startswith("--")]
    return [f"{target.relative_to(ROOT)} has no option {option}" for option in options if option not in known]


@functools.cache
def make_targets_and_variables() -> tuple[frozenset[str], str]:
    text = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"^([A-Za-z0-9_.-]+):", text, flags=re.MULTILINE)), text


def make_problems(command: Command) -> list[str]:
    targets, text = make_targets_and_variables()
    found = []
    for token in command.everything()[1:]:
        if "=" in token:
            variable = token.split("=", 1)[0]
            if f"$({variable})" not in text and not re.search(rf"^{variable}\s*\??=", text, flags=re.MULTILINE):
                found.append(f"the Makefile does not use the variable {variable}")
        elif token not in targets:
            found.append(f"the Makefile has no target {token!r}")
    return found


@functools.cache
def extras() -> frozenset[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return frozenset(data["project"]["optional-dependencies"])


def pip_problems(command: Command) -> list[str]:
    found = []
    for token in command.everything()[2:]:
        match = re.fullmatch(r"\.\[([a-z,_-]+)\]", token)
        if match:
            found += [
                f"pyproject.toml has no extra [{name}]" for name in match.group(1).split(",") if name not in extras()
            ]
    return found


def problems(command: Command) -> list[str]:
    """What is wrong with one command (empty list: nothing found)."""
    tokens = strip_nice(command.everything())
    while tokens and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", tokens[0]):  # NAME=value before the program
        tokens = tokens[1:]
    program = tokens[0]
    if program in ROBOT_GRPO:
        return robot_grpo_problems(command)
    if program in PYTHON:
        return python_problems(command)
    if program == "make":
        return make_problems(command)
    if program == "pip":
        return pip_problems(command)
    if program == "bash":
        return [] if (ROOT / tokens[1]).is_file() else [f"no script {tokens[1]}"]
    if program in MKDOCS:
        return [] if tokens[1:2] and tokens[1] in MKDOCS_SUBCOMMANDS else [f"mkdocs {tokens[1:2]}: not a subcommand"]
    if program in EXTERNAL:
        marker = EXTERNAL[program]
        return [] if command.block.needs == marker else [f"{program} runs only in a block marked {marker}"]
    return [f"the docs tests do not know the command {program!r}: check it in tests/docs/command_checks.py"]


def budget_overrides(job: str, overrides: list[str]) -> list[str]:
    """The --set values the run test appends to a job (``BUDGETS``; a run's episodes make two groups of attempts)."""
    extra = list(BUDGETS[job])
    if job == "run":
        attempts = [int(text.split("=", 1)[1]) for text in overrides if text.startswith("attempts_per_target=")]
        extra.append(f"episodes={max(MIN_RUN_EPISODES, RUN_GROUPS * max(attempts or [1]))}")
    return extra


def run_problem(command: Command) -> str | None:
    """Why the run test could not run this command as written (None: it can)."""
    tokens = strip_nice(command.required())
    if any(PLACEHOLDER.search(token) for token in tokens):
        return "it has a placeholder"
    if tokens[0] in ROBOT_GRPO:
        args, _ = parse_robot_grpo(tokens)
        job = job_of(args) if args is not None else None
        return None if job in BUDGETS else f"robot-grpo {job} has no test budget (tests/docs/command_checks.py)"
    if tokens[0] in PYTHON and tokens[1:2] == ["-m"] and tokens[2] in RUNNABLE_MODULES:
        return None
    return f"the run test does not run {tokens[0]} commands"
