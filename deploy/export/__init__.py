"""Export: torch policy -> verified policy package (ONNX fp32 / fp16 / int8, TensorRT engine, manifest, report).

``export_package`` lives in :mod:`deploy.export.exporter` (it needs torch). This ``__init__`` imports nothing, so
``python -m deploy.export.tensorrt_build`` runs on a robot computer that has TensorRT but no torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["export_package"]


def __getattr__(name: str) -> Any:
    if name == "export_package":
        from deploy.export.exporter import export_package

        return export_package
    raise AttributeError(f"module 'deploy.export' has no attribute {name!r}")
