"""GRPO's constructor checks: every bad argument raises a ValueError that says what to pass instead."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from robot_grpo.advantages import ADVANTAGE_SCALES


def check_loss_terms(terms: Sequence[Any]) -> None:
    """Each extra loss term needs a str ``name`` and ``__call__(policy) -> scalar tensor``."""
    for term in terms:
        if not callable(term) or not isinstance(getattr(term, "name", None), str):
            raise ValueError(f"extra loss term {term!r} needs a str `name` and `__call__(policy) -> tensor`")


#: The model attributes check_grpo_arguments takes by name (all its keywords but ``n_envs``, which the env gives).
CHECKED_ARGUMENTS = (
    "group_size",
    "n_groups",
    "n_epochs",
    "batch_size",
    "gamma",
    "scale_advantages",
    "beta",
    "ent_coef",
    "bound_coef",
    "dual_clip",
    "target_kl",
    "adaptive_beta",
    "max_grad_norm",
    "ref_update_interval",
    "extra_loss_terms",
    "restart_fraction",
)


def check_grpo_arguments(
    *,
    group_size: int,
    n_groups: int,
    n_envs: int | None,
    n_epochs: int,
    batch_size: int,
    gamma: float,
    scale_advantages: str,
    beta: float,
    ent_coef: float,
    bound_coef: float,
    dual_clip: float | None,
    target_kl: float | None,
    adaptive_beta: bool,
    max_grad_norm: float,
    ref_update_interval: int,
    extra_loss_terms: Sequence[Any],
    restart_fraction: float = 0.0,
) -> None:
    """Check GRPO's hyperparameters (``n_envs`` None: no env yet, e.g. while loading)."""
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2 (the group is the baseline), got {group_size}")
    if n_groups < 1:
        raise ValueError(f"n_groups must be >= 1, got {n_groups}")
    if n_envs is not None and n_envs != group_size * n_groups:
        raise ValueError(
            f"the env has {n_envs} envs but group_size * n_groups = {group_size * n_groups}; "
            f"build it with make_vec_env(env_id, n_envs={group_size * n_groups}) or change n_groups"
        )
    if n_epochs < 1:
        raise ValueError(f"n_epochs must be >= 1, got {n_epochs}")
    if batch_size < 2:
        raise ValueError(f"batch_size must be >= 2 rows, got {batch_size}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if scale_advantages not in ADVANTAGE_SCALES:
        raise ValueError(f"scale_advantages must be one of {ADVANTAGE_SCALES}, got {scale_advantages!r}")
    if beta < 0 or ent_coef < 0:
        raise ValueError(f"beta and ent_coef must be >= 0, got beta={beta}, ent_coef={ent_coef}")
    if not bound_coef >= 0:
        raise ValueError(f"bound_coef must be >= 0 (0 = no action-bound penalty), got {bound_coef}")
    if dual_clip is not None and not dual_clip > 1.0:
        raise ValueError(
            f"dual_clip must be > 1 (rho * A is bounded at dual_clip * A for A < 0; e.g. 3.0) or None (off), "
            f"got {dual_clip}"
        )
    if target_kl is not None and target_kl <= 0:
        raise ValueError(f"target_kl must be > 0 or None (off), got {target_kl}")
    if adaptive_beta and (target_kl is None or beta <= 0):
        raise ValueError("adaptive_beta needs a target_kl and an initial beta > 0 (e.g. beta=0.01)")
    if max_grad_norm <= 0:
        raise ValueError(f"max_grad_norm must be > 0, got {max_grad_norm}")
    if ref_update_interval < 0:
        raise ValueError(f"ref_update_interval must be >= 0 (0 = never refresh), got {ref_update_interval}")
    if not 0.0 <= restart_fraction < 1.0:
        raise ValueError(
            f"restart_fraction must be in [0, 1) (the share of groups restarted from mid-episode states; some must "
            f"start fresh, or nothing starts from the env's reset), got {restart_fraction}"
        )
    check_loss_terms(extra_loss_terms)
