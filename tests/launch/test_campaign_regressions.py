"""Failures the fault campaign found, each replayed from its seed (``robot-grpo campaign --runs 1 --seed S``): the
run must break no invariant. The campaign found them on the controller before issue 31's fixes (the position bound,
the e-stop acknowledgement timing, inference off the control thread); each id says what broke. The one still marked
xfail (strict: it fails today) is a known gap, named in its mark.

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
    pytest.param(
        679,
        marks=pytest.mark.xfail(
            strict=True,
            reason="known gap: a 9 cm sensor offset whose y part (+4.9 cm) reads as lag along the commanded motion is "
            "confirmed, and the bound follows the lie (13 mm out); catching it needs dead reckoning from the HOMED "
            "pose within the spec's gain range",
        ),
        id="679-sensor_offset_9cm-corner-14mm_out",
    ),
    pytest.param(83, id="83-reply_latency_35-false_estop_claim"),
    pytest.param(245, id="245-policy_stall-shipped-late_stop"),
    pytest.param(102, id="102-policy_stall-bang_bang-late_stop"),
    pytest.param(295, id="295-motor_stall-push-not_stopped"),
    pytest.param(1341, id="1341-motor_stall-bang_bang-not_stopped"),
    pytest.param(9577, id="9577-sensor_freeze-shipped"),  # the shipped-policy case; held before the fixes
    pytest.param(310299, id="310299-reply_latency_28-motor_stall-false_estop_claim"),
    pytest.param(310103, id="310103-fake_homed-motor_stall-push-not_stopped"),
    pytest.param(310182, id="310182-sensor_freeze-robot_estop-nan_state-not_stopped"),
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
