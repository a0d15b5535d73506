"""The robot side (deploy.runtime, deploy.wire, deploy.contract, deploy.robot_spec, calibration) loads without the
training side, and the arrows between the robot-side packages go one way (calibration -> deploy, never back).

Each module is imported in a fresh interpreter whose ``sys.meta_path`` starts with a finder that raises
ImportError for torch, mujoco, gymnasium, stable_baselines3, robot_grpo and envs (and their submodules).
Negative controls show the harness catches such an import, direct or indirect. A static check also looks
at imports inside functions, which an import-time test cannot see.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from import_guard import FORBID_SOURCE, FORBIDDEN

ROOT = Path(__file__).resolve().parents[3]
SUBPROCESS_TIMEOUT_S = 120

HARNESS = FORBID_SOURCE + textwrap.dedent(
    """
    import importlib

    for module in sys.argv[2:]:
        try:
            importlib.import_module(module)
        except ImportError as err:
            print(f"FAILED {module}: {err}")
            sys.exit(3)
        print(f"ok {module}")
    """
)


def robot_side_modules() -> list[str]:
    """Every module of deploy/runtime, deploy/cell, deploy/wire and calibration, plus deploy.contract and
    deploy.robot_spec."""
    modules = ["deploy.contract", "deploy.robot_spec"]
    for package in ("deploy/runtime", "deploy/cell", "deploy/wire", "calibration"):
        folder = ROOT / package
        dotted = package.replace("/", ".")
        if (folder / "__init__.py").exists():
            modules.append(dotted)
        modules += [f"{dotted}.{p.stem}" for p in sorted(folder.glob("*.py")) if p.stem != "__init__"]
    return modules


def run_harness(modules: list[str], extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    path = [str(ROOT)] + ([str(extra_path)] if extra_path else [])
    code = f"import sys; sys.path[:0] = {path!r}\n" + HARNESS
    return subprocess.run(
        [sys.executable, "-c", code, ",".join(FORBIDDEN), *modules],
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
        cwd=ROOT,
    )


def test_robot_side_modules_import_without_the_training_side():
    modules = robot_side_modules()
    assert "deploy.runtime.safety" in modules and "deploy.runtime.ticklog" in modules
    assert "calibration.probe" in modules and "deploy.wire.codec" in modules and "deploy.robot_spec" in modules
    result = run_harness(modules)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("ok ") == len(modules)


@pytest.mark.parametrize("name", FORBIDDEN)
def test_negative_control_a_forbidden_import_fails(tmp_path, name):
    (tmp_path / "bad_runtime_module.py").write_text(f"import numpy\nimport {name}\n")
    result = run_harness(["deploy.runtime.safety", "bad_runtime_module"], extra_path=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"FAILED bad_runtime_module: forbidden on the robot side: {name}" in result.stdout


def test_negative_control_an_indirect_import_fails(tmp_path):
    # a submodule of a forbidden package, reached through another module
    (tmp_path / "helper_mod.py").write_text("from envs.delayed_fetch_reach import DelayedFetchReachEnv\n")
    (tmp_path / "bad_runtime_module.py").write_text("import helper_mod\n")
    result = run_harness(["bad_runtime_module"], extra_path=tmp_path)
    assert result.returncode == 3
    assert "forbidden on the robot side: envs" in result.stdout


def _imported_roots(source: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.partition(".")[0])
    return roots


def test_no_forbidden_import_anywhere_in_the_source_even_inside_functions():
    offenders = {}
    for module in robot_side_modules():
        file = ROOT / (module.replace(".", "/") + ".py")
        if not file.exists():
            file = ROOT / module.replace(".", "/") / "__init__.py"
        bad = _imported_roots(file.read_text()) & set(FORBIDDEN)
        if bad:
            offenders[module] = sorted(bad)
    assert offenders == {}
    # negative control of the static check
    assert _imported_roots("def f():\n    import torch.nn as nn\n") == {"torch"}


def test_the_runtime_and_the_spec_never_import_calibration():
    """The spec and its file format sit below both the runtime and the calibration package: deploy.* must not
    import calibration (calibration imports deploy.robot_spec and the safety filter; never the other way)."""
    offenders = {}
    for module in robot_side_modules():
        if module.startswith("calibration"):
            continue
        file = ROOT / (module.replace(".", "/") + ".py")
        if not file.exists():
            file = ROOT / module.replace(".", "/") / "__init__.py"
        if "calibration" in _imported_roots(file.read_text()):
            offenders[module] = "imports calibration"
    assert offenders == {}
