"""What the manifest records about where a policy came from: training provenance and library versions."""

from __future__ import annotations

import math
import platform
from importlib import metadata
from typing import Any

LIBRARIES = (
    "numpy",
    "torch",
    "onnx",
    "onnxscript",
    "onnxruntime",
    "onnxruntime-gpu",
    "tensorrt",
    "gymnasium",
    "gymnasium-robotics",
    "mujoco",
    "stable-baselines3",
)
_SCALARS = (bool, int, float, str, type(None))
# Attributes SB3 keeps on the algorithm that are state or bookkeeping, not hyperparameters.
_NOT_HYPERPARAMETERS = frozenset({"verbose", "num_timesteps", "start_time", "_num_timesteps_at_start", "n_envs"})


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries that shape the exported graphs and the checks (absent ones left out)."""
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON-ready copy of simple values; classes and functions become their qualified names."""
    max_depth = 4
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, _SCALARS):
        return value
    if depth < max_depth and isinstance(value, (list, tuple)):
        return [jsonable(v, depth + 1) for v in value]
    if depth < max_depth and isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, type) or callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"
    if hasattr(value, "item") and getattr(value, "size", 0) == 1:
        return jsonable(value.item(), depth + 1)
    return repr(value)


def algorithm_provenance(model: Any) -> dict[str, Any]:
    """Provenance of an SB3-style algorithm object (GRPO): class, hyperparameters, steps, seed, final success.

    Hyperparameters are the public scalar attributes the constructor stored (SB3 keeps them on the object), plus
    ``policy_kwargs``; schedules and objects are left out.
    """
    hyper = {
        key: value
        for key, value in vars(model).items()
        if not key.startswith("_") and isinstance(value, (bool, int, float, str)) and key not in _NOT_HYPERPARAMETERS
    }
    if getattr(model, "policy_kwargs", None) is not None:
        hyper["policy_kwargs"] = jsonable(model.policy_kwargs)
    success_buffer = getattr(model, "ep_success_buffer", None)
    final_success = float(sum(success_buffer) / len(success_buffer)) if success_buffer else None
    return {
        "algorithm": type(model).__name__,
        "algorithm_module": type(model).__module__,
        "hyperparameters": jsonable(hyper),
        "total_timesteps": int(getattr(model, "num_timesteps", 0)),
        "seed": getattr(model, "seed", None),
        "final_success_rate": final_success,
        "final_success_source": "mean is_success of the last training episodes (ep_success_buffer, sampled actions)",
    }
