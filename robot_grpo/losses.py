"""Loss of the GRPO update (pure torch functions of log-probabilities, all in nats).

- clipped surrogate (PPO / DAPO): min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A), rho = pi / pi_old;
- dual clip (Ye et al. 2020, https://arxiv.org/abs/1912.09729): for A < 0 the surrogate is also bounded below by
  c * A. PPO's min leaves rho * A unbounded when A < 0: on a row whose action lies far from the mean (hindsight rows
  of delayed FetchPush, old log-prob down to -1,800 nats) a small move of the mean multiplies rho by e^47, and the
  gradient that pushes the action's probability down pushes the mean further out: the surrogate reached -9e18 and
  the gradient norm overflowed (seed 1000, update 138). Beyond rho = c such a row has no gradient;
- the log-ratio is capped at ``LOG_RATIO_MAX`` (the cap of the hindsight IS weights) before the exponential,
  so rho stays finite in float32 (a row past the cap has no gradient, as a clipped one);
- k3 KL estimator (Schulman, "Approximating KL divergence"): for samples a ~ q and r = p(a) / q(a),
  k3 = r - 1 - log r >= 0, an unbiased, low-variance estimate of KL(q || p) that is exactly 0 when p == q (its log r
  capped as the surrogate's);
- action-bound penalty (rl_games' ``bounds_loss``): the squared distance of the Gaussian's mean outside the action
  box. The env clips every action to the box, so a mean outside it changes nothing the env sees while the
  surrogate keeps moving it, and the noise around it no longer explores (delayed FetchPush, 150k env steps: 4-5% of
  the mean components at visited states were outside the box, none with ``bound_coef=1``;
  docs/benchmarks/push-study.md, source ``push_probe``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

import torch as th

from robot_grpo.hindsight import LOG_RATIO_MAX  # nats: rho <= e^30 ~ 1e13, far past any clip, finite squared
from robot_grpo.policies import gaussian_log_prob

if TYPE_CHECKING:
    from robot_grpo.buffers import GroupRolloutSamples
    from robot_grpo.policies import GoalGaussianPolicy


def k3_kl(log_q: th.Tensor, log_p: th.Tensor) -> th.Tensor:
    """Per-sample k3 estimate of KL(q || p) from log q(a) and log p(a) of the same samples (nats, >= 0).

    ``log r`` is capped at ``LOG_RATIO_MAX`` before the exponential, in both of its terms: a sample the reference
    finds far likelier than the policy then counts e^30 - 31 and has no gradient (as a capped surrogate row). Without
    the cap a policy with a small std overflowed: behaviour-cloned push, log-std -3 (std 0.05), a mean 0.7 off the
    reference's on one row gave r = e^98, kl_ref = inf at update 5 (and at log-std -2.3 an infinite gradient)."""
    log_r = (log_p - log_q).clamp(max=LOG_RATIO_MAX)
    return th.exp(log_r) - 1.0 - log_r


def clipped_surrogate(
    ratio: th.Tensor, advantages: th.Tensor, clip_low: float, clip_high: float, dual_clip: float | None = None
) -> th.Tensor:
    """Per-sample clipped objective (to maximize); asymmetric clip range [1 - clip_low, 1 + clip_high].

    :param dual_clip: c > 1: rows with a negative advantage are bounded below by ``c * A`` (None: off).
    """
    surrogate = th.min(ratio * advantages, th.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages)
    if dual_clip is None:
        return surrogate
    return th.where(advantages < 0, th.max(surrogate, dual_clip * advantages), surrogate)


def action_bound_penalty(mean: th.Tensor, low: th.Tensor, high: th.Tensor) -> th.Tensor:
    """Mean over the batch of sum_d (relu(mu_d - high_d)^2 + relu(low_d - mu_d)^2): 0 inside the box (actions^2).

    :param mean: the Gaussian's means ``[B, action_dim]``.
    :param low: lower action bounds ``[action_dim]``.
    :param high: upper action bounds ``[action_dim]``.
    """
    excess = th.relu(mean - high) + th.relu(low - mean)  # at most one of the two is non-zero per component
    return excess.square().sum(-1).mean()


def clip_fraction(ratio: th.Tensor, clip_low: float, clip_high: float) -> th.Tensor:
    """Share of samples whose ratio lies outside the clip range."""
    return ((ratio < 1.0 - clip_low) | (ratio > 1.0 + clip_high)).float().mean()


class ExtraLossTerm(Protocol):
    """A pluggable loss term (e.g. an EWC penalty): ``term(policy) -> scalar tensor``, logged as train/<name>."""

    name: str

    def __call__(self, policy: GoalGaussianPolicy) -> th.Tensor: ...


class GRPOLoss(NamedTuple):
    """One minibatch's loss: ``terms`` holds every named term (all scalars) and ``terms["loss"]``, their sum."""

    terms: dict[str, th.Tensor]  # policy_gradient_loss, entropy, kl_ref (beta > 0), bound_loss, extra/<name>, loss
    ratio: th.Tensor  # [B] pi / pi_old
    approx_kl: th.Tensor  # scalar k3 estimate of KL(pi_old || pi) on pi_old's samples


def grpo_loss(
    policy: GoalGaussianPolicy,
    batch: GroupRolloutSamples,
    clip_low: float,
    clip_high: float,
    beta: float,
    ent_coef: float,
    extra_loss_terms: Sequence[ExtraLossTerm] = (),
    bound_coef: float = 0.0,
    dual_clip: float | None = None,
) -> GRPOLoss:
    """loss = -mean(w * clipped surrogate) - ent_coef * entropy + beta * KL(pi || pi_ref)
    + bound_coef * action-bound penalty + sum of extra terms.

    The reference KL is computed only when ``beta > 0`` and the bound penalty only when ``bound_coef > 0``: a term
    that is off is not computed at all (0 * inf would still make the loss NaN when the reference is far away).
    """
    mean, log_std = policy.distribution_params(batch.observations)
    log_prob, entropy = gaussian_log_prob(mean, log_std, batch.actions), policy.entropy()
    ratio = th.exp((log_prob - batch.old_log_prob).clamp(max=LOG_RATIO_MAX))
    surrogate = clipped_surrogate(ratio, batch.advantages, clip_low, clip_high, dual_clip)
    policy_loss = -(batch.weights * surrogate).mean()
    terms = {"policy_gradient_loss": policy_loss, "entropy": entropy}
    loss = policy_loss - ent_coef * entropy
    if beta > 0:
        terms["kl_ref"] = k3_kl(log_prob, batch.ref_log_prob).mean()  # KL(pi || pi_ref) on pi_old's samples
        loss = loss + beta * terms["kl_ref"]
    if bound_coef > 0:
        terms["bound_loss"] = action_bound_penalty(mean, policy.action_low, policy.action_high)
        loss = loss + bound_coef * terms["bound_loss"]
    for term in extra_loss_terms:
        terms[f"extra/{term.name}"] = term(policy)
        loss = loss + terms[f"extra/{term.name}"]
    terms["loss"] = loss
    return GRPOLoss(terms, ratio, k3_kl(batch.old_log_prob, log_prob).mean())
