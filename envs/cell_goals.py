"""Goal sampling for the two-arm cell, and how often the arms' paths cross (pure numpy).

Each arm's goal is drawn in its own frame (``envs.cell_scene``) uniformly in a box around the cell centre at the
grippers' start height: x and y within +-``goal_range_m`` of the centre, z from ``-goal_drop_m`` to
``+goal_range_m`` of the start height (the table top stops the gripper below). The box is the same region of the
table for both arms (it is symmetric under the half turn between their frames), so each arm's goal lies as often
on the partner's side of the centre as on its own: the arms have to pass each other. Pairs whose goals lie closer
than ``min_goal_gap_m`` are redrawn (both arms could not succeed without breaking the separation), and so are pairs
whose arms would touch with both grippers on their goals (``feasible``: the scene settles both arms there; the
links behind the grippers, a forearm over the partner's gripper, make about a third of the box's pairs impossible).

Crossing (what the docs report, measured by :func:`crossing_shares`):

- "swap": the goals lie in the opposite order along the line between the grippers' starts (the arms must pass
  each other to get there);
- "conflict": the two grippers moving straight to their goals at the same pace would come closer than the
  separation limit at some instant.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

MAX_REDRAWS = 1000  # goal pairs drawn before giving up (the default box rejects ~10% of pairs)


def sample_goal_pair(
    rng: np.random.Generator,
    box_low: np.ndarray,
    box_high: np.ndarray,
    to_world: tuple,
    min_goal_gap_m: float,
    feasible: Callable[[np.ndarray], bool] | None = None,
) -> np.ndarray:
    """Two goals ``[2, 3]``, each in its own arm's frame, at least ``min_goal_gap_m`` apart in the world and, when
    ``feasible`` is given, a pair it accepts.

    :param box_low: lower corner of the goal box (arm frame, metres).
    :param box_high: upper corner of the goal box (arm frame, metres).
    :param to_world: two callables mapping a point in arm 0's / arm 1's frame to the world.
    :param feasible: takes the pair in world coordinates ``[2, 3]``; False redraws it (the cell: the arms would
        touch with both grippers there).
    """
    for _ in range(MAX_REDRAWS):
        goals = rng.uniform(box_low, box_high, size=(2, 3))
        world = np.stack([to_world[0](goals[0]), to_world[1](goals[1])])
        if np.linalg.norm(world[0] - world[1]) >= min_goal_gap_m and (feasible is None or feasible(world)):
            return goals
    raise ValueError(
        f"no goal pair {min_goal_gap_m} m apart with arms clear of each other in {MAX_REDRAWS} draws: widen "
        "goal_range_m or lower min_separation_m"
    )


def straight_path_closest(start: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """Closest distance between two grippers moving straight from ``start`` to ``goal`` at the same pace.

    :param start: ``[..., 2, 3]`` world start positions of the two grippers (metres).
    :param goal: ``[..., 2, 3]`` world goals.
    :return: ``[...]`` the minimum over s in [0, 1] of |p0(s) - p1(s)|, p_i(s) = start_i + s (goal_i - start_i).
    """
    d0 = start[..., 0, :] - start[..., 1, :]
    dd = (goal[..., 0, :] - start[..., 0, :]) - (goal[..., 1, :] - start[..., 1, :])
    denom = np.maximum(np.sum(dd * dd, axis=-1), 1e-12)
    s = np.clip(-np.sum(d0 * dd, axis=-1) / denom, 0.0, 1.0)
    return np.linalg.norm(d0 + s[..., None] * dd, axis=-1)


def crossing_shares(start: np.ndarray, goals: np.ndarray, min_separation_m: float) -> dict[str, float]:
    """Shares of episodes whose paths cross (see the module docstring).

    :param start: ``[2, 3]`` world start positions of the grippers.
    :param goals: ``[N, 2, 3]`` world goals of N episodes.
    """
    axis = start[1] - start[0]
    order = (goals[:, 1] - goals[:, 0]) @ axis
    closest = straight_path_closest(np.broadcast_to(start, goals.shape), goals)
    return {"swap": float(np.mean(order < 0)), "conflict": float(np.mean(closest < min_separation_m))}
