"""PolicySlot: swaps land between ticks, broken backends are refused, rollback restores, no deadline is missed.

Time is a fake ledger (no wall-clock asserts): each backend call charges its cost to whoever is calling - the
control tick or the promoter thread - so the test can see which side pays for a cold start.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import numpy as np
import pytest

from deploy.runtime.hotswap import PolicySlot, SwapRefusedError

PERIOD_S = 0.04  # 25 Hz control period
COLD_COST_S = 0.1  # first inference of a fresh session: allocations, longer than a period
WARM_COST_S = 0.001
OBS_DIM, ACTION_DIM, PROBE_BATCH = 16, 4, 8


class Ledger:
    """Who pays for backend calls right now: a list of costs in seconds (the tick's or the promoter's)."""

    def __init__(self) -> None:
        self.current: list[float] = []


class CostedBackend:
    """A fake inference backend: constant action ``value``; costs COLD_COST_S on its first call, then WARM_COST_S."""

    def __init__(self, ledger: Ledger, value: float) -> None:
        self.ledger, self.value, self.calls = ledger, value, 0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.ledger.current.append(COLD_COST_S if self.calls == 0 else WARM_COST_S)
        self.calls += 1
        return np.full((obs.shape[0], ACTION_DIM), self.value, dtype=np.float32)


def run_ticks(slot: PolicySlot, ledger: Ledger, n_ticks: int, swap_before: dict[int, CostedBackend]):
    """The control loop's use of the slot: one current() per tick; swaps run on the promoter's ledger."""
    values, missed = [], 0
    obs = np.zeros((1, OBS_DIM), dtype=np.float32)
    for tick in range(n_ticks):
        if tick in swap_before:
            ledger.current = []  # the promoter thread pays for the probe / warm-up
            slot.swap(swap_before[tick], label=f"at-{tick}")
        ledger.current = tick_costs = []
        backend = slot.current()
        values.append(float(backend(obs)[0, 0]))
        missed += sum(tick_costs) > PERIOD_S
    return values, missed


def test_swap_lands_between_ticks_without_a_missed_deadline() -> None:
    ledger = Ledger()
    probe = np.zeros((PROBE_BATCH, OBS_DIM), dtype=np.float32)
    slot = PolicySlot(CostedBackend(ledger, 1.0), label="old", probe=probe)
    values, missed = run_ticks(slot, ledger, 100, {50: CostedBackend(ledger, 2.0)})
    assert values == [1.0] * 50 + [2.0] * 50  # every tick used one policy; the switch is at the tick boundary
    assert missed == 0
    assert slot.entry().label == "at-50" and slot.entry().version == 2


def test_without_the_probe_warm_up_the_cold_start_would_miss_a_deadline() -> None:
    # Negative control for the test above: publishing a cold backend makes its first tick overrun.
    ledger = Ledger()
    slot = PolicySlot(CostedBackend(ledger, 1.0), label="old", probe=None)
    _, missed = run_ticks(slot, ledger, 100, {50: CostedBackend(ledger, 2.0)})
    assert missed == 2  # the initial backend's first tick and the swapped one's first tick


class Broken:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        if self.kind == "raises":
            raise RuntimeError("corrupt model")
        if self.kind == "nan":
            return np.full((obs.shape[0], ACTION_DIM), np.nan, dtype=np.float32)
        if self.kind == "shape":
            return np.zeros((obs.shape[0], ACTION_DIM + 1), dtype=np.float32)
        return np.zeros((obs.shape[0], ACTION_DIM), dtype=np.float64)  # "dtype"


@pytest.mark.parametrize("kind", ["raises", "nan", "shape", "dtype"])
def test_broken_backend_is_refused_and_the_running_one_stays(kind: str) -> None:
    ledger = Ledger()
    good = CostedBackend(ledger, 1.0)
    slot = PolicySlot(good, label="good", probe=np.zeros((PROBE_BATCH, OBS_DIM), dtype=np.float32))
    with pytest.raises(SwapRefusedError):
        slot.swap(Broken(kind), label="broken")
    assert slot.current() is good and slot.entry().version == 1
    with pytest.raises(RuntimeError, match="nothing to roll back"):
        slot.rollback()


def test_rollback_restores_the_previous_backend_and_can_be_undone() -> None:
    ledger = Ledger()
    a, b = CostedBackend(ledger, 1.0), CostedBackend(ledger, 2.0)
    slot = PolicySlot(a, label="a")
    slot.swap(b, label="b")
    assert slot.rollback().label == "a" and slot.current() is a
    assert slot.rollback().label == "b" and slot.current() is b
    assert slot.entry().version == 4


def test_each_entry_carries_its_policy_id_through_swaps_and_rollbacks() -> None:
    ledger = Ledger()
    a, b = CostedBackend(ledger, 1.0), CostedBackend(ledger, 2.0)
    slot = PolicySlot(a, label="a", policy_id="a" * 64)
    assert slot.entry().policy_id == "a" * 64
    assert slot.swap(b, label="b", policy_id="b" * 64).policy_id == "b" * 64
    assert slot.rollback().policy_id == "a" * 64
    assert slot.rollback().policy_id == "b" * 64
    assert slot.swap(a).policy_id == ""  # a bare backend: the tick log names no policy


@pytest.mark.parametrize("bad", ["é" * 64, "a\x00b", "x" * 256])
def test_a_policy_id_the_tick_log_cannot_hold_is_refused_before_anything_is_published(bad: str) -> None:
    ledger = Ledger()
    a, b = CostedBackend(ledger, 1.0), CostedBackend(ledger, 2.0)
    with pytest.raises(ValueError, match="printable ASCII"):
        PolicySlot(a, policy_id=bad)
    slot = PolicySlot(a, label="a")
    with pytest.raises(ValueError, match="printable ASCII"):
        slot.swap(b, label="b", policy_id=bad)
    assert slot.current() is a and slot.entry().version == 1 and b.calls == 0  # not even probed


def test_concurrent_swaps_never_expose_an_unprobed_backend() -> None:
    ledger = Ledger()
    probe = np.zeros((PROBE_BATCH, OBS_DIM), dtype=np.float32)
    good = [CostedBackend(ledger, float(i)) for i in range(1, 4)]
    slot = PolicySlot(good[0], label="g0", probe=probe)
    stop = threading.Event()
    seen_versions: list[int] = []
    bad_seen = []

    def control_loop() -> None:
        obs = np.zeros((1, OBS_DIM), dtype=np.float32)
        while not stop.is_set() or len(seen_versions) < 200:
            entry = slot.entry()
            seen_versions.append(entry.version)
            if not np.all(np.isfinite(entry.backend(obs))):
                bad_seen.append(entry.label)

    thread = threading.Thread(target=control_loop)
    thread.start()
    for i in range(300):
        with contextlib.suppress(SwapRefusedError):
            slot.swap(Broken("nan") if i % 3 == 0 else good[i % 3], label=f"s{i}")
    stop.set()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert not bad_seen
    assert seen_versions == sorted(seen_versions)  # the loop only ever sees newer entries
    assert slot.entry().version == 1 + 200  # 200 of the 300 swaps passed the probe


def test_bad_probe_and_non_callable_are_refused() -> None:
    with pytest.raises(ValueError, match="probe"):
        PolicySlot(lambda o: o, probe=np.zeros(3, dtype=np.float32))
    with pytest.raises(TypeError, match="callable"):
        PolicySlot(42)  # type: ignore[arg-type]


def test_real_controller_swaps_policies_between_ticks() -> None:
    """The control loop (lock-step SimRobot over a pty) reads the slot once per tick: a swap requested during
    tick N is used from tick N + 1 on, and every proposal comes whole from one policy."""
    from loop_fixtures import (
        ABOVE_TABLE_SEEDS,
        FAST_PERIOD_S,
        WIDE_BOX,
        DelayAwareP,
        robot_spec,
        run_loop,
        seeded_goals,
    )

    from deploy.runtime.loop import LoopConfig

    steps = 20
    old, new = DelayAwareP(gain=1.0), DelayAwareP(gain=0.5)
    probe = np.zeros((1, old.contract.flat_dim), dtype=np.float32)  # DelayAwareP takes batch 1
    probe[:, -3:] = 1.0  # a goal 1 m away: both policies saturate differently from the gain
    slot = PolicySlot(old, label="old", probe=probe, policy_id="old-id")
    swapped_at: list[int] = []

    def on_tick(controller, record) -> None:
        if record is not None and record.episode_id == 1 and not swapped_at:
            swapped_at.append(record.tick)
            slot.swap(new, label="new", policy_id="new-id")

    config = LoopConfig(period_s=FAST_PERIOD_S, max_episode_steps=steps, max_ticks=400)
    run = run_loop(slot, seeded_goals(ABOVE_TABLE_SEEDS), config, robot_spec(WIDE_BOX), on_tick=on_tick)
    policy_ticks = [r for r in run.records if r.obs_flat.size and r.episode_id >= 0]
    assert len(policy_ticks) == 3 * steps
    distinguishable = 0
    for r in policy_ticks:
        by_old = np.asarray(old(r.obs_flat[None]), dtype=np.float64)[0]
        by_new = np.asarray(new(r.obs_flat[None]), dtype=np.float64)[0]
        expected = by_old if r.tick <= swapped_at[0] else by_new
        np.testing.assert_array_equal(r.proposed, expected)
        distinguishable += not np.array_equal(by_old, by_new)
    assert distinguishable > steps  # the two policies disagree on most ticks, so the check has teeth
    assert slot.entry().label == "new"
    # the tick log names the policy asked on each tick, so the fine-tuner can tell the two apart
    for r in policy_ticks:
        assert r.policy_id == ("old-id" if r.tick <= swapped_at[0] else "new-id"), r.tick
    assert all(r.policy_id == "" for r in run.records if not r.obs_flat.size)  # no policy asked: none named


# StoreFollower: robot-grpo run --set follow_store=... -------------------------------------------------------------
def _store_with(tmp_path, names, **manifest_overrides):
    """A package store holding hand-built linear packages under ``names`` (the first promoted); ``manifest_overrides``
    (e.g. ``{"b": {"contract": ...}}``) go to make_package of that name."""
    from package_fixtures import make_package

    from deploy.finetune.promote import PackageStore

    store = PackageStore(tmp_path / "store")
    for name in names:
        store.install(make_package(tmp_path / f"src-{name}", **manifest_overrides.get(name, {})), name)
    store.promote(names[0], {"passed": True, "reasons": ["initial"]})
    return store


def _follower(store, spec=None, **options):
    """A StoreFollower on ``store`` whose slot runs the store's current package; the controller's contract is the
    test packages' (point_reach, history 2)."""
    from package_fixtures import CONTRACT

    from deploy.runtime.hotswap import StoreFollower
    from deploy.runtime.package import load_package

    slot = PolicySlot(load_package(store.resolve_current()).make_backend(), label=store.current_name())
    return StoreFollower(slot, store.root, spec or _point_spec(), CONTRACT, **options)


def _wait_for(condition, timeout_s: float = 5.0) -> bool:
    """Poll ``condition`` every 10 ms until it holds or ``timeout_s`` (seconds) passed; returns whether it held."""
    for _ in range(int(timeout_s / 0.01)):
        if condition():
            return True
        threading.Event().wait(0.01)
    return condition()


def _point_spec(**changes):
    """A robot spec that fits the point-mass test packages (delay 2, 0.04 s, 0.05 m per unit)."""
    from dataclasses import replace

    from deploy.robot_spec import load_robot_spec

    return replace(load_robot_spec(), **changes)


def test_store_follower_swaps_in_a_promoted_package_and_a_rollback(tmp_path):
    store = _store_with(tmp_path, ["a", "b"])
    follower = _follower(store)
    slot = follower.slot
    assert follower.poll_once() is None  # nothing changed
    store.promote("b", {"passed": True, "reasons": []})
    entry = follower.poll_once()
    assert entry is not None and entry.label == "b" and slot.current() is entry.backend
    store.rollback()
    assert follower.poll_once().label == "a"
    assert follower.swaps == ["b", "a"]


def test_store_follower_names_each_swapped_in_package_by_its_manifest_digest(tmp_path):
    """The id is the package's manifest_sha256: the store's installed copy has its source's id, and the tick log
    tells a promotion's ticks from a rollback's."""
    from deploy.runtime.package import load_package

    store = _store_with(tmp_path, ["a", "b"], b={"provenance": {"round": 1}})
    ids = {name: load_package(tmp_path / f"src-{name}").policy_id for name in "ab"}
    assert ids["a"] != ids["b"] and len(ids["a"]) == 64
    follower = _follower(store)
    store.promote("b", {"passed": True, "reasons": []})
    assert follower.poll_once().policy_id == ids["b"] == follower.slot.entry().policy_id
    store.rollback()
    assert follower.poll_once().policy_id == ids["a"]


def test_store_follower_keeps_the_running_policy_when_the_new_package_does_not_fit(tmp_path):
    store = _store_with(tmp_path, ["a", "b"])
    k6 = _point_spec(delay_steps=6, delay_ms=240.0, delay_range=(6, 6))  # the packages were trained for k=2
    follower = _follower(store, k6)
    slot = follower.slot
    running = slot.current()
    store.promote("b", {"passed": True, "reasons": []})
    assert follower.poll_once() is None
    assert slot.current() is running and follower.refused == ["b"]
    assert follower.poll_once() is None  # refused once, not retried every interval


@pytest.mark.parametrize("where", ["outside", "copy_in_progress"])
def test_store_follower_refuses_a_link_to_a_package_the_store_never_installed(tmp_path, where):
    """``current`` edited by hand to a sealed, fitting package outside the store's ``packages/`` (never installed,
    never gated), or to a folder still being copied in: refused, the running policy stays (before: swapped in)."""
    import os
    import shutil

    from package_fixtures import make_package

    store = _store_with(tmp_path, ["a"])
    follower = _follower(store)
    running = follower.slot.current()
    rogue = make_package(tmp_path / "rogue")
    if where == "copy_in_progress":
        rogue = Path(shutil.copytree(rogue, store.root / "packages" / ".tmp-b-1234"))
    link = store.root / "current"
    os.unlink(link)
    os.symlink(rogue, link)
    assert follower.poll_once() is None
    assert follower.slot.current() is running and follower.refused == [rogue.name]
    assert "not an installed package of this store" in follower.last_error


def test_store_follower_runs_on_its_own_thread_and_stops(tmp_path):
    store = _store_with(tmp_path, ["a", "b"])
    follower = _follower(store, interval_s=0.01).start()
    try:
        store.promote("b", {"passed": True, "reasons": []})
        _wait_for(lambda: follower.slot.entry().label == "b")
    finally:
        follower.stop()
    assert follower.slot.entry().label == "b" and not follower.alive


# Same flat size (18) and robot spec as the running point_reach contract, so only a contract check can tell them apart.
OTHER_CONTRACTS = {
    # one command more of history, the velocity dropped: the running controller's values land in the wrong slots
    "history": ({"name": "point_reach_h3", "history_len": 3, "state_fields": (("pos", 3),)}, "history_len 3"),
    # another robot's layout: position and velocity swapped, the position read from values 3:6
    "layout": (
        {"name": "other_arm", "state_fields": (("vel", 3), ("pos", 3)), "position_slice": (3, 6)},
        "state_fields",
    ),
}


@pytest.mark.parametrize("kind", sorted(OTHER_CONTRACTS))
def test_store_follower_refuses_a_package_of_another_contract(tmp_path, kind):
    from dataclasses import replace

    from package_fixtures import CONTRACT

    changes, named = OTHER_CONTRACTS[kind]
    other = replace(CONTRACT, **changes)
    assert other.flat_dim == CONTRACT.flat_dim and other != CONTRACT
    store = _store_with(tmp_path, ["a", "other"], other={"contract": other.to_dict()})
    follower = _follower(store)
    running = follower.slot.current()
    store.promote("other", {"passed": True, "reasons": []})
    assert follower.poll_once() is None
    assert follower.slot.current() is running and follower.slot.entry().label == "a"
    assert follower.refused == ["other"]
    error = follower.health()["refused"][0]["error"]
    assert error.startswith("ContractMismatchError") and named in error and "the running controller builds" in error
    assert follower.health()["refusals"] == 1 and follower.health()["last_error"] == error


def _with_complex_selftest(folder):
    """Replace a package's self-test observations by complex64 ones (re-sealed): its self-test raises a TypeError
    (numpy cannot cast complex64 to float32) - neither ValueError nor OSError nor RuntimeError."""
    from package_fixtures import reseal

    from deploy.runtime.package import SELFTEST_FILE

    with np.load(folder / SELFTEST_FILE) as data:
        obs, actions = data["obs"].astype(np.complex64), data["actions"]
    np.savez(folder / SELFTEST_FILE, obs=obs, actions=actions)
    return reseal(folder, lambda manifest: None)


def test_store_follower_survives_a_package_that_raises_anything_and_still_follows(tmp_path):
    from package_fixtures import make_package

    store = _store_with(tmp_path, ["a", "b"])
    store.install(_with_complex_selftest(make_package(tmp_path / "src-bad")), "bad")
    follower = _follower(store, interval_s=0.01).start()
    try:
        store.promote("bad", {"passed": True, "reasons": []})
        assert _wait_for(lambda: follower.refused == ["bad"])
        assert follower.alive and follower.slot.entry().label == "a"
        store.promote("b", {"passed": True, "reasons": []})  # a later good promotion still reaches the slot
        assert _wait_for(lambda: follower.slot.entry().label == "b")
        assert follower.alive
    finally:
        follower.stop()
    health = follower.health()
    assert health["swaps"] == ["b"] and health["refusals"] == 1 and health["watch_errors"] == 0
    assert health["refused"][0]["package"] == "bad" and health["refused"][0]["error"].startswith("TypeError")


def test_store_follower_outlives_failing_polls(tmp_path):
    """A poll that fails outside any package (here: the store unreadable three times) is counted, not fatal."""
    store = _store_with(tmp_path, ["a", "b"])
    follower = _follower(store, interval_s=0.01)
    real_poll, failures = follower.poll_once, []

    def flaky_poll():
        if len(failures) < 3:
            failures.append(1)
            raise PermissionError(13, "Permission denied", str(follower.link))
        return real_poll()

    follower.poll_once = flaky_poll
    follower.start()
    try:
        store.promote("b", {"passed": True, "reasons": []})
        assert _wait_for(lambda: follower.slot.entry().label == "b")
    finally:
        follower.stop()
    assert follower.watch_errors == 3 and follower.last_error.startswith("PermissionError")


def test_contract_probe_is_one_observation_the_controller_would_build():
    from package_fixtures import CONTRACT

    from deploy.runtime.hotswap import contract_probe

    probe = contract_probe(CONTRACT, (0.1, -0.2, 0.3))
    # point_reach flat layout: pos 0:3, vel 3:6, history 6:12 (hold), achieved 12:15, desired 15:18
    assert probe.dtype == np.float32 and probe.shape == (1, CONTRACT.flat_dim)
    np.testing.assert_allclose(probe[0, 0:3], [0.1, -0.2, 0.3], rtol=1e-6)
    assert not probe[0, 3:12].any()
    np.testing.assert_array_equal(probe[0, 12:15], probe[0, 0:3])
    np.testing.assert_array_equal(probe[0, 15:18], probe[0, 0:3])
    with pytest.raises(ValueError, match="position_m must be 3 finite metres"):
        contract_probe(CONTRACT, (0.1, np.nan, 0.3))


def test_store_follower_needs_the_running_contract(tmp_path):
    from deploy.runtime.hotswap import StoreFollower

    slot = PolicySlot(lambda obs: np.zeros((len(obs), 3), np.float32))
    with pytest.raises(TypeError, match="ObservationContract the running controller uses"):
        StoreFollower(slot, tmp_path, _point_spec(), "point_reach")  # type: ignore[arg-type]
