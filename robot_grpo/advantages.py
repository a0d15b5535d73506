"""Discounted returns-to-go and per-time-step group-relative advantages (GRPO), vectorized over groups.

Arrays are laid out ``[..., T, n_groups, G]``: any leading axes (e.g. one per hindsight goal), then time, then
groups, then the G members of a group. A group is G rollouts from one start state with one goal, so member
``i`` at step ``t`` is compared with its siblings at the same step::

    R[t, i] = sum_{t' >= t} gamma^(t' - t) * r[t', i]            (returns-to-go, masked steps contribute 0)
    A[t, i] = (R[t, i] - mean_j R[t, j]) / (std_j R[t, j] + eps)  (scale "group"; population std)

Scales: "group" (as above), "batch" (centre per group, divide by the std of all centred values: Dr.GRPO-like
without the per-group std bias), "none" (centre only). A (group, step) cell whose members all have the same
return has zero variance: its advantages are exactly 0 and the cell is counted.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

ADVANTAGE_SCALES = ("group", "batch", "none")
ADV_EPS = 1e-8
ZERO_STD_ATOL = 1e-6  # returns closer than this are treated as equal (sparse rewards are multiples of 1)


class GroupAdvantages(NamedTuple):
    """Advantages and the zero-variance statistics of one batch of groups."""

    advantages: np.ndarray  # [..., T, n_groups, G], float32
    returns: np.ndarray  # [..., T, n_groups, G], the score that was compared (returns-to-go or outcome)
    zero_std_cells: np.ndarray  # [..., T, n_groups] bool: valid (group, step) cells with zero variance
    zero_std_groups: np.ndarray  # [..., n_groups] bool: groups with zero variance at every valid step


def discounted_returns_to_go(rewards: np.ndarray, gamma: float, mask: np.ndarray | None = None) -> np.ndarray:
    """Returns-to-go along the time axis (axis -3 of ``[..., T, n_groups, G]``) in one matrix product.

    :param rewards: rewards ``[..., T, n_groups, G]``.
    :param gamma: discount factor in [0, 1].
    :param mask: optional bool array broadcastable to ``rewards``; masked-out steps contribute nothing.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    r = np.asarray(rewards, dtype=np.float64)
    if mask is not None:
        r = np.where(mask, r, 0.0)
    T = r.shape[-3]
    steps = np.arange(T)
    lag = steps[None, :] - steps[:, None]  # lag[t, t'] = t' - t
    discount = np.where(lag >= 0, gamma ** np.maximum(lag, 0), 0.0)  # [T, T], upper triangular
    return np.einsum("ts,...sgi->...tgi", discount, r)


def group_advantages(
    rewards: np.ndarray,
    gamma: float,
    scale: str = "group",
    outcome_only: bool = False,
    mask: np.ndarray | None = None,
) -> GroupAdvantages:
    """Group-relative advantages per time step.

    :param rewards: ``[..., T, n_groups, G]`` rewards.
    :param gamma: discount of the returns-to-go.
    :param scale: "group" | "batch" | "none" (see the module docstring).
    :param outcome_only: score each member by its last valid reward (the episode outcome: 0 at the goal, -1 not,
        for sparse goal envs) at every step, instead of the returns-to-go.
    :param mask: bool ``[..., T, n_groups, 1]`` or full shape; invalid steps get zero advantage and are ignored.
        A mask must be the same for all members of a group (whole-group relabelling guarantees it).
    """
    if scale not in ADVANTAGE_SCALES:
        raise ValueError(f"scale_advantages must be one of {ADVANTAGE_SCALES}, got {scale!r}")
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim < 3:
        raise ValueError(f"rewards must be [..., T, n_groups, G], got shape {r.shape}")
    valid = np.ones(r.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), r.shape)
    if outcome_only:
        # Last valid step of every member: valid steps form a prefix, so it is (number of valid steps - 1).
        last = np.maximum(valid.sum(axis=-3, keepdims=True) - 1, 0)
        outcome = np.take_along_axis(r, last, axis=-3)
        score = np.where(valid, np.broadcast_to(outcome, r.shape), 0.0)
    else:
        score = discounted_returns_to_go(r, gamma, valid)

    mean = score.mean(axis=-1, keepdims=True)
    centred = np.where(valid, score - mean, 0.0)
    std = score.std(axis=-1, keepdims=True)
    zero_cell = (std[..., 0] < ZERO_STD_ATOL) & valid[..., 0]
    if scale == "group":
        adv = centred / (std + ADV_EPS)
    elif scale == "batch":
        adv = centred / (centred[valid].std() + ADV_EPS) if valid.any() else centred
    else:
        adv = centred
    adv = np.where(zero_cell[..., None] | ~valid, 0.0, adv)
    any_valid = valid[..., 0].any(axis=-2)
    zero_group = np.all(zero_cell | ~valid[..., 0], axis=-2) & any_valid
    return GroupAdvantages(adv.astype(np.float32), score.astype(np.float32), zero_cell, zero_group)
