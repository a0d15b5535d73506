"""A reach package on a push robot and a push package on a reach robot: refused by one rule, with a named error.

The rule (deploy.runtime.compatibility.block_mismatches): a robot whose spec has a block_tracker sends the block in its
state, so its packages must read one (contract format 2); a package that reads a block needs a robot that sends one.
"""

from __future__ import annotations

import pytest

from deploy.contract import fetch_push_contract, fetch_reach_contract
from deploy.robot_spec import DEFAULT_SIM_SPEC, load_robot_spec
from deploy.runtime.compatibility import (
    BLOCK_NOT_READ,
    BLOCK_TRACKER_MISSING,
    CompatibilityError,
    check_compatibility,
    mismatches,
)
from deploy.runtime.safety import SafetyLimits

REACH_SPEC = load_robot_spec(DEFAULT_SIM_SPEC)
PUSH_SPEC = load_robot_spec(DEFAULT_SIM_SPEC.with_name("sim_fetch_push.yaml"))


def test_matching_pairs_are_accepted() -> None:
    assert mismatches(REACH_SPEC, fetch_reach_contract(2), (2, 2), "reach") == []
    assert mismatches(PUSH_SPEC, fetch_push_contract(2), (2, 2), "push") == []


@pytest.mark.parametrize(
    ("spec", "contract", "name"),
    [(REACH_SPEC, fetch_push_contract(2), BLOCK_TRACKER_MISSING), (PUSH_SPEC, fetch_reach_contract(2), BLOCK_NOT_READ)],
)
def test_a_block_mismatch_is_refused_by_name_even_with_the_override_in_the_safety_filter(spec, contract, name) -> None:
    with pytest.raises(CompatibilityError, match=f"^{name}: "):
        check_compatibility(spec, contract, (2, 2), "pkg")
    assert check_compatibility(spec, contract, (2, 2), "pkg", override=True)[0].startswith(name)
    with pytest.raises(ValueError, match=name):  # the filter cannot plan for a state layout it does not know
        SafetyLimits.from_spec(spec, contract)
