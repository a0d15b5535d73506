"""deploy.ewc_file: the EWC state file's one reader/writer, numpy only; round trips with the training side."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from torch import nn

from deploy.ewc_file import EwcState, ewc_from_bytes, ewc_to_bytes, load_ewc, save_ewc
from deploy.export.exporter import EwcAnchor
from robot_grpo.ewc import EWCPenalty


def tiny_state(consolidations: int = 0, lam: float | None = 3.0, gamma: float | None = 0.8) -> EwcState:
    params = {"mu.weight": np.arange(6, dtype=np.float32).reshape(2, 3), "log_std": np.zeros(2, dtype=np.float32)}
    fisher = {"mu.weight": np.full((2, 3), 0.25, dtype=np.float32), "log_std": np.full(2, 2.0, dtype=np.float32)}
    return EwcState(params, fisher, consolidations, lam, gamma)


def test_round_trip_keeps_weights_fisher_and_the_consolidation_count(tmp_path) -> None:
    state = tiny_state(consolidations=4)
    path = save_ewc(tmp_path / "ewc.npz", state)
    loaded = load_ewc(path)
    assert (loaded.consolidations, loaded.lam, loaded.gamma) == (4, 3.0, 0.8)
    for name in state.params:
        np.testing.assert_array_equal(loaded.params[name], state.params[name])
        np.testing.assert_array_equal(loaded.fisher[name], state.fisher[name])
    assert not list(tmp_path.glob("*.tmp"))  # written atomically, nothing left behind
    with np.load(path, allow_pickle=False) as npz:  # plain arrays only: the robot loads it without pickle
        assert "meta/consolidations" in npz.files


def test_online_ewc_count_survives_the_file_between_rounds() -> None:
    """Round n reads the state, consolidates once, writes it; round n + 1 reads consolidations n + 1."""
    policy = nn.Linear(3, 2)
    fisher = {k: torch.ones_like(v) for k, v in policy.named_parameters()}
    state = EwcState(*EWCPenalty.from_policy(policy, fisher).anchor_arrays())
    for expected in (1, 2):
        term = EWCPenalty(state.params, state.fisher, 5.0, 0.5, state.consolidations)
        term.consolidate(policy, fisher)
        params, fisher_np = term.anchor_arrays()
        anchor = EwcAnchor(params, fisher_np, consolidations=term.consolidations, lam=term.lam, gamma=term.gamma)
        state = ewc_from_bytes(ewc_to_bytes(anchor.state()))
        assert state.consolidations == expected and (state.lam, state.gamma) == (5.0, 0.5)


def test_reads_files_without_meta_entries() -> None:
    """The exporter's first files held only param/ and fisher/: format 1, no round absorbed, no lambda recorded."""
    state = tiny_state()
    buffer = io.BytesIO()
    arrays = {f"param/{k}": v for k, v in state.params.items()} | {f"fisher/{k}": v for k, v in state.fisher.items()}
    np.savez(buffer, **arrays)
    loaded = ewc_from_bytes(buffer.getvalue())
    assert (loaded.consolidations, loaded.lam, loaded.gamma) == (0, None, None)


def test_refuses_pickles_future_versions_and_bad_fishers(tmp_path) -> None:
    bad = tmp_path / "pickled.npz"
    np.savez(bad, **{"param/w": np.array([object()], dtype=object), "fisher/w": np.ones(1)})
    with pytest.raises(ValueError, match="not an EWC .npz"):
        load_ewc(bad)
    future = tmp_path / "future.npz"
    np.savez(future, **{"meta/format_version": np.array(99)})
    with pytest.raises(ValueError, match="format_version 99"):
        load_ewc(future)
    with pytest.raises(ValueError, match="same, non-empty set"):
        EwcState({"w": np.ones(2)}, {"v": np.ones(2)})
    with pytest.raises(ValueError, match=">= 0"):
        EwcState({"w": np.ones(2)}, {"w": -np.ones(2)})
    with pytest.raises(ValueError, match=r"params\['w'\] \(the anchor weights\) must be finite"):
        EwcState({"w": np.array([1.0, np.nan])}, {"w": np.ones(2)})  # one owner of the format refuses it on read
    with pytest.raises(FileNotFoundError, match="export the policy"):
        load_ewc(tmp_path / "missing.npz")
