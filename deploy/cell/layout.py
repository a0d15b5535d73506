"""Where the two arms of a cell stand, and the maps between their frames.

numpy only (robot side). Arm 0's frame is the cell frame. Arm 1 stands facing arm 0 across the table: its frame is
the cell frame turned half a turn about the vertical axis through the cell centre, so x and y are mirrored through
the centre and z is unchanged. The map is its own inverse (cell -> arm and arm -> cell are the same). Each arm's
runtime works in its own frame (its robot spec, workspace box and goals are in it); what the arms share goes
through the supervisor in the cell frame. The simulated cell (``envs.cell_scene``) uses the same maps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

N_ARMS = 2
ARMS = tuple(range(N_ARMS))


def mirror_point(point: np.ndarray, centre_xy: Sequence[float]) -> np.ndarray:
    """A point [..., 3] turned half a turn about the vertical axis through ``centre_xy`` (metres; a copy)."""
    out = np.array(point, dtype=np.float64)
    out[..., 0] = 2 * centre_xy[0] - out[..., 0]
    out[..., 1] = 2 * centre_xy[1] - out[..., 1]
    return out


def mirror_vector(vector: np.ndarray) -> np.ndarray:
    """A vector [..., 3] (a displacement, a velocity, a command) turned half a turn about the vertical (a copy)."""
    out = np.array(vector, dtype=np.float64)
    out[..., :2] = -out[..., :2]
    return out


@dataclass(frozen=True)
class CellLayout:
    """The cell's geometry as the runtimes need it.

    :param centre_xy: the cell centre (metres, cell frame): arm 1's frame is arm 0's turned half a turn about it.
    """

    centre_xy: tuple[float, float]

    def __post_init__(self) -> None:
        centre = tuple(float(v) for v in self.centre_xy)
        if len(centre) != 2 or not all(map(math.isfinite, centre)):
            raise ValueError(f"centre_xy must be two finite numbers (metres), got {self.centre_xy!r}")
        object.__setattr__(self, "centre_xy", centre)

    def point_to_cell(self, arm: int, point: Sequence[float]) -> tuple[float, ...]:
        """A point in ``arm``'s frame in the cell frame (and back: the map is its own inverse), metres."""
        _check_arm(arm)
        if arm == 0:
            return tuple(float(v) for v in point)
        x, y, *rest = point
        return (2 * self.centre_xy[0] - float(x), 2 * self.centre_xy[1] - float(y), *map(float, rest))

    def box_to_cell(
        self, arm: int, low: Sequence[float], high: Sequence[float]
    ) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """An axis-aligned box (low, high corners, metres) in ``arm``'s frame in the cell frame (and back)."""
        a, b = self.point_to_cell(arm, low), self.point_to_cell(arm, high)
        return tuple(map(min, a, b)), tuple(map(max, a, b))


def _check_arm(arm: int) -> None:
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
