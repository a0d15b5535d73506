"""A fake two-node cluster (ray.cluster_utils.Cluster, one CPU per node, loopback): a node that leaves
mid-training takes its rollout worker with it, and training completes with the weights of an undisturbed run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray
from ray.cluster_utils import Cluster
from scale_fixtures import SEED, SMALL, UPDATE_STEPS, G, assert_same_weights, point_factory, train, weights
from stable_baselines3.common.callbacks import BaseCallback

from robot_grpo.scale.distributed_grpo import DistributedGRPO
from robot_grpo.scale.pool import RolloutWorkerPool

NODE_CPUS = 1  # one rollout worker per node


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[tuple[Cluster, object]]:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": NODE_CPUS, "include_dashboard": False})
    second = cluster.add_node(num_cpus=NODE_CPUS)
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    cluster.wait_for_nodes()
    try:
        yield cluster, second
    finally:
        ray.shutdown()
        cluster.shutdown()


class RemoveNodeBeforeRollout(BaseCallback):
    """Takes ``node`` out of ``cluster`` when rollout ``update`` starts (the pool finds out from its calls)."""

    def __init__(self, cluster: Cluster, node: object, update: int) -> None:
        super().__init__()
        self.cluster, self.node, self.update = cluster, node, update
        self.removed = False

    def _on_rollout_start(self) -> None:
        if self.model._n_updates == self.update:
            self.cluster.remove_node(self.node)
            self.removed = True

    def _on_step(self) -> bool:
        return True


def test_removing_a_node_mid_training_gives_the_undisturbed_weights(two_nodes):
    cluster, second = two_nodes
    undisturbed = weights(train(n_workers=2, updates=3))

    pool = RolloutWorkerPool(point_factory, G, 2)
    node_of_worker = [
        ray.get(actor.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()))
        for actor in pool.actors()
    ]
    assert len(set(node_of_worker)) == 2  # one worker on each node; Ray picks which
    on_second_node = node_of_worker.index(second.node_id)
    remove = RemoveNodeBeforeRollout(cluster, second, update=1)
    model = DistributedGRPO("MultiInputPolicy", pool, seed=SEED, **SMALL)
    try:
        model.learn(3 * UPDATE_STEPS, callback=remove)
        assert remove.removed and pool.lost == [on_second_node] and pool.n_alive == 1  # only that node's worker is gone
    finally:
        pool.shutdown()
    assert model._n_updates == 3
    assert_same_weights(undisturbed, weights(model))
