"""The train job's behaviour-cloned start: the schema's demonstrators exist, none asked for is none made, the clone
is made with the launch file's settings, and a demonstrator is refused on a task it does not demonstrate."""

import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env

import envs  # noqa: F401  (registers the ids)
from launch.demonstrations import (
    DEMONSTRATION_ENVS,
    DEMONSTRATOR_ENVS,
    DEMONSTRATORS,
    clone_demonstrations,
    demonstrators,
)
from launch.jobs import LaunchError, validate_launch
from robot_grpo import GRPO

PUSH = "DelayedFetchPush-v0"


def settings(**overrides):
    return {**validate_launch({"job": "train", "name": "t"})["train"]["demonstrations"], **overrides}


def test_every_demonstrator_the_schema_names_can_be_built():
    assert set(demonstrators()) == set(DEMONSTRATORS) == set(DEMONSTRATOR_ENVS)


def test_no_episodes_means_no_clone_and_the_policy_is_left_alone():
    model = GRPO("MultiInputPolicy", make_vec_env(PUSH, n_envs=4, seed=0), seed=0, group_size=2, n_groups=2)
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    assert clone_demonstrations(settings(episodes=0), PUSH, None, model, seed=0) is None
    assert all(th.equal(v, model.policy.state_dict()[k]) for k, v in before.items())


def test_the_clone_is_made_with_the_launch_files_settings():
    model = GRPO("MultiInputPolicy", make_vec_env(PUSH, n_envs=4, seed=0), seed=0, group_size=2, n_groups=2)
    figures = clone_demonstrations(settings(episodes=DEMONSTRATION_ENVS, epochs=1, log_std=-2.5), PUSH, None, model, 0)
    assert figures["episodes"] == DEMONSTRATION_ENVS and figures["env_steps"] == DEMONSTRATION_ENVS * 50
    assert figures["successes"] > DEMONSTRATION_ENVS / 2  # the scripted push lands most, with the DART noise too
    assert th.all(model.policy.log_std == -2.5)


def test_a_demonstrator_is_refused_on_a_task_it_does_not_demonstrate():
    with pytest.raises(LaunchError, match="demonstrates DelayedFetchPush-v0, not DelayedFetchReach-v0"):
        validate_launch(
            {
                "job": "train",
                "name": "t",
                "env": {"id": "DelayedFetchReach-v0"},
                "train": {"demonstrations": {"episodes": 5}},
            }
        )
