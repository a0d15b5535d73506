"""Opt-in exploration for production-line data collection: the policy's mean action plus Gaussian noise.

GRPO fine-tuning needs groups whose members differ: a deterministic policy repeating a target produces the same
episode every time (zero variance, nothing to learn). With exploration on, each tick proposes
``mean + N(0, (scale * std)^2)`` with the policy's own std (``exp(log_std)`` from the package's EWC anchor) times
``scale`` (:data:`DEFAULT_STD_SCALE`). Fine-tuning trains on the filter's sent command by default, the proposal on
request (``deploy.finetune.dataset``); with ``scale = 1`` the proposal is a sample of the deployed Gaussian policy
and its log-probabilities are exact (up to the exported mean's clipping at the action bounds). The safety filter
still sees every proposal: noise never bypasses the clip, rate limit, workspace barrier or watchdog. Off unless
the run asks for it.

Why half the policy's std by default: on ``benchmarks/continual.py``'s drifted robot (delay 6, gain 1.5, seeds
1-6) the sim-trained policy's full noise makes the line succeed in 2-6% of its attempts and leans on the safety
filter 19-20 times per episode; at half the std the line succeeds in 9-28% of attempts, the filter steps in 1.2-3.9
times per episode, and fine-tuning on those logs adapts faster (median new-condition success on unseen seeds 4-6:
0.97 against 0.78; ``continual_explore_*`` in docs/benchmarks/continual-study.md).

numpy only (robot side).
"""

from __future__ import annotations

from typing import Any

import numpy as np

LOG_STD_KEY = "log_std"
DEFAULT_STD_SCALE = 0.5  # the line's noise std as a multiple of the policy's own (see the module docstring)


class GaussianExploration:
    """Wrap a policy (flat float32 [B, D] -> [B, A]) so it proposes its mean plus Gaussian noise.

    :param policy: the deterministic policy (an inference backend or a ``PolicySlot``).
    :param std: noise std per action dimension, shape ``(action_dim,)`` (command units), or one value for all.
    :param action_dim: the policy's action size (``contract.action_dim``); ``std`` must fit it.
    :param seed: seed of the noise generator (runs are reproducible).
    """

    def __init__(self, policy: Any, std: np.ndarray | float, action_dim: int, seed: int = 0) -> None:
        std = np.asarray(std, dtype=np.float64)
        if std.shape not in ((), (action_dim,)):
            raise ValueError(
                f"exploration std has shape {std.shape}, the policy's action has {action_dim} dimension(s); give "
                f"one std per action dimension, shape ({action_dim},), or a single value for all"
            )
        if not np.all(np.isfinite(std)) or np.any(std < 0):
            raise ValueError(f"exploration std must be finite and >= 0 (command units), got {std}")
        self.policy = policy
        self.std = std
        self._rng = np.random.default_rng(seed)

    def __call__(self, obs_flat: np.ndarray) -> np.ndarray:
        mean = np.asarray(self.policy(obs_flat))
        noise = self._rng.normal(0.0, 1.0, size=mean.shape) * self.std
        return (mean + noise).astype(np.float32)


def policy_std(package: Any) -> np.ndarray:
    """The deployed policy's action std, ``exp(log_std)``, from the package's EWC anchor (``ewc.npz``)."""
    anchor = package.load_ewc_anchor()
    if anchor is None or LOG_STD_KEY not in anchor["params"]:
        raise ValueError(
            f"package {package.folder} has no {LOG_STD_KEY!r} in its ewc.npz, so its policy std is unknown; "
            "re-export it with robot-grpo export (which ships the EWC anchor) or give an explicit std"
        )
    return np.exp(np.asarray(anchor["params"][LOG_STD_KEY], dtype=np.float64))


def line_exploration(
    policy: Any, package: Any, std_scale: float = DEFAULT_STD_SCALE, seed: int = 0
) -> GaussianExploration:
    """The production line's exploration: ``policy``'s mean plus noise of ``std_scale`` times the package's std.

    :param policy: the deterministic policy (an inference backend).
    :param package: the running policy package (its ``ewc.npz`` holds the policy's ``log_std``, its contract the
        action size that std must fit).
    :param std_scale: the noise std as a multiple of the policy's std (> 0; 1 = the policy's own Gaussian).
    :param seed: seed of the noise generator.
    """
    if not (np.isfinite(std_scale) and std_scale > 0):
        raise ValueError(
            f"explore_std_scale must be a finite number > 0 (a multiple of the policy's std), got {std_scale}; "
            "to run without noise, turn explore off"
        )
    std, action_dim = policy_std(package), package.contract.action_dim
    if std.shape not in ((), (action_dim,)):
        raise ValueError(
            f"package {package.folder}: {LOG_STD_KEY!r} in its ewc.npz has shape {std.shape}, its contract's action "
            f"has {action_dim} dimension(s), so the EWC anchor does not belong to this policy; re-export the package "
            "with robot-grpo export"
        )
    return GaussianExploration(policy, std_scale * std, action_dim, seed=seed)
