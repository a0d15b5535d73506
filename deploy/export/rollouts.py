"""Sim rollouts for the export checks: observations for calibration and parity, and closed-loop success.

Every policy here is an ``ActFn``: float32 flat observations [B, D] -> actions [B, A], so the torch module
and every onnxruntime variant run through the very same loop (the contract's ``flatten`` of the env's dict
observation, as on the robot).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from deploy.contract import ObservationContract

ActFn = Callable[[np.ndarray], np.ndarray]


def make_env(env_id: str, env_kwargs: dict[str, Any] | None = None) -> gym.Env:
    """Create a registered env (``import envs`` registers ours)."""
    import envs  # noqa: F401  (registers DelayedFetchReach-v0 and PointReach-v0)

    return gym.make(env_id, **(env_kwargs or {}))


def env_contract(env: gym.Env) -> ObservationContract:
    contract = getattr(env.unwrapped, "contract", None)
    if not isinstance(contract, ObservationContract):
        raise ValueError(f"env {env.spec.id if env.spec else env} has no ObservationContract at env.unwrapped.contract")
    return contract


def collect_observations(
    env: gym.Env,
    act: ActFn,
    n_obs: int,
    seed: int,
    action_noise_std: float = 0.0,
) -> np.ndarray:
    """Flat float32 observations [n_obs, D] visited by ``act`` (plus Gaussian action noise) from seeded episodes.

    Episodes use seeds ``seed, seed + 1, ...``; the noise (std in action units) widens the visited states around
    the policy's own trajectories.
    """
    if n_obs < 1:
        raise ValueError(f"n_obs must be >= 1, got {n_obs}")
    contract = env_contract(env)
    rng = np.random.default_rng(seed)
    rows: list[np.ndarray] = []
    episode = 0
    while len(rows) < n_obs:
        obs, _ = env.reset(seed=seed + episode)
        episode += 1
        done = False
        while not done and len(rows) < n_obs:
            flat = contract.flatten(obs)
            rows.append(flat)
            action = act(flat[None])[0].astype(np.float64)
            if action_noise_std > 0:
                action = action + rng.normal(0.0, action_noise_std, size=action.shape)
            obs, _, terminated, truncated, _ = env.step(contract.clip_action(action))
            done = terminated or truncated
    return np.stack(rows).astype(np.float32)


def closed_loop_success(env: gym.Env, act: ActFn, seeds: Sequence[int]) -> np.ndarray:
    """Run one episode per seed with ``act`` in the loop; True where ``is_success`` holds at the episode's end."""
    contract = env_contract(env)
    success = np.zeros(len(seeds), dtype=bool)
    for i, seed in enumerate(seeds):
        obs, _ = env.reset(seed=int(seed))
        done, info = False, {}
        while not done:
            action = act(contract.flatten(obs)[None])[0]
            obs, _, terminated, truncated, info = env.step(np.asarray(action, dtype=np.float64))
            done = terminated or truncated
        success[i] = bool(info.get("is_success", False))
    return success


def on_envs(envs: Sequence[gym.Env], calls: Sequence[Callable[[gym.Env], Any]]) -> list[Any]:
    """Run ``calls`` (each takes an env) on ``envs`` at once, one thread per env: call ``i`` runs on env
    ``i % len(envs)``, in order on it; the results come back in the calls' order. MuJoCo releases the GIL while it
    steps, so the rollouts of an export use every core. An episode depends only on its seed (the env is reseeded and
    its physics reset at every reset), so the results are what one env would give. The first error is raised."""
    if not envs:
        raise ValueError("on_envs needs at least one env")
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def work(slot: int) -> None:
        try:
            for i in range(slot, len(calls), len(envs)):
                results[i] = calls[i](envs[slot])
        except BaseException as exc:  # re-raised on the caller's thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(slot,), daemon=True) for slot in range(min(len(envs), len(calls)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def closed_loop_success_on(envs: Sequence[gym.Env], make_act: Callable[[], ActFn], seeds: Sequence[int]) -> np.ndarray:
    """``closed_loop_success`` over ``envs`` at once (``on_envs``): the seeds in one contiguous part per env, each
    part with its own policy from ``make_act`` (an onnxruntime session with I/O binding is not to be shared between
    threads); the successes in seed order."""
    parts = [list(part) for part in np.array_split(np.asarray(seeds, dtype=np.int64), len(envs)) if len(part)]
    calls = [lambda env, part=part: closed_loop_success(env, make_act(), part) for part in parts]
    return np.concatenate(on_envs(envs[: len(parts)], calls)) if parts else np.zeros(0, dtype=bool)
