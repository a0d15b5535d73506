"""The JSON side of the observation/action contract: which keys a manifest's ``contract`` section has, and the
JSON types of their values, checked before :meth:`deploy.contract.ObservationContract.from_dict` reads any of them.

JSON's ``true`` is not a dimension and ``"2"`` is not an integer: without these checks ``int("2")`` and
``float(True)`` would quietly accept them, and a misspelt key would quietly take its default. numpy-free, stdlib only
(shared by the training side and the robot side, like the contract itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any

#: Every key :meth:`ObservationContract.to_dict` writes, in its order.
CONTRACT_KEYS = (
    "format_version",
    "name",
    "state_fields",
    "action_dim",
    "history_len",
    "history_order",
    "goal_dim",
    "action_scale_m",
    "action_low",
    "action_high",
    "control_period_s",
    "position_slice",
    "block_slice",
    "flat_layout",
    "flat_dim",
)
OPTIONAL_CONTRACT_KEYS = ("history_order", "block_slice", "flat_layout", "flat_dim")  # checked when present
# (block_slice: only a format-2 contract, one whose state carries a block, has it)
INTEGER_KEYS = ("action_dim", "history_len", "goal_dim")
NUMBER_KEYS = ("action_scale_m", "action_low", "action_high", "control_period_s")


def is_int(value: Any) -> bool:
    """An integer that is not a bool (JSON ``true`` is not a dimension)."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, Real) and not isinstance(value, bool)


def check_contract_dict(data: Any) -> None:
    """Raise ``ValueError`` naming the key on an unknown or missing key or a value of the wrong JSON type."""
    if not isinstance(data, Mapping):
        raise ValueError(f"the contract must be a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(CONTRACT_KEYS))
    if unknown:
        raise ValueError(f"unknown contract key(s) {unknown}; a contract has the keys {list(CONTRACT_KEYS)}")
    missing = [key for key in CONTRACT_KEYS if key not in data and key not in OPTIONAL_CONTRACT_KEYS]
    if missing:
        raise ValueError(f"the contract is missing {missing}; re-export the policy")
    if not isinstance(data["name"], str) or not data["name"]:
        raise ValueError(f"contract name must be a non-empty string, got {data['name']!r}")
    state_fields = data["state_fields"]
    if not isinstance(state_fields, list) or not all(
        isinstance(f, list) and len(f) == 2 and isinstance(f[0], str) and is_int(f[1]) for f in state_fields
    ):
        raise ValueError(f"contract state_fields must be a list of [name, size] pairs, got {state_fields!r}")
    position = data["position_slice"]
    if not (isinstance(position, list) and len(position) == 2 and all(is_int(v) for v in position)):
        raise ValueError(f"contract position_slice must be a [start, stop] pair of integers, got {position!r}")
    for key in INTEGER_KEYS:
        if not is_int(data[key]):
            raise ValueError(f"contract {key} must be an integer, got {data[key]!r}")
    for key in NUMBER_KEYS:
        if not is_number(data[key]):
            raise ValueError(f"contract {key} must be a number, got {data[key]!r}")
