"""The push cell's env: the training task's observation bit for bit without tracker noise; the tracker's noise and
rate from the spec; the contract and spec the exporter and the runtime need."""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest
import yaml

import envs  # noqa: F401  (registers the ids)
from deploy.robot_spec import robot_spec_from_dict
from envs.delayed_fetch_push import DEFAULT_PUSH_SPEC, DelayedFetchPushEnv

STEPS = 50


def test_without_tracker_noise_it_is_the_training_task_bit_for_bit() -> None:
    train = gym.make("DelayedFetchPush-v0")
    cell = gym.make("DelayedFetchPushRobot-v0", block_noise_std_m=0.0)
    rng = np.random.default_rng(0)
    for seed in (0, 7):
        a, _ = train.reset(seed=seed)
        b, _ = cell.reset(seed=seed)
        assert all(a[k].tobytes() == b[k].tobytes() for k in a)
        for _ in range(STEPS):
            action = rng.uniform(-1.0, 1.0, 4)
            a, ra, _, ta, ia = train.step(action)
            b, rb, _, tb, ib = cell.step(action)
            assert all(a[k].tobytes() == b[k].tobytes() for k in a)
            assert (ra, ta, ia["is_success"]) == (rb, tb, ib["is_success"])


def test_the_tracker_adds_the_spec_noise_to_the_block_and_derives_the_relative_position() -> None:
    env = DelayedFetchPushEnv()  # the push spec: 1 mm per axis
    obs, _ = env.reset(seed=3)
    true_block = env.block_position_m
    reported = obs["observation"][3:6]
    assert 0 < np.abs(reported - true_block).max() < 0.006  # within 6 sigma of 1 mm, never exact
    assert obs["achieved_goal"].tolist() == reported.tolist()
    assert np.array_equal(obs["observation"][6:9], reported - obs["observation"][0:3])


def test_a_slower_tracker_holds_its_reading_between_readings() -> None:
    data = yaml.safe_load(DEFAULT_PUSH_SPEC.read_text())
    data["block_tracker"]["rate_hz"] = 12.5  # a reading every 2 control steps
    env = DelayedFetchPushEnv(spec=robot_spec_from_dict(data))
    readings = [env.reset(seed=1)[0]["observation"][3:6].copy()]
    for _ in range(4):
        readings.append(env.step(np.zeros(4))[0]["observation"][3:6].copy())
    same = [a.tobytes() == b.tobytes() for a, b in itertools.pairwise(readings)]
    assert same == [True, False, True, False]  # held one step, then a fresh (noisy) reading


def test_a_spec_without_a_tracker_is_refused() -> None:
    with pytest.raises(ValueError, match="no block_tracker section"):
        DelayedFetchPushEnv(spec=DEFAULT_PUSH_SPEC.with_name("sim_fetch.yaml"))
