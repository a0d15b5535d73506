"""Returns-to-go and group-relative advantages, with the arithmetic spelled out."""

import numpy as np
import pytest

from robot_grpo.advantages import discounted_returns_to_go, group_advantages

# One group of G=3 members, T=3 steps, gamma=0.5. Layout [T, n_groups=1, G=3].
#   member 0: rewards -1, -1,  0   (reaches the goal on the last step)
#   member 1: rewards -1,  0,  0   (reaches it one step earlier)
#   member 2: rewards -1, -1, -1   (never)
REWARDS = np.array([[-1, -1, -1], [-1, 0, -1], [0, 0, -1]], dtype=np.float32)[:, None, :]
GAMMA = 0.5


def test_returns_to_go_hand_computed():
    # R[t] = r[t] + 0.5 * R[t+1]
    # member 0: R2 = 0;  R1 = -1 + 0.5*0 = -1;   R0 = -1 + 0.5*(-1)  = -1.5
    # member 1: R2 = 0;  R1 =  0 + 0.5*0 =  0;   R0 = -1 + 0.5*0     = -1
    # member 2: R2 = -1; R1 = -1 + 0.5*(-1) = -1.5; R0 = -1 + 0.5*(-1.5) = -1.75
    expected = np.array([[-1.5, -1.0, -1.75], [-1.0, 0.0, -1.5], [0.0, 0.0, -1.0]])[:, None, :]
    np.testing.assert_allclose(discounted_returns_to_go(REWARDS, GAMMA), expected)


def test_group_advantages_hand_computed():
    # t=0: R = [-1.5, -1, -1.75], mean = -4.25/3 = -1.416667, deviations [-0.083333, 0.416667, -0.333333],
    #      population var = (0.006944 + 0.173611 + 0.111111) / 3 = 0.097222, std = 0.311805
    #      A = [-0.267261, 1.336306, -1.069045]
    # t=1: R = [-1, 0, -1.5], mean = -0.833333, deviations [-0.166667, 0.833333, -0.666667],
    #      var = (0.027778 + 0.694444 + 0.444444) / 3 = 0.388889, std = 0.623610 -> the same A as t=0
    # t=2: R = [0, 0, -1], mean = -1/3, deviations [1/3, 1/3, -2/3], var = (1/9 + 1/9 + 4/9) / 3 = 2/9,
    #      std = 0.471405, A = [0.707107, 0.707107, -1.414214]
    expected = np.array(
        [[-0.267261, 1.336306, -1.069045], [-0.267261, 1.336306, -1.069045], [0.707107, 0.707107, -1.414214]]
    )[:, None, :]
    out = group_advantages(REWARDS, GAMMA, scale="group")
    np.testing.assert_allclose(out.advantages, expected, atol=1e-5)
    assert not out.zero_std_cells.any() and not out.zero_std_groups.any()


def test_scale_none_only_centres_and_batch_divides_by_one_std():
    centred = group_advantages(REWARDS, GAMMA, scale="none").advantages
    # t=2 deviations from the hand computation above: [1/3, 1/3, -2/3]
    np.testing.assert_allclose(centred[2, 0], [1 / 3, 1 / 3, -2 / 3], atol=1e-6)
    batch = group_advantages(REWARDS, GAMMA, scale="batch").advantages
    np.testing.assert_allclose(batch, centred / centred.std(), atol=1e-5)


def test_outcome_only_scores_every_step_by_the_last_reward():
    # last rewards [0, 0, -1] at every step -> the t=2 advantages above, repeated
    out = group_advantages(REWARDS, GAMMA, outcome_only=True)
    np.testing.assert_allclose(out.advantages, np.tile([0.707107, 0.707107, -1.414214], (3, 1, 1)), atol=1e-5)


def test_zero_variance_group_gives_zeros_and_is_counted():
    # group 0: every member fails at every step (all returns equal) -> zeros, counted;
    # group 1: the REWARDS group above -> non-zero.
    rewards = np.concatenate([-np.ones((3, 1, 3), dtype=np.float32), REWARDS], axis=1)
    out = group_advantages(rewards, GAMMA)
    assert np.all(out.advantages[:, 0] == 0.0)
    assert np.abs(out.advantages[:, 1]).sum() > 0
    np.testing.assert_array_equal(out.zero_std_groups, [True, False])
    assert out.zero_std_cells[:, 0].all() and not out.zero_std_cells[:, 1].any()


def test_mask_truncates_the_episode():
    # valid steps 0..1 only: member 2's reward at t=2 no longer counts; R1 = r1, R0 = r0 + 0.5 r1
    # R0 = [-1.5, -1, -1.5], R1 = [-1, 0, -1]; masked step t=2 -> advantage 0
    mask = np.array([True, True, False])[:, None, None]
    out = group_advantages(REWARDS, GAMMA, scale="none", mask=mask)
    np.testing.assert_allclose(out.returns[:2, 0], [[-1.5, -1, -1.5], [-1, 0, -1]])
    assert np.all(out.advantages[2] == 0)
    np.testing.assert_allclose(out.advantages[1, 0], [-1 / 3, 2 / 3, -1 / 3], atol=1e-6)


def test_leading_axes_are_independent():
    stacked = np.stack([REWARDS, -np.ones_like(REWARDS)])
    out = group_advantages(stacked, GAMMA)
    np.testing.assert_allclose(out.advantages[0], group_advantages(REWARDS, GAMMA).advantages)
    assert out.zero_std_groups.tolist() == [[False], [True]]


@pytest.mark.parametrize("bad", [{"scale": "median"}, {"gamma": 1.5}])
def test_bad_arguments_raise(bad):
    kwargs = {"gamma": GAMMA, **bad}
    with pytest.raises(ValueError):
        group_advantages(REWARDS, **kwargs)
