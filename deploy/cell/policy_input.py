"""A cell arm's policy as the single-arm loop runs it: the partner's position comes from the supervisor.

numpy only (robot side). A cell policy reads, besides its own arm, the partner's gripper position (in its own
arm's frame). On the robot the partner is another runtime on another link, so its position is what the partner's
runtime last reported through the supervisor (``deploy.cell.report``: its newest *checked* position), never the
physics. The package of one arm (``deploy.export.cell_arm``) therefore has a contract whose robot state carries one
more field, ``partner_pos``, after the robot's own fields: the policy's flat input is
``[robot state, partner_pos, action history, achieved goal, desired goal]`` (the graph reorders it to the row the
cell policy was trained on). The loop itself runs on the robot's contract (``robot_contract``: what the arm's link
sends, which its checks judge), and :class:`PartnerInput` splices the partner in before each call.

The spliced position may be old or missing; the policy is still asked (a missing one reads as the last known, or as
the partner's home before the first report): whether the arm may move on it is the separation barrier's call
(``deploy.runtime.separation``: a stale partner holds the arm), not the policy's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from deploy.contract import ObservationContract

PARTNER_FIELD = "partner_pos"  # metres, the arm's own frame
CELL_ARM_SUFFIX = "_cell_arm"


def cell_arm_contract(robot: ObservationContract) -> ObservationContract:
    """The contract of one arm's package: the robot's, with ``partner_pos`` (``goal_dim`` values) after its state."""
    if any(name == PARTNER_FIELD for name, _ in robot.state_fields):
        raise ValueError(f"contract {robot.name!r} already has a {PARTNER_FIELD!r} field")
    return ObservationContract(
        name=robot.name + CELL_ARM_SUFFIX,
        state_fields=(*robot.state_fields, (PARTNER_FIELD, robot.goal_dim)),
        action_dim=robot.action_dim,
        history_len=robot.history_len,
        goal_dim=robot.goal_dim,
        action_scale_m=robot.action_scale_m,
        action_low=robot.action_low,
        action_high=robot.action_high,
        control_period_s=robot.control_period_s,
        position_slice=robot.position_slice,
    )


def is_cell_arm(contract: ObservationContract) -> bool:
    """Whether ``contract`` is a cell arm's (its state ends with the partner's position)."""
    return contract.state_fields[-1][0] == PARTNER_FIELD and contract.name.endswith(CELL_ARM_SUFFIX)


def robot_contract(arm: ObservationContract) -> ObservationContract:
    """What the arm's link speaks and the loop checks: a cell arm's contract without ``partner_pos``."""
    if not is_cell_arm(arm):
        raise ValueError(
            f"contract {arm.name!r} is not a cell arm's (its state must end with {PARTNER_FIELD!r} and its name with "
            f"{CELL_ARM_SUFFIX!r}); export the arm with deploy.export.cell_arm"
        )
    return ObservationContract(
        name=arm.name[: -len(CELL_ARM_SUFFIX)],
        state_fields=arm.state_fields[:-1],
        action_dim=arm.action_dim,
        history_len=arm.history_len,
        goal_dim=arm.goal_dim,
        action_scale_m=arm.action_scale_m,
        action_low=arm.action_low,
        action_high=arm.action_high,
        control_period_s=arm.control_period_s,
        position_slice=arm.position_slice,
    )


class PartnerInput:
    """The policy as the loop calls it (float32 [B, robot flat] -> action): the partner's position spliced in at
    ``index`` (the robot's state size), then ``backend`` (float32 [B, robot flat + 3] -> action) asked.

    :param backend: the arm package's backend (or any callable on the cell arm's flat layout).
    :param partner: the partner's newest reported position in this arm's frame (metres), None before any.
    :param index: where ``partner_pos`` starts in the package's flat input (``robot_contract(...).state_dim``).
    :param fallback: what the partner reads as before its first report (metres, this arm's frame): its home.
    """

    def __init__(
        self,
        backend: Callable[[np.ndarray], Any],
        partner: Callable[[], Sequence[float] | None],
        index: int,
        fallback: Sequence[float],
    ) -> None:
        self.backend = backend
        self.partner = partner
        self.index = int(index)
        self.last = np.asarray(fallback, dtype=np.float32)
        self.name = getattr(backend, "name", type(backend).__name__)

    def __call__(self, obs: np.ndarray) -> Any:
        position = self.partner()
        if position is not None:
            self.last = np.asarray(position, dtype=np.float32)
        i, n = self.index, self.last.size
        out = np.empty((obs.shape[0], obs.shape[1] + n), dtype=np.float32)
        out[:, :i] = obs[:, :i]
        out[:, i : i + n] = self.last
        out[:, i + n :] = obs[:, i:]
        return self.backend(out)
