"""Parity, closed-loop success and latency of every exported variant, and the package's report files.

Metrics:

- parity: per observation, the largest |action - torch action| over the action components; the report gives
  its maximum and 99th percentile over all parity observations (action units; 1 unit = ``action_scale_m``);
- closed loop: the share of seeded sim episodes that end in success, with the variant's onnxruntime session
  in the loop (the same seeds for every variant and for the torch policy);
- latency: wall time of one batch-1 call of the backend the runtime uses (``ort-cpu``, one thread, I/O
  binding), p50 and p99 in microseconds, after a warm-up.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

PARITY_PERCENTILE = 99.0
LATENCY_WARMUP_CALLS = 200
NS_PER_US = 1e3

#: Largest parity error (action units) each variant must stay under; the export fails above it.
PARITY_TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "int8": 3e-2, "engine": 2e-3}  # engine: TensorRT fp16
#: Largest closed-loop success drop (percentage points) against the torch policy, over the same seeds.
SUCCESS_TOLERANCE_PP = 1.0


def parity(reference: np.ndarray, actions: np.ndarray) -> dict[str, float]:
    """Max and p99 over observations of the per-observation max |actions - reference| (action units)."""
    if reference.shape != actions.shape:
        raise ValueError(f"reference {reference.shape} and actions {actions.shape} must have the same shape")
    err = np.abs(actions.astype(np.float64) - reference.astype(np.float64)).max(axis=1)
    return {
        "max_abs": float(err.max()),
        "p99_abs": float(np.percentile(err, PARITY_PERCENTILE)),
        "n_obs": len(err),
    }


def latency_us(call: Any, obs: np.ndarray, n_calls: int) -> dict[str, float]:
    """p50/p99 microseconds of ``call(obs[i:i+1])`` cycling over ``obs`` (batch 1)."""
    rows = [np.ascontiguousarray(obs[i : i + 1]) for i in range(min(len(obs), n_calls))]
    for i in range(LATENCY_WARMUP_CALLS):
        call(rows[i % len(rows)])
    times = np.empty(n_calls)
    for i in range(n_calls):
        row = rows[i % len(rows)]
        start = time.perf_counter_ns()
        call(row)
        times[i] = time.perf_counter_ns() - start
    return {
        "p50_us": float(np.percentile(times, 50) / NS_PER_US),
        "p99_us": float(np.percentile(times, 99) / NS_PER_US),
        "n_calls": n_calls,
    }


def success_gap_pp(success_rate: float, reference_rate: float) -> float:
    """success_rate - reference_rate in percentage points, rounded to 1e-6 pp (so 73% vs 74% is exactly 1.0 pp)."""
    return round(100.0 * (success_rate - reference_rate), 6)


def check_report(report: dict[str, Any]) -> list[str]:
    """Every tolerance the report breaks, as readable lines (empty when the package passes)."""
    problems = []
    torch_success = report["torch"]["success_rate"]
    for variant, row in report["variants"].items():
        limit = PARITY_TOLERANCE[variant]
        if row["parity"]["max_abs"] > limit:
            problems.append(f"{variant}: max |action - torch| {row['parity']['max_abs']:.3g} > {limit:g}")
        gap_pp = success_gap_pp(row["success_rate"], torch_success)
        if abs(gap_pp) > SUCCESS_TOLERANCE_PP:
            problems.append(
                f"{variant}: closed-loop success {row['success_rate']:.1%} vs torch {torch_success:.1%} "
                f"({gap_pp:+.1f} pp, limit +-{SUCCESS_TOLERANCE_PP:g} pp)"
            )
    return problems


def render_markdown(report: dict[str, Any]) -> str:
    """The human-readable ``report.md`` of a package."""
    torch_row = report["torch"]
    lines = [
        f"# Policy package report: {report['env_id']}",
        "",
        f"Parity over {report['n_parity_obs']} observations from sim rollouts (seeds {report['parity_seed']}+), "
        f"closed loop over {report['n_episodes']} seeded episodes (seeds {report['episode_seeds'][0]}.."
        f"{report['episode_seeds'][-1]}), latency of batch-1 calls on {report['latency_backend']} "
        f"({report['latency_calls']} calls).",
        "",
        "| variant | max abs err | p99 abs err | tolerance | success | vs torch (pp) | p50 us | p99 us |",
        "|---|---|---|---|---|---|---|---|",
        f"| torch (eager) | - | - | - | {torch_row['success_rate']:.1%} | - | "
        f"{torch_row['latency']['p50_us']:.1f} | {torch_row['latency']['p99_us']:.1f} |",
    ]
    for variant, row in report["variants"].items():
        drop = success_gap_pp(row["success_rate"], torch_row["success_rate"])
        lines.append(
            f"| {variant} | {row['parity']['max_abs']:.2e} | {row['parity']['p99_abs']:.2e} | "
            f"{PARITY_TOLERANCE[variant]:g} | {row['success_rate']:.1%} | {drop:+.1f} | "
            f"{row['latency']['p50_us']:.1f} | {row['latency']['p99_us']:.1f} |"
        )
    left_out = report.get("left_out", [])
    lines += [
        "",
        f"Left out by the export's variants setting (not in the package): {', '.join(left_out)}."
        if left_out
        else f"int8 scheme: {report['int8_scheme']}.",
        "",
        "fp16 on a CPU: onnxruntime x86 has no fp16 Gemm kernel and runs those nodes in fp32 on the fp16-rounded "
        "weights, so that row measures fp16 storage; fp16 arithmetic is checked on a GPU (the engine row when built "
        "here, the engine's self-test when built on the target, benchmarks/gpu_check.sh).",
        "",
        f"TensorRT engine: {report['engine']['status']}. {report['engine']['detail']}",
        "",
    ]
    problems = report.get("problems", [])
    lines.append("Result: **PASS**" if not problems else "Result: **FAIL**\n\n" + "\n".join(f"- {p}" for p in problems))
    return "\n".join(lines) + "\n"


def write_report(folder: Path, report: dict[str, Any]) -> list[Path]:
    json_path, md_path = folder / "report.json", folder / "report.md"
    json_path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    md_path.write_text(render_markdown(report))
    return [json_path, md_path]
