"""The measurement math of calibration, as pure functions on recorded sequences (numpy only).

Conventions: ``positions[n]`` is the gripper position (metres) received *before* command ``n`` was sent, and
``positions[n + 1]`` the one received after it, so ``len(positions) == len(commands) + 1``. Commands are the
displacements actually sent, in metres (command units x ``action_scale_m``). A robot with an actuation delay
of ``k`` control steps applies command ``n`` during step ``n + k``: its motion shows in
``positions[n + k + 1] - positions[n + k]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

GAIN_TAPS = 4  # control steps of the arm's response to one command that the gain fit spans (from the delay on)
SECOND_DIFFERENCE_VARIANCE = 6.0  # var(e[n+1] - 2 e[n] + e[n-1]) = 6 var(e) for white noise e
MIN_PEAK_SIGNIFICANCE = 5.0  # the chosen lag's gain must exceed this many standard errors of the noise
MIN_PEAK_RATIO = 2.0  # ... and this many times the runner-up lag's gain


@dataclass(frozen=True)
class DelayEstimate:
    """One delay measurement.

    :param lag_steps: the lag (control steps) whose response to the commands is largest.
    :param gains: response gain per lag 0..max_lag (metres moved per metre commanded, least squares).
    :param noise_gain: standard error of a gain from the position noise alone (same units).
    """

    lag_steps: int
    gains: tuple[float, ...]
    noise_gain: float

    @property
    def significance(self) -> float:
        """How many noise standard errors the chosen lag's gain stands above zero."""
        return self.gains[self.lag_steps] / self.noise_gain if self.noise_gain > 0 else float("inf")

    @property
    def peak_ratio(self) -> float:
        """The chosen lag's gain over the largest other gain (inf when every other gain is <= 0)."""
        others = [g for i, g in enumerate(self.gains) if i != self.lag_steps]
        runner_up = max(others, default=0.0)
        return self.gains[self.lag_steps] / runner_up if runner_up > 0 else float("inf")

    @property
    def reliable(self) -> bool:
        return self.significance >= MIN_PEAK_SIGNIFICANCE and self.peak_ratio >= MIN_PEAK_RATIO


def _check_sequences(commands_m: np.ndarray, positions_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    commands_m = np.asarray(commands_m, dtype=np.float64)
    positions_m = np.asarray(positions_m, dtype=np.float64)
    if commands_m.ndim != 2 or positions_m.ndim != 2 or commands_m.shape[1] != positions_m.shape[1]:
        raise ValueError(
            f"commands {commands_m.shape} and positions {positions_m.shape} must be [N, D] and [N + 1, D] arrays"
        )
    if positions_m.shape[0] != commands_m.shape[0] + 1:
        raise ValueError(
            f"need one more position than commands (the state before each command and after the last), "
            f"got {positions_m.shape[0]} positions for {commands_m.shape[0]} commands"
        )
    if not (np.all(np.isfinite(commands_m)) and np.all(np.isfinite(positions_m))):
        raise ValueError("commands and positions must be finite")
    return commands_m, positions_m


def estimate_delay(commands_m: np.ndarray, positions_m: np.ndarray, max_lag: int) -> DelayEstimate:
    """Cross-correlate the commands with the per-step motion; the lag of the largest response is the delay.

    For each lag L the gain is the least-squares fit of ``motion[n + L] ~ gain * command[n]`` over all axes
    (``motion[n] = positions[n + 1] - positions[n]``). Trailing hold commands (zeros) of at least ``max_lag``
    steps make every lag use the same commands. The noise standard error of a gain is estimated from the
    motion at the lags with the smallest gains.
    """
    commands_m, positions_m = _check_sequences(commands_m, positions_m)
    if max_lag < 0:
        raise ValueError(f"max_lag must be >= 0 control steps, got {max_lag}")
    motion = np.diff(positions_m, axis=0)
    n = commands_m.shape[0]
    if n <= max_lag:
        raise ValueError(f"{n} commands cannot resolve lags up to {max_lag}; record more steps")
    gains = []
    for lag in range(max_lag + 1):
        c = commands_m[: n - lag]
        energy = float(np.sum(c * c))
        if energy == 0.0:
            raise ValueError("the probing commands are all zero; nothing to correlate")
        gains.append(float(np.sum(c * motion[lag:])) / energy)
    energy = float(np.sum(commands_m * commands_m))
    # residual motion once the best lag's response is removed: a (conservative) noise level per step
    best = int(np.argmax(gains))
    residual = motion[best:] - gains[best] * commands_m[: n - best]
    noise_gain = float(np.std(residual) / np.sqrt(energy))
    return DelayEstimate(lag_steps=best, gains=tuple(gains), noise_gain=noise_gain)


def estimate_gain(commands_m: np.ndarray, positions_m: np.ndarray, delay: int, taps: int = GAIN_TAPS) -> np.ndarray:
    """Per-axis actuator gain: metres the arm moves, in the long run, per metre commanded.

    Per axis, least squares of the per-step motion on the commands ``delay .. delay + taps - 1`` steps earlier
    plus a constant (a sagging or drifting arm), ``motion[n] = sum_j h[j] command[n - delay - j] + drift``; the
    gain is ``sum_j h[j]``, the whole response to one command (the arm lags it over a few steps). Pass the commands
    actually sent (metres, at nominal scale) and trailing holds of at least ``delay + taps`` steps.
    """
    commands_m, positions_m = _check_sequences(commands_m, positions_m)
    if delay < 0 or taps < 1:
        raise ValueError(f"need delay >= 0 and taps >= 1 control steps, got delay {delay}, taps {taps}")
    motion = np.diff(positions_m, axis=0)
    n, dims = commands_m.shape
    first = delay + taps - 1
    if n - first <= taps + 1:
        raise ValueError(f"{n} commands cannot fit {taps} response taps after a {delay}-step delay; record more")
    gains = np.empty(dims)
    for axis in range(dims):
        rows = [commands_m[first - delay - j : n - delay - j, axis] for j in range(taps)]
        design = np.column_stack([*rows, np.ones(n - first)])
        if not np.any(design[:, :taps]):
            raise ValueError(f"axis {axis} got no probing command; nothing to fit its gain on")
        coef, *_ = np.linalg.lstsq(design, motion[first:, axis], rcond=None)
        gains[axis] = float(np.sum(coef[:taps]))
    return gains


def summarize_delays(lags: Sequence[int]) -> tuple[int, float, int]:
    """(delay, spread, agreeing runs) of repeated measurements: the most common lag (ties: the median of the
    tied lags, rounded up: the safer, longer delay), the max - min spread in control steps, and how many runs
    agree with the chosen lag."""
    if not lags:
        raise ValueError("no delay measurements")
    values, counts = np.unique(np.asarray(lags, dtype=int), return_counts=True)
    tied = values[counts == counts.max()]
    delay = int(tied[(len(tied)) // 2])
    return delay, float(np.max(lags) - np.min(lags)), int(counts.max())


def rest_noise_std(positions_m: np.ndarray) -> np.ndarray:
    """Per-axis std (metres) of white measurement noise on positions recorded at rest.

    Uses second differences, which cancel a constant offset and a constant drift (a slowly sagging arm):
    ``e[n+1] - 2 e[n] + e[n-1]`` has variance 6 sigma^2 for white noise of std sigma.
    """
    positions_m = np.asarray(positions_m, dtype=np.float64)
    if positions_m.ndim != 2 or positions_m.shape[0] < 3:
        raise ValueError(f"need at least 3 positions [N, D] recorded at rest, got shape {positions_m.shape}")
    if not np.all(np.isfinite(positions_m)):
        raise ValueError("positions recorded at rest must be finite")
    d2 = positions_m[2:] - 2.0 * positions_m[1:-1] + positions_m[:-2]
    return np.sqrt(np.mean(d2 * d2, axis=0) / SECOND_DIFFERENCE_VARIANCE)


def probing_sequence(
    steps: int, dims: int, amplitude: float, max_excursion: float, rng: np.random.Generator
) -> np.ndarray:
    """Random +-``amplitude`` commands per axis whose running sum stays within +-``max_excursion``.

    Units are whatever the caller uses (command units); a sign that would take the running sum past the
    bound is flipped, so the arm wanders at most ``max_excursion`` (in commanded displacement) from its start.
    """
    if amplitude <= 0 or max_excursion < amplitude:
        raise ValueError(f"need 0 < amplitude ({amplitude}) <= max_excursion ({max_excursion})")
    out = np.zeros((steps, dims))
    total = np.zeros(dims)
    signs = rng.choice([-1.0, 1.0], size=(steps, dims))
    for n in range(steps):
        step = signs[n] * amplitude
        flip = np.abs(total + step) > max_excursion
        step[flip] = -step[flip]
        out[n] = step
        total += step
    return out


STALL_NOISE_SIGMAS = 3.0  # a stall must show even if the position noise hid this many std of progress


def stalled(
    along_m: Sequence[float],
    applied_m: Sequence[float],
    window: int,
    delay: int,
    noise_std_m: float,
    min_ratio: float = 0.1,
    min_applied_m: float = 0.01,
) -> bool:
    """True when the arm stopped following commands toward a face (a physical limit).

    :param along_m: position along the probe direction (metres, increasing toward the face); ``along_m[i]``
        is seen after command ``i - 1`` (``along_m[0]`` before the first command).
    :param applied_m: displacement sent toward the face at each step (metres).
    :param window: steps averaged; the progress is the mean of the last ``window`` positions minus the mean
        of the ``window`` before (their centres are ``window`` steps apart, the noise shrinks by sqrt(window)).
    :param delay: actuation delay (control steps): the commands that moved the arm over those steps.
    :param noise_std_m: position noise std (metres).
    :param min_ratio: stopped = progress below this share of the displacement applied over the window, even
        after adding ``STALL_NOISE_SIGMAS`` noise standard errors.
    :param min_applied_m: windows with less applied displacement (e.g. the barrier slowing near a face) say
        nothing.
    """
    if len(along_m) < 2 * window or len(applied_m) < window + delay:
        return False
    progress = float(np.mean(along_m[-window:]) - np.mean(along_m[-2 * window : -window]))
    applied = float(np.sum(applied_m[len(applied_m) - window - delay : len(applied_m) - delay]))
    noise = STALL_NOISE_SIGMAS * noise_std_m * float(np.sqrt(2.0 / window))
    return applied >= min_applied_m and progress + noise < min_ratio * applied
