"""``robot-grpo population`` on a local Ray (2 CPUs, once for the module): 4 PointReach members, tiny budget;
at least one logged exploit/explore step, a diversity figure per interval, a best member that
``robot-grpo export`` turns into a valid policy package, and a second run of the same config that repeats the
first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launch.jobs import validate_launch
from launch.schema import LaunchError
from robot_grpo.scale.pbt_member import member_index
from robot_grpo.scale.population import COLLAPSE_SPREAD_FACTOR

MEMBERS, ENVS, INTERVALS = 4, 24, 3
THRESHOLD = 0.001  # the launch default (nats)
INTERVAL = ENVS * 50  # one update of 24 PointReach envs x 50 steps


def run_population(out: Path) -> Path:
    from launch.job_population import main

    config = validate_launch(
        {
            "job": "population",
            "name": "pop",
            "env": {"id": "PointReach-v0", "delay": 1},
            "members": MEMBERS,
            "total_timesteps": INTERVALS * INTERVAL,
            "interval_timesteps": INTERVAL,
            "envs_per_update": ENVS,  # group sizes 4, 6, 8 -> 6, 4, 3 groups
            "mutations": {"group_size": [4, 6, 8]},
            "hyperparameters": {"batch_size": 256, "n_epochs": 2, "policy_kwargs": {"net_arch": [16]}},
            "eval_episodes": 8,
            "diversity_states": 16,
            "output": str(out),
        }
    )
    assert main(config) == 0
    return out / "pop"


@pytest.fixture(scope="module")
def population_run(tmp_path_factory: pytest.TempPathFactory, local_ray) -> Path:
    return run_population(tmp_path_factory.mktemp("population"))


def by_member_index(record: dict) -> dict:
    """A log record without its timing, with Tune's trial ids (a random prefix per run) as member indices."""
    out = {key: value for key, value in record.items() if key != "elapsed_s"}
    for key in ("member", "from", "close_to"):
        if key in out:
            out[key] = member_index(out[key])
    if record["event"] == "interval":
        for key in ("success", "hyperparameters"):
            out[key] = {member_index(trial): value for trial, value in record[key].items()}
    return out


def test_population_exploits_and_logs_it(population_run: Path):
    records = [json.loads(line) for line in (population_run / "population_log.jsonl").read_text().splitlines()]
    exploits = [r for r in records if r["event"] == "exploit"]
    intervals = [r for r in records if r["event"] == "interval"]
    assert exploits, "no exploit/explore step was logged"
    for event in exploits:
        assert event["from"] != event["member"]
        assert set(event["hyperparameters"]) == {"learning_rate", "clip_range", "group_size", "ent_coef"}
        assert event["hyperparameters"]["group_size"] in (4, 6, 8)
        assert event["perturbation"]["js_to_donor"] >= THRESHOLD  # a copy is moved away from its donor
    assert [r["interval"] for r in intervals] == list(range(1, INTERVALS + 1))
    for record in intervals:
        assert len(record["success"]) == MEMBERS
        assert 0.0 < record["diversity_js"] < 0.6932  # distinct policies, below ln 2
        assert record["threshold_js"] == THRESHOLD and 0.0 <= record["min_pair_js"] <= record["diversity_js"]
        spread = (
            record["diversity_js"] >= COLLAPSE_SPREAD_FACTOR * THRESHOLD
        )  # before it spreads out no pair is replaced
        assert (
            record["pairs_below_threshold"] == 0
            or not spread
            or any(c["interval"] == record["interval"] for c in records if c["event"] == "collapse")
        )  # a pair below the threshold is acted on in the round that follows its interval
    totals = [r["env_steps_total"] for r in intervals]
    assert totals == [MEMBERS * INTERVAL * (k + 1) for k in range(INTERVALS)]  # equal steps whatever the group size
    summary = json.loads((population_run / "population_summary.json").read_text())
    assert summary["total_env_steps"] == totals[-1]
    assert summary["exploits"] == len(exploits) and summary["replaced_per_round"] == 1  # ceil(0.15 * 4)
    assert summary["collapses"] == sum(r["event"] == "collapse" for r in records)
    assert summary["total_env_steps"] == MEMBERS * INTERVALS * INTERVAL


def test_the_best_member_exports_to_a_valid_policy_package(population_run: Path, tmp_path: Path):
    from deploy.runtime.package import load_package
    from launch.job_export import export

    config = validate_launch(
        {
            "job": "export",
            "env": {"id": "PointReach-v0", "delay": 1},
            "checkpoint": str(population_run / "model.zip"),
            "out_dir": str(tmp_path / "package"),
            "output": str(tmp_path),
        }
    )
    package = load_package(export(config))
    assert package.manifest["provenance"]["algorithm"] == "GRPO"
    assert package.manifest["provenance"]["checkpoint"] == str(population_run / "model.zip")


def test_the_launch_default_threshold_is_the_populations():
    from robot_grpo.scale.population import DEFAULT_MIN_PAIR_JS

    assert validate_launch({"job": "population"})["min_pair_js"] == DEFAULT_MIN_PAIR_JS == THRESHOLD


def test_population_configs_are_checked():
    with pytest.raises(LaunchError, match="'interval_timesteps' = 900 exceeds 'total_timesteps' = 800"):
        validate_launch({"job": "population", "total_timesteps": 800, "interval_timesteps": 900})
    with pytest.raises(LaunchError, match="'members' = 1 is out of range"):
        validate_launch({"job": "population", "members": 1})
    with pytest.raises(LaunchError, match=r"'mutations.clip_range' = \[0.3, 0.1\] must be \[low, high\]"):
        validate_launch({"job": "population", "mutations": {"clip_range": [0.3, 0.1]}})
    with pytest.raises(LaunchError, match=r"'mutations.group_size' \[5\] do not divide envs_per_update = 48"):
        validate_launch({"job": "population", "mutations": {"group_size": [4, 5]}})
    with pytest.raises(LaunchError, match="'hyperparameters.n_groups' is set per member"):
        validate_launch({"job": "population", "hyperparameters": {"n_groups": 2}})


def test_a_second_run_of_the_same_config_repeats_the_first(population_run: Path, tmp_path: Path):
    # members seeded by their places in the population, PBT's pairing and explore draws by the run's seed
    rerun = run_population(tmp_path)

    def log(run: Path) -> list[dict]:
        lines = (run / "population_log.jsonl").read_text().splitlines()
        records = [by_member_index(json.loads(line)) for line in lines]
        return sorted(records, key=lambda r: (r["interval"], r["event"], r.get("member", -1)))  # arrival order varies

    assert log(rerun) == log(population_run)
    first, second = (json.loads((run / "population_summary.json").read_text()) for run in (population_run, rerun))
    assert second["best_success"] == first["best_success"]
    assert member_index(second["best_member"]) == member_index(first["best_member"])
