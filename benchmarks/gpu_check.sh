#!/usr/bin/env bash
# GPU check, one command, a few minutes at most:
#   bash benchmarks/gpu_check.sh [PACKAGE_DIR]
# builds the TensorRT fp16 engine from the package (in a copy), checks the actions of onnxruntime CUDA, the
# TensorRT execution provider and the native engine against onnxruntime CPU fp32 on sim rollouts, and reports
# batch-1 / batch-64 latency. Without PACKAGE_DIR it first exports a small GRPO PointReach package (~20 s).
# Needs on the GPU machine: onnxruntime-gpu, tensorrt (10.x or 11.x) and cuda-python next to the project's
# [sim,export] extras; whatever is missing is reported as skipped, with the reason. Results:
# benchmarks/results/gpu_check.{json,md}. Exit 1 when a GPU backend disagrees with fp32 or the build fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
else
  echo "nvidia-smi not found: no NVIDIA GPU visible here; the GPU rows will be skipped."
fi
PACKAGE="${1:-}"
if [ -z "$PACKAGE" ]; then
  PACKAGE="$(mktemp -d)/gpu_check_package"
  timeout 300 "$PY" benchmarks/gpu_check.py --make-package "$PACKAGE" 2>&1 | grep -v "torchvision is not installed" || true
  [ -f "$PACKAGE/manifest.json" ] || { echo "could not export the check package"; exit 2; }
fi
timeout 600 "$PY" benchmarks/gpu_check.py "$PACKAGE"
