"""The fault campaign (launch.campaign): samples drawn from their seed, the invariant checks on hand-made evidence,
the policy faults, the command line, a hung run, and the CI-sized campaign itself."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from deploy.runtime.run_report import EpisodeResult, RunReport
from deploy.runtime.state_machine import LoopState, Transition
from deploy.wire import CommandMsg, EStopMsg, HeartbeatMsg, HomeMsg
from launch.campaign.invariants import RunEvidence, check_run, steps_outside
from launch.campaign.policy_faults import FaultyPolicy, PolicyFault, PolicyFaultError
from launch.campaign.pool import run_campaign
from launch.campaign.sample import draw_sample
from launch.campaign.settings import CampaignSettings
from launch.campaign.summary import distinct_failures, fault_table
from launch.cli import main

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = CampaignSettings(package=str(ROOT / "models" / "default"))
SPEC = SETTINGS.spec()
ACTION_DIM = 4
CI_RUNS = 300
CI_SEED = 310_000  # fixed: the CI campaign runs the same samples every time


def _names(violations) -> list[str]:
    return [name for name, _ in violations]


def test_a_sample_is_the_same_for_the_same_seed_and_within_spec_samples_hold_only_allowed_faults():
    a, b = draw_sample(7, SETTINGS, SPEC, ACTION_DIM), draw_sample(7, SETTINGS, SPEC, ACTION_DIM)
    assert a.describe() == b.describe()
    samples = [draw_sample(s, SETTINGS, SPEC, ACTION_DIM) for s in range(300)]
    within = [s for s in samples if s.within_spec]
    assert 30 < len(within) < 120  # about WITHIN_SPEC_SHARE of 300
    assert all(i.fault.within_spec(SPEC, SETTINGS.period_s) for s in within for i in s.robot_faults)
    assert {s.policy.family for s in samples} == {"push", "bang_bang", "corner", "shipped"}
    assert any(s.policy_faults for s in samples) and any(s.fault_kinds() == ["none"] for s in samples)
    low, high = np.array(SPEC.workspace_low), np.array(SPEC.workspace_high)
    assert all(np.all((s.goals >= low) & (s.goals <= high)) for s in samples)


def test_steps_outside_counts_physics_steps_beyond_the_tolerance():
    low = np.array(SPEC.workspace_low)
    trace = np.array([low + 0.1, low - [0.0005, 0, 0], low - [0.0, 0.002, 0], low - [0.0, 0.0, 0.03]])
    assert steps_outside(trace, SPEC, 0.001) == (2, pytest.approx(0.03))  # 0.5 mm is inside the tolerance


def _evidence(**changes) -> RunEvidence:
    done = Transition(40, LoopState.HOLD, LoopState.DONE, "all goals served")
    report = RunReport([], {}, {}, {}, {}, {}, [done], 40)
    base = dict(
        report=report,
        error="",
        named_error=False,
        trace=np.tile(np.array(SPEC.home_position_m), (5, 1)),
        received=[],
        hook_ticks=[1, 2, 3],
        logged_ticks=[1, 2, 3],
    )
    return RunEvidence(**{**base, **changes})


def _check(ev: RunEvidence):
    return check_run(ev, SPEC, SETTINGS.period_s, 0.025, SETTINGS.box_tolerance_m)


def test_check_run_passes_a_clean_run_and_names_each_broken_invariant():
    assert _check(_evidence()) == []
    low = np.array(SPEC.workspace_low)
    assert _names(_check(_evidence(trace=np.array([low - 0.01])))) == ["outside_box"]
    assert _names(_check(_evidence(error="Traceback ...\nKeyError: 'x'"))) == ["traceback"]
    assert _check(_evidence(error="TimeoutError: no valid state", named_error=True)) == []
    assert _names(_check(_evidence(logged_ticks=[1, 3]))) == ["ticklog_incomplete"]
    bad = CommandMsg(5, 0.0, np.array([1.5, 0.0, 0.0, 0.0]))
    assert _names(_check(_evidence(received=[(0.0, bad, True)]))) == ["command_out_of_limits"]

    limit = Transition(500, LoopState.RUN, LoopState.DONE, "tick limit reached")
    stuck = RunReport([], {}, {}, {}, {}, {}, [limit], 500)
    assert _names(_check(_evidence(report=stuck))) == ["did_not_end"]

    aborted = EpisodeResult(0, 0, np.zeros(3), False, math.nan, 3, True)
    stop = Transition(20, LoopState.RUN, LoopState.SAFE_STOP, "watchdog")
    stopped = RunReport([aborted], {}, {}, {"safe_stops": 1}, {}, {}, [stop, *_evidence().report.transitions], 40)
    assert _check(_evidence(report=stopped)) == []
    assert _names(_check(_evidence(report=stopped, within_spec=True))) == ["stop_within_spec"]
    starved = RunReport([aborted], {"overruns": 3.0}, {}, {"safe_stops": 1}, {}, {}, stopped.transitions, 40)
    assert _check(_evidence(report=starved, within_spec=True)) == []  # the host, not the fault, broke the period
    unnamed = RunReport([aborted, aborted], {}, {}, {}, {}, {}, [stop, *_evidence().report.transitions], 40)
    assert _names(_check(_evidence(report=unnamed))) == ["unnamed_abort"]

    claim = RunReport([], {}, {}, {"estop_not_acknowledged": 1}, {}, {}, _evidence().report.transitions, 40)
    assert _names(_check(_evidence(report=claim))) == ["false_estop_claim"]
    assert _check(_evidence(report=claim, fault_kinds=["estop_ignored"])) == []
    assert _check(_evidence(report=claim, fault_kinds=["frozen_sender"])) == []  # its old frames never acknowledge
    # a clock jump while replies were late (seed 9653): the stamps cannot tell states made before the stop
    late_then_jump = [("reply_latency", 20, 30), ("clock_jump", 23, 57)]
    assert _check(_evidence(report=claim, fault_windows=late_then_jump)) == []
    jump_then_late = [("clock_jump", 5, 10), ("reply_latency", 20, 30)]  # learnt on fast replies: no excuse
    assert _names(_check(_evidence(report=claim, fault_windows=jump_then_late))) == ["false_estop_claim"]


def test_a_policy_stall_needs_an_estop_within_the_policy_fault_time_plus_slack():
    t0 = 100.0
    stall = [(t0, 0.2)]  # 200 ms, far past 25 ms + the 50 ms slack
    on_time = [(t0 + 0.01, HeartbeatMsg(1, 0.0), True), (t0 + 0.06, EStopMsg(2, 0.0, 1), True)]
    late = [(t0 + 0.2, EStopMsg(2, 0.0, 1), True)]
    assert _check(_evidence(stalls=stall, received=on_time)) == []
    assert _names(_check(_evidence(stalls=stall, received=late))) == ["late_policy_stop"]
    assert _names(_check(_evidence(stalls=stall, received=[]))) == ["late_policy_stop"]
    assert _check(_evidence(stalls=[(t0, 0.05)], received=[])) == []  # short enough to need no stop


def test_motion_unconfirmed_under_a_frozen_sensor_or_stalled_motors_must_end_in_an_estop():
    push = CommandMsg(1, 0.0, np.array([1.0, 0.0, 0.0, 0.0]))  # 1 unit = 0.05 m x 0.654 = 3.3 cm at nominal gain
    hold = CommandMsg(1, 0.0, np.zeros(4))
    pushes = [(0.0, push, True)] * 10  # robot ticks 0..9: 33 cm commanded
    stop = [(0.0, EStopMsg(2, 0.0, 1), True)]
    stall = [("motor_stall", 0, 40)]
    assert _names(_check(_evidence(received=pushes, fault_windows=stall))) == ["unconfirmed_motion_not_stopped"]
    assert _check(_evidence(received=pushes + stop, fault_windows=stall)) == []  # stopped at tick 10
    late = pushes + [(0.0, hold, True)] * 30 + stop  # the e-stop 30 ticks after 5 cm: past 1 s (25 ticks)
    assert _names(_check(_evidence(received=late, fault_windows=stall))) == ["unconfirmed_motion_not_stopped"]
    assert _check(_evidence(received=[(0.0, hold, True)] * 40, fault_windows=stall)) == []  # nothing to confirm
    assert _check(_evidence(received=pushes, fault_windows=[("sensor_noise", 0, 40)])) == []
    assert _check(_evidence(received=pushes, fault_windows=[("sensor_freeze", 20, 10)])) == []  # after the pushes
    homed = [(0.0, push, True), (0.0, HomeMsg(3, 0.0, 0), True)]  # 3.3 cm, then the arm starts over
    assert _check(_evidence(received=homed * 10, fault_windows=stall)) == []
    # a sensor that came back within the second (seeds 1000154, 1000709: a 4-tick freeze) lets the motion confirm
    assert _check(_evidence(received=pushes + [(0.0, hold, True)] * 30, fault_windows=[("sensor_freeze", 0, 12)])) == []
    # HOME at the 5 cm point and holds while the sensor stays frozen (seed 1001794: the episode ended): nothing moves
    home = [(0.0, HomeMsg(3, 0.0, 0), True)]
    held = pushes + home + [(0.0, hold, True)] * 30
    assert _check(_evidence(received=held, fault_windows=[("sensor_freeze", 0, 40)])) == []
    moving = pushes + home + [(0.0, hold, True)] * 5 + pushes * 3  # the loop commands motion again: not stopped
    assert _names(_check(_evidence(received=moving, fault_windows=[("sensor_freeze", 0, 60)]))) == [
        "unconfirmed_motion_not_stopped"
    ]
    # held past the second (rejected or missing states), then homed; the next episode's motion stopped within the
    # second (seeds 3215, 5001533, 6000407, 7450: the stall was caught in the episode after the HOME)
    long_fault = [("motor_stall", 0, 120)]
    rehomed = pushes + [(0.0, hold, True)] * 30 + home + pushes
    assert _check(_evidence(received=rehomed + stop, fault_windows=long_fault)) == []
    late_again = rehomed + [(0.0, hold, True)] * 30 + stop  # after the HOME, 5 cm then no e-stop within the second
    assert _names(_check(_evidence(received=late_again, fault_windows=long_fault))) == [
        "unconfirmed_motion_not_stopped"
    ]
    twice = rehomed + [(0.0, hold, True)] * 30 + home + pushes + stop  # held and homed again: no second excuse
    assert _names(_check(_evidence(received=twice, fault_windows=long_fault))) == ["unconfirmed_motion_not_stopped"]
    still_moving = pushes + [(0.0, hold, True)] * 20 + pushes + home + pushes + stop  # motion past the second
    assert _names(_check(_evidence(received=still_moving, fault_windows=long_fault))) == [
        "unconfirmed_motion_not_stopped"
    ]
    # the robot's own e-stop in force within 1 s stops the arm as the loop's would (seed 310182)
    own_stop = [*stall, ("robot_estop", 12, 28)]
    assert _check(_evidence(received=pushes + [(0.0, hold, True)] * 40, fault_windows=own_stop)) == []
    too_late = [*stall, ("robot_estop", 40, 5)]  # 5 cm by tick 2: 1 s later is tick 27
    assert _names(_check(_evidence(received=pushes + [(0.0, hold, True)] * 40, fault_windows=too_late))) == [
        "unconfirmed_motion_not_stopped"
    ]


def test_faulty_policy_applies_each_fault_in_its_window_of_calls():
    obs = np.zeros((1, 24), dtype=np.float32)
    policy = FaultyPolicy(
        lambda o: np.ones((1, ACTION_DIM), dtype=np.float32),
        [
            PolicyFault("policy_nan", 1, 1),
            PolicyFault("policy_wrong_size", 2, 1, size=5),
            PolicyFault("policy_raise", 3, 1),
            PolicyFault("policy_stall", 4, 1, stall_s=0.02),
        ],
    )
    assert np.all(policy(obs) == 1.0)
    assert np.all(np.isnan(policy(obs)))
    assert policy(obs).shape == (1, 5)
    with pytest.raises(PolicyFaultError):
        policy(obs)
    t = time.monotonic()
    policy(obs)
    assert time.monotonic() - t >= 0.02 and len(policy.stalls) == 1 and policy.stalls[0][1] == 0.02
    assert np.all(policy(obs) == 1.0)


def test_fault_table_and_distinct_failures_group_runs():
    base = {"steps_outside": 0, "safe_stops": 1, "aborted_episodes": 1, "hang": False, "stop_reasons": ["watchdog 3"]}
    runs = [
        {
            **base,
            "seed": 2,
            "fault_kinds": ["sensor_freeze"],
            "policy_family": "push",
            "policy": "push()",
            "faults": [],
        },
        {
            **base,
            "seed": 1,
            "fault_kinds": ["sensor_freeze"],
            "policy_family": "push",
            "policy": "push()",
            "faults": [],
        },
    ]
    for r in runs:
        r["violations"] = [{"invariant": "outside_box", "detail": "x"}]
    table = fault_table(runs)
    assert table["sensor_freeze"]["runs"] == 2 and table["sensor_freeze"]["reasons"] == {"watchdog #": 2}
    (failure,) = distinct_failures(runs, ["period_s=0.005"])
    assert failure["seed"] == 1 and failure["runs"] == 2
    assert failure["replay"] == "robot-grpo campaign --runs 1 --seed 1 --set period_s=0.005"


def test_campaign_command_runs_its_samples_and_writes_the_table(tmp_path: Path):
    rc = main(["campaign", "--runs", "2", "--seed", "3", "--set", f"output={tmp_path}", "--set", "workers=1"])
    data = json.loads((tmp_path / "campaign" / "campaign.json").read_text())
    assert data["runs"] == 2 and sorted(o["seed"] for o in data["outcomes"]) == [3, 4]
    assert all(o["physics_steps"] > 0 and o["ticks"] > 0 for o in data["outcomes"])
    assert rc == (1 if data["failed_runs"] else 0)
    assert "Faults x outcomes" in (tmp_path / "campaign" / "campaign.md").read_text()


def test_a_run_past_its_timeout_is_a_hang_and_the_campaign_goes_on():
    settings = CampaignSettings(package=SETTINGS.package, run_timeout_s=0.05)  # shorter than any run
    outcomes = list(run_campaign(settings, [0, 1], workers=1))
    assert sorted(o["seed"] for o in outcomes) == [0, 1]
    assert all(o["hang"] and o["violations"][0]["invariant"] == "hang" for o in outcomes)


# Samples of the CI campaign that still break an invariant after issue 31's fixes: known gaps, each named. The test
# fails on any other failing sample (a new gap or a regression) and on a known one that no longer fails (drop it).
KNOWN_GAPS: dict[int, str] = {}


@pytest.mark.slow
def test_ci_campaign_breaks_no_invariant_beyond_the_known_gaps():
    """A few hundred samples from a fixed seed on two workers: no run may break an invariant, except the known gaps
    (``KNOWN_GAPS``, the issue-31 work that remains), each of which must still be one."""
    outcomes = list(run_campaign(SETTINGS, list(range(CI_SEED, CI_SEED + CI_RUNS)), workers=2))
    assert len(outcomes) == CI_RUNS
    failing = {o["seed"]: o for o in outcomes if o["violations"]}
    new = [o for seed, o in sorted(failing.items()) if seed not in KNOWN_GAPS]
    assert not new, "\n".join(
        f"{v['invariant']}: {v['detail']} [{o['faults']}] replay: robot-grpo campaign --runs 1 --seed {o['seed']}"
        for o in new
        for v in o["violations"]
    )
    assert set(KNOWN_GAPS) <= set(failing), f"fixed, drop from KNOWN_GAPS: {sorted(set(KNOWN_GAPS) - set(failing))}"
