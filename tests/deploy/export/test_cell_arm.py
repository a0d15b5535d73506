"""One policy package per arm of a trained cell model: the same weights with the arm's agent baked in, verified and
loaded like any package, the manifest naming the cell and the agent, refused when tampered with; ``robot-grpo
export`` on a cell checkpoint writes both."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from export_fixtures import flip_byte
from stable_baselines3.common.env_util import make_vec_env

import envs
from deploy.cell.policy_input import PARTNER_FIELD, is_cell_arm, robot_contract
from deploy.export.cell_arm import ARM_VIEW_ENV_ID, CELL_ENV_ID, export_cell_arms
from deploy.export.exporter import ExportConfig
from deploy.runtime.package import PackageError, load_package
from envs.cell_arm_view import CellArmView
from launch import job_export
from launch.jobs import validate_launch
from launch.schema import LaunchError
from robot_grpo import GRPO, CellGRPO

EPISODE_STEPS = 10
CELL = {"delay": 1, "max_episode_steps": EPISODE_STEPS}
TRAIN_STEPS = 200  # a tiny cell model: its weights, not its skill, are what the packages must carry


def small_checks() -> ExportConfig:
    return ExportConfig(
        n_parity_obs=300, n_calibration_obs=300, n_episodes=3, latency_calls=20, build_engine=False,
        allow_small_checks=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def cell_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[CellGRPO, Path]:
    """A CellGRPO (shared trunk + heads) trained for a few hundred cell steps, and its checkpoint."""
    vec = make_vec_env("TwoArmCell-v0", n_envs=4, seed=0, env_kwargs={**CELL, "end_on_violation": False})
    model = CellGRPO(
        "MultiInputPolicy", vec, sharing="heads", seed=0, group_size=2, n_groups=2, batch_size=64, n_epochs=1,
        policy_kwargs={"net_arch": [16]},
    )  # fmt: skip
    model.learn(TRAIN_STEPS)
    path = tmp_path_factory.mktemp("cell") / "model.zip"
    model.save(path)
    return model, path


@pytest.fixture(scope="module")
def arm_packages(cell_model, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    model, _ = cell_model
    return export_cell_arms(model, tmp_path_factory.mktemp("pk") / "cell", CELL, small_checks())


def test_each_arm_package_is_the_cell_policy_for_its_agent(cell_model, arm_packages) -> None:
    model, _ = cell_model
    cell = envs.two_arm_cell_parallel_env(**CELL)
    obs_by_agent, _ = cell.reset(seed=3)
    for _ in range(3):  # a few steps in: the history and the partner are not at their start values
        obs_by_agent, *_ = cell.step(model.predict(obs_by_agent, deterministic=True)[0])
    expected, _ = model.predict(obs_by_agent, deterministic=True)
    view = CellArmView(**CELL)
    for arm, folder in enumerate(arm_packages):
        package = load_package(folder)  # the normal loader: digest, files, self-test
        assert folder.name == f"arm_{arm}" and is_cell_arm(package.contract)
        assert dict(package.contract.state_fields)[PARTNER_FIELD] == 3
        assert robot_contract(package.contract).name == "fetch_reach"
        provenance = package.manifest["provenance"]
        assert provenance["cell"]["agent"] == f"arm_{arm}" and provenance["cell"]["agent_index"] == arm
        assert provenance["cell"]["env_id"] == CELL_ENV_ID and provenance["env_id"] == ARM_VIEW_ENV_ID
        assert provenance["algorithm"] == "CellGRPO" and provenance["cell"]["sharing"] == "heads"
        # the arm's own observation, in its package's layout (partner after the state, then the history)
        agent_obs = {k: v for k, v in obs_by_agent[f"arm_{arm}"].items()}
        stacked = {k: np.stack([obs_by_agent["arm_0"][k], obs_by_agent["arm_1"][k]]) for k in agent_obs}
        flat = package.contract.flatten(view.view(stacked, arm)).astype(np.float32)[None]
        action = package.make_backend("ort-cpu")(flat)
        np.testing.assert_allclose(np.asarray(action)[0], expected[f"arm_{arm}"], atol=1e-4)
    # the agents differ: arm 0's package on arm 1's observation is not arm 1's policy
    arm0 = load_package(arm_packages[0])
    other = arm0.make_backend("ort-cpu")(arm0.contract.flatten(view.view(stacked, 1)).astype(np.float32)[None])
    assert not np.allclose(np.asarray(other)[0], expected["arm_1"], atol=1e-4)
    view.close()


def test_a_tampered_arm_package_is_refused(arm_packages, tmp_path: Path) -> None:
    import shutil

    renamed = tmp_path / "renamed"
    shutil.copytree(arm_packages[1], renamed)
    manifest = json.loads((renamed / "manifest.json").read_text())
    manifest["provenance"]["cell"]["agent"] = "arm_0"  # claims the other arm: the seal no longer matches
    (renamed / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PackageError, match="manifest"):
        load_package(renamed)
    weights = tmp_path / "weights"
    shutil.copytree(arm_packages[0], weights)
    flip_byte(weights / "policy.onnx")
    with pytest.raises(PackageError, match="policy.onnx"):
        load_package(weights).make_backend("ort-cpu")


def test_export_job_writes_one_package_per_arm(cell_model, tmp_path: Path) -> None:
    _, checkpoint = cell_model
    out = tmp_path / "arms"
    config = validate_launch(
        {"job": "export", "env": {"id": CELL_ENV_ID, "delay": 1}, "checkpoint": str(checkpoint), "out_dir": str(out)}
    )
    model = GRPO.load(checkpoint, device="cpu")  # a cell checkpoint loads with GRPO.load, as the job loads it
    assert job_export.export_cell(model, config, {"delay": 1}, small_checks(), overwrite=False) == out
    for arm in (0, 1):
        package = load_package(out / f"arm_{arm}")
        assert package.manifest["provenance"]["checkpoint"] == str(checkpoint)
        assert package.manifest["provenance"]["cell"]["agent"] == f"arm_{arm}"


def test_export_job_refuses_a_single_arm_checkpoint_for_the_cell(tmp_path: Path) -> None:
    vec = make_vec_env("PointReach-v0", n_envs=2, seed=0)
    single = GRPO("MultiInputPolicy", vec, group_size=2, n_groups=1, n_steps=4, policy_kwargs={"net_arch": [8]})
    config = {"checkpoint": str(tmp_path / "m.zip"), "out_dir": str(tmp_path / "p")}
    with pytest.raises(LaunchError, match="not a cell model"):
        job_export.export_cell(single, config, {}, small_checks(), overwrite=False)
