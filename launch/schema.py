"""A small declarative schema for launch files: typed fields, defaults, ranges, choices, nested sections.

Validation errors name the file, the dotted key, what was wrong and what is allowed, e.g.
``launch/train.yaml: 'algo.gamma' = 1.5 is out of range [0.0, 1.0]`` or
``launch/run.yaml: unknown key 'robot.baud'; allowed keys: baudrate, delay, kind, lockstep, port``.
A "path" field takes a path relative to the current folder, or ``shipped:<path>`` for a file that ships with
robot-grpo (``shipped:calibration/sim_fetch.yaml``), which validation turns into its absolute path on this machine
(:mod:`deploy.shipped`), so the resolved config says which file a run used.
yaml + stdlib only: ``robot-grpo run`` validates its launch file on the robot without torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deploy.shipped import SHIPPED_PREFIX, ShippedFileError, resolve_path

_MISSING = object()


class LaunchError(ValueError):
    """A launch file (or command-line override) that does not validate."""


@dataclass(frozen=True)
class Field:
    """One key of a launch file.

    :param kind: "int", "float", "bool", "str", "path" (``shipped:<path>`` names a shipped file), "list[float]",
        "list[int]", "list[str]" (each item one of ``choices``), "mapping" (free-form, checked later by the job, e.g.
        algorithm hyperparameters against the algorithm's signature).
    :param default: the value when the key is absent; ``required=True`` fields have none.
    :param choices: allowed values (for "str"; for each item of "list[str]").
    :param low: inclusive lower bound (numbers; list items).
    :param high: inclusive upper bound.
    :param length: required list length.
    :param nullable: ``null`` is allowed.
    :param doc: one line for ``--help`` and the error message.
    """

    kind: str
    default: Any = None
    required: bool = False
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    length: int | None = None
    nullable: bool = False
    doc: str = ""


@dataclass(frozen=True)
class Section:
    """A nested mapping of fields and sections."""

    fields: dict[str, Field | Section] = field(default_factory=dict)
    doc: str = ""


def _range_text(spec: Field) -> str:
    if spec.low is not None and spec.high is not None:
        return f"allowed values are {spec.low} to {spec.high}"
    return f"it must be >= {spec.low}" if spec.low is not None else f"it must be <= {spec.high}"


def _check_number(value: Any, key: str, spec: Field, integer: bool) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        raise LaunchError(f"'{key}' must be {'an integer' if integer else 'a number'}, got {value!r}")
    if not integer and not math.isfinite(value):
        raise LaunchError(f"'{key}' must be finite, got {value!r}")
    if (spec.low is not None and value < spec.low) or (spec.high is not None and value > spec.high):
        raise LaunchError(f"'{key}' = {value} is out of range: {_range_text(spec)}")
    return int(value) if integer else float(value)


def _resolve_shipped(value: Any, key: str) -> Any:
    """A ``shipped:`` path as its absolute path on this machine; any other value unchanged."""
    if not (isinstance(value, str) and value.startswith(SHIPPED_PREFIX)):
        return value
    try:
        return str(resolve_path(value))
    except ShippedFileError as err:
        raise LaunchError(f"'{key}': {err}") from None


def _check_field(value: Any, key: str, spec: Field) -> Any:
    if value is None:
        if spec.nullable:
            return None
        raise LaunchError(f"'{key}' must not be null ({spec.doc or spec.kind})")
    kind = spec.kind
    if kind == "int":
        return _check_number(value, key, spec, integer=True)
    if kind == "float":
        return _check_number(value, key, spec, integer=False)
    if kind == "bool":
        if not isinstance(value, bool):
            raise LaunchError(f"'{key}' must be true or false, got {value!r}")
        return value
    if kind in ("str", "path"):
        if not isinstance(value, str) or not value:
            raise LaunchError(f"'{key}' must be a non-empty string, got {value!r}")
        if spec.choices is not None and value not in spec.choices:
            allowed = ", ".join(map(str, spec.choices))
            raise LaunchError(f"'{key}' = {value!r} is not allowed; allowed values: {allowed}")
        return _resolve_shipped(value, key) if kind == "path" else value
    if kind in ("list[float]", "list[int]"):
        if not isinstance(value, list | tuple):
            raise LaunchError(f"'{key}' must be a list, got {value!r}")
        if spec.length is not None and len(value) != spec.length:
            raise LaunchError(f"'{key}' must have {spec.length} items, got {len(value)}")
        item = Field("int" if kind == "list[int]" else "float", low=spec.low, high=spec.high)
        return [_check_field(v, f"{key}[{i}]", item) for i, v in enumerate(value)]
    if kind == "list[str]":
        if not isinstance(value, list | tuple):
            raise LaunchError(f"'{key}' must be a list, got {value!r}")
        item = Field("str", choices=spec.choices)
        return [_check_field(v, f"{key}[{i}]", item) for i, v in enumerate(value)]
    if kind == "mapping":
        if not isinstance(value, Mapping):
            raise LaunchError(f"'{key}' must be a mapping, got {value!r}")
        return dict(value)
    raise LaunchError(f"schema error: unknown field kind {kind!r} for '{key}'")


def validate(data: Any, section: Section, prefix: str = "") -> dict[str, Any]:
    """Validate ``data`` against ``section``; returns the resolved mapping with every default filled in."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        where = f"'{prefix[:-1]}'" if prefix else "the top level"
        raise LaunchError(f"{where} must be a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - set(section.fields))
    if unknown:
        allowed = ", ".join(sorted(section.fields))
        raise LaunchError(f"unknown key '{prefix}{unknown[0]}'; allowed keys: {allowed}")
    resolved: dict[str, Any] = {}
    for name, spec in section.fields.items():
        key = f"{prefix}{name}"
        if isinstance(spec, Section):
            resolved[name] = validate(data.get(name), spec, prefix=f"{key}.")
            continue
        if name not in data:
            if spec.required:
                raise LaunchError(f"missing key '{key}' ({spec.doc})")
            resolved[name] = _resolve_shipped(spec.default, key) if spec.kind == "path" else spec.default
            continue
        resolved[name] = _check_field(data[name], key, spec)
    return resolved
