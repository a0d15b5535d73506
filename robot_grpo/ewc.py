"""Elastic weight consolidation (EWC) for a Gaussian policy: Fisher information, penalty term, online update.

Kirkpatrick et al. 2017 ("Overcoming catastrophic forgetting in neural networks") and the online variant of
Schwarz et al. 2018 ("Progress & Compress"). torch only: this module knows no env and no deploy code.

Fisher (diagonal, averaged over states s from the task the policy was trained on). For a Gaussian head
pi(a|s) = N(mu_theta(s), diag(sigma_theta(s)^2)) the true Fisher E_{a~pi}[grad log pi grad log pi^T] has a
closed form per state:

    F(s) = J_mu^T diag(1 / sigma^2) J_mu + 2 J_logsigma^T J_logsigma

so its diagonal is, per parameter i, sum_k (d mu_k / d theta_i)^2 / sigma_k^2 + 2 (d log sigma_k / d theta_i)^2.
For a state-independent log-std parameter that is 2 per action dimension. ``gaussian_fisher_diagonal`` computes
it exactly with per-state Jacobians (torch.func); ``sampled_fisher_diagonal`` estimates the same quantity with
actions sampled from the policy (used to check the closed form, and for heads that have none).

Penalty (a pluggable loss term: GRPO adds ``term(policy)`` to its loss and logs it under the term's name):

    ewc(theta) = lambda / 2 * sum_i F_i (theta_i - theta*_i)^2

Online EWC: after a fine-tuning round, ``consolidate`` sets F <- gamma * F_old + F_new and theta* <- theta, and
counts the round. This module holds the state in memory only. Its file (a policy package's ``ewc.npz``) has one
reader and writer, ``deploy.ewc_file`` (numpy only, so the robot reads it without torch): build
``EWCPenalty(state.params, state.fisher, lam, gamma, state.consolidations)`` from what it reads, and write
``anchor_arrays()`` with ``consolidations``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, jacrev, vmap

# Defaults chosen with benchmarks/continual.py (docs/benchmarks/continual-study.md): on a drifted robot (delay 6 /
# gain 1.5, and delay 3 / gain 1.8) lambda = 30 reached >= 0.93 success on the new condition from the third round
# on while keeping >= 97% of the original success and causing no safety-filter interventions; lambda = 10 adapted
# a little faster but lost up to 7 points of original success on one condition; 1000 stopped adaptation (0.65);
# plain fine-tuning drove into the workspace barrier (4-9 interventions per episode by round 6).
# gamma 0.9 vs 1.0 made no measurable difference over 6 rounds; 0.9 lets very old Fisher terms fade so a robot
# that keeps drifting is not frozen forever.
DEFAULT_EWC_LAMBDA = 30.0
DEFAULT_EWC_GAMMA = 0.9
SAMPLED_ROWS_PER_CALL = 8192  # (state, action) rows per vmap call of the sampled Fisher
DEFAULT_FISHER_CHUNK = 256  # states per vmap call: bounds the Jacobian memory (chunk x action_dim x n_params)

MeanLogStdFn = Callable[[Any], tuple[torch.Tensor, torch.Tensor]]
"""obs batch (tensor or dict of tensors, leading batch axis) -> (mean [B, A], log_std [B, A] or [A])."""


# Fisher information ---------------------------------------------------------------------------------------
def trainable_parameters(module: nn.Module) -> dict[str, torch.Tensor]:
    """The parameters EWC protects: every ``requires_grad`` parameter, by its ``named_parameters`` name."""
    return {name: p for name, p in module.named_parameters() if p.requires_grad}


def _batch_size(obs: Any) -> int:
    if isinstance(obs, Mapping):
        return int(next(iter(obs.values())).shape[0])
    return int(obs.shape[0])


def _repeat(obs: Any, times: int) -> Any:
    if isinstance(obs, Mapping):
        return {key: value.repeat_interleave(times, 0) for key, value in obs.items()}
    return obs.repeat_interleave(times, 0)


def _slice(obs: Any, start: int, stop: int) -> Any:
    if isinstance(obs, Mapping):
        return {key: value[start:stop] for key, value in obs.items()}
    return obs[start:stop]


class _Head(nn.Module):
    """Wraps ``module`` so that ``functional_call`` can reparametrize it while ``fn`` is called."""

    def __init__(self, module: nn.Module, fn: MeanLogStdFn) -> None:
        super().__init__()
        self.module = module
        self._fn = fn

    def forward(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return self._fn(obs)


def gaussian_fisher_diagonal(
    module: nn.Module,
    mean_log_std: MeanLogStdFn,
    obs: Any,
    chunk_size: int = DEFAULT_FISHER_CHUNK,
) -> dict[str, torch.Tensor]:
    """Closed-form diagonal Fisher of a Gaussian policy, averaged over the states in ``obs``.

    :param module: the policy; its ``requires_grad`` parameters are the ones measured.
    :param mean_log_std: computes (mean, log_std) of the action distribution from a batch of observations using
        ``module``'s parameters (e.g. ``policy.mean_log_std``). Must be free of side effects (the module is put in
        eval mode while it runs, so a running observation normalizer does not update).
    :param obs: states, a tensor [N, D] or a dict of tensors with leading axis N.
    :param chunk_size: states per vectorized Jacobian call.
    :return: parameter name -> tensor of the parameter's shape, >= 0.
    """
    n = _batch_size(obs)
    if n < 1:
        raise ValueError("the Fisher needs at least one state; pass a batch of observations from the task")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1 state, got {chunk_size}")
    params = {k: v.detach() for k, v in trainable_parameters(module).items()}
    if not params:
        raise ValueError("the module has no trainable parameters to measure")
    head = _Head(module, mean_log_std)
    prefixed = {f"module.{k}": v for k, v in params.items()}

    def one_state(p: dict[str, torch.Tensor], single_obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        batched = {k: v.unsqueeze(0) for k, v in single_obs.items()} if isinstance(single_obs, Mapping) else None
        mean, log_std = functional_call(head, p, (batched if batched is not None else single_obs.unsqueeze(0),))
        mean = mean.reshape(-1)
        return mean, torch.broadcast_to(log_std.reshape(1, -1), (1, mean.shape[0])).reshape(-1)

    jac_fn = vmap(jacrev(one_state), in_dims=(None, 0))
    value_fn = vmap(one_state, in_dims=(None, 0))
    fisher = {k: torch.zeros_like(v) for k, v in params.items()}
    was_training = module.training
    module.train(False)
    try:
        for start in range(0, n, chunk_size):
            chunk = _slice(obs, start, min(start + chunk_size, n))
            jac_mean, jac_log_std = jac_fn(prefixed, chunk)  # name -> [B, A, *param_shape]
            _, log_std = value_fn(prefixed, chunk)  # [B, A]
            inv_var = torch.exp(-2.0 * log_std.detach())
            for name in params:
                j_mu, j_ls = jac_mean[f"module.{name}"], jac_log_std[f"module.{name}"]
                w = inv_var.reshape(inv_var.shape + (1,) * (j_mu.dim() - 2))
                fisher[name] += (w * j_mu.square() + 2.0 * j_ls.square()).sum(dim=(0, 1))
    finally:
        module.train(was_training)
    return {k: v / n for k, v in fisher.items()}


def sampled_fisher_diagonal(
    module: nn.Module,
    mean_log_std: MeanLogStdFn,
    obs: Any,
    n_actions: int,
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """Monte-Carlo true Fisher: E_s E_{a ~ pi(.|s)} [(d log pi(a|s) / d theta)^2], diagonal.

    Per-sample gradients of the log-likelihood of ``n_actions`` actions drawn from the policy at every state.
    Unbiased; its relative error shrinks as 1 / sqrt(N * n_actions).
    """
    n = _batch_size(obs)
    if n < 1 or n_actions < 1:
        raise ValueError(f"need >= 1 state and >= 1 sampled action per state, got {n} and {n_actions}")
    params = {k: v.detach() for k, v in trainable_parameters(module).items()}
    head = _Head(module, mean_log_std)
    prefixed = {f"module.{k}": v for k, v in params.items()}

    def log_prob(p: dict[str, torch.Tensor], single_obs: Any, action: torch.Tensor) -> torch.Tensor:
        batched = {k: v.unsqueeze(0) for k, v in single_obs.items()} if isinstance(single_obs, Mapping) else None
        mean, log_std = functional_call(head, p, (batched if batched is not None else single_obs.unsqueeze(0),))
        mean = mean.reshape(-1)
        log_std = torch.broadcast_to(log_std.reshape(1, -1), (1, mean.shape[0])).reshape(-1)
        return torch.distributions.Normal(mean, log_std.exp()).log_prob(action).sum()

    grad_fn = vmap(torch.func.grad(log_prob), in_dims=(None, 0, 0))
    was_training = module.training
    module.train(False)
    try:
        fisher = {k: torch.zeros_like(v) for k, v in params.items()}
        states_per_call = max(1, SAMPLED_ROWS_PER_CALL // n_actions)
        for start in range(0, n, states_per_call):
            chunk = _slice(obs, start, min(start + states_per_call, n))
            with torch.no_grad():
                mean, log_std = mean_log_std(chunk)
                std = torch.broadcast_to(log_std.exp(), mean.shape)
            # Every state n_actions times (state-major), each with its own action drawn from pi(.|s).
            repeated = _repeat(chunk, n_actions)
            noise = torch.randn((mean.shape[0] * n_actions, mean.shape[1]), generator=generator, dtype=mean.dtype)
            actions = mean.repeat_interleave(n_actions, 0) + std.repeat_interleave(n_actions, 0) * noise.to(mean)
            grads = grad_fn(prefixed, repeated, actions)
            for name in params:
                fisher[name] += grads[f"module.{name}"].square().sum(dim=0)
    finally:
        module.train(was_training)
    return {k: v / (n * n_actions) for k, v in fisher.items()}


# Penalty term and online EWC -------------------------------------------------------------------------------
class EWCPenalty:
    """The EWC penalty as a pluggable GRPO loss term: ``lambda / 2 * sum_i F_i (theta_i - theta*_i)^2``.

    :param anchor: parameter name -> anchor weights theta* (the deployed policy's).
    :param fisher: parameter name -> diagonal Fisher F (same names and shapes as ``anchor``, >= 0).
    :param lam: penalty strength lambda (>= 0). Larger keeps the policy closer to what it knew.
    :param gamma: online-EWC decay in [0, 1]: ``consolidate`` keeps gamma * F_old + F_new.
    :param consolidations: how many fine-tuning rounds this state has absorbed (bookkeeping, saved).

    Anchor and Fisher must be finite; the policy's parameters must have the anchor's names and shapes
    (:meth:`check_fits`, also run by the penalty and by ``consolidate``).
    """

    name = "ewc_penalty"

    def __init__(
        self,
        anchor: Mapping[str, torch.Tensor | np.ndarray],
        fisher: Mapping[str, torch.Tensor | np.ndarray],
        lam: float = DEFAULT_EWC_LAMBDA,
        gamma: float = DEFAULT_EWC_GAMMA,
        consolidations: int = 0,
    ) -> None:
        if not (np.isfinite(lam) and lam >= 0):
            raise ValueError(f"lambda must be a finite number >= 0, got {lam}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(
                f"gamma must be in [0, 1] (1 = never forget old Fisher, 0 = keep only the new), got {gamma}"
            )
        if set(anchor) != set(fisher):
            raise ValueError(
                f"anchor and Fisher name different parameters: only in anchor {sorted(set(anchor) - set(fisher))}, "
                f"only in Fisher {sorted(set(fisher) - set(anchor))}"
            )
        self.anchor = {k: torch.as_tensor(v).detach().clone() for k, v in anchor.items()}
        self.fisher = {k: torch.as_tensor(v).detach().clone() for k, v in fisher.items()}
        for name in self.anchor:
            if self.anchor[name].shape != self.fisher[name].shape:
                raise ValueError(
                    f"{name}: anchor shape {tuple(self.anchor[name].shape)} != Fisher shape "
                    f"{tuple(self.fisher[name].shape)}"
                )
            if not torch.all(torch.isfinite(self.fisher[name])) or torch.any(self.fisher[name] < 0):
                raise ValueError(f"{name}: the Fisher must be finite and >= 0")
            n_bad = int((~torch.isfinite(self.anchor[name])).sum())
            if n_bad:
                raise ValueError(
                    f"{name}: the anchor weights must be finite, {n_bad} of {self.anchor[name].numel()} are NaN or "
                    "inf; the EWC state is damaged: re-export the package from its checkpoint (robot-grpo export)"
                )
        self.lam = float(lam)
        self.gamma = float(gamma)
        self.consolidations = int(consolidations)

    @classmethod
    def from_policy(
        cls,
        policy: nn.Module,
        fisher: Mapping[str, torch.Tensor],
        lam: float = DEFAULT_EWC_LAMBDA,
        gamma: float = DEFAULT_EWC_GAMMA,
    ) -> EWCPenalty:
        """Anchor at ``policy``'s current weights with the given Fisher."""
        return cls(_snapshot(policy), fisher, lam, gamma)

    def check_fits(self, policy: nn.Module) -> None:
        """Refuse a policy whose trainable parameters differ from the anchor's in name or shape (a shape mismatch
        would otherwise broadcast into a wrong penalty and a wrongly shaped Fisher)."""
        self._check_params(trainable_parameters(policy))

    def _check_params(self, params: Mapping[str, torch.Tensor]) -> None:
        if set(params) != set(self.anchor):
            raise ValueError(
                "the policy's parameters do not match the EWC anchor: missing from the anchor "
                f"{sorted(set(params) - set(self.anchor))}, "
                f"not in the policy {sorted(set(self.anchor) - set(params))}; "
                "the anchor must come from the same policy architecture"
            )
        for name, p in params.items():
            if self.anchor[name].shape != p.shape:
                raise ValueError(
                    f"{name}: the EWC anchor has shape {tuple(self.anchor[name].shape)}, the policy's parameter "
                    f"{tuple(p.shape)}; the anchor must come from the same policy architecture (re-export the "
                    "package from the checkpoint it was trained from)"
                )

    def __call__(self, policy: nn.Module) -> torch.Tensor:
        """The penalty for ``policy``'s current weights (a scalar tensor with autograd)."""
        params = trainable_parameters(policy)
        self._check_params(params)
        total = None
        for name, p in params.items():
            anchor = self.anchor[name].to(device=p.device, dtype=p.dtype)
            fisher = self.fisher[name].to(device=p.device, dtype=p.dtype)
            term = (fisher * (p - anchor).square()).sum()
            total = term if total is None else total + term
        return 0.5 * self.lam * total

    def consolidate(self, policy: nn.Module, new_fisher: Mapping[str, torch.Tensor]) -> None:
        """Online EWC after a fine-tuning round: F <- gamma * F_old + F_new, anchor <- the policy's weights."""
        params = _snapshot(policy)
        self._check_params(params)
        if set(new_fisher) != set(self.fisher):
            raise ValueError("the new Fisher must name the same parameters as the old one")
        for name, f in new_fisher.items():
            if f.shape != self.fisher[name].shape:
                raise ValueError(
                    f"{name}: the new Fisher has shape {tuple(f.shape)}, the old {tuple(self.fisher[name].shape)}"
                )
        self.fisher = {k: self.gamma * self.fisher[k] + new_fisher[k].detach().to(self.fisher[k]) for k in self.fisher}
        self.anchor = params
        self.consolidations += 1

    def with_strength(self, lam: float, gamma: float) -> EWCPenalty:
        """A copy of this state (anchor, Fisher, consolidation count) with another lambda and gamma."""
        return EWCPenalty(self.anchor, self.fisher, lam, gamma, self.consolidations)

    def anchor_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(params, fisher) as numpy arrays, e.g. for ``deploy.export.exporter.EwcAnchor``."""
        return (
            {k: v.cpu().numpy() for k, v in self.anchor.items()},
            {k: v.cpu().numpy() for k, v in self.fisher.items()},
        )


def _snapshot(policy: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainable_parameters(policy).items()}
