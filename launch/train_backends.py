"""Where a training run's rollouts happen: one class per ``scale.backend`` (threads here, or Ray workers).

Both build a GRPO model on the same task with the same hyperparameters and give back a model whose checkpoint is
a plain GRPO checkpoint; ``robot-grpo train`` does the rest (evaluation, summary, safety-filter check) alike.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported by the job that trains, not when this module is imported
    import gymnasium as gym

    from robot_grpo.grpo import GRPO

EnvFactory = Callable[[], "gym.Env"]

LAST_GOOD_CHECKPOINT = "last_good_model.zip"  # written by the Ray backend when no rollout worker is left


def group_size_and_groups(hyperparameters: dict[str, Any]) -> tuple[int, int]:
    """(group_size, n_groups) of a run: the launch file's or GRPO's defaults."""
    from robot_grpo.grpo import DEFAULT_GROUP_SIZE, DEFAULT_N_GROUPS

    return (
        int(hyperparameters.get("group_size", DEFAULT_GROUP_SIZE)),
        int(hyperparameters.get("n_groups", DEFAULT_N_GROUPS)),
    )


class ThreadedBackend:
    """The default: every env of a rollout on this machine, stepped on ``env_threads`` threads.

    :param env_factory: builds one env.
    :param scale: the launch file's ``scale`` section (backend threaded).
    :param env_threads: threads that step the envs (same result for any number).
    """

    def __init__(self, env_factory: EnvFactory, scale: dict[str, Any], env_threads: int) -> None:
        del scale
        self.env_factory, self.env_threads = env_factory, env_threads
        self._stack = ExitStack()

    def build_model(self, hyperparameters: dict[str, Any], seed: int, run_dir: Path) -> GRPO:
        from stable_baselines3.common.env_util import make_vec_env

        from robot_grpo.grpo import GRPO
        from robot_grpo.threaded_vec_env import ThreadedVecEnv

        group_size, n_groups = group_size_and_groups(hyperparameters)
        vec_env = make_vec_env(
            self.env_factory,
            n_envs=group_size * n_groups,
            seed=seed,
            vec_env_cls=ThreadedVecEnv,  # MuJoCo releases the GIL: the envs step in parallel, bit-identically
            vec_env_kwargs={"n_threads": self.env_threads},
        )
        self._stack.callback(vec_env.close)
        return GRPO("MultiInputPolicy", vec_env, seed=seed, tensorboard_log=str(run_dir / "tb"), **hyperparameters)

    def describe(self) -> dict[str, Any]:
        return {"backend": "threaded", "env_threads": self.env_threads}

    def close(self) -> None:
        self._stack.close()


class RayBackend:
    """Group rollouts on Ray rollout workers (``robot_grpo.scale``), one CPU each, on a local Ray or a cluster.

    :param env_factory: builds one env on each worker (picklable).
    :param scale: the launch file's ``scale`` section: ``workers`` (None: every CPU) and ``address``.
    :param env_threads: unused (each worker steps its envs on its own core).
    """

    def __init__(self, env_factory: EnvFactory, scale: dict[str, Any], env_threads: int) -> None:
        del env_threads
        self.env_factory, self.scale = env_factory, scale
        self._stack = ExitStack()
        self.pool: Any = None

    def build_model(self, hyperparameters: dict[str, Any], seed: int, run_dir: Path) -> GRPO:
        import ray

        from launch.ray_session import ray_connection
        from robot_grpo.scale.distributed_grpo import DistributedGRPO
        from robot_grpo.scale.pool import RolloutWorkerPool

        self._stack.enter_context(ray_connection(self.scale["address"], self.scale["auth_token_file"]))
        workers = self.scale["workers"] or int(ray.cluster_resources().get("CPU", 1))
        group_size, _ = group_size_and_groups(hyperparameters)
        self.pool = RolloutWorkerPool(self.env_factory, group_size, workers)
        self._stack.callback(self.pool.shutdown)
        return DistributedGRPO(
            "MultiInputPolicy",
            self.pool,
            checkpoint_on_failure=str(run_dir / LAST_GOOD_CHECKPOINT),
            seed=seed,
            tensorboard_log=str(run_dir / "tb"),
            **hyperparameters,
        )

    def describe(self) -> dict[str, Any]:
        lost = [] if self.pool is None else list(self.pool.lost)
        workers = None if self.pool is None else len(self.pool.lost) + self.pool.n_alive
        return {"backend": "ray", "address": self.scale["address"], "workers": workers, "workers_lost": lost}

    def close(self) -> None:
        self._stack.close()


BACKENDS: dict[str, type[ThreadedBackend] | type[RayBackend]] = {"threaded": ThreadedBackend, "ray": RayBackend}
