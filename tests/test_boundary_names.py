"""Names that cross a layer boundary, spelt on both sides because the lower layer may not import the other.

robot_grpo (the algorithm) runs on any goal env, so it imports neither envs nor the deploy side; the strings it
shares with them are its own constants. A rename on one side would fail silently (a restarted group keeping its
step count, a reward offset never subtracted, a policy reading the wrong observation keys): these pin them equal.
"""

from __future__ import annotations

from deploy import contract
from envs import object_approach, snapshots
from robot_grpo import buffers, group_reset, policies


def test_the_reset_options_are_named_alike():
    assert group_reset.NEW_EPISODE_OPTION == snapshots.NEW_EPISODE_OPTION
    assert group_reset.SNAPSHOT_OPTION == snapshots.SNAPSHOT_OPTION
    assert callable(getattr(snapshots.SnapshotWrapper, group_reset.SNAPSHOT_METHOD))


def test_the_reward_offset_info_key_is_named_alike():
    assert buffers.REWARD_OFFSET_KEY == object_approach.REWARD_OFFSET_KEY


def test_the_goal_observation_keys_are_named_alike():
    assert policies.OBS_KEYS == contract.OBS_KEYS
