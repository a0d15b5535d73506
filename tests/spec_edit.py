"""Test helper: the shipped simulated robot's spec with some fields changed, written to a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from deploy.robot_spec import DEFAULT_SIM_SPEC


def edited_spec(folder: Path, name: str = "robot.yaml", **changes: Any) -> Path:
    """Write ``calibration/sim_fetch.yaml`` with ``changes`` applied to ``folder / name``; a key's ``__`` separates
    nesting levels (``action_delay__steps=6`` sets ``action_delay: {steps: 6}``)."""
    data = yaml.safe_load(DEFAULT_SIM_SPEC.read_text())
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split("__")
        for key in parents:
            node = node[key]
        node[leaf] = value
    path = folder / name
    path.write_text(yaml.safe_dump(data))
    return path
