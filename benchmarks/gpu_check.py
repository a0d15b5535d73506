"""GPU check of a policy package: build the TensorRT fp16 engine, compare every GPU backend with onnxruntime
CPU fp32, and time them (batch 1 and 64). Run through ``benchmarks/gpu_check.sh``.

Backends checked (each one that is not available here is reported as skipped, with the reason):

- ``ort-cuda`` on ``policy.onnx`` (fp32) and ``policy_fp16.onnx``;
- ``ort-trt`` on ``policy.onnx`` (TensorRT execution provider with fp16 enabled);
- ``tensorrt``: the native engine built here from the package (``deploy.export.tensorrt_build``, which also
  self-tests it), in a copy of the package so the original is left as it was.

Each backend also runs the package's shipped self-test (torch actions recorded at export) and must pass it.

Observations: sim rollouts of the package's own fp32 policy in the env named in its manifest (so the check
sees the states the robot will see). Tolerance against ort-cpu fp32: the fp16 parity tolerance (2e-3).

    .venv/bin/python benchmarks/gpu_check.py PACKAGE_DIR [--obs 4096] [--calls 2000]
    .venv/bin/python benchmarks/gpu_check.py --make-package DIR   (a small GRPO PointReach package, ~20 s)
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from deploy.export.rollouts import collect_observations, make_env
from deploy.export.tensorrt_build import TensorRTUnavailableError, build_into_package, tensorrt_status
from deploy.export.verify import PARITY_TOLERANCE, latency_us, parity
from deploy.runtime.backends import BackendUnavailableError, available_backends
from deploy.runtime.package import PackageError, load_package

RESULTS = Path(__file__).resolve().parent / "results"
CHECK_BATCH = 64
TOLERANCE = PARITY_TOLERANCE["fp16"]
OBS_SEED = 40_000
KIB_PER_MIB = 1024.0
# (row name, backend, variant)
ROWS = (
    ("ort-cpu fp32 (reference)", "ort-cpu", "fp32"),
    ("ort-cuda fp32", "ort-cuda", "fp32"),
    ("ort-cuda fp16", "ort-cuda", "fp16"),
    ("ort-trt (fp16 enabled)", "ort-trt", "fp32"),
    ("tensorrt engine (native)", "tensorrt", "engine"),
)


def make_package(folder: Path) -> Path:
    """Train a small GRPO policy on PointReach (seconds) and export it (no TensorRT build: that is the check's job)."""
    import envs  # noqa: F401
    from deploy.export.exporter import ExportConfig, export_package
    from robot_grpo.grpo import GRPO

    model = GRPO("MultiInputPolicy", "PointReach-v0", group_size=4, n_groups=2, batch_size=512, n_epochs=4, seed=0)
    model.learn(9_600)
    return export_package(model, folder, "PointReach-v0", config=ExportConfig(build_engine=False), overwrite=True)


def batched(call: Any, obs: np.ndarray) -> np.ndarray:
    return np.concatenate([call(obs[i : i + CHECK_BATCH]) for i in range(0, len(obs), CHECK_BATCH)])


def run_check(package_dir: Path, n_obs: int, calls: int) -> dict[str, Any]:
    reference_package = load_package(package_dir)
    provenance = reference_package.manifest["provenance"]
    env = make_env(provenance["env_id"], provenance.get("env_kwargs") or {})
    cpu = reference_package.make_backend("ort-cpu", "fp32")
    obs = collect_observations(env, cpu, n_obs, OBS_SEED, action_noise_std=0.3)
    env.close()
    reference = batched(cpu, obs)

    result: dict[str, Any] = {"package": str(package_dir), "available_backends": available_backends(), "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "package"
        shutil.copytree(package_dir, work)
        ok, reason = tensorrt_status()
        engine: dict[str, Any] = {"status": "skipped", "detail": reason}
        if ok:
            start = time.perf_counter()
            try:
                build_into_package(work)
                engine = {"status": "built", **load_package(work).manifest["engine"]}
                engine["build_s"] = time.perf_counter() - start
            except (TensorRTUnavailableError, RuntimeError, ValueError) as exc:
                engine = {"status": "failed", "detail": str(exc)}
        result["engine_build"] = engine
        package = load_package(work)
        for name, backend_name, variant in ROWS:
            row: dict[str, Any] = {"row": name, "backend": backend_name, "variant": variant}
            try:
                backend = package.make_backend(backend_name, variant, self_test=False)  # self-tested just below
            except (BackendUnavailableError, ValueError, OSError) as exc:
                result["rows"].append({**row, "status": "skipped", "detail": str(exc)})
                continue
            if package.manifest.get("selftest"):
                try:
                    row["selftest_max_abs"] = package.self_test(backend, variant)
                except PackageError as exc:
                    row["selftest_failed"] = str(exc)
            row["parity"] = parity(reference, batched(backend, obs))
            within = row["parity"]["max_abs"] <= TOLERANCE or backend_name == "ort-cpu"
            row["passed"] = within and "selftest_failed" not in row
            row["latency_batch1"] = latency_us(backend, obs, calls)
            row["latency_batch64"] = latency_us(lambda x, b=backend: b(obs[:CHECK_BATCH]), obs, max(1, calls // 8))
            result["rows"].append({**row, "status": "ran"})
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / KIB_PER_MIB
    return result


def write_results(result: dict[str, Any]) -> str:
    lines = [
        "# GPU check",
        "",
        f"Package: `{result['package']}`; available backends: {result['available_backends']}.",
        f"Engine build: {result['engine_build']['status']} ({result['engine_build'].get('detail', '')}"
        f"{result['engine_build'].get('tensorrt_version', '')} {result['engine_build'].get('device', '')}).",
        "",
        f"| backend | status | max abs err vs ort-cpu fp32 (tol {TOLERANCE:g}) | b1 p50 us | b1 p99 us | b64 p50 us |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        if r["status"] != "ran":
            lines.append(f"| {r['row']} | skipped: {r['detail']} | - | - | - | - |")
            continue
        verdict = "ok" if r["passed"] else "FAIL"
        lines.append(
            f"| {r['row']} | {verdict} | {r['parity']['max_abs']:.2e} | {r['latency_batch1']['p50_us']:.1f} | "
            f"{r['latency_batch1']['p99_us']:.1f} | {r['latency_batch64']['p50_us']:.1f} |"
        )
    lines += ["", f"Peak memory (ru_maxrss): {result['peak_rss_mib']:.0f} MiB.", ""]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gpu_check.json").write_text(json.dumps(result, indent=2) + "\n")
    markdown = "\n".join(lines)
    (RESULTS / "gpu_check.md").write_text(markdown)
    return markdown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", type=Path, nargs="?", help="policy package folder")
    parser.add_argument("--make-package", type=Path, help="export a small GRPO PointReach package here and exit")
    parser.add_argument("--obs", type=int, default=4_096, help="rollout observations compared per backend")
    parser.add_argument("--calls", type=int, default=2_000, help="timed batch-1 calls per backend")
    args = parser.parse_args()
    if args.make_package is not None:
        print(make_package(args.make_package))
        return 0
    if args.package is None:
        parser.error("give a package folder (or --make-package DIR first)")
    result = run_check(args.package, args.obs, args.calls)
    print(write_results(result))
    gpu_rows = [r for r in result["rows"] if r["backend"] != "ort-cpu"]
    if not any(r["status"] == "ran" for r in gpu_rows):
        print("No GPU backend is available here: nothing was checked on a GPU (see the skipped reasons above).")
    failed = [r["row"] for r in gpu_rows if r["status"] == "ran" and not r["passed"]]
    if failed or result["engine_build"]["status"] == "failed":
        print(f"GPU check FAILED: {failed or 'engine build'}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
