"""``scale`` in the train launch file: validated, and ``scale.backend=ray`` trains on Ray workers (local Ray, 2 CPUs,
once for the module) into the same run folder as the threaded default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launch.cli import main
from launch.jobs import validate_launch
from launch.schema import LaunchError

TINY = [
    "--set",
    "env.id=PointReach-v0",
    "--set",
    "train.total_timesteps=1200",  # two updates of 4 x 3 envs x 50 steps
    "--set",
    "train.eval_episodes=4",
    "--set",
    "train.hyperparameters={group_size: 4, n_groups: 3, batch_size: 256, n_epochs: 2, policy_kwargs: {net_arch: [16]}}",
]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"scale": {"backend": "mpi"}}, "'scale.backend' = 'mpi' is not allowed; allowed values: threaded, ray"),
        ({"scale": {"workers": 0, "backend": "ray"}}, "'scale.workers' = 0 is out of range"),
        ({"scale": {"workers": 2}}, "'scale.workers' is only used with scale.backend=ray"),
        ({"scale": {"address": "10.0.0.1:6379"}}, "'scale.address' is only used with scale.backend=ray"),
    ],
)
def test_bad_scale_sections_name_the_key(data, message):
    with pytest.raises(LaunchError, match="^t.yaml: ") as err:
        validate_launch({"job": "train", **data}, source="t.yaml")
    assert message in str(err.value)


def test_the_default_backend_is_threaded():
    assert validate_launch({"job": "train"})["scale"] == {
        "backend": "threaded",
        "workers": None,
        "address": None,
        "auth_token_file": None,
    }


@pytest.mark.usefixtures("local_ray")
def test_train_on_ray_writes_the_run_folder_of_a_threaded_run(tmp_path: Path):
    from robot_grpo import GRPO

    out = ["--set", f"output={tmp_path}"]
    assert main(["train", "--name", "threaded", *TINY, *out]) in (0, 1)
    ray_args = ["--set", "scale.backend=ray", "--set", "scale.workers=2"]
    assert main(["train", "--name", "ray", *TINY, *ray_args, *out]) in (0, 1)
    threaded, ray = (json.loads((tmp_path / n / "train_summary.json").read_text()) for n in ("threaded", "ray"))
    assert threaded.keys() == ray.keys()
    assert ray["scale"] == {"backend": "ray", "address": None, "workers": 2, "workers_lost": []}
    assert ray["env_steps"] == threaded["env_steps"] == 1200
    files = {p.name for p in (tmp_path / "threaded").iterdir()}
    assert files <= {p.name for p in (tmp_path / "ray").iterdir()}
    model = GRPO.load(str(tmp_path / "ray" / "model.zip"), device="cpu")  # a plain GRPO checkpoint
    assert model.num_timesteps == 1200 and model._n_updates == 2
