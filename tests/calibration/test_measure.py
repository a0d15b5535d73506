"""Calibration math on synthetic recordings whose delay, gain, drift and noise the test sets."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.measure import (
    estimate_delay,
    probing_sequence,
    rest_noise_std,
    stalled,
    summarize_delays,
)

SCALE_M = 0.05  # metres per command unit
GAIN = 0.6  # the sim Fetch gripper moves ~0.6 of a commanded displacement in the step it is applied
HOLD_STEPS = 10
HOME_M = np.array([1.3, 0.75, 0.5])


def record(commands_m: np.ndarray, delay: int, noise_m: float, rng, drift_m=(0.0, 0.0, -1.5e-4)) -> np.ndarray:
    """Positions of a robot that applies command n at step n + delay with GAIN, sags by drift, plus noise."""
    n = commands_m.shape[0]
    applied = np.zeros_like(commands_m)
    applied[delay:] = commands_m[: n - delay] if delay else commands_m
    true = np.vstack([np.zeros(3), np.cumsum(GAIN * applied + np.asarray(drift_m), axis=0)]) + HOME_M
    return true + rng.normal(0.0, noise_m, size=true.shape)


def probe_commands(rng, steps=64) -> np.ndarray:
    seq = probing_sequence(steps, 3, 0.3, 0.6, rng) * SCALE_M
    return np.vstack([seq, np.zeros((HOLD_STEPS, 3))])  # trailing holds: every lag sees all commands


@pytest.mark.parametrize("delay", [0, 1, 2, 3, 5, 8])
@pytest.mark.parametrize("noise_m", [0.0, 0.001, 0.005])
def test_delay_is_recovered_exactly(delay, noise_m):
    for seed in range(5):
        rng = np.random.default_rng(seed)
        commands = probe_commands(rng)
        estimate = estimate_delay(commands, record(commands, delay, noise_m, rng), max_lag=8)
        assert estimate.lag_steps == delay
        assert estimate.reliable
        assert estimate.gains[delay] == pytest.approx(GAIN, abs=0.1)


def test_pure_noise_is_flagged_unreliable():
    rng = np.random.default_rng(0)
    commands = probe_commands(rng)
    positions = 1.0 + rng.normal(0.0, 0.005, size=(commands.shape[0] + 1, 3))  # the arm never responds
    assert not estimate_delay(commands, positions, max_lag=8).reliable


def test_delay_input_errors_name_the_problem():
    with pytest.raises(ValueError, match="one more position"):
        estimate_delay(np.zeros((5, 3)), np.zeros((5, 3)), 2)
    with pytest.raises(ValueError, match="all zero"):
        estimate_delay(np.zeros((5, 3)), np.zeros((6, 3)), 2)
    with pytest.raises(ValueError, match="cannot resolve"):
        estimate_delay(np.ones((2, 3)), np.zeros((3, 3)), 2)


def test_summarize_delays():
    # most common lag, spread max - min, number of agreeing runs
    assert summarize_delays([2, 2, 2, 2, 2]) == (2, 0.0, 5)
    assert summarize_delays([2, 3, 2, 2, 1]) == (2, 2.0, 3)
    assert summarize_delays([1, 2]) == (2, 1.0, 1)  # a tie takes the longer delay


@pytest.mark.parametrize("sigma", [0.001, 0.003, 0.005])
def test_rest_noise_ignores_a_sagging_arm(sigma):
    rng = np.random.default_rng(1)
    steps = 300
    sag = np.outer(np.arange(steps), [1e-5, 0.0, -1.5e-4])  # metres per step: the sim arm sags at rest
    positions = HOME_M + sag + rng.normal(0.0, sigma, size=(steps, 3))
    estimate = rest_noise_std(positions)
    np.testing.assert_allclose(estimate, sigma, rtol=0.1)
    assert np.std(positions[:, 2]) > 2 * sigma  # a plain std would be fooled by the sag


def test_probing_sequence_stays_within_its_excursion():
    rng = np.random.default_rng(3)
    seq = probing_sequence(500, 3, 0.3, 0.6, rng)
    assert set(np.unique(seq)) == {-0.3, 0.3}
    assert np.max(np.abs(np.cumsum(seq, axis=0))) <= 0.6 + 1e-12
    with pytest.raises(ValueError):
        probing_sequence(10, 3, 0.3, 0.1, rng)


def test_stalled_needs_real_commands_and_little_progress():
    window = 4
    pushing = [0.01] * 12  # 1 cm per step toward the face
    # free motion: 6 mm per step -> progress 24 mm between window means vs 40 mm applied: moving
    moving = list(np.arange(13) * 0.006)
    assert not stalled(moving, pushing, window, delay=2, noise_std_m=0.0)
    # stuck at a wall: 0.5 mm per step -> 2 mm progress < 0.1 x 40 mm: stopped
    stuck = list(np.arange(13) * 0.0005)
    assert stalled(stuck, pushing, window, delay=2, noise_std_m=0.0)
    # with 5 mm noise the same numbers are not proof: 3 x 5 mm x sqrt(2 / 4) = 10.6 mm > 4 mm - 2 mm
    assert not stalled(stuck, pushing, window, delay=2, noise_std_m=0.005)
    # the barrier slowing down near a face (1 mm per step applied): too little to judge
    assert not stalled(stuck, [0.001] * 12, window, delay=2, noise_std_m=0.0)
    assert not stalled(stuck[:5], pushing[:4], window, delay=2, noise_std_m=0.0)  # too short to tell


def test_stalled_at_a_wall_despite_noise():
    rng = np.random.default_rng(0)
    window, sigma = 8, 0.005
    wall = np.concatenate([np.arange(10) * 0.012, np.full(17, 0.12)])  # moves, then hits a wall
    along = list(wall + rng.normal(0.0, sigma, wall.size))
    pushing = [0.02] * (wall.size - 1)
    assert stalled(along, pushing, window, delay=3, noise_std_m=sigma)
    assert not stalled(along[:12], pushing[:11], window, delay=3, noise_std_m=sigma)
