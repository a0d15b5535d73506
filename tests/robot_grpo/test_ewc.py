"""EWC: closed-form Fisher of a tiny Gaussian policy, penalty value and gradient, online update (the file: deploy)."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch import nn

from robot_grpo.ewc import EWCPenalty, gaussian_fisher_diagonal, sampled_fisher_diagonal


class LinearGaussian(nn.Module):
    """mu(s) = W s + b, state-independent log-std: the smallest Gaussian policy with a hand-computable Fisher."""

    def __init__(self, obs_dim: int = 2, action_dim: int = 2) -> None:
        super().__init__()
        self.mu = nn.Linear(obs_dim, action_dim)
        self.log_std = nn.Parameter(torch.zeros(action_dim))

    def mean_log_std(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.mu(obs), self.log_std


class DictMLPGaussian(nn.Module):
    """A nonlinear mean on a dict observation with a state-dependent log-std (exercises both Fisher terms)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(5, 8), nn.SiLU())
        self.mu = nn.Linear(8, 2)
        self.log_std = nn.Linear(8, 2)

    def mean_log_std(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(torch.cat([obs["observation"], obs["desired_goal"]], dim=-1))
        return self.mu(h), -0.5 + 0.3 * torch.tanh(self.log_std(h))


def test_fisher_of_linear_gaussian_equals_hand_computed_value() -> None:
    policy = LinearGaussian()
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([0.0, math.log(2.0)]))  # sigma = (1, 2), sigma^2 = (1, 4)
    states = torch.tensor([[1.0, 2.0], [3.0, -1.0]])
    fisher = gaussian_fisher_diagonal(policy, policy.mean_log_std, states)
    # d mu_k / d W_kj = s_j, so F_W[k, j] = E_s[s_j^2] / sigma_k^2 with E[s_0^2] = (1 + 9) / 2 = 5 and
    # E[s_1^2] = (4 + 1) / 2 = 2.5:   row 0 (sigma^2 = 1): [5, 2.5];   row 1 (sigma^2 = 4): [1.25, 0.625].
    torch.testing.assert_close(fisher["mu.weight"], torch.tensor([[5.0, 2.5], [1.25, 0.625]]))
    # d mu_k / d b_k = 1: F_b = 1 / sigma^2 = [1, 0.25].
    torch.testing.assert_close(fisher["mu.bias"], torch.tensor([1.0, 0.25]))
    # Gaussian log-std: d log pi / d log sigma = z^2 - 1 with z ~ N(0, 1); E[(z^2 - 1)^2] = 3 - 2 + 1 = 2.
    torch.testing.assert_close(fisher["log_std"], torch.tensor([2.0, 2.0]))


def test_fisher_is_independent_of_chunking() -> None:
    torch.manual_seed(0)
    policy = DictMLPGaussian()
    obs = {"observation": torch.randn(37, 3), "desired_goal": torch.randn(37, 2)}
    whole = gaussian_fisher_diagonal(policy, policy.mean_log_std, obs, chunk_size=64)
    chunked = gaussian_fisher_diagonal(policy, policy.mean_log_std, obs, chunk_size=5)
    for name in whole:
        torch.testing.assert_close(whole[name], chunked[name])


@pytest.mark.parametrize("model", ["linear", "dict_mlp"])
def test_sampled_true_fisher_agrees_with_closed_form(model: str) -> None:
    torch.manual_seed(1)
    if model == "linear":
        policy = LinearGaussian(3, 2)
        obs = torch.randn(64, 3)
    else:
        policy = DictMLPGaussian()
        obs = {"observation": torch.randn(64, 3), "desired_goal": torch.randn(64, 2)}
    exact = gaussian_fisher_diagonal(policy, policy.mean_log_std, obs)
    sampled = sampled_fisher_diagonal(
        policy, policy.mean_log_std, obs, n_actions=400, generator=torch.Generator().manual_seed(2)
    )
    for name in exact:
        scale = exact[name].abs().max()
        # 25,600 sampled actions: relative error ~ sqrt(2 / 25600) ~ 1% per entry; allow 8% of the tensor's scale.
        torch.testing.assert_close(sampled[name], exact[name], atol=0.08 * float(scale), rtol=0.08)
    # The wrong Fisher (a different sigma) must not pass the same check: proves the tolerance can fail.
    with torch.no_grad():
        if model == "linear":
            policy.log_std.add_(0.2)
        else:
            policy.log_std.bias.add_(2.0)
    shifted = gaussian_fisher_diagonal(policy, policy.mean_log_std, obs)
    assert not torch.allclose(
        shifted["mu.weight"], sampled["mu.weight"], atol=0.08 * float(exact["mu.weight"].abs().max()), rtol=0.08
    )


def test_fisher_leaves_training_mode_and_rejects_empty_input() -> None:
    policy = LinearGaussian()
    policy.train(True)
    gaussian_fisher_diagonal(policy, policy.mean_log_std, torch.ones(3, 2))
    assert policy.training
    with pytest.raises(ValueError, match="at least one state"):
        gaussian_fisher_diagonal(policy, policy.mean_log_std, torch.ones(0, 2))


def _random_fisher(policy: nn.Module, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {k: torch.rand(v.shape, generator=g) for k, v in policy.named_parameters()}


def test_penalty_is_zero_at_the_anchor_and_its_gradient_is_lambda_f_delta() -> None:
    torch.manual_seed(3)
    policy = LinearGaussian(3, 2)
    fisher = _random_fisher(policy, 4)
    lam = 7.5
    term = EWCPenalty.from_policy(policy, fisher, lam=lam, gamma=0.9)
    penalty = term(policy)
    penalty.backward()
    assert penalty.item() == 0.0
    assert all(torch.count_nonzero(p.grad) == 0 for p in policy.parameters())

    anchor = {k: v.detach().clone() for k, v in policy.named_parameters()}
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn_like(p))
    policy.zero_grad()
    penalty = term(policy)
    penalty.backward()
    expected_value = 0.0
    for name, p in policy.named_parameters():
        delta = p.detach() - anchor[name]
        torch.testing.assert_close(p.grad, lam * fisher[name] * delta)
        expected_value += 0.5 * lam * float((fisher[name] * delta**2).sum())
    assert penalty.item() == pytest.approx(expected_value, rel=1e-5)


def test_penalty_hand_computed_number() -> None:
    policy = LinearGaussian(1, 1)
    with torch.no_grad():
        policy.mu.weight.fill_(2.0)
        policy.mu.bias.fill_(0.0)
        policy.log_std.fill_(0.0)
    anchor = {"mu.weight": torch.tensor([[1.0]]), "mu.bias": torch.tensor([1.0]), "log_std": torch.tensor([0.0])}
    fisher = {"mu.weight": torch.tensor([[3.0]]), "mu.bias": torch.tensor([0.5]), "log_std": torch.tensor([2.0])}
    # lambda / 2 * (3 * (2 - 1)^2 + 0.5 * (0 - 1)^2 + 2 * 0^2) = 2 / 2 * 3.5 = 3.5
    assert EWCPenalty(anchor, fisher, lam=2.0)(policy).item() == pytest.approx(3.5)


def test_online_consolidation_decays_the_old_fisher_and_moves_the_anchor() -> None:
    torch.manual_seed(5)
    policy = LinearGaussian(3, 2)
    old, new = _random_fisher(policy, 6), _random_fisher(policy, 7)
    term = EWCPenalty.from_policy(policy, old, lam=1.0, gamma=0.5)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(1.0)
    assert term(policy).item() > 0
    term.consolidate(policy, new)
    for name in old:
        torch.testing.assert_close(term.fisher[name], 0.5 * old[name] + new[name])
    assert term(policy).item() == 0.0
    assert term.consolidations == 1


def test_mismatched_policy_and_bad_arguments_are_refused() -> None:
    policy = LinearGaussian(3, 2)
    term = EWCPenalty.from_policy(policy, _random_fisher(policy, 1))
    with pytest.raises(ValueError, match="do not match the EWC anchor"):
        term(LinearGaussian(3, 2).mu)
    with pytest.raises(ValueError, match="gamma"):
        EWCPenalty.from_policy(policy, _random_fisher(policy, 1), gamma=1.5)
    negative = {k: -v for k, v in _random_fisher(policy, 1).items()}
    with pytest.raises(ValueError, match=">= 0"):
        EWCPenalty.from_policy(policy, negative)


def test_with_strength_copies_the_state_with_another_lambda_and_gamma() -> None:
    policy = LinearGaussian(3, 2)
    term = EWCPenalty.from_policy(policy, _random_fisher(policy, 3), lam=1.0, gamma=0.5)
    term.consolidate(policy, _random_fisher(policy, 4))
    stronger = term.with_strength(10.0, 0.9)
    assert (stronger.lam, stronger.gamma, stronger.consolidations) == (10.0, 0.9, 1)
    assert (term.lam, term.gamma) == (1.0, 0.5)  # the original is untouched
    with torch.no_grad():
        policy.log_std.add_(1.0)
    assert stronger(policy).item() == pytest.approx(10.0 * term(policy).item())
    stronger.fisher["log_std"].add_(1.0)
    assert not torch.equal(stronger.fisher["log_std"], term.fisher["log_std"])  # no shared tensors


@pytest.mark.parametrize("shape", [(1,), (2, 1)])
def test_an_anchor_shaped_unlike_the_policy_is_refused_not_broadcast(shape: tuple[int, ...]) -> None:
    """A (2, 1) anchor for the (2,) log-std would broadcast: a penalty over 4 pairs instead of 2, and consolidate
    would build a (2, 2) Fisher; a (1,) anchor would silently pull both entries to one value."""
    policy = LinearGaussian(3, 2)
    anchor = {k: v.detach().clone() for k, v in policy.named_parameters()}
    anchor["log_std"] = torch.ones(shape)
    fisher = {k: torch.ones_like(v) for k, v in anchor.items()}
    term = EWCPenalty(anchor, fisher)
    message = rf"log_std: the EWC anchor has shape {re.escape(str(shape))}, the policy's parameter \(2,\)"
    with pytest.raises(ValueError, match=message):
        term(policy)
    with pytest.raises(ValueError, match=message):
        term.consolidate(policy, _random_fisher(policy, 0))
    with pytest.raises(ValueError, match=message):
        term.check_fits(policy)  # what a round runs on the loaded state before any work
    assert term.anchor["log_std"].shape == shape and term.consolidations == 0  # nothing was changed


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_anchor_is_refused_at_construction(bad: float) -> None:
    policy = LinearGaussian(3, 2)
    anchor = {k: v.detach().clone() for k, v in policy.named_parameters()}
    anchor["mu.bias"][1] = bad
    with pytest.raises(ValueError, match="mu.bias: the anchor weights must be finite, 1 of 2 are NaN or inf"):
        EWCPenalty(anchor, _random_fisher(policy, 2))
