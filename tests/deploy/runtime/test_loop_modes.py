"""loop_modes' own helpers (the modes' behaviour is tested through the controller: test_loop*.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deploy.contract import FLOAT32_MAX
from deploy.runtime.loop_modes import finite_as_float32


@pytest.mark.parametrize(
    ("values", "finite"),
    [
        ([0.1, -2.0, 1e30], True),
        ([FLOAT32_MAX, -FLOAT32_MAX], True),
        ([0.0, math.nan], False),  # a NaN compares False
        ([math.inf], False),
        ([-math.inf, 0.0], False),
        ([3.5e38], False),  # finite as float64, inf as the float32 the policy takes
        ([0.0, -3.5e38], False),
        ([], True),
    ],
)
def test_a_state_is_finite_as_float32_as_numpy_says(values: list[float], finite: bool) -> None:
    assert finite_as_float32(values) is finite
    with np.errstate(over="ignore"):
        assert bool(np.isfinite(np.asarray(values, dtype=np.float64).astype(np.float32)).all()) is finite
