"""Policy package loading: hashes, self-sealed manifest, format version, variants, EWC anchor (no torch here)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from package_fixtures import BIAS, CONTRACT, WEIGHT, flip_byte, make_package

from deploy.runtime.package import PACKAGE_FORMAT_VERSION, PackageError, load_package, sha256_file, write_manifest


def test_a_valid_package_loads_with_its_contract_and_variants(tmp_path: Path) -> None:
    package = load_package(make_package(tmp_path / "pkg"))
    assert package.contract == CONTRACT
    assert package.variants == ["fp32", "fp16", "int8"]
    assert package.action_delay_steps == (2, 2)
    assert package.model_path("int8") == tmp_path / "pkg" / "policy_int8.onnx"
    assert package.load_ewc_anchor() is None


def test_backend_from_the_package_computes_the_linear_policy(tmp_path: Path) -> None:
    package = load_package(make_package(tmp_path / "pkg"))
    backend = package.make_backend("ort-cpu", "fp32")
    obs = np.random.default_rng(0).normal(size=(5, CONTRACT.flat_dim)).astype(np.float32)
    np.testing.assert_allclose(backend(obs), np.clip(obs @ WEIGHT + BIAS, -1, 1), atol=1e-6)


@pytest.mark.parametrize("name", ["manifest.json", "policy.onnx", "policy_fp16.onnx", "policy_int8.onnx", "report.md"])
def test_a_flipped_byte_in_any_file_is_refused_and_the_error_names_it(tmp_path: Path, name: str) -> None:
    folder = make_package(tmp_path / "pkg")
    flip_byte(folder / name)
    with pytest.raises(PackageError) as err:
        load_package(folder)
    assert name in str(err.value)


def test_every_single_byte_of_the_manifest_is_protected(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg")
    raw = (folder / "manifest.json").read_bytes()
    for index in range(0, len(raw), 7):  # every 7th byte: whitespace, keys, values and the digest itself
        (folder / "manifest.json").write_bytes(raw)
        flip_byte(folder / "manifest.json", index)
        with pytest.raises(PackageError, match="manifest.json"):
            load_package(folder)


def test_a_missing_or_unlisted_file_is_refused(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg")
    (folder / "policy_int8.onnx").unlink()
    with pytest.raises(PackageError, match="policy_int8.onnx.*missing"):
        load_package(folder)
    package = load_package(make_package(tmp_path / "pkg2"))
    with pytest.raises(PackageError, match="not listed"):
        package.read_verified("extra.bin")


def test_a_file_changed_after_loading_is_refused_when_the_backend_is_made(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg")
    package = load_package(folder)
    flip_byte(folder / "policy.onnx")
    with pytest.raises(PackageError, match="policy.onnx"):
        package.make_backend("ort-cpu", "fp32")


def test_a_future_format_version_is_refused(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg", format_version=PACKAGE_FORMAT_VERSION + 1)
    with pytest.raises(PackageError, match="newer than this runtime reads"):
        load_package(folder)


def test_a_path_escaping_the_package_is_refused(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["../outside.onnx"] = manifest["files"]["policy.onnx"]
    write_manifest(folder, manifest)
    with pytest.raises(PackageError, match="plain file name"):
        load_package(folder)


def test_engine_variant_without_an_engine_says_how_to_build_it(tmp_path: Path) -> None:
    package = load_package(make_package(tmp_path / "pkg"))
    with pytest.raises(PackageError, match="python -m deploy.export.tensorrt_build PKG"):
        package.model_path("engine")
    with pytest.raises(ValueError, match="native 'tensorrt' backend runs the 'engine' variant"):
        package.make_backend("ort-cpu", "engine")
    with pytest.raises(ValueError, match="unknown variant"):
        package.model_path("bf16")


def test_ewc_anchor_loads_without_pickle(tmp_path: Path) -> None:
    package = load_package(make_package(tmp_path / "pkg", ewc=True))
    anchor = package.load_ewc_anchor()
    assert anchor is not None
    np.testing.assert_array_equal(anchor["params"]["w"], np.ones(3))
    np.testing.assert_array_equal(anchor["fisher"]["w"], np.full(3, 0.5))
    # the stored arrays are plain .npy members, loadable with allow_pickle=False
    with np.load(io.BytesIO((tmp_path / "pkg" / "ewc.npz").read_bytes()), allow_pickle=False) as data:
        assert sorted(data.files) == ["fisher/w", "param/w"]


def test_not_a_package(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match="not a policy package"):
        load_package(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PackageError, match="manifest.json: is missing"):
        load_package(tmp_path / "empty")


def with_selftest(folder: Path, actions_offset: float = 0.0) -> Path:
    """Add a self-test set computed from the linear policy (optionally wrong by ``actions_offset``) and re-seal."""
    obs = np.random.default_rng(1).normal(size=(100, CONTRACT.flat_dim)).astype(np.float32)
    actions = np.clip(obs @ WEIGHT + BIAS, -1, 1) + actions_offset
    np.savez(folder / "selftest.npz", obs=obs, actions=actions.astype(np.float32))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["selftest.npz"] = sha256_file(folder / "selftest.npz")
    manifest["selftest"] = {"file": "selftest.npz", "tolerance": {"fp32": 1e-5, "fp16": 2e-3, "int8": 3e-2}}
    write_manifest(folder, manifest)
    return folder


def test_make_backend_self_tests_against_the_shipped_actions(tmp_path: Path) -> None:
    package = load_package(with_selftest(make_package(tmp_path / "good")))
    backend = package.make_backend("ort-cpu", "fp32")
    assert package.self_test(backend, "fp32") <= 1e-6
    wrong = load_package(with_selftest(make_package(tmp_path / "wrong"), actions_offset=1e-3))
    with pytest.raises(PackageError, match=r"selftest.npz: self-test of variant 'fp32'.*> tolerance 1e-05"):
        wrong.make_backend("ort-cpu", "fp32")
    assert wrong.make_backend("ort-cpu", "int8") is not None  # 1e-3 is inside the int8 tolerance
    with pytest.raises(PackageError, match="no self-test set"):
        load_package(make_package(tmp_path / "none", selftest=False)).self_test(backend, "fp32")


def test_a_package_that_failed_its_checks_is_refused(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg", checks={"passed": False, "problems": ["int8: max err 0.5 > 0.03"]})
    with pytest.raises(PackageError, match="must not run on a robot: int8: max err 0.5"):
        load_package(folder)
    assert load_package(folder, allow_failed_checks=True).variants == ["fp32", "fp16", "int8"]


def test_an_fp16_computing_backend_is_held_to_the_fp16_tolerance(tmp_path: Path) -> None:
    package = load_package(with_selftest(make_package(tmp_path / "pkg"), actions_offset=1e-3))
    backend = package.make_backend("ort-cpu", "fp32", self_test=False)
    with pytest.raises(PackageError, match="> tolerance 1e-05"):
        package.self_test(backend, "fp32")
    backend.compute_precision = "fp16"  # what the TensorRT EP reports: it runs fp32 models with fp16 enabled
    assert package.self_test(backend, "fp32") == pytest.approx(1e-3, rel=1e-3)


@pytest.mark.parametrize(
    ("make", "name", "match"),
    [
        (lambda f: (f / "notes.txt").write_text("extra"), "notes.txt", "is a file the manifest does not list"),
        (lambda f: (f / "policy.onnx.bak").write_bytes(b"old model"), "policy.onnx.bak", "does not list"),
        (lambda f: (f / "extra").mkdir(), "extra", "is a folder the manifest does not list"),
        (lambda f: (f / "evil.onnx").symlink_to("/etc/hostname"), "evil.onnx", "is a symbolic link"),
    ],
    ids=["extra_file", "backup_copy", "subfolder", "unlisted_symlink"],
)
def test_anything_the_manifest_does_not_list_is_refused_by_name(tmp_path: Path, make, name: str, match: str) -> None:
    folder = make_package(tmp_path / "pkg")
    make(folder)
    with pytest.raises(PackageError, match=match) as err:
        load_package(folder)
    assert name in str(err.value)


def test_a_listed_file_replaced_by_a_symlink_is_refused(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg")
    real = tmp_path / "elsewhere.onnx"
    (folder / "policy.onnx").rename(real)
    (folder / "policy.onnx").symlink_to(real)  # same bytes, same hash: only the link gives it away
    with pytest.raises(PackageError, match="policy.onnx: is a symbolic link"):
        load_package(folder)


def test_a_model_whose_output_size_does_not_match_the_contract_is_refused_at_load(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg", outputs=2)  # the contract says 3 actions
    package = load_package(folder)  # the manifest itself is consistent
    with pytest.raises(PackageError, match=r"policy.onnx: the model maps 18 inputs to 2 outputs.*needs 18 -> 3"):
        package.make_backend("ort-cpu", "fp32")


def test_io_shapes_in_the_manifest_must_match_the_contract(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg", io={"input_shape": ["batch", 18], "output_shape": ["batch", 4]})
    with pytest.raises(PackageError, match=r"manifest.json: its io shapes .* do not match its contract \(18 -> 3\)"):
        load_package(folder)
