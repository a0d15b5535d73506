"""PBT settings: the quantile fraction replaces 2 of 10 members in Tune's own ranking; ranges and checks."""

from __future__ import annotations

import math

import pytest
from ray.tune.schedulers import PopulationBasedTraining
from ray.tune.schedulers.pbt import _PBTTrialState

from robot_grpo.scale.pbt_member import member_seed
from robot_grpo.scale.population import DEFAULT_QUANTILE_FRACTION, Mutations, PopulationConfig


class _Trial:
    """What PBT's ranking reads of a trial."""

    def __init__(self, name: str) -> None:
        self.name = self.experiment_tag = name

    def is_finished(self) -> bool:
        return False


def tune_quantiles(members: int, fraction: float) -> tuple[int, int]:
    """Sizes of the lower and upper quantile that Tune's PBT computes for ``members`` scored trials."""
    pbt = PopulationBasedTraining(
        metric="success", mode="max", quantile_fraction=fraction, hyperparam_mutations={"a": [1]}
    )
    for i in range(members):
        trial = _Trial(str(i))
        state = _PBTTrialState(trial)
        state.last_score = float(i)
        pbt._trial_state[trial] = state
    lower, upper = pbt._quantiles()
    return len(lower), len(upper)


@pytest.mark.parametrize(("members", "replaced"), [(4, 1), (8, 2), (10, 2), (12, 2), (16, 3)])
def test_the_default_fraction_replaces_about_a_fifth_in_tunes_ranking(members, replaced):
    assert tune_quantiles(members, DEFAULT_QUANTILE_FRACTION) == (replaced, replaced)
    config = PopulationConfig(members=members, total_timesteps=2, interval_timesteps=1, storage_path="/tmp/x")
    assert config.replaced_per_round == replaced


def test_a_fifth_sits_on_tunes_rounding_edge():
    # 0.2 * 10 is 2.0 in floating point today, but 0.2 * N rounds up to 3 of 12 and 4 of 16 (25%)
    assert tune_quantiles(12, 0.2) == (3, 3) and tune_quantiles(16, 0.2) == (4, 4)
    assert math.ceil(10 * DEFAULT_QUANTILE_FRACTION) == 2


def test_perturbed_values_are_kept_in_their_ranges():
    mutations = Mutations(learning_rate=(1e-4, 1e-3), clip_range=(0.1, 0.3), ent_coef=(0.0, 0.01))
    clamped = mutations.clamp({"learning_rate": 1.2e-3, "clip_range": 0.05, "ent_coef": 0.005, "group_size": 8})
    assert clamped == {"learning_rate": 1e-3, "clip_range": 0.1, "ent_coef": 0.005, "group_size": 8}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"members": 1}, "needs >= 2 members"),
        ({"interval_timesteps": 5}, r"interval_timesteps \(5\) must be in \(0, total_timesteps = 4\]"),
        ({"storage_path": "runs/x"}, "must be absolute"),
        ({"quantile_fraction": 0.6}, "quantile_fraction must be in"),
    ],
)
def test_population_config_errors_say_what_to_change(kwargs, message):
    base = {"members": 4, "total_timesteps": 4, "interval_timesteps": 2, "storage_path": "/tmp/x"}
    with pytest.raises(ValueError, match=message):
        PopulationConfig(**{**base, **kwargs})
    with pytest.raises(ValueError, match="group sizes >= 2"):
        Mutations(group_size=(1, 2))


def test_member_seeds_differ_by_member_and_interval():
    seeds = {member_seed(0, trial, it) for trial in ("a_00000", "a_00001") for it in range(3)}
    assert len(seeds) == 6 and member_seed(0, "a_00000", 1) == member_seed(0, "a_00000", 1)


def test_member_seeds_ignore_the_runs_random_trial_id_prefix():
    # Tune draws the prefix afresh per run (uuid1): seeding by it made two runs of one config differ
    assert member_seed(0, "3f2a1_00002", 1) == member_seed(0, "9c0d7_00002", 1)
    assert member_seed(0, "3f2a1_00002", 1) != member_seed(1, "3f2a1_00002", 1)


def test_a_trial_id_without_an_index_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="does not end in '_<index>'"):
        member_seed(0, "trial-without-index", 0)
