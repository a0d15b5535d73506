"""Tick log -> logged episodes: cut by episode id, interventions counted, stopped / foreign episodes skipped."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from deploy.contract import point_reach_contract
from deploy.finetune.dataset import load_log_dataset
from deploy.runtime.tick_record import NO_EPISODE, TickRecord
from deploy.runtime.ticklog import TickLogWriter

CONTRACT = point_reach_contract(1)  # flat obs: 6 state + 3 history + 3 achieved + 3 desired = 15


def record(
    tick: int,
    episode: int,
    flat_dim: int = CONTRACT.flat_dim,
    reasons=(),
    stop=False,
    sent_scale: float = 1.0,
    policy_id: str = "",
) -> TickRecord:
    obs = np.full(flat_dim, float(tick), dtype=np.float32)
    obs[-3:] = 0.1 * max(episode, 0)  # desired goal: constant within an episode
    return TickRecord(
        t_s=0.04 * tick,
        tick=tick,
        state=np.zeros(6),
        obs_flat=obs,
        goal=obs[-3:].astype(np.float64),
        proposed=np.full(3, 0.01 * tick),
        sent=np.full(3, 0.01 * tick * sent_scale),
        reasons=tuple(reasons),
        latency_s=1e-4,
        jitter_s=0.0,
        episode_id=episode,
        stop=stop,
        policy_id=policy_id,
    )


def test_log_is_cut_into_episodes_with_interventions(tmp_path: Path) -> None:
    path = tmp_path / "ticks.mcap"
    ticks = [record(0, NO_EPISODE)]  # connect / hold
    ticks += [record(1 + t, 1, reasons=("clip",) if t in (2, 3) else ()) for t in range(5)]
    ticks += [record(6 + t, 2) for t in range(4)]
    ticks += [record(10 + t, 3, stop=t == 2) for t in range(3)]  # ended in a safe stop
    ticks += [record(13 + t, 4, flat_dim=CONTRACT.flat_dim + 1) for t in range(3)]  # another policy's log
    with TickLogWriter(path, fsync_interval_s=None) as writer:
        for r in ticks:
            writer.append(r)
    data = load_log_dataset(path, CONTRACT)
    assert [ep.episode_id for ep in data.episodes] == [1, 2]
    first = data.episodes[0]
    assert first.n_steps == 4  # 5 ticks -> 4 transitions
    assert first.interventions == 2
    np.testing.assert_array_equal(first.intervened, [False, False, True, True])  # per transition, for a penalty
    np.testing.assert_allclose(first.actions[:, 0], [0.01, 0.02, 0.03, 0.04], rtol=1e-6)  # sent == proposed here
    np.testing.assert_allclose(first.achieved_next[:, 0], [2, 3, 4, 5])  # the achieved goal one tick later
    assert (data.skipped_stopped, data.skipped_wrong_shape, data.n_records) == (1, 1, len(ticks))
    assert data.interventions_per_episode == 1.0
    assert [ep.episode_id for ep in load_log_dataset(path, CONTRACT, keep_stopped=True).episodes] == [1, 2, 3]


def test_missing_or_foreign_log_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_log_dataset(tmp_path / "none.mcap", CONTRACT)
    path = tmp_path / "other.mcap"
    with TickLogWriter(path, fsync_interval_s=None) as writer:
        for t in range(3):
            writer.append(record(t, 1, flat_dim=7))
    with pytest.raises(ValueError, match="different policy"):
        load_log_dataset(path, CONTRACT)


def test_an_episode_with_a_held_tick_is_skipped_not_a_crash():
    """The runtime holds without asking the policy (a stale or implausible state): that tick has no observation,
    and the episode around it is not the policy's doing."""
    from deploy.contract import point_reach_contract
    from deploy.finetune.dataset import episodes_from_records
    from deploy.runtime.tick_record import TickRecord

    contract = point_reach_contract(1)
    flat = np.zeros(contract.flat_dim, dtype=np.float32)

    def tick(i: int, episode: int, held: bool = False) -> TickRecord:
        obs = np.zeros(0, dtype=np.float32) if held else flat
        reasons = ("implausible_state",) if held else ()
        zero = np.zeros(contract.action_dim)
        return TickRecord(0.0, i, np.zeros(6), obs, np.zeros(3), zero, zero, reasons, 0.0, 0.0, episode, i)

    records = [tick(0, 0), tick(1, 0, held=True), tick(2, 0), tick(3, 1), tick(4, 1), tick(5, 1)]
    dataset = episodes_from_records(records, contract)
    assert dataset.skipped_held == 1
    assert len(dataset.episodes) == 1


def test_fine_tuning_trains_on_the_sent_command_unless_asked_for_the_proposal(tmp_path: Path) -> None:
    """Where the filter changed the proposal, the sent command (what the robot did) is the trained action by default;
    ``action="proposed"`` takes the policy's sample; an unknown name is refused naming the choices."""
    path = tmp_path / "ticks.mcap"
    with TickLogWriter(path, fsync_interval_s=None) as writer:
        for t in range(4):
            writer.append(record(1 + t, 1, reasons=("workspace_barrier",), sent_scale=0.5))  # the barrier halved it
    sent = load_log_dataset(path, CONTRACT).episodes[0]
    np.testing.assert_allclose(sent.actions[:, 0], [0.005, 0.01, 0.015], rtol=1e-6)
    proposed = load_log_dataset(path, CONTRACT, action="proposed").episodes[0]
    np.testing.assert_allclose(proposed.actions[:, 0], [0.01, 0.02, 0.03], rtol=1e-6)
    with pytest.raises(ValueError, match="'sent', 'proposed'"):
        load_log_dataset(path, CONTRACT, action="filtered")


@pytest.mark.parametrize("action", ["sent", "proposed"])
def test_an_episode_with_a_policy_fault_is_skipped_not_trained_as_the_policys_hold(tmp_path: Path, action) -> None:
    """On a policy-fault tick the runtime held in the policy's place and logged that hold as the proposal: training
    on it (either action) would credit the policy with a choice it never made."""
    path = tmp_path / "ticks.mcap"
    with TickLogWriter(path, fsync_interval_s=None) as writer:
        for t in range(5):
            writer.append(record(t, 1, reasons=("policy_fault",) if t == 2 else ()))  # one faulty tick mid-episode
        for t in range(5, 9):
            writer.append(record(t, 2))
    data = load_log_dataset(path, CONTRACT, action=action)
    assert [ep.episode_id for ep in data.episodes] == [2]
    assert data.skipped_policy_fault == 1


def test_episodes_with_nan_values_are_skipped_not_the_whole_load(tmp_path: Path) -> None:
    """A NaN desired goal in one episode and a NaN final achieved goal in another drop those two episodes (a NaN
    achieved goal would score as a success under a sparse reward); the good one is kept."""
    path = tmp_path / "ticks.mcap"
    good = [record(t, 1) for t in range(4)]
    nan_goal = [record(4 + t, 2) for t in range(4)]
    nan_goal[1].obs_flat[-3:] = np.nan  # desired goal: the last 3 values
    nan_achieved = [record(8 + t, 3) for t in range(4)]
    nan_achieved[-1].obs_flat[-6:-3] = np.nan  # achieved goal of the last tick: the last transition's outcome
    with TickLogWriter(path, fsync_interval_s=None) as writer:
        for r in good + nan_goal + nan_achieved:
            writer.append(r)
    data = load_log_dataset(path, CONTRACT)
    assert [ep.episode_id for ep in data.episodes] == [1]
    assert data.skipped_nonfinite == 2


# a record inside episode 1, its last, episode 2's first, one inside episode 3
def chunk_extent(data: bytes, index: int) -> tuple[int, int]:
    """(offset, length) of the ``index``-th chunk record of an MCAP tick log, walking its framing."""
    pos, found = 8, []  # after the magic
    while pos + 9 <= len(data):
        opcode, length = struct.unpack_from("<BQ", data, pos)
        if opcode == 0x06:  # chunk
            found.append((pos, 9 + length))
        pos += 9 + length
    return found[index]


@pytest.mark.parametrize("damaged", [2, 5, 6, 11])
def test_an_episode_next_to_damage_in_the_log_is_skipped(tmp_path: Path, damaged: int) -> None:
    """A record the reader had to skip (a flipped byte: bad CRC) may be a tick of an episode: the ticks either side
    would be stitched into one transition carrying the lost command's motion (before: trained on as one step). Every
    episode that the damaged stretch touches is skipped and counted; the others are kept."""
    ticks = [record(0, NO_EPISODE)]
    ticks += [record(1 + t, 1) for t in range(5)]  # records 1..5
    ticks += [record(6 + t, 2) for t in range(4)]  # records 6..9
    ticks += [record(10 + t, 3) for t in range(4)]  # records 10..13
    path = tmp_path / "ticks.mcap"
    with TickLogWriter(path, fsync_interval_s=None) as writer:
        for r in ticks:
            writer.append(r)
    data = bytearray(path.read_bytes())
    start, length = chunk_extent(bytes(data), damaged)  # one chunk per tick
    data[start + length // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    dataset = load_log_dataset(path, CONTRACT)
    # a lost last (first) record cannot be told from a lost first (last) record of the next (previous) episode
    touched = {2: [1], 5: [1, 2], 6: [1, 2], 11: [3]}[damaged]
    assert [ep.episode_id for ep in dataset.episodes] == [e for e in (1, 2, 3) if e not in touched]
    assert dataset.skipped_damaged == len(touched)


RUNNING = "a" * 64  # the package being fine-tuned (its manifest_sha256)
EARLIER = "b" * 64  # the package it replaced


def write_ticks(path: Path, ticks: list[TickRecord]) -> Path:
    with TickLogWriter(path, fsync_interval_s=None) as writer:
        for r in ticks:
            writer.append(r)
    return path


def test_only_the_running_packages_episodes_are_kept_when_its_id_is_given(tmp_path: Path) -> None:
    ticks = [record(t, 1, policy_id=RUNNING) for t in range(4)]
    ticks += [record(4 + t, 2, policy_id=EARLIER) for t in range(4)]  # the earlier package drove it
    # a hot swap mid-episode: the first two ticks were the earlier package's
    ticks += [record(8 + t, 3, policy_id=EARLIER if t < 2 else RUNNING) for t in range(4)]
    ticks += [record(12 + t, 4) for t in range(3)]  # a version 1 log's ticks name no policy
    ticks += [record(15 + t, 5, policy_id=RUNNING) for t in range(3)]
    path = write_ticks(tmp_path / "ticks.mcap", ticks)
    data = load_log_dataset(path, CONTRACT, policy_id=RUNNING)
    assert [ep.episode_id for ep in data.episodes] == [1, 5]
    assert data.skipped_other_policy == 3
    assert data.other_policies == {EARLIER: 6, "": 3}
    assert data.skipped()["other_policy"] == 3 and set(data.skipped()) >= {"stopped", "damaged", "other_policy"}
    # no id given: whoever drove them (the behaviour of a caller that does not know the package)
    assert [ep.episode_id for ep in load_log_dataset(path, CONTRACT).episodes] == [1, 2, 3, 4, 5]


def test_a_log_of_other_packages_only_is_a_clear_error_naming_them(tmp_path: Path) -> None:
    ticks = [record(t, 1, policy_id=EARLIER) for t in range(4)] + [record(4 + t, 2) for t in range(3)]
    path = write_ticks(tmp_path / "ticks.mcap", ticks)
    with pytest.raises(ValueError, match="none of its 2 episodes was driven") as err:
        load_log_dataset(path, CONTRACT, policy_id=RUNNING)
    message = str(err.value)
    assert EARLIER[:12] in message and "version 1 log" in message and RUNNING[:12] in message
    assert "robot-grpo run" in message
