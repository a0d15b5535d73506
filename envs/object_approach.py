"""A reaching bonus for the Fetch object tasks: progress toward the object, reported as the goal-free part of the
reward.

Under the sparse reward a push is only scored once the object reaches the goal, and nothing scores getting the
gripper to the object first: a policy that never touches the object never sees a difference between its rollouts.
:class:`ObjectApproachReward` adds ``coef * (closest so far - closest now)`` (reward per metre): the gripper is
paid each time it comes closer to the object than it has been this episode, ``coef * (d_0 - min_t d_t)`` in all.
It never pays less than zero, so moving away later - behind the object to push it, or because a push sent the
object off - costs nothing. (Minus the distance itself was tried first, with the hindsight buffer's distance term:
on delayed FetchPush the policy learned to park the gripper beside the block without pushing it, since every push
moved the block away from the gripper; contacts fell from 40% to 8% of episodes in 450k env steps.)

The bonus is reported in ``info[REWARD_OFFSET_KEY]``: it does not depend on the goal, so a hindsight learner keeps
it when it rescores a step under another goal (``robot_grpo.buffers.REWARD_OFFSET_KEY`` reads the same key).
``info["is_success"]`` is untouched: success is still the object at the goal. The closest distance so far is
episode state, carried by ``envs.with_snapshots`` (``get_episode_state``/``set_episode_state``).

The gripper and object positions are the first two xyz triples of gymnasium-robotics' Fetch observation
(``grip_pos``, ``object_pos``), also behind ``ActionDelay``, which appends to the observation.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

REWARD_OFFSET_KEY = "reward_offset"  # info key of the goal-independent part of a step's reward
GRIPPER_XYZ = slice(0, 3)  # Fetch object task observation (MujocoFetchEnv, has_object): gripper position (m)
OBJECT_XYZ = slice(3, 6)  # Fetch object task observation: object position (m)


def gripper_to_object_m(observation: dict[str, np.ndarray]) -> float:
    """Distance from the gripper to the object in a Fetch object task's observation, metres."""
    state = observation["observation"]
    return float(np.linalg.norm(state[GRIPPER_XYZ] - state[OBJECT_XYZ]))


class ObjectApproachReward(gym.Wrapper):
    """Pays ``coef`` per metre of new closest approach of the gripper to the object (see the module docstring).

    :param env: a Fetch object task (Push, PickAndPlace, Slide), possibly wrapped, with a Dict observation whose
        ``observation`` starts with the gripper and object positions.
    :param coef: reward per metre of approach (> 0).
    """

    def __init__(self, env: gym.Env, coef: float) -> None:
        if not (np.isfinite(coef) and coef > 0):
            raise ValueError(f"coef must be a finite reward per metre > 0, got {coef}; leave the wrapper off for 0")
        space = env.observation_space
        if not isinstance(space, gym.spaces.Dict) or "observation" not in space.spaces:
            raise ValueError(f"ObjectApproachReward needs a Fetch goal env's Dict observation, got {space}")
        if not getattr(env.unwrapped, "has_object", False):
            raise ValueError(
                f"{env.unwrapped!r} is not a Fetch object task (its has_object is not set; FetchReach has no object): "
                "the bonus needs the object position at observation[3:6]"
            )
        super().__init__(env)
        self.coef = float(coef)
        self.closest_m = np.inf  # closest gripper-to-object distance of this episode so far

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self.closest_m = gripper_to_object_m(obs)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        distance_m = gripper_to_object_m(obs)
        bonus = self.coef * max(0.0, self.closest_m - distance_m)
        self.closest_m = min(self.closest_m, distance_m)
        return obs, float(reward) + bonus, terminated, truncated, {**info, REWARD_OFFSET_KEY: bonus}

    def get_episode_state(self) -> float:
        return self.closest_m

    def set_episode_state(self, state: float) -> None:
        self.closest_m = float(state)
