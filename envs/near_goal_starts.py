"""Start states near success for the Fetch push task: a training-only curriculum of starts (reverse curriculum).

On delayed FetchPush most goals lie behind the block as seen from the gripper's start (docs/benchmarks/push-study.md),
so an on-policy learner rarely sees the push that lands one: the gripper must first go round the block. Reverse
curricula (Florensa et al. 2017, "Reverse Curriculum Generation for Reinforcement Learning") start episodes near the
goal instead and let the starts reach back to the task's own. :class:`NearGoalStarts` does that with a fixed spread
rather than an adaptive one: on a share of fresh resets the block is put on the straight line from its drawn start
to the goal, a uniform fraction of the way back toward its start (never within the success radius plus
``MIN_PUSH_M`` of the goal), and the gripper behind it on that line, at the task's own gripper height, ready to push.
The rest of the resets are the task's own. Every start keeps the task's goal.

Training only: an evaluation must run the task's own starts (``benchmarks/push_probe.py`` evaluates on the env
without it). A reset that restores a snapshot (GRPO's group members) places nothing (``envs.snapshots`` passes
``RESTORING_OPTION``): the snapshot holds the leader's placed start. The draws come from the env's own
``np_random``, which snapshots carry. A goal off the table (FetchPickAndPlace's goals in the air) leaves the reset as
the task drew it.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from envs.snapshots import RESTORING_OPTION

BLOCK_JOINT = "object0:joint"  # gymnasium-robotics Fetch object tasks: the block's free joint (x, y, z, quaternion)
MOCAP = "robot0:mocap"
GRIPPER_QUAT = np.array([1.0, 0.0, 1.0, 0.0])  # Fetch's gripper orientation target (fetch_env._env_setup)
BLOCK_HALF_SIZE_M = 0.025  # FetchPush's block: a 5 cm cube
BEHIND_GAP_M = 0.03  # gripper centre this far behind the block's back face, metres
LIFT_M = 0.1  # the gripper passes over the table this high before it is lowered behind the block, metres
MOVE_CONTROL_STEPS = 10  # control steps per gripper move (Fetch's own setup settles in 10)
MIN_PUSH_M = 0.01  # a placed block lies at least this much beyond the success radius from the goal, metres
ON_TABLE_M = 0.01  # a goal within this height of the block's lies on the table, metres


class NearGoalStarts(gym.Wrapper):
    """Place the block between its drawn start and the goal, the gripper behind it, on a share of fresh resets.

    :param env: a gymnasium-robotics Fetch object task (``MujocoFetchEnv`` with ``has_object``), possibly wrapped by
        its TimeLimit; put this wrapper inside every wrapper that reads the first observation.
    :param share: probability in [0, 1] that a fresh reset starts near the goal.
    """

    def __init__(self, env: gym.Env, share: float) -> None:
        super().__init__(env)
        if not (math.isfinite(share) and 0.0 <= share <= 1.0):
            raise ValueError(f"near-goal start share must be in [0, 1], got {share}")
        fetch = env.unwrapped
        if not getattr(fetch, "has_object", False):
            raise ValueError(f"{type(fetch).__name__} has no object to push: near-goal starts need a Fetch object task")
        self.share = float(share)
        self.placed = 0  # fresh resets that started near the goal (this process)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        if options and options.get(RESTORING_OPTION):  # the snapshot being restored overwrites this start
            return obs, info
        fetch = self.env.unwrapped
        if self.share == 0.0 or fetch.np_random.random() >= self.share:
            return obs, info
        if not self._place(fetch):
            return obs, info
        self.placed += 1
        return fetch._get_obs(), info

    def _place(self, fetch: Any) -> bool:
        """Move the block and the gripper (physics of ``fetch``); False when the drawn start is left as it is."""
        utils, model, data = fetch._utils, fetch.model, fetch.data
        block = utils.get_joint_qpos(model, data, BLOCK_JOINT).copy()
        goal = np.asarray(fetch.goal, dtype=np.float64)
        if abs(goal[2] - block[2]) > ON_TABLE_M:
            return False
        back = block[:2] - goal[:2]  # from the goal toward the drawn start
        length = float(np.linalg.norm(back))
        nearest = fetch.distance_threshold + MIN_PUSH_M
        if length <= nearest:
            return False
        fraction = fetch.np_random.uniform(nearest / length, 1.0)
        placed = goal[:2] + fraction * back
        push = -back / length  # the direction the block must go
        behind = placed - (BLOCK_HALF_SIZE_M + BEHIND_GAP_M) * push
        height = float(fetch.initial_gripper_xpos[2])
        for target in ((*behind, height + LIFT_M), (*behind, height)):
            utils.set_mocap_pos(model, data, MOCAP, np.array(target))
            utils.set_mocap_quat(model, data, MOCAP, GRIPPER_QUAT)
            for _ in range(MOVE_CONTROL_STEPS):
                fetch._mujoco_step(None)
                fetch._step_callback()  # a push task keeps its fingers closed
        block[:2] = placed
        utils.set_joint_qpos(model, data, BLOCK_JOINT, block)
        utils.set_joint_qvel(model, data, BLOCK_JOINT, np.zeros(6))
        fetch._mujoco.mj_forward(model, data)
        return True
