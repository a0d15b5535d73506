"""One arm's runtime in a cell: the single-arm controller with the separation barrier and the partner's position.

numpy only (robot side). Assembles what an arm of a cell runs: a ``PartnerLink`` to the supervisor, the arm's
``SeparationBarrier`` (which cuts every RUN command last and publishes the arm's reach after every command), the
policy wrapped in ``PartnerInput`` (the partner's reported position spliced into its input) and the usual
``Controller`` on the arm's own link, in the arm's own frame. One arm's runtime never needs the other's policy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from deploy.cell.layout import CellLayout
from deploy.cell.partner_link import PartnerLink
from deploy.cell.policy_input import PartnerInput
from deploy.contract import ObservationContract
from deploy.robot_spec import RobotSpec
from deploy.runtime.goals import GoalSource
from deploy.runtime.loop import Controller
from deploy.runtime.loop_config import LoopConfig
from deploy.runtime.separation import SeparationBarrier, SeparationConfig


@dataclass
class CellArmRuntime:
    """An arm's assembled runtime: run ``controller.run()``; ``close()`` afterwards."""

    controller: Controller
    barrier: SeparationBarrier
    link: PartnerLink

    def run(self) -> Any:
        try:
            return self.controller.run()
        finally:
            self.link.close()

    def close(self) -> None:
        self.link.close()


def cell_arm_runtime(
    port: str,
    contract: ObservationContract,
    policy: Callable[[np.ndarray], Any],
    spec: RobotSpec,
    goals: GoalSource,
    separation: SeparationConfig,
    supervisor: tuple[str, int],
    config: LoopConfig | None = None,
    barrier_class: type[SeparationBarrier] = SeparationBarrier,
    **controller_kwargs: Any,
) -> CellArmRuntime:
    """Assemble arm ``separation.arm``'s runtime.

    :param port: the arm's link (a pty, a serial port).
    :param contract: the robot's contract (``policy_input.robot_contract`` of the arm's package).
    :param policy: float32 [B, cell arm flat] -> action (the package's backend, or a scripted cell policy).
    :param spec: the arm's robot spec (its frame).
    :param goals: the arm's targets (its frame).
    :param separation: the separation rule (its ``partner_home_m`` is also what the partner reads as before its
        first report).
    :param supervisor: the supervisor's (host, port).
    :param config: loop settings.
    :param barrier_class: the separation barrier (a subclass may time its calls, as the cell benchmark's does).
    :param controller_kwargs: more ``Controller`` arguments (ticklog, on_tick, policy_id, ...).
    """
    link = PartnerLink(separation.arm, supervisor)
    barrier = barrier_class(separation, link)
    home = separation.partner_home_m
    layout: CellLayout = separation.layout
    fallback = layout.point_to_cell(separation.arm, home) if home is not None else (0.0,) * contract.goal_dim
    wrapped = PartnerInput(policy, barrier.partner_position, contract.state_dim, fallback)
    controller = Controller(port, contract, wrapped, spec, goals, config, separation=barrier, **controller_kwargs)
    return CellArmRuntime(controller, barrier, link)
