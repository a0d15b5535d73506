"""Training guards: non-finite detection with a snapshot for post-mortem, KL guards, last-good-weights rollback.

On a NaN/inf in any loss term or gradient, :func:`write_nonfinite_snapshot` saves the policy weights, the
optimizer state and the offending minibatch (``torch.save`` of tensors and state dicts, loadable with
``torch.load(path, weights_only=True)``) and :class:`NonFiniteError` names the tensor and the update number.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from typing import Any

import torch as th
from torch import nn

EARLY_STOP_KL_FACTOR = 1.5  # stop the update when approx KL > 1.5 x target_kl
ROLLBACK_KL_FACTOR = 2.0  # restore the last good weights (and halve the lr) when approx KL > 2 x target_kl
KL_OK, KL_EARLY_STOP, KL_ROLLBACK = "ok", "early_stop", "rollback"
ADAPTIVE_BETA_TOLERANCE = 1.5  # adapt beta when kl_ref leaves [target / 1.5, target * 1.5]
ADAPTIVE_BETA_STEP = 2.0
NONFINITE_FOLDER = "nonfinite_snapshots"  # default snapshot folder, under the run's log folder or the cwd


def nonfinite_dir(snapshot_dir: str | None, log_folder: str | None) -> str:
    """Where a snapshot goes: ``snapshot_dir`` if given, else ``<log_folder>/nonfinite_snapshots``, else
    ``nonfinite_snapshots`` in the working directory at the time of the failure (resolved when called)."""
    if snapshot_dir is not None:
        return snapshot_dir
    return os.path.join(log_folder or os.getcwd(), NONFINITE_FOLDER)


def kl_verdict(approx_kl: float, target_kl: float | None) -> str:
    """KL guard of one minibatch: ``KL_ROLLBACK`` above 2 x target, ``KL_EARLY_STOP`` above 1.5 x, else ``KL_OK``
    (always ``KL_OK`` when ``target_kl`` is None)."""
    if target_kl is None:
        return KL_OK
    if approx_kl > ROLLBACK_KL_FACTOR * target_kl:
        return KL_ROLLBACK
    if approx_kl > EARLY_STOP_KL_FACTOR * target_kl:
        return KL_EARLY_STOP
    return KL_OK


def adapted_beta(beta: float, kl_ref: float, target_kl: float) -> float:
    """Adaptive KL coefficient: x2 when kl_ref > 1.5 x target, /2 when kl_ref < target / 1.5, else unchanged."""
    if kl_ref > ADAPTIVE_BETA_TOLERANCE * target_kl:
        return beta * ADAPTIVE_BETA_STEP
    if kl_ref < target_kl / ADAPTIVE_BETA_TOLERANCE:
        return beta / ADAPTIVE_BETA_STEP
    return beta


class NonFiniteError(FloatingPointError):
    """A loss term or gradient became NaN or inf during a GRPO update."""


def first_nonfinite(tensors: Mapping[str, th.Tensor]) -> str | None:
    """Name of the first tensor holding a NaN or inf, or None when all are finite."""
    for name, value in tensors.items():
        if not bool(th.isfinite(value).all()):
            return name
    return None


def first_nonfinite_grad(named_parameters: Iterable[tuple[str, nn.Parameter]]) -> str | None:
    """``grad/<parameter name>`` of the first parameter whose gradient holds a NaN or inf, else None."""
    for name, param in named_parameters:
        if param.grad is not None and not bool(th.isfinite(param.grad).all()):
            return f"grad/{name}"
    return None


def write_nonfinite_snapshot(
    directory: str,
    update: int,
    tensor_name: str,
    policy: nn.Module,
    optimizer: th.optim.Optimizer,
    batch: Mapping[str, th.Tensor],
    terms: Mapping[str, th.Tensor],
) -> str:
    """Write the post-mortem snapshot and return its path (``<directory>/nonfinite_update<N>.pt``)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"nonfinite_update{update}.pt")
    th.save(
        {
            "update": update,
            "tensor": tensor_name,
            "policy": policy.state_dict(),
            "optimizer": optimizer.state_dict(),
            "batch": {k: v.detach().cpu() for k, v in batch.items()},
            "terms": {k: v.detach().cpu() for k, v in terms.items()},
        },
        path,
    )
    return path


class LastGood:
    """Copy of the policy and optimizer state, restored on a KL spike."""

    def __init__(self) -> None:
        self._policy: dict[str, Any] | None = None
        self._optimizer: dict[str, Any] | None = None

    def capture(self, policy: nn.Module, optimizer: th.optim.Optimizer) -> None:
        self._policy = {k: v.detach().clone() for k, v in policy.state_dict().items()}
        self._optimizer = copy.deepcopy(optimizer.state_dict())

    def restore(self, policy: nn.Module, optimizer: th.optim.Optimizer) -> None:
        if self._policy is None or self._optimizer is None:
            raise RuntimeError("no last-good state captured; call capture() at the start of each epoch")
        policy.load_state_dict(self._policy)
        optimizer.load_state_dict(self._optimizer)
