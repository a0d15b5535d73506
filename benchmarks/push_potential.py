"""A push probe variant: potential-based shaping toward the pushing pose, rescored under every hindsight goal.

The push study (docs/benchmarks/push-study.md, "Where the goals lie") shows why delayed FetchPush resists: most
goals lie behind the block as seen from the gripper's start, and a gripper that drives at the block pushes it the
other way. The launch file's reaching bonus pays for exactly that drive. This variant pays instead for getting to
where a push would move the block toward the goal, going over the block rather than through it, and for the block's
progress toward the goal:

    Phi(s, g) = -(reach_coef * reach_m(s, g) + goal_coef * |block - g|)
    reach_m   = |grip_xy - pre_xy| + |grip_z - z_target|,  pre_xy = block_xy - behind_m * unit(g_xy - block_xy)
    z_target  = block_z + lift_m while |grip_xy - pre_xy| > near_m, else block_z

and adds ``Phi(s_{t+1}, g) - Phi(s_t, g)`` to each step's reward. That is potential-based shaping (Ng et al. 1999),
which leaves the optimal policy unchanged when the difference is discounted with the learner's gamma; here it is
undiscounted and the last step of an episode gets none (the state after it is not stored), so the invariance is only
approximate. The goal enters Phi, so the buffer rescores it under every relabelled goal. Success and the start-goal
test still read the env's sparse reward. This is a probe of the idea, kept beside the probe: it reads the Fetch object
task's observation layout, which the learning library must not know.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.object_approach import GRIPPER_XYZ, OBJECT_XYZ  # the Fetch object task observation's positions (m)
from robot_grpo.buffers import HindsightGroupBuffer, RelabelledCopies

REACH_COEF = 10.0  # reward per metre of approach to the pushing pose
GOAL_COEF = 10.0  # reward per metre of block progress toward the goal
BEHIND_M = 0.05  # pushing pose: this far behind the block's centre on the goal line (block half-size 2.5 cm)
LIFT_M = 0.06  # height above the block's centre at which the gripper passes over it
NEAR_M = 0.03  # within this (xy) of the pushing pose the gripper may come down to the block's height
MIN_DIRECTION_M = 1e-6  # goal-to-block distance under which the goal line has no direction


def push_potential(obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """Phi(s, g) of the module docstring for flat observations ``[..., D]`` and goals ``[..., 3]`` (metres x coef)."""
    grip, block = obs[..., GRIPPER_XYZ], obs[..., OBJECT_XYZ]
    goal_line = (goal - block)[..., :2]
    unit = goal_line / np.maximum(np.linalg.norm(goal_line, axis=-1, keepdims=True), MIN_DIRECTION_M)
    to_pose_xy = np.linalg.norm(grip[..., :2] - (block[..., :2] - BEHIND_M * unit), axis=-1)
    z_target = block[..., 2] + np.where(to_pose_xy > NEAR_M, LIFT_M, 0.0)
    reach_m = to_pose_xy + np.abs(grip[..., 2] - z_target)
    return -(REACH_COEF * reach_m + GOAL_COEF * np.linalg.norm(block - goal, axis=-1))


def push_shaping(obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """``Phi(s_{t+1}, g) - Phi(s_t, g)`` per step for grouped observations ``[..., T, n_groups, G, D]`` (0 at the
    last step) -> ``[..., T, n_groups, G]`` float32."""
    phi = push_potential(obs, goal)
    shaping = np.zeros_like(phi)
    shaping[..., :-1, :, :] = phi[..., 1:, :, :] - phi[..., :-1, :, :]
    return shaping.astype(np.float32)


class PushPotentialBuffer(HindsightGroupBuffer):
    """The hindsight buffer with :func:`push_shaping` under the original goal and under every relabelled one."""

    def _own_rewards(self) -> np.ndarray:
        obs = self._grouped(self.observations)
        return super()._own_rewards() + push_shaping(obs, obs[..., self.obs_dim - self.goal_dim :])

    def _relabel(
        self, policy: Any, compute_reward: Any, rng: np.random.Generator, normalize_obs: Any
    ) -> RelabelledCopies:
        if normalize_obs is not None:
            raise ValueError(
                "PushPotentialBuffer reads the relabelled goals from the copies' rows: run it without VecNormalize"
            )
        copies = super()._relabel(policy, compute_reward, rng, normalize_obs)
        K = copies.observations.shape[0]
        goals = copies.observations.reshape(K, self.n_steps, self.n_groups, self.group_size, self.obs_dim)
        goals = goals[..., self.obs_dim - self.goal_dim :]  # desired_goal: the last block of each row
        shaping = push_shaping(self._grouped(self.observations)[None], goals)
        return copies._replace(rewards=copies.rewards + shaping)


BUFFER_CLASSES = {"PushPotentialBuffer": PushPotentialBuffer}  # names a probe variant may give rollout_buffer_class
