"""Group reset: every block of ``group_size`` consecutive envs of a VecEnv starts from one shared snapshot.

Generic over any env that offers the snapshot API: ``snapshot()`` on the env or on one of its wrappers (the
VecEnv finds it with ``get_wrapper_attr``, as ``env_method`` does) and ``reset(options={"snapshot": s})``.
The simulation package provides it for the delayed tasks and, through ``envs.with_snapshots``, for any MuJoCo
gymnasium env; this module knows neither.

GRPO's baseline is the group, so all members must start from the same state with the same goal. Rather than
re-seeding every member alike (fragile: any extra RNG draw desynchronises them), the block leader is reset
normally, its full state is captured with ``snapshot()``, and every member (the leader too) is reset with
``options={"snapshot": s}``. Works with SB3's DummyVecEnv and SubprocVecEnv (snapshots are picklable).

Groups restarted from a state reached mid-episode (``starts``) are reset with ``options={"snapshot": s,
"new_episode": True}``: the env must then count the episode's steps from 0 (``envs.with_snapshots`` and the delayed
tasks do), so every member still runs the whole episode length.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

SNAPSHOT_METHOD = "snapshot"
SNAPSHOT_OPTION = "snapshot"  # reset option: the snapshot to restore (envs.snapshots reads the same names)
NEW_EPISODE_OPTION = "new_episode"  # reset option: the snapshot's state starts a new episode (its step count at 0)


def check_snapshot_support(vec_env: VecEnv) -> None:
    """Raise a ValueError that says how to fix it when the envs offer no ``snapshot()`` for group resets."""
    if vec_env.has_attr(SNAPSHOT_METHOD):
        return
    raise ValueError(
        "GRPO starts every group from one shared snapshot, but this env offers no snapshot(). For a MuJoCo "
        "gymnasium env, wrap it with envs.with_snapshots, e.g. make_vec_env('FetchReach-v4', n_envs=48, "
        "wrapper_class=envs.with_snapshots) (add envs.ActionDelay for actuation delay), or use a registered task "
        "(DelayedFetchReach-v0, DelayedFetchPush-v0, ...). Any other env must offer snapshot() and "
        "reset(options={'snapshot': s}) itself."
    )


def episode_length(vec_env: VecEnv) -> int:
    """Control steps per episode: the smaller of the envs' ``max_episode_steps`` and their spec's limit."""
    limits = []
    with contextlib.suppress(AttributeError):  # envs without their own limit rely on TimeLimit
        limits.append(vec_env.get_attr("max_episode_steps", [0])[0])
    spec = vec_env.get_attr("spec", [0])[0]
    if spec is not None:
        limits.append(spec.max_episode_steps)
    limits = [int(v) for v in limits if v]
    if not limits:
        raise ValueError("cannot read the episode length from the env; pass n_steps (control steps per episode)")
    return min(limits)


def group_reset(
    vec_env: VecEnv, group_size: int, seed: int | None = None, starts: Sequence[Any] = ()
) -> dict[str, np.ndarray] | np.ndarray:
    """Reset ``vec_env`` so that envs [g*G, (g+1)*G) share one start; returns the first observation.

    :param vec_env: the vectorized env; ``num_envs`` must be a multiple of ``group_size``.
    :param group_size: members per group (G).
    :param seed: optional seed for the leaders' fresh reset (env i gets seed + i, as SB3 seeds).
    :param starts: snapshots the last ``len(starts)`` groups start from instead of a fresh reset (states the policy
        reached mid-episode, with their goals: ``GRPO(restart_fraction=...)``); the others start fresh.
    """
    n = vec_env.num_envs
    if group_size < 1 or n % group_size != 0:
        raise ValueError(f"num_envs ({n}) must be a positive multiple of group_size ({group_size})")
    n_groups = n // group_size
    if len(starts) > n_groups:
        raise ValueError(f"{len(starts)} start snapshots for {n_groups} groups; give at most one per group")
    if seed is not None:
        vec_env.seed(seed)
    vec_env.reset()
    fresh = n_groups - len(starts)
    leaders = list(range(0, fresh * group_size, group_size))
    snapshots: list[Any] = vec_env.env_method(SNAPSHOT_METHOD, indices=leaders) if leaders else []
    options = [{SNAPSHOT_OPTION: s} for s in snapshots] + [
        {SNAPSHOT_OPTION: s, NEW_EPISODE_OPTION: True} for s in starts
    ]
    vec_env.set_options([options[i // group_size] for i in range(n)])
    return vec_env.reset()
