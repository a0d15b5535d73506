"""GroupRolloutBuffer's constructor: settings it would otherwise refuse only at the first update."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from robot_grpo.buffers import GroupRolloutBuffer


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scale_advantages": "mean"}, r"scale_advantages must be one of \('group', 'batch', 'none'\), got 'mean'"),
        ({"gamma": -0.1}, r"gamma must be a discount in \[0, 1\]"),
        ({"gamma": 1.5}, r"gamma must be a discount in \[0, 1\]"),
    ],
)
def test_a_bad_advantage_setting_is_refused_by_the_constructor(kwargs, match):
    box = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    with pytest.raises(ValueError, match=match):
        GroupRolloutBuffer(4, box, box, group_size=2, n_groups=1, **kwargs)


@pytest.mark.parametrize(("scale", "gamma"), [("group", 1.0), ("batch", 0.0), ("none", 0.98)])
def test_every_advantage_scale_and_the_ends_of_the_discount_range_are_accepted(scale, gamma):
    box = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    buffer = GroupRolloutBuffer(4, box, box, group_size=2, n_groups=1, gamma=gamma, scale_advantages=scale)
    assert (buffer.scale_advantages, buffer.gamma) == (scale, gamma)
