"""Loss pieces of the GRPO update (pure torch functions of log-probabilities, all in nats).

- clipped surrogate (PPO / DAPO): min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A), rho = pi / pi_old;
- k3 KL estimator (Schulman, "Approximating KL divergence"): for samples a ~ q and r = p(a) / q(a),
  k3 = r - 1 - log r >= 0, an unbiased, low-variance estimate of KL(q || p) that is exactly 0 when p == q.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch as th

if TYPE_CHECKING:
    from robot_grpo.policies import GoalGaussianPolicy


def k3_kl(log_q: th.Tensor, log_p: th.Tensor) -> th.Tensor:
    """Per-sample k3 estimate of KL(q || p) from log q(a) and log p(a) of the same samples (nats, >= 0)."""
    log_r = log_p - log_q
    return th.exp(log_r) - 1.0 - log_r


def clipped_surrogate(ratio: th.Tensor, advantages: th.Tensor, clip_low: float, clip_high: float) -> th.Tensor:
    """Per-sample clipped objective (to maximize); asymmetric clip range [1 - clip_low, 1 + clip_high]."""
    return th.min(ratio * advantages, th.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages)


def clip_fraction(ratio: th.Tensor, clip_low: float, clip_high: float) -> th.Tensor:
    """Share of samples whose ratio lies outside the clip range."""
    return ((ratio < 1.0 - clip_low) | (ratio > 1.0 + clip_high)).float().mean()


class ExtraLossTerm(Protocol):
    """A pluggable loss term (e.g. an EWC penalty): ``term(policy) -> scalar tensor``, logged as train/<name>."""

    name: str

    def __call__(self, policy: GoalGaussianPolicy) -> th.Tensor: ...
