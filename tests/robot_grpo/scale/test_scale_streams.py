"""Random streams of distributed rollouts: a pure function of (seed, update, group, member)."""

from __future__ import annotations

import numpy as np
import pytest

from robot_grpo.scale.streams import group_noise, group_start_seed, member_noise


def test_streams_are_a_function_of_their_keys_only():
    # the same keys give the same draws, whatever was drawn before
    first = member_noise(7, 3, 2, 1, n_steps=5, action_dim=4)
    member_noise(7, 0, 0, 0, n_steps=50, action_dim=4)
    np.testing.assert_array_equal(first, member_noise(7, 3, 2, 1, n_steps=5, action_dim=4))
    assert first.dtype == np.float32 and first.shape == (5, 4)
    assert group_start_seed(7, 3, 2) == group_start_seed(7, 3, 2)


@pytest.mark.parametrize("other", [(8, 3, 2, 1), (7, 4, 2, 1), (7, 3, 1, 1), (7, 3, 2, 0)])
def test_every_key_changes_the_noise(other):
    assert not np.array_equal(member_noise(7, 3, 2, 1, 5, 4), member_noise(*other, 5, 4))


def test_group_starts_differ_between_groups_and_updates():
    seeds = {group_start_seed(0, u, g) for u in range(4) for g in range(6)}
    assert len(seeds) == 24 and all(0 <= s < 2**32 for s in seeds)


def test_group_noise_stacks_the_members():
    noise = group_noise(1, 2, 3, group_size=4, n_steps=6, action_dim=2)
    assert noise.shape == (6, 4, 2)
    for m in range(4):
        np.testing.assert_array_equal(noise[:, m], member_noise(1, 2, 3, m, 6, 2))


def test_negative_keys_are_refused():
    with pytest.raises(ValueError, match="update must be >= 0"):
        group_start_seed(0, -1, 0)
