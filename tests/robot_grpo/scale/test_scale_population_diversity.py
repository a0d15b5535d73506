"""The scheduler acts on collapse: at a round, the weaker member of a pair closer than ``min_pair_js`` joins the
members to replace (unless it is a top member), and the log names it. Fake trials with hand-made action laws
stand in for Tune's (the scheduler reads only their ids, scores and last results)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from ray.tune.schedulers.pbt import _PBTTrialState

from robot_grpo.scale.pbt_log import PopulationLog
from robot_grpo.scale.population import SeededPBT

THRESHOLD = 0.001
STATES, ACT = 8, 2


@dataclass(eq=False)
class FakeTrial:
    trial_id: str
    experiment_tag: str = ""

    def is_finished(self) -> bool:
        return False


def scheduler(log: PopulationLog | None = None) -> SeededPBT:
    return SeededPBT(
        seed=0,
        min_pair_js=THRESHOLD,
        log=log,
        time_attr="timesteps_total",
        metric="success",
        mode="max",
        perturbation_interval=100,
        hyperparam_mutations={"learning_rate": [1e-4, 1e-3]},
        quantile_fraction=0.25,
        synch=True,
    )


def add(pbt: SeededPBT, trial_id: str, score: float, mean_shift: float) -> FakeTrial:
    trial = FakeTrial(trial_id)
    state = _PBTTrialState(trial)
    state.last_score = score
    mean = np.full((STATES, ACT), mean_shift)
    state.last_result = {
        "success": score,
        "training_iteration": 3,
        "probe_mean": mean.tolist(),
        "probe_log_std": [np.log(0.5)] * ACT,
    }
    pbt._trial_state[trial] = state
    return trial


def test_the_weaker_of_a_collapsed_pair_is_replaced_and_logged(tmp_path):
    log = PopulationLog(tmp_path / "log.jsonl", members=4, min_pair_js=THRESHOLD)
    pbt = scheduler(log)
    # 0 is the worst (bottom quantile), 3 the best (top); 1 and 2 sit 0.001 std apart: one policy twice
    t0 = add(pbt, "pbt_00000", 0.1, 0.0)
    t1 = add(pbt, "pbt_00001", 0.5, 1.0)
    t2 = add(pbt, "pbt_00002", 0.4, 1.0005)
    t3 = add(pbt, "pbt_00003", 0.9, 3.0)
    lower, upper = pbt._quantiles()
    assert upper == [t3]
    assert lower == [t0, t2]  # Tune's bottom member, then the weaker copy
    (record,) = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert record["event"] == "collapse" and record["member"] == "pbt_00002" and record["close_to"] == "pbt_00001"
    assert 0.0 <= record["js"] < THRESHOLD and log.collapses == [record]
    assert t1 not in lower


def test_distinct_members_are_left_to_tunes_ranking():
    pbt = scheduler()
    trials = [add(pbt, f"pbt_{i:05d}", 0.1 * (i + 1), float(i)) for i in range(4)]
    assert pbt._quantiles() == ([trials[0]], [trials[3]])


def test_a_top_member_is_never_moved_to_the_bottom():
    pbt = scheduler()
    t0 = add(pbt, "pbt_00000", 0.1, 0.0)
    add(pbt, "pbt_00001", 0.5, 1.0)
    add(pbt, "pbt_00002", 0.6, 2.0)
    t3 = add(pbt, "pbt_00003", 0.9, 0.0005)  # top member, a near copy of the bottom one
    assert pbt._quantiles() == ([t0], [t3])  # the pair's weaker member is already being replaced


def test_a_population_still_at_its_common_initial_law_is_left_alone():
    pbt = scheduler()
    # every pair within ~0.0004 nats: the mean pairwise JS is below twice the threshold, so no pair is a collapse
    trials = [add(pbt, f"pbt_{i:05d}", 0.1 * (i + 1), 0.01 * i) for i in range(4)]
    assert pbt._quantiles() == ([trials[0]], [trials[3]])
