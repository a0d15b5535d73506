"""How different a population's policies are: mean pairwise Jensen-Shannon divergence of their action laws.

Each member's policy at a state is a diagonal Gaussian N(mu(s), diag(exp(log_std))^2). The Jensen-Shannon
divergence of two such laws P and Q,

    JS(P, Q) = 1/2 KL(P || M) + 1/2 KL(Q || M),   M = (P + Q) / 2,

has no closed form; it is estimated with fixed standard-normal draws z (common random numbers, so the figure is a
deterministic function of the policies): x = mu_P + sigma_P * z ~ P, KL(P || M) ~ mean(log p(x) - log m(x)),
and the same for Q. In nats, 0 for identical policies, at most ln 2 for policies that never overlap. The
population figure is the mean over the fixed probe states and over all pairs of members.
"""

from __future__ import annotations

import math
from itertools import combinations

import gymnasium as gym
import numpy as np

from robot_grpo.policies import LOG_2PI, flatten_obs_np

JS_SAMPLES = 256  # standard-normal draws per state and law
JS_SEED = 0  # seed of those draws (fixed: the figure is comparable across intervals)
LN2 = math.log(2.0)


def _gaussian_log_density(x: np.ndarray, mean: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """log N(x; mean, diag(exp(log_std))^2) summed over the last axis."""
    z = (x - mean) * np.exp(-log_std)
    return -0.5 * (z * z + LOG_2PI).sum(-1) - log_std.sum(-1)


def _kl_to_mixture(
    mean_p: np.ndarray, log_std_p: np.ndarray, mean_q: np.ndarray, log_std_q: np.ndarray, z: np.ndarray
) -> np.ndarray:
    """Monte-Carlo KL(P || (P + Q) / 2) per state: means ``[S, A]``, log-stds ``[A]``, draws ``[K, A]`` -> ``[S]``."""
    x = mean_p[:, None, :] + np.exp(log_std_p) * z[None]  # [S, K, A] samples of P
    log_p = _gaussian_log_density(x, mean_p[:, None, :], log_std_p)
    log_q = _gaussian_log_density(x, mean_q[:, None, :], log_std_q)
    log_m = np.logaddexp(log_p, log_q) - LN2
    return (log_p - log_m).mean(axis=1)


def gaussian_js(
    mean_p: np.ndarray,
    log_std_p: np.ndarray,
    mean_q: np.ndarray,
    log_std_q: np.ndarray,
    n_samples: int = JS_SAMPLES,
    seed: int = JS_SEED,
) -> np.ndarray:
    """JS divergence (nats) of two diagonal-Gaussian policies at each state.

    :param mean_p: action means of P at the states, ``[S, A]``.
    :param log_std_p: log standard deviations of P, ``[A]`` (state-independent) or ``[S, A]``.
    :param mean_q: action means of Q, ``[S, A]``.
    :param log_std_q: log standard deviations of Q.
    :return: ``[S]`` values in [0, ln 2].
    """
    mean_p, mean_q = np.asarray(mean_p, np.float64), np.asarray(mean_q, np.float64)
    if mean_p.shape != mean_q.shape or mean_p.ndim != 2:
        raise ValueError(f"means must both be [states, action_dim], got {mean_p.shape} and {mean_q.shape}")
    z = np.random.default_rng(seed).standard_normal((n_samples, mean_p.shape[1]))
    log_std_p, log_std_q = np.asarray(log_std_p, np.float64), np.asarray(log_std_q, np.float64)
    kl_pm = _kl_to_mixture(mean_p, log_std_p, mean_q, log_std_q, z)
    kl_qm = _kl_to_mixture(mean_q, log_std_q, mean_p, log_std_p, z)
    return np.clip(0.5 * (kl_pm + kl_qm), 0.0, LN2)


def mean_pairwise_js(means: list[np.ndarray], log_stds: list[np.ndarray]) -> float:
    """Mean over all member pairs and probe states of the JS divergence (nats); 0.0 for fewer than two members.

    :param means: per member, the action means at the probe states ``[S, A]``.
    :param log_stds: per member, the log standard deviations ``[A]``.
    """
    if len(means) != len(log_stds):
        raise ValueError(f"{len(means)} mean arrays but {len(log_stds)} log-std arrays")
    pairs = list(combinations(range(len(means)), 2))
    if not pairs:
        return 0.0
    return float(np.mean([gaussian_js(means[i], log_stds[i], means[j], log_stds[j]).mean() for i, j in pairs]))


def pairwise_js(means: list[np.ndarray], log_stds: list[np.ndarray]) -> np.ndarray:
    """Symmetric ``[N, N]`` matrix of the members' JS divergence (nats), each the mean over the probe states.

    :param means: per member, the action means at the probe states ``[S, A]``.
    :param log_stds: per member, the log standard deviations ``[A]``.
    """
    if len(means) != len(log_stds):
        raise ValueError(f"{len(means)} mean arrays but {len(log_stds)} log-std arrays")
    n = len(means)
    matrix = np.zeros((n, n))
    for i, j in combinations(range(n), 2):
        matrix[i, j] = matrix[j, i] = gaussian_js(means[i], log_stds[i], means[j], log_stds[j]).mean()
    return matrix


def collapsed_members(js: np.ndarray, scores: list[float], min_pair_js: float) -> list[tuple[int, int, float]]:
    """Members whose action law sits closer than ``min_pair_js`` to another's: the weaker copy of each such pair.

    Pairs are visited from the closest; a member already named is not named again, and neither is its partner
    counted twice. The weaker member (lower score; the later index on a tie) is the copy.

    :param js: the ``[N, N]`` matrix of :func:`pairwise_js`.
    :param scores: the members' scores (higher is better).
    :param min_pair_js: nats; pairs below it are collapsed.
    :return: ``(copy, kept partner, JS)`` per collapsed member, closest pair first.
    """
    pairs = sorted((js[i, j], i, j) for i, j in combinations(range(len(scores)), 2) if js[i, j] < min_pair_js)
    named: set[int] = set()
    out = []
    for value, i, j in pairs:
        copy, kept = (j, i) if scores[j] <= scores[i] else (i, j)
        if copy in named or kept in named:
            continue
        named.add(copy)
        out.append((copy, kept, float(value)))
    return out


def probe_states(env: gym.Env, n_states: int, seed: int, max_random_steps: int = 10) -> np.ndarray:
    """A fixed set of flat observations ``[n_states, obs_dim]`` to compare policies on.

    State i is reached from ``env.reset(seed=seed + i)`` by ``i % (max_random_steps + 1)`` uniformly random
    actions (seeded), so the set covers starts and states a few steps in.
    """
    if n_states < 1:
        raise ValueError(f"n_states must be >= 1, got {n_states}")
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_states):
        obs, _ = env.reset(seed=seed + i)
        for _ in range(i % (max_random_steps + 1)):
            action = rng.uniform(env.action_space.low, env.action_space.high).astype(env.action_space.dtype)
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        rows.append(flatten_obs_np({k: v[None] for k, v in obs.items()} if isinstance(obs, dict) else obs[None])[0])
    return np.stack(rows)
