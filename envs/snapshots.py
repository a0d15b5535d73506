"""Snapshot/restore for any MuJoCo gymnasium env, as a wrapper: the API GRPO's group reset relies on.

``with_snapshots(env)`` gives ``env.snapshot()`` and ``env.reset(options={"snapshot": s})`` to any env whose
``unwrapped`` holds a MuJoCo ``model`` and ``data`` (gymnasium's ``MujocoEnv``: Reacher, InvertedPendulum, ...;
gymnasium-robotics' ``MujocoRobotEnv``: FetchReach, FetchPush, FetchPickAndPlace, FetchSlide, ...). A snapshot
holds everything the next steps depend on:

- physics: MuJoCo's integration state (``mj_getState`` with ``mjSTATE_INTEGRATION``: time, qpos, qvel, act,
  warmstart, ctrl, applied forces, equality activations, mocap poses, userdata, plugin state);
- the task's own state: the attributes named in ``task_attrs`` of the unwrapped env (default ``("goal",)``:
  Fetch's target; an object's pose is physics);
- the env's random generator (``np_random``: the next episode's goal and object draws replay too);
- the state of the wrappers between this one and the env: TimeLimit's step count, and any wrapper that offers
  ``get_episode_state()`` / ``set_episode_state(state)`` (``envs.action_delay.ActionDelay``: the commands in
  flight and this episode's delay);
- the observation and info last returned, which a restore returns again.

``reset(options={"snapshot": s, "new_episode": True})`` restores the same state as the start of a new episode: the
step count (TimeLimit) begins at 0, so a state snapshotted mid-episode gets the env's whole episode length from
there (GRPO's ``restart_fraction``); everything else is the snapshot's.

Derived quantities. After ``mj_step`` MuJoCo's positions-derived arrays (``xpos``, ``site_xpos``, ...) still
describe the start of the last substep, and some envs read them before stepping (Fetch's mocap action reads
``xpos``; Reacher's reward reads body positions). They are not part of the integration state, so both
``snapshot()`` and the restore bring them up to date (``mj_forward`` + ``mj_rnePostConstraint``, which never
change the integration state): the env that was snapshotted and every env restored from it then continue bit for
bit alike. Right after a reset (where group resets take their snapshots) they are already up to date.

Restoring first resets the wrapped env normally (so Monitor, TimeLimit and the other wrappers start an episode),
then overwrites its state; a ``seed`` passed with a snapshot is overruled by it. Snapshots are plain dataclasses
of numpy arrays and dicts (picklable for SubprocVecEnv) and are never modified by a restore. Put this wrapper
outside every wrapper that holds episode state (``make_vec_env(..., wrapper_class=with_snapshots)`` does);
stateful wrappers outside it are not captured.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium.wrappers import TimeLimit

SNAPSHOT_STATE = mujoco.mjtState.mjSTATE_INTEGRATION
DEFAULT_TASK_ATTRS = ("goal",)
SNAPSHOT_OPTION = "snapshot"  # reset option: the snapshot to restore
NEW_EPISODE_OPTION = "new_episode"  # reset option: the snapshot's state starts a new episode (step count 0)
# reset option passed to the wrapped env while a snapshot is restored: its start is overwritten, so a wrapper that
# builds starts (envs.near_goal_starts) skips that work
RESTORING_OPTION = "restoring_snapshot"


@runtime_checkable
class EpisodeState(Protocol):
    """A wrapper with per-episode state (e.g. a delay line) that snapshots must carry."""

    def get_episode_state(self) -> Any: ...

    def set_episode_state(self, state: Any) -> None: ...


@dataclass(frozen=True)
class MujocoSnapshot:
    """One env's full state (see the module docstring); restore it with ``reset(options={"snapshot": s})``."""

    physics: np.ndarray  # mj_getState(mjSTATE_INTEGRATION), float64
    task: dict[str, Any]  # task_attrs of the unwrapped env, deep copies
    rng_state: dict[str, Any]  # np_random.bit_generator.state
    wrappers: tuple[Any, ...]  # one entry per stateful wrapper beneath, outermost first
    observation: Any  # the observation last returned
    info: dict[str, Any]  # the info returned with it


def _wrappers_beneath(env: gym.Env) -> list[gym.Wrapper]:
    chain = []
    while isinstance(env, gym.Wrapper):
        chain.append(env)
        env = env.env
    return chain


def _refresh_derived(model: mujoco.MjModel, data: mujoco.MjData) -> None:
    """Recompute every derived quantity from the integration state (which this leaves untouched)."""
    mujoco.mj_forward(model, data)
    mujoco.mj_rnePostConstraint(model, data)


class SnapshotWrapper(gym.Wrapper):
    """Adds ``snapshot()`` and ``reset(options={"snapshot": s})`` to a MuJoCo env (see the module docstring).

    :param env: an env whose ``unwrapped`` has a ``mujoco.MjModel`` ``model`` and ``mujoco.MjData`` ``data``.
    :param task_attrs: attributes of ``env.unwrapped`` that hold the task's own state (missing ones are skipped).
    """

    def __init__(self, env: gym.Env, task_attrs: Sequence[str] = DEFAULT_TASK_ATTRS) -> None:
        base = env.unwrapped
        model, data = getattr(base, "model", None), getattr(base, "data", None)
        if not isinstance(model, mujoco.MjModel) or not isinstance(data, mujoco.MjData):
            raise ValueError(
                f"with_snapshots needs a MuJoCo env (env.unwrapped.model / .data from the mujoco bindings); "
                f"{type(base).__name__} has none. Other envs must implement snapshot() and "
                "reset(options={'snapshot': s}) themselves"
            )
        beneath = _wrappers_beneath(env)
        if any(isinstance(w, SnapshotWrapper) for w in beneath):
            raise ValueError("this env already has a SnapshotWrapper; wrap it once, outside the stateful wrappers")
        super().__init__(env)
        self._model, self._data = model, data
        self._stateful = [w for w in beneath if isinstance(w, (TimeLimit, EpisodeState))]
        self._task_attrs = tuple(name for name in task_attrs if hasattr(base, name))
        self._state_size = mujoco.mj_stateSize(model, SNAPSHOT_STATE)
        self._last: tuple[Any, dict[str, Any]] | None = None

    @property
    def max_episode_steps(self) -> int | None:
        """Control steps per episode: the shortest TimeLimit beneath (None without one); GRPO reads it."""
        limits = [int(w._max_episode_steps) for w in self._stateful if isinstance(w, TimeLimit)]
        return min(limits) if limits else None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        options = dict(options or {})
        snapshot = options.pop(SNAPSHOT_OPTION, None)
        new_episode = bool(options.pop(NEW_EPISODE_OPTION, False))
        if snapshot is not None:
            options[RESTORING_OPTION] = True
        obs, info = self.env.reset(seed=seed, options=options or None)
        if snapshot is None:
            self._last = (obs, info)
            return obs, info
        return self._restore(snapshot, new_episode)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._last = (obs, info)
        return obs, reward, terminated, truncated, info

    def snapshot(self) -> MujocoSnapshot:
        """Capture the full state now (derived quantities are brought up to date first, see the module doc)."""
        if self._last is None:
            raise RuntimeError("reset the env before taking a snapshot: there is no episode to capture yet")
        base = self.env.unwrapped
        _refresh_derived(self._model, self._data)
        physics = np.empty(self._state_size, dtype=np.float64)
        mujoco.mj_getState(self._model, self._data, physics, SNAPSHOT_STATE)
        return MujocoSnapshot(
            physics=physics,
            task={name: copy.deepcopy(getattr(base, name)) for name in self._task_attrs},
            rng_state=copy.deepcopy(base.np_random.bit_generator.state),
            wrappers=tuple(self._wrapper_state(w) for w in self._stateful),
            observation=copy.deepcopy(self._last[0]),
            info=copy.deepcopy(self._last[1]),
        )

    @staticmethod
    def _wrapper_state(wrapper: gym.Wrapper) -> Any:
        if isinstance(wrapper, TimeLimit):
            return wrapper._elapsed_steps  # gymnasium keeps the step count private; TimeLimit has no accessor
        return wrapper.get_episode_state()

    def _restore(self, snapshot: MujocoSnapshot, new_episode: bool = False) -> tuple[Any, dict[str, Any]]:
        if not isinstance(snapshot, MujocoSnapshot):
            raise TypeError(f"options['snapshot'] must be a MujocoSnapshot from env.snapshot(), got {type(snapshot)}")
        physics = np.asarray(snapshot.physics, dtype=np.float64)
        if physics.shape != (self._state_size,) or len(snapshot.wrappers) != len(self._stateful):
            raise ValueError(
                f"this snapshot comes from a different env ({physics.size} MuJoCo state values and "
                f"{len(snapshot.wrappers)} stateful wrappers; this env has {self._state_size} and "
                f"{len(self._stateful)})"
            )
        base = self.env.unwrapped
        mujoco.mj_setState(self._model, self._data, physics, SNAPSHOT_STATE)
        _refresh_derived(self._model, self._data)
        for name, value in snapshot.task.items():
            setattr(base, name, copy.deepcopy(value))
        base.np_random.bit_generator.state = copy.deepcopy(snapshot.rng_state)
        for wrapper, state in zip(self._stateful, snapshot.wrappers, strict=True):
            if isinstance(wrapper, TimeLimit):
                wrapper._elapsed_steps = 0 if new_episode else state
            else:
                wrapper.set_episode_state(state)
        self._last = (copy.deepcopy(snapshot.observation), copy.deepcopy(snapshot.info))
        return copy.deepcopy(snapshot.observation), copy.deepcopy(snapshot.info)


def with_snapshots(env: gym.Env, task_attrs: Sequence[str] = DEFAULT_TASK_ATTRS) -> SnapshotWrapper:
    """Wrap a MuJoCo gymnasium env so that GRPO can reset groups from one snapshot (see the module docstring).

    Usable as SB3's ``make_vec_env(env_id, n_envs, wrapper_class=with_snapshots)``.
    """
    return SnapshotWrapper(env, task_attrs)
