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
PICK = "DelayedFetchPickAndPlace-v0"


def settings(**overrides):
    return {**validate_launch({"job": "train", "name": "t"})["train"]["demonstrations"], **overrides}


def test_every_demonstrator_the_schema_names_can_be_built():
    assert set(demonstrators()) == set(DEMONSTRATORS) == set(DEMONSTRATOR_ENVS)


def test_no_episodes_means_no_clone_and_the_policy_is_left_alone():
    model = GRPO("MultiInputPolicy", make_vec_env(PUSH, n_envs=4, seed=0), seed=0, group_size=2, n_groups=2)
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    assert clone_demonstrations(settings(episodes=0), PUSH, None, model, seed=0) is None
    assert all(th.equal(v, model.policy.state_dict()[k]) for k, v in before.items())


@pytest.mark.parametrize(("expert", "env_id"), [("scripted_push", PUSH), ("scripted_pick_and_place", PICK)])
def test_the_clone_is_made_with_the_launch_files_settings(expert, env_id):
    model = GRPO("MultiInputPolicy", make_vec_env(env_id, n_envs=4, seed=0), seed=0, group_size=2, n_groups=2)
    chosen = settings(expert=expert, episodes=DEMONSTRATION_ENVS, epochs=1, log_std=-2.5)
    figures = clone_demonstrations(chosen, env_id, None, model, 0)
    assert figures["episodes"] == DEMONSTRATION_ENVS and figures["env_steps"] == DEMONSTRATION_ENVS * 50
    assert figures["successes"] > DEMONSTRATION_ENVS / 2  # each demonstrator lands most, with the DART noise too
    assert th.all(model.policy.log_std == -2.5)


def test_dagger_rounds_count_their_env_steps_and_leave_the_refitted_clone_as_the_reference():
    model = GRPO("MultiInputPolicy", make_vec_env(PUSH, n_envs=4, seed=0), seed=0, group_size=2, n_groups=2, beta=0.1)
    chosen = settings(episodes=DEMONSTRATION_ENVS, epochs=1, dagger_rounds=1, dagger_episodes=DEMONSTRATION_ENVS)
    chosen["dagger_epochs"] = 1
    figures = clone_demonstrations(chosen, PUSH, None, model, 0)
    assert figures["env_steps"] == 2 * DEMONSTRATION_ENVS * 50  # the demonstrator's and the clone's episodes
    assert figures["episodes"] == DEMONSTRATION_ENVS  # the demonstrator's, as without DAgger
    assert 0.0 <= figures["dagger_success_last_round"] <= 1.0
    for name, value in model.policy.state_dict().items():
        assert th.equal(value, model.ref_policy.state_dict()[name]), name


@pytest.mark.parametrize(
    ("expert", "env_id", "message"),
    [
        ("scripted_push", "DelayedFetchReach-v0", "demonstrates DelayedFetchPush-v0, not DelayedFetchReach-v0"),
        ("scripted_pick_and_place", PUSH, "demonstrates DelayedFetchPickAndPlace-v0, not DelayedFetchPush-v0"),
        ("scripted_push", PICK, "demonstrates DelayedFetchPush-v0, not DelayedFetchPickAndPlace-v0"),
    ],
)
def test_a_demonstrator_is_refused_on_a_task_it_does_not_demonstrate(expert, env_id, message):
    with pytest.raises(LaunchError, match=message):
        validate_launch(
            {
                "job": "train",
                "name": "t",
                "env": {"id": env_id},
                "train": {"demonstrations": {"episodes": 5, "expert": expert}},
            }
        )
