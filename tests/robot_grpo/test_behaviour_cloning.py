"""Behaviour cloning: demonstrations collected and counted, a cloned mean that acts like its demonstrator, the clone
made GRPO's reference, and clear refusals."""

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env

import envs  # noqa: F401  (registers the ids)
from robot_grpo import GRPO
from robot_grpo.behaviour_cloning import Demonstrations, behaviour_clone, clone_into, collect_demonstrations

N_ENVS = 4
EPISODE_STEPS = 50
REACH_GAIN = 0.5  # share of the gripper-to-goal distance commanded per step (Fetch: 5 cm per unit command)


def reach_expert(obs):
    """Straight at the goal: lands every easy reach."""
    move = REACH_GAIN * (obs["desired_goal"] - obs["observation"][:, :3]) / 0.05
    return np.concatenate([np.clip(move, -1.0, 1.0), np.zeros((len(move), 1))], axis=1)


def never_succeeds(obs):
    return np.zeros((len(obs["desired_goal"]), 4))


@pytest.fixture
def env():
    return make_vec_env("DelayedFetchReach-v0", n_envs=N_ENVS, seed=3, env_kwargs={"delay": 2})


def test_the_demonstrations_count_every_episode_and_step_and_keep_the_successful_rows(env):
    demos = collect_demonstrations(env, reach_expert, episodes=2 * N_ENVS)
    assert demos.episodes == 2 * N_ENVS and demos.env_steps == 2 * N_ENVS * EPISODE_STEPS
    assert demos.successes == demos.episodes  # the reach expert lands all
    obs_dim = env.observation_space["observation"].shape[0] + 6  # with the achieved and desired goals
    assert demos.observations.shape == (demos.successes * EPISODE_STEPS, obs_dim)
    assert demos.actions.shape == (len(demos.observations), 4) and demos.actions.dtype == np.float32


def test_noisy_demonstrations_keep_the_demonstrators_own_command(env):
    env.seed(11)
    clean = collect_demonstrations(env, reach_expert, episodes=N_ENVS, successful_only=False)
    env.seed(11)
    demos = collect_demonstrations(env, reach_expert, episodes=N_ENVS, successful_only=False, action_noise=0.3, seed=1)
    first, later = slice(0, 1), slice(10, 11)  # rows are episode by episode: the first episode's start, step 10
    np.testing.assert_array_equal(demos.observations[first], clean.observations[first])  # the same starts
    assert not np.allclose(demos.observations[later], clean.observations[later])  # the noise moved the arm
    obs_dim = env.observation_space["observation"].shape[0]
    rows = {"observation": demos.observations[:, :obs_dim], "desired_goal": demos.observations[:, -3:]}
    np.testing.assert_allclose(demos.actions, reach_expert(rows), atol=1e-6)  # the label, not what was executed
    with pytest.raises(ValueError, match="action_noise must be a finite std"):
        collect_demonstrations(env, reach_expert, episodes=1, action_noise=-0.1)


def test_a_demonstrator_that_never_succeeds_leaves_nothing_to_clone_and_says_how_to_get_rows(env):
    with pytest.raises(ValueError, match="0 of 4 episodes succeeded.*successful_only=False"):
        collect_demonstrations(env, never_succeeds, episodes=N_ENVS)
    kept = collect_demonstrations(env, never_succeeds, episodes=N_ENVS, successful_only=False)
    assert len(kept.observations) == N_ENVS * EPISODE_STEPS and kept.successes == 0


def test_the_cloned_mean_acts_like_its_demonstrator(env):
    demos = collect_demonstrations(env, reach_expert, episodes=2 * N_ENVS)
    model = GRPO("MultiInputPolicy", env, seed=0, group_size=2, n_groups=2)
    figures = behaviour_clone(model.policy, demos, epochs=40, batch_size=64, learning_rate=3e-3)
    assert figures["mse_last_epoch"] < figures["mse_first_epoch"] / 5
    with th.no_grad():
        mean = model.policy.mean_net(model.policy._normalize(th.as_tensor(demos.observations)))
    assert float((mean - th.as_tensor(demos.actions)).abs().mean()) < 0.1


def test_the_clone_becomes_the_kl_reference_with_the_log_std_asked_for(env):
    demos = collect_demonstrations(env, reach_expert, episodes=N_ENVS)
    model = GRPO("MultiInputPolicy", env, seed=0, group_size=2, n_groups=2, beta=0.1, ref_update_interval=0)
    figures = clone_into(model, demos, log_std=-1.5, epochs=2)
    assert figures["episodes"] == N_ENVS and figures["env_steps"] == N_ENVS * EPISODE_STEPS
    assert th.all(model.policy.log_std == -1.5)
    for name, value in model.policy.state_dict().items():
        assert th.equal(value, model.ref_policy.state_dict()[name]), name


def test_rows_of_the_wrong_size_or_with_nan_are_refused(env):
    model = GRPO("MultiInputPolicy", env, seed=0, group_size=2, n_groups=2)
    wrong = Demonstrations(np.zeros((5, 3), np.float32), np.zeros((5, 4), np.float32), 1, 1, 50)
    with pytest.raises(ValueError, match="collect them on the env the policy trains on"):
        behaviour_clone(model.policy, wrong)
    with pytest.raises(ValueError, match="NaN or inf"):
        Demonstrations(np.full((5, 3), np.nan, np.float32), np.zeros((5, 4), np.float32), 1, 1, 50)
    with pytest.raises(ValueError, match="epochs >= 1"):
        behaviour_clone(model.policy, wrong, epochs=0)


def test_an_actor_drives_while_the_demonstrator_labels_every_state_it_reaches(env):
    env.seed(5)
    demos = collect_demonstrations(env, reach_expert, episodes=N_ENVS, successful_only=False, actor=never_succeeds)
    assert demos.successes == 0 and len(demos.observations) == N_ENVS * EPISODE_STEPS  # the actor's episodes
    obs_dim = env.observation_space["observation"].shape[0]
    grip = demos.observations[:EPISODE_STEPS, :3]
    assert np.abs(grip - grip[0]).max() < 0.01  # the actor held still: the arm stayed near its start (it sags)
    rows = {"observation": demos.observations[:, :obs_dim], "desired_goal": demos.observations[:, -3:]}
    np.testing.assert_allclose(demos.actions, reach_expert(rows), atol=1e-5)  # the demonstrator's labels
    assert np.abs(demos.actions[:, :3]).max() > 0.1


def test_dagger_rounds_add_the_clones_own_states_and_refit_it(env):
    from robot_grpo.behaviour_cloning import dagger_rounds

    demos = collect_demonstrations(env, reach_expert, episodes=N_ENVS)
    model = GRPO("MultiInputPolicy", env, seed=0, group_size=2, n_groups=2)
    clone_into(model, demos, log_std=-2.0, epochs=1)  # a poor clone: one pass
    count = float(model.policy.obs_normalizer.count)
    grown, rounds = dagger_rounds(model, demos, env, reach_expert, rounds=2, episodes=N_ENVS, epochs=20)
    assert len(rounds) == 2 and all(r["episodes"] == N_ENVS for r in rounds)
    assert len(grown.observations) == len(demos.observations) + 2 * N_ENVS * EPISODE_STEPS
    assert grown.env_steps == demos.env_steps + 2 * N_ENVS * EPISODE_STEPS
    assert float(model.policy.obs_normalizer.count) == count + 2 * N_ENVS * EPISODE_STEPS  # new rows merged once
    assert rounds[-1]["mse_last_epoch"] < 0.05
    with pytest.raises(ValueError, match="rounds >= 0 and episodes >= 1"):
        dagger_rounds(model, demos, env, reach_expert, rounds=1, episodes=0)
