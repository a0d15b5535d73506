"""Failures the fault campaign found, each replayed from its seed (``robot-grpo campaign --runs 1 --seed S``): the
run must break no invariant. The campaign found them on the controller before issue 31's fixes (the position bound,
the e-stop acknowledgement timing, inference off the control thread); each id says what broke.

Each sample runs in lock-step over a pty on one rig (robot + policies made once for the module); a timing-sensitive
failure counts only if it recurs on a replay (``CampaignRig.run_confirmed``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from launch.campaign.rig import CampaignRig
from launch.campaign.settings import CampaignSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rig() -> Iterator[CampaignRig]:
    made = CampaignRig(CampaignSettings(package=str(ROOT / "models" / "default")))
    yield made
    made.close()


# seed: what the sample is, and what broke before the fixes
CASES = [
    pytest.param(151, id="151-sensor_freeze-corner-5_steps_94mm_out"),
    pytest.param(56, id="56-sensor_freeze-bang_bang-2_steps_47mm_out"),
    pytest.param(477, id="477-short_sensor_freeze-corner-6_steps_69mm_out"),
    pytest.param(115, id="115-sensor_scale_0.11-corner-2_steps_47mm_out"),
    pytest.param(679, id="679-sensor_offset_9cm-corner-14mm_out"),
    # found by the 2,000-sample search from seed 1,000,000 and the CI campaign after the first fixes; fixed by the
    # per-axis reckoning, the arm's one-step lag and the gain margin in the barrier, or (the last four) found to be
    # motion that did not stay unconfirmed (the invariant now says so)
    pytest.param(310091, id="310091-sensor_scale_0.58-corner-55mm_out"),
    pytest.param(310111, id="310111-motor_gain_1.89-corner-7mm_out"),
    pytest.param(310170, id="310170-sensor_offset_z_4.8cm-latency-3mm_out"),
    pytest.param(1000042, id="1000042-motor_gain_1.85-stray_homed-push-25mm_out"),
    pytest.param(1000237, id="1000237-motor_gain_2.0-corner-10mm_out"),
    pytest.param(1000719, id="1000719-sensor_offset-motor_gain-corner-4mm_out"),
    pytest.param(1000936, id="1000936-motor_gain_1.93-push-6mm_out"),
    pytest.param(1001440, id="1001440-motor_gain_1.75-sensor_drift-corner-2mm_out"),
    pytest.param(1001522, id="1001522-motor_gain_1.89-fake_homed-push-4mm_out"),
    pytest.param(1001846, id="1001846-motor_gain_1.82-sensor_freeze-corner-5mm_out"),
    pytest.param(1001875, id="1001875-sensor_offset_4.5cm-unprompted_home-corner-8mm_out"),
    pytest.param(1000154, id="1000154-sensor_freeze_4_ticks-push-recovered"),
    pytest.param(1001604, id="1001604-motor_stall_10_ticks-bang_bang-recovered"),
    pytest.param(1001794, id="1001794-sensor_freeze-shipped-homed_and_held"),
    # a stall the loop saw, then no fresh state (reply latency, a link outage): the silent ticks stop it too
    pytest.param(3001907, id="3001907-policy_stall-reply_latency-late_stop"),
    pytest.param(3000577, id="3000577-policy_stall-link_outage-late_stop"),
    pytest.param(3000477, id="3000477-policy_stall-controller_reboot-held_not_asked"),
    pytest.param(4000965, id="4000965-policy_stall-clock_jump-rejected_states-late_stop"),
    # found by the 10,000-run benchmark with a gain margin of 1.5: a 2x motor pressed the gripper into the table
    pytest.param(5494, id="5494-motor_gain_1.99-sensor_offset-push_down-2mm_out"),
    pytest.param(83, id="83-reply_latency_35-false_estop_claim"),
    pytest.param(245, id="245-policy_stall-shipped-late_stop"),
    pytest.param(102, id="102-policy_stall-bang_bang-late_stop"),
    pytest.param(295, id="295-motor_stall-push-not_stopped"),
    pytest.param(1341, id="1341-motor_stall-bang_bang-not_stopped"),
    pytest.param(9577, id="9577-sensor_freeze-shipped"),  # the shipped-policy case; held before the fixes
    pytest.param(310299, id="310299-reply_latency_28-motor_stall-false_estop_claim"),
    pytest.param(310103, id="310103-fake_homed-motor_stall-push-not_stopped"),
    pytest.param(310182, id="310182-sensor_freeze-robot_estop-nan_state-not_stopped"),
    # the controller rebooted during the safe stop (numbering and clock began again): its acknowledgement was taken
    # for an old one and its states timed on the old clock; now it gets the e-stop anew (StopLatch.restarted)
    pytest.param(2001162, id="2001162-controller_reboot-link_outage-drop_frames-false_estop_claim"),
    pytest.param(2001261, id="2001261-controller_reboot-link_outage-sequence_jump-policy_stall-false_estop_claim"),
    pytest.param(3001122, id="3001122-controller_reboot-link_outage-sensor_scale-policy_stall-false_estop_claim"),
    pytest.param(4001867, id="4001867-controller_reboot-sensor_noise-byte_corruption-false_estop_claim"),
    # found by the search at margin 2 (seeds 6,000,000+): states a period late, a command sent after the state was
    # made entered the reckoning before older ones (CommandLine._maybe_applied); timing-dependent (1 run in 8)
    pytest.param(6001737, id="6001737-reply_latency_1-motor_gain_1.06-false_not_following_stop"),
    # a stall the loop held through (states rejected or dropped) and homed from; caught in the next episode: the
    # invariant had counted that episode's motion as the first one going on (launch/campaign/invariants.py)
    pytest.param(3215, id="3215-motor_stall-drop_frames_42pc-stray_homed-held_then_homed"),
    pytest.param(5001533, id="5001533-motor_stall-sensor_scale_0.03-sequence_jump-held_then_homed"),
    pytest.param(6000407, id="6000407-motor_stall-fake_homed-sequence_jump-held_then_homed"),
    pytest.param(7450, id="7450-motor_stall-sensor_noise_1cm-held_then_homed"),
    # the 10,000 runs at margin 2: a clock jump under 35 periods of reply latency; the claim is the safe reading of
    # stamps that cannot tell old states from new (invariants.STAMP_BLIND), not a loop fix
    pytest.param(9653, id="9653-reply_latency_35-clock_jump-stamp_blind_estop_claim"),
]


@pytest.mark.parametrize("seed", CASES)
def test_campaign_sample_breaks_no_invariant(rig: CampaignRig, seed: int):
    outcome = rig.run_confirmed(seed)
    assert outcome["physics_steps"] > 0
    assert not outcome["violations"], (
        f"seed {seed} ({outcome['policy']}; {', '.join(outcome['faults'])}): "
        + "; ".join(f"{v['invariant']}: {v['detail']}" for v in outcome["violations"])
        + f"  replay: robot-grpo campaign --runs 1 --seed {seed}"
    )


# Known gaps of the CI campaign (seeds 310000+), fixed: each ends for the reason its fix gives
FIXED_GAPS = {
    310299: ("", "without acknowledging"),  # reply latency learnt into the clock offset: no false claim
    310103: ("implausible_home_not_reached", ""),  # a HOMED answer off home after a stall stops at once
    310182: ("robot e-stop", ""),  # the robot's own e-stop stopped the arm within 1 s of the frozen sensor's motion
}


@pytest.mark.parametrize("seed", sorted(FIXED_GAPS))
def test_a_fixed_gap_of_the_ci_campaign_replays_without_breaking_an_invariant(rig: CampaignRig, seed: int):
    outcome = rig.run_confirmed(seed)
    assert outcome["violations"] == [], outcome
    assert outcome["steps_outside"] == 0 and outcome["end_reason"]
    stop_named, never_said = FIXED_GAPS[seed]
    assert any(stop_named in reason for reason in outcome["stop_reasons"]), outcome["stop_reasons"]
    if never_said:
        assert never_said not in outcome["end_reason"], outcome["end_reason"]
