"""Random streams of distributed group rollouts, derived from (seed, update, group, member) and nothing else.

A group's start (the leader's reset seed) and every member's action noise come from
``numpy.random.SeedSequence(seed, spawn_key=(stream, update, group[, member]))``: independent, reproducible
streams that do not depend on which worker runs the group, how many workers there are, or what a worker ran
before. One worker and N workers therefore train to bit-identical weights, and a group re-run after a worker
died gives exactly the result the dead worker would have returned.
"""

from __future__ import annotations

import numpy as np

START_STREAM = 0  # spawn-key tag of the group start (leader reset seed)
NOISE_STREAM = 1  # spawn-key tag of a member's action noise


def _check(seed: int, update: int, group: int, member: int = 0) -> None:
    for name, value in (("seed", seed), ("update", update), ("group", group), ("member", member)):
        if int(value) < 0:
            raise ValueError(f"{name} must be >= 0 (it keys a random stream), got {value}")


def group_start_seed(seed: int, update: int, group: int) -> int:
    """The reset seed of group ``group``'s leader in rollout ``update`` (a uint32 that ``env.reset(seed=)`` takes)."""
    _check(seed, update, group)
    sequence = np.random.SeedSequence(int(seed), spawn_key=(START_STREAM, int(update), int(group)))
    return int(sequence.generate_state(1, dtype=np.uint32)[0])


def member_noise(seed: int, update: int, group: int, member: int, n_steps: int, action_dim: int) -> np.ndarray:
    """Standard-normal action noise of one member, float32 ``[n_steps, action_dim]`` (action = mean + noise * std)."""
    _check(seed, update, group, member)
    sequence = np.random.SeedSequence(int(seed), spawn_key=(NOISE_STREAM, int(update), int(group), int(member)))
    return np.random.default_rng(sequence).standard_normal((n_steps, action_dim), dtype=np.float32)


def group_noise(seed: int, update: int, group: int, group_size: int, n_steps: int, action_dim: int) -> np.ndarray:
    """The noise of all members of a group, float32 ``[n_steps, group_size, action_dim]``."""
    return np.stack(
        [member_noise(seed, update, group, m, n_steps, action_dim) for m in range(group_size)],
        axis=1,
    )
