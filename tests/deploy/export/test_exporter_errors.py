"""Exporter behaviour around the happy path: failing checks are not installed, EWC anchor, bad arguments."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from export_fixtures import POINT_ENV_ID, POINT_ENV_KWARGS, TinyGoalPolicy

from deploy.export import exporter, verify
from deploy.export.exporter import EwcAnchor, ExportCheckError, ExportConfig, export_package
from deploy.runtime.package import PackageError, load_package

SMALL = {
    "allow_small_checks": True,
    "n_parity_obs": 300,
    "n_calibration_obs": 600,
    "n_episodes": 5,
    "latency_calls": 50,
}
PROVENANCE = {"algorithm": "behaviour cloning (test)"}


def test_a_package_that_breaks_a_tolerance_is_not_installed(
    bc_policy: TinyGoalPolicy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(verify.PARITY_TOLERANCE, "fp16", 1e-9)  # no real fp16 model meets this
    out = tmp_path / "pkg"
    with pytest.raises(ExportCheckError, match=r"fp16: max \|action - torch\|"):
        export_package(bc_policy, out, POINT_ENV_ID, POINT_ENV_KWARGS, PROVENANCE, config=ExportConfig(**SMALL))
    assert not out.exists()
    rejected = tmp_path / "pkg.rejected"
    assert "FAIL" in (rejected / "report.md").read_text()
    with pytest.raises(PackageError, match="failed its export checks and must not run on a robot"):
        load_package(rejected)
    assert load_package(rejected, allow_failed_checks=True).manifest["checks"]["passed"] is False
    assert [p.name for p in tmp_path.iterdir()] == ["pkg.rejected"]  # no temporary folder left behind


def test_ewc_anchor_is_shipped_and_verified(bc_policy: TinyGoalPolicy, tmp_path: Path) -> None:
    params = {name: p.detach().numpy().copy() for name, p in bc_policy.named_parameters()}
    fisher = {name: np.full_like(value, 0.25) for name, value in params.items()}
    anchor = EwcAnchor(params, fisher, meta={"fisher_samples": 1000})
    out = export_package(
        bc_policy, tmp_path / "pkg", POINT_ENV_ID, POINT_ENV_KWARGS, PROVENANCE, anchor, ExportConfig(**SMALL)
    )
    package = load_package(out)
    assert package.manifest["ewc"] == {"file": "ewc.npz", "fisher_samples": 1000}
    loaded = package.load_ewc_anchor()
    assert loaded is not None and set(loaded["params"]) == set(params)
    for name, value in params.items():
        np.testing.assert_array_equal(loaded["params"][name], value.astype(np.float32))
        np.testing.assert_array_equal(loaded["fisher"][name], fisher[name])


def test_ewc_anchor_refuses_a_fisher_that_does_not_fit() -> None:
    with pytest.raises(ValueError, match="same, non-empty set"):
        EwcAnchor({"w": np.ones(2)}, {"v": np.ones(2)})
    with pytest.raises(ValueError, match="shape"):
        EwcAnchor({"w": np.ones(2)}, {"w": np.ones(3)})
    with pytest.raises(ValueError, match=">= 0"):
        EwcAnchor({"w": np.ones(2)}, {"w": -np.ones(2)})


def test_arguments_are_checked(bc_policy: TinyGoalPolicy, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=">= 10000 parity observations"):
        ExportConfig(n_parity_obs=100)
    (tmp_path / "exists").mkdir()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_package(bc_policy, tmp_path / "exists", POINT_ENV_ID, POINT_ENV_KWARGS, PROVENANCE)
    with pytest.raises(ValueError, match="name the 'algorithm'"):
        export_package(bc_policy, tmp_path / "new", POINT_ENV_ID, POINT_ENV_KWARGS)
    with pytest.raises(TypeError, match="cannot export a dict"):
        exporter.load_policy({"weights": 1})


def test_one_episode_in_a_hundred_is_exactly_one_percentage_point() -> None:
    assert 100 * (0.73 - 0.74) != -1.0  # the float trap this guards against
    assert verify.success_gap_pp(0.73, 0.74) == -1.0
    report = {
        "torch": {"success_rate": 0.73},
        "variants": {
            "int8": {"parity": {"max_abs": 0.0}, "success_rate": 0.74},
            "fp16": {"parity": {"max_abs": 0.0}, "success_rate": 0.71},
        },
    }
    assert verify.check_report(report) == ["fp16: closed-loop success 71.0% vs torch 73.0% (-2.0 pp, limit +-1 pp)"]


def test_a_variant_left_out_is_not_built_shipped_or_run(bc_policy: TinyGoalPolicy, tmp_path: Path) -> None:
    """A policy whose int8 cannot meet its tolerance ships without it; asking the package for it names what it has."""
    config = ExportConfig(**SMALL, variants=("fp16", "fp32"))
    out = export_package(bc_policy, tmp_path / "pkg", POINT_ENV_ID, POINT_ENV_KWARGS, PROVENANCE, config=config)
    package = load_package(out)
    assert package.variants == ["fp32", "fp16"]
    assert not (out / "policy_int8.onnx").exists()
    assert "Left out by the export's variants setting (not in the package): int8." in (out / "report.md").read_text()
    with pytest.raises(PackageError, match=r"variant 'int8' is not in this package; it has \['fp32', 'fp16'\]"):
        package.make_backend("ort-cpu", "int8")


@pytest.mark.parametrize("variants", [("fp16", "int8"), ("fp32", "engine"), ("fp32", "fp32")])
def test_variants_without_fp32_unknown_or_repeated_are_refused(variants: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="variants must be distinct ONNX variants"):
        ExportConfig(**SMALL, variants=variants)
