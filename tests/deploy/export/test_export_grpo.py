"""Export of a GRPO policy trained here for a few seconds, read back from its checkpoint (GRPO.load)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deploy.export.exporter import ExportConfig, export_package
from deploy.export.rollouts import make_env
from deploy.export.verify import PARITY_TOLERANCE, SUCCESS_TOLERANCE_PP, success_gap_pp
from deploy.runtime.package import load_package

POINT_STEPS = 9_600  # ~4 s on one core; enough for a policy that reaches some goals
FETCH_STEPS = 9_600  # the DESIGN prototype budget: a policy that succeeds often enough to compare
SEED = 0


def train_and_export(env_id: str, steps: int, folder: Path, **config: int) -> tuple[Path, object]:
    import envs  # noqa: F401  (registers the ids)
    from robot_grpo.grpo import GRPO

    model = GRPO("MultiInputPolicy", env_id, group_size=4, n_groups=2, batch_size=512, n_epochs=4, seed=SEED)
    model.learn(steps)
    checkpoint = folder / "grpo.zip"
    model.save(checkpoint)
    package = export_package(checkpoint, folder / "package", env_id, config=ExportConfig(latency_calls=500, **config))
    return package, model


@pytest.fixture(scope="module")
def grpo_point(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    return train_and_export("PointReach-v0", POINT_STEPS, tmp_path_factory.mktemp("grpo_point"))


def test_grpo_checkpoint_exports_with_parity_and_closed_loop_within_tolerance(grpo_point: tuple[Path, object]) -> None:
    folder, _ = grpo_point
    report = json.loads((folder / "report.json").read_text())
    torch_success = report["torch"]["success_rate"]
    for variant, row in report["variants"].items():
        print(
            f"GRPO PointReach {variant}: max {row['parity']['max_abs']:.3g} p99 {row['parity']['p99_abs']:.3g} "
            f"success {row['success_rate']:.2f} (torch {torch_success:.2f})"
        )
        assert row["parity"]["max_abs"] <= PARITY_TOLERANCE[variant]
        assert abs(success_gap_pp(row["success_rate"], torch_success)) <= SUCCESS_TOLERANCE_PP


def test_grpo_provenance_is_recorded(grpo_point: tuple[Path, object]) -> None:
    folder, model = grpo_point
    provenance = load_package(folder).manifest["provenance"]
    assert provenance["algorithm"] == "GRPO"
    assert provenance["total_timesteps"] == model.num_timesteps >= POINT_STEPS
    assert provenance["seed"] == SEED
    assert provenance["env_id"] == "PointReach-v0"
    assert provenance["hyperparameters"]["group_size"] == 4
    assert provenance["hyperparameters"]["gamma"] == pytest.approx(model.gamma)
    assert provenance["final_success_rate"] is not None


def test_env_dict_obs_through_the_package_equals_grpo_predict_on_the_dict(grpo_point: tuple[Path, object]) -> None:
    """GRPO.predict flattens the dict with the training side's code; the runtime uses the manifest's contract."""
    folder, model = grpo_point
    package = load_package(folder)
    backend = package.make_backend("ort-cpu", "fp32")
    env = make_env("PointReach-v0")
    for seed in range(2):
        obs, _ = env.reset(seed=seed)
        for _ in range(25):
            torch_action, _ = model.predict(obs, deterministic=True)
            onnx_action = backend(package.contract.flatten(obs)[None])[0]
            np.testing.assert_allclose(onnx_action, torch_action, atol=PARITY_TOLERANCE["fp32"], rtol=0)
            obs, *_ = env.step(onnx_action.astype(np.float64))


@pytest.mark.slow
def test_delayed_fetch_reach_grpo_export(tmp_path: Path) -> None:
    """The same checks on MuJoCo DelayedFetchReach (k=2): ~40k physics steps, so marked slow."""
    folder, _ = train_and_export("DelayedFetchReach-v0", FETCH_STEPS, tmp_path)
    package = load_package(folder)
    assert package.contract.name == "fetch_reach"
    assert package.action_delay_steps == (2, 2)
    trained_for = package.manifest["trained_for"]  # the robot spec the sim env was built from
    assert trained_for["robot_id"] == "sim_fetch" and trained_for["action_delay_steps"] == {"low": 2, "high": 2}
    assert trained_for["command_scale_m"] == package.contract.action_scale_m
    report = json.loads((folder / "report.json").read_text())
    assert report["problems"] == []
    for variant, row in report["variants"].items():
        print(
            f"GRPO Fetch {variant}: max {row['parity']['max_abs']:.3g} p99 {row['parity']['p99_abs']:.3g} "
            f"success {row['success_rate']:.2f} (torch {report['torch']['success_rate']:.2f})"
        )
