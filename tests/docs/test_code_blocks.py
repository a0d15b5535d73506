"""The docs' python and yaml blocks against the code (fast): python compiles and imports only names that exist;
a launch file validates; a robot spec loads. The python blocks are also run (``test_run_blocks.py``, slow)."""

from __future__ import annotations

import ast
import importlib
import importlib.util

import pytest
import yaml
from doc_blocks import all_blocks

OUR_PACKAGES = ("robot_grpo", "envs", "deploy", "launch", "calibration")
PYTHON = [block for block in all_blocks() if block.lang == "python"]
YAML = [block for block in all_blocks() if block.lang == "yaml"]


def missing_imports(source: str) -> list[str]:
    """``from <our package> import name`` lines whose module or name does not exist."""
    missing = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in OUR_PACKAGES:
            try:
                module = importlib.import_module(node.module)
            except ImportError as err:
                missing.append(f"{node.module}: {err}")
                continue
            missing += [f"{node.module}.{alias.name}" for alias in node.names if not hasattr(module, alias.name)]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in OUR_PACKAGES and importlib.util.find_spec(alias.name) is None:
                    missing.append(alias.name)
    return missing


def test_the_docs_have_python_and_yaml_blocks() -> None:
    assert PYTHON and YAML


@pytest.mark.parametrize("block", PYTHON, ids=[block.where for block in PYTHON])
def test_python_block_compiles_and_imports_what_exists(block) -> None:
    compile(block.text, block.where, "exec")
    assert missing_imports(block.text) == [], block.where


def test_a_missing_name_is_caught() -> None:
    assert missing_imports("from robot_grpo import GRPO, NoSuchThing\nimport envs.no_such") == [
        "robot_grpo.NoSuchThing",
        "envs.no_such",
    ]


@pytest.mark.parametrize("block", YAML, ids=[block.where for block in YAML])
def test_yaml_block_is_what_it_shows(block) -> None:
    from deploy.robot_spec import robot_spec_from_dict
    from launch.jobs import validate_launch

    data = yaml.safe_load(block.text)
    if isinstance(data, dict) and "job" in data:
        validate_launch(data, source=block.where)
    elif isinstance(data, dict) and "schema_version" in data:
        robot_spec_from_dict(data, source=block.where)
    else:
        pytest.skip("neither a launch file nor a robot spec")
