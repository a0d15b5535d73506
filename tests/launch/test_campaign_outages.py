"""Issue 31, must show: 1 s and 2 s link outages, 20 each, over the real wire (the campaign rig: the simulated robot
and the real loop and tick log): no run ends with ``estop_not_acknowledged``, each ends with a named reason, and the
true gripper stays in the box. Each outage starts at a seeded robot tick within the run's episodes, under the policy
its seed draws (pushes at faces, bang-bang, corners, the shipped one). Lengths are robot time: the outage lasts
``OUTAGE_S / spec.control_period_s`` robot ticks (one per message the runtime sends, lost or not). In lock-step the
robot steps only on what it hears; the slow variant runs it in real time too, where it keeps making states during
the outage and the first ones after it may be made before it hears the repeated e-stop (issue 31, found item 2)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from envs.faults.link import LinkOutage
from envs.faults.schedule import ScheduledFault
from launch.campaign.rig import CampaignRig
from launch.campaign.sample import Sample, draw_sample
from launch.campaign.settings import CampaignSettings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = CampaignSettings(package=str(ROOT / "models" / "default"))
OUTAGE_S = (1.0, 2.0)  # robot seconds
OUTAGES_EACH = 20
SEED = 31_000  # fixed: the same starts and policies every time
FIRST_TICK = 2  # an outage starts after the first HOME went out, anywhere up to the runs' last episode's end


def outage_samples(length_s: float) -> list[Sample]:
    """``OUTAGES_EACH`` samples, each one link outage of ``length_s`` and nothing else, at seeded robot ticks."""
    spec = SETTINGS.spec()
    ticks = round(length_s / spec.control_period_s)
    rng = np.random.default_rng([SEED, ticks])
    samples = []
    for i in range(OUTAGES_EACH):
        base = draw_sample(SEED + 1000 * ticks + i, SETTINGS, spec, action_dim=4)  # its policy and goals
        start = int(rng.integers(FIRST_TICK, SETTINGS.horizon_ticks))
        outage = ScheduledFault(LinkOutage(), start, ticks)
        samples.append(dataclasses.replace(base, robot_faults=[outage], policy_faults=[], within_spec=False))
    return samples


@pytest.mark.parametrize("mode", ["lockstep", pytest.param("realtime", marks=pytest.mark.slow)])
@pytest.mark.parametrize("length_s", OUTAGE_S)
def test_link_outages_never_end_a_run_with_a_false_estop_claim(mode: str, length_s: float):
    rig = CampaignRig(SETTINGS, mode=mode)
    try:
        _check_outages(rig, length_s)
    finally:
        rig.close()


def _check_outages(rig: CampaignRig, length_s: float) -> None:
    ends: Counter[str] = Counter()
    families: Counter[str] = Counter()
    for sample in outage_samples(length_s):
        outcome = rig.run_sample(sample)
        families[sample.policy.family] += 1
        where = f"{sample.describe()['faults']} under {sample.policy.describe()}"
        assert outcome["steps_outside"] == 0, where
        assert outcome["end_reason"] and "without acknowledging" not in outcome["end_reason"], (where, outcome)
        assert outcome["violations"] == [], (where, outcome)
        ends[outcome["end_reason"].split(":")[0][:60]] += 1
        ends.update(f"stop: {r[:50]}" for r in outcome["stop_reasons"])
        ends["aborted episodes"] += outcome["aborted_episodes"]
    print(f"{rig.robot.mode}: {length_s} s outages x {OUTAGES_EACH}: policies {dict(families)}; ends {dict(ends)}")
    assert sum(v for k, v in ends.items() if not k.startswith(("stop: ", "aborted"))) == OUTAGES_EACH
    assert len(families) >= 3  # several policies, not one
