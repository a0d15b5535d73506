"""DistributedGRPO on a local Ray (2 CPUs, started once for the module): worker count and worker deaths do not
change the weights; no worker left -> a clear error and the last good checkpoint."""

from __future__ import annotations

import functools
import sys

import pytest
import ray
import ray.cloudpickle
import torch as th
from scale_fixtures import (
    N_GROUPS,
    SEED,
    SMALL,
    UPDATE_STEPS,
    G,
    KillWorkerEnv,
    assert_same_weights,
    point_factory,
    train,
)
from scale_fixtures import weights as weights_of
from stable_baselines3.common.env_util import make_vec_env

from robot_grpo import GRPO
from robot_grpo.scale.distributed_grpo import DistributedGRPO
from robot_grpo.scale.pool import NoRolloutWorkersError, RolloutWorkerPool

pytestmark = pytest.mark.usefixtures("local_ray")
ray.cloudpickle.register_pickle_by_value(sys.modules["scale_fixtures"])  # workers cannot import tests/


@pytest.fixture(scope="module")
def one_worker_weights() -> dict[str, th.Tensor]:
    return weights_of(train(n_workers=1))


def test_one_and_two_workers_train_to_identical_weights(one_worker_weights):
    two = train(n_workers=2)
    assert two._n_updates == 2 and two.num_timesteps == 2 * UPDATE_STEPS
    assert_same_weights(one_worker_weights, weights_of(two))
    # and training moved them (identical is not "both untrained"): GRPO with the same seed starts from the same init
    untrained = GRPO("MultiInputPolicy", make_vec_env(point_factory, n_envs=G * N_GROUPS), seed=SEED, **SMALL)
    moved = weights_of(untrained)["mean_net.0.weight"] != one_worker_weights["mean_net.0.weight"]
    assert bool(moved.any())


def test_a_worker_that_dies_mid_group_loses_nothing(one_worker_weights, tmp_path):
    # the worker playing group 1 of the second rollout dies 3 steps in; the group runs again on the other worker
    factory = functools.partial(KillWorkerEnv, update=1, group=1, marker=str(tmp_path / "struck"))
    model = train(n_workers=2, env_factory=factory)
    assert (tmp_path / "struck").exists()
    stats = model.workers.last_stats
    assert stats.workers_lost and stats.groups_rerun >= 1
    assert_same_weights(one_worker_weights, weights_of(model))


def test_no_worker_left_raises_and_keeps_the_last_good_checkpoint(tmp_path):
    # group 0 of the second rollout kills every worker that plays it
    factory = functools.partial(KillWorkerEnv, update=1, group=0, marker=None)
    pool = RolloutWorkerPool(factory, G, 2)
    checkpoint = tmp_path / "last_good.zip"
    model = DistributedGRPO("MultiInputPolicy", pool, seed=SEED, checkpoint_on_failure=str(checkpoint), **SMALL)
    try:
        with pytest.raises(NoRolloutWorkersError, match="all 2 rollout workers died.*saved in"):
            model.learn(2 * UPDATE_STEPS)
    finally:
        pool.shutdown()
    assert model._n_updates == 1 and pool.n_alive == 0
    saved = GRPO.load(str(checkpoint), device="cpu")  # a plain GRPO checkpoint
    assert saved._n_updates == 1 and saved.num_timesteps == model.num_timesteps
    assert_same_weights(weights_of(model), weights_of(saved))


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="need 6 CPUs but the Ray cluster has 2"):
        RolloutWorkerPool(point_factory, G, 6)
    pool = RolloutWorkerPool(point_factory, G, 1)
    try:
        with pytest.raises(ValueError, match="group_size=8"):
            DistributedGRPO("MultiInputPolicy", pool, **{**SMALL, "group_size": 8})
        with pytest.raises(TypeError, match="GRPO.load"):
            DistributedGRPO.load("anything.zip")
        with pytest.raises(ValueError, match="restart_fraction is not supported on Ray workers"):
            DistributedGRPO("MultiInputPolicy", pool, **{**SMALL, "restart_fraction": 0.5})
    finally:
        pool.shutdown()
