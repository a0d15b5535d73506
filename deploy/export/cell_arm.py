"""Export a cell policy as one ordinary policy package per arm (decentralized execution).

Each arm's package holds the same weights with its agent baked in (``make_agent_export_module(arm)``: the head, or the
one-hot, of that arm), wrapped so that its input is the arm package's flat layout
(``deploy.cell.policy_input.cell_arm_contract``: robot state, ``partner_pos``, action history, achieved goal, desired
goal) and reordered inside the graph to the row the cell policy was trained on (robot state, history, partner). It is
exported and verified like any package (``deploy.export.exporter.export_package``: fp32 / fp16 / int8, parity, a
closed-loop check in sim, sealed manifest), on ``CellArmView-v0`` (the arm's view of the cell, the partner driven by a
scripted goal seeker); the manifest's provenance names the cell and the agent. On the robot, ``robot_contract`` of the
package's contract is what the arm's link speaks, and ``PartnerInput`` splices the partner's reported position in.

    from deploy.export.cell_arm import export_cell_arms
    export_cell_arms(model, "models/cell")          # -> models/cell/arm_0, models/cell/arm_1
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from deploy.cell.layout import ARMS
from deploy.cell.policy_input import PARTNER_FIELD, robot_contract
from deploy.export.exporter import ExportConfig, export_package
from deploy.export.provenance import algorithm_provenance

ARM_VIEW_ENV_ID = "CellArmView-v0"
CELL_ENV_ID = "TwoArmCell-v0"


class ArmPackageModule(nn.Module):
    """One agent's export module behind the package's input layout: float32 [B, flat] -> [B, action_dim].

    :param agent_module: ``make_agent_export_module(agent)`` of the cell policy (takes the cell's row layout).
    :param state_dim: the robot's state values (before ``partner_pos`` in the package's layout).
    :param history_dim: the action history's values.
    :param partner_dim: the partner position's values.
    """

    def __init__(self, agent_module: nn.Module, state_dim: int, history_dim: int, partner_dim: int) -> None:
        super().__init__()
        self.agent = agent_module
        partner = list(range(state_dim, state_dim + partner_dim))
        history = list(range(state_dim + partner_dim, state_dim + partner_dim + history_dim))
        goals_from = state_dim + partner_dim + history_dim
        self.flat_dim = goals_from + 2 * partner_dim
        order = list(range(state_dim)) + history + partner + list(range(goals_from, self.flat_dim))
        self.register_buffer("order", torch.tensor(order, dtype=torch.long))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.agent(obs.index_select(1, self.order))


def arm_module(policy: Any, arm: int, contract: Any) -> ArmPackageModule:
    """Arm ``arm``'s package module of a cell ``policy`` for the arm contract ``contract``."""
    robot = robot_contract(contract)
    partner_dim = dict(contract.state_fields)[PARTNER_FIELD]
    history_dim = robot.history_len * robot.action_dim
    return ArmPackageModule(policy.make_agent_export_module(arm), robot.state_dim, history_dim, partner_dim)


def export_cell_arms(
    model: Any,
    out_dir: str | Path,
    env_kwargs: dict[str, Any] | None = None,
    config: ExportConfig | None = None,
    overwrite: bool = False,
    provenance: dict[str, Any] | None = None,
) -> list[Path]:
    """Export both arms of a trained cell model (``CellGRPO``) to ``out_dir/arm_0`` and ``out_dir/arm_1``.

    :param model: the cell model (its ``policy.make_agent_export_module``), or a cell policy.
    :param out_dir: the folder of the two packages.
    :param env_kwargs: ``TwoArmCellEnv`` arguments of the sim checks (delay, goal range, ...).
    :param config: the export checks' sizes and seeds.
    :param overwrite: replace existing packages.
    :param provenance: more provenance for both manifests (the checkpoint's path, ...).
    """
    import envs  # noqa: F401  (registers CellArmView-v0)
    from envs.cell_arm_view import CellArmView

    policy = getattr(model, "policy", model)
    if not hasattr(policy, "make_agent_export_module"):
        raise TypeError(f"a {type(model).__name__} is no cell policy: it has no make_agent_export_module(agent)")
    base = algorithm_provenance(model) if hasattr(model, "policy") else {"algorithm": type(policy).__name__}
    base.update(provenance or {})
    sharing = getattr(policy, "sharing", None)
    paths = []
    for arm in ARMS:
        kwargs = {"arm": arm, **(env_kwargs or {})}
        view = CellArmView(**kwargs)
        module = arm_module(policy, arm, view.contract).eval()
        view.close()
        cell = {"env_id": CELL_ENV_ID, "agent": f"arm_{arm}", "agent_index": arm, "sharing": sharing}
        cell["partner_field"] = PARTNER_FIELD
        paths.append(
            export_package(
                module,
                Path(out_dir) / f"arm_{arm}",
                ARM_VIEW_ENV_ID,
                kwargs,
                provenance={**base, "cell": cell},
                config=config,
                overwrite=overwrite,
            )
        )
    return paths
