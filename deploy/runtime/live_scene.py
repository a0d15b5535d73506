"""The live view's 3D scene of one tick: the workspace box, the goal, the gripper, the position bound the checker
keeps, and the commanded motion as an arrow (Foxglove ``SceneUpdate``, frame ``world``, metres).

Pure geometry here (``arrow_orientation``, ``commanded_motion_m``); ``SceneBuilder`` turns it into the SDK's
messages (``foxglove.messages``, passed in, so this module imports without the [live] extra).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from deploy.runtime.tick_record import TickRecord

FRAME_ID = "world"
GRIPPER_DIAMETER_M = 0.03
GOAL_DIAMETER_M = 0.04
ARROW_SHAFT_DIAMETER_M = 0.006
ARROW_HEAD_DIAMETER_M = 0.015
ARROW_MIN_LENGTH_M = 1e-5  # shorter commanded motions draw no arrow
ARROW_SCALE = 5.0  # the arrow is this many control steps of the commanded motion long (one step is millimetres)
BOX_RGBA = (0.5, 0.5, 0.5, 0.12)
BOUND_RGBA = (1.0, 0.6, 0.0, 0.35)
GOAL_RGBA = (0.1, 0.8, 0.2, 0.9)
GRIPPER_RGBA = (0.2, 0.4, 1.0, 1.0)
ARROW_RGBA = (0.9, 0.1, 0.1, 1.0)
QUATERNION_IDENTITY = (0.0, 0.0, 0.0, 1.0)  # x, y, z, w


def arrow_orientation(direction: Sequence[float]) -> tuple[float, float, float, float]:
    """The quaternion (x, y, z, w) that turns +x (where an arrow primitive points) onto ``direction``."""
    dx, dy, dz = (float(v) for v in direction)
    norm = math.sqrt(dx * dx + dy * dy + dz * dz)
    if not norm > 0.0:
        return QUATERNION_IDENTITY
    cos = max(-1.0, min(1.0, dx / norm))
    ay, az = -dz / norm, dy / norm  # the axis: +x cross the direction (its x part is 0)
    axis_norm = math.hypot(ay, az)
    if axis_norm < 1e-12:  # along +x or -x: no turn, or half a turn about z
        return QUATERNION_IDENTITY if cos > 0 else (0.0, 0.0, 1.0, 0.0)
    half = math.acos(cos) / 2.0
    sin = math.sin(half) / axis_norm
    return (0.0, ay * sin, az * sin, math.cos(half))


def commanded_motion_m(sent: np.ndarray, dims: int, gain_m: np.ndarray) -> np.ndarray:
    """The displacement (metres) the sent command asks of the gripper in one control step: command x metres per
    unit command (the spec's command scale times its nominal gain)."""
    if sent.size < dims:
        return np.zeros(dims)
    return np.asarray(sent[:dims], dtype=np.float64) * gain_m


def _finite(values: list[float]) -> bool:
    return all(map(math.isfinite, values))


class SceneBuilder:
    """Builds a tick's ``SceneUpdate``.

    :param messages: the ``foxglove.messages`` module.
    :param box: the workspace (low, high corners, metres).
    :param position_slice: (start, stop) of the gripper position in the robot state.
    :param gain_m: metres moved per unit command, per axis (command scale x nominal actuator gain).
    """

    def __init__(
        self, messages: Any, box: tuple[np.ndarray, np.ndarray], position_slice: tuple[int, int], gain_m: np.ndarray
    ) -> None:
        self._m = messages
        self._pos = slice(*position_slice)
        self._dims = position_slice[1] - position_slice[0]
        self._gain_m = np.asarray(gain_m, dtype=np.float64)
        self._colors = {rgba: self._color(rgba) for rgba in (BOX_RGBA, BOUND_RGBA, GOAL_RGBA, GRIPPER_RGBA, ARROW_RGBA)}
        self._sizes = {d: self._vector([d, d, d]) for d in (GRIPPER_DIAMETER_M, GOAL_DIAMETER_M)}
        self._identity = self._m.Quaternion(x=0.0, y=0.0, z=0.0, w=1.0)
        low, high = (np.asarray(c, dtype=np.float64) for c in box)
        self._box = self._cube("workspace", ((low + high) / 2.0).tolist(), (high - low).tolist(), BOX_RGBA)
        kind = self._m.SceneEntityDeletionType.MatchingId
        self._deletions = {i: self._m.SceneEntityDeletion(type=kind, id=i) for i in ("command", "goal", "bound")}

    def _vector(self, xyz: Sequence[float]) -> Any:
        return self._m.Vector3(x=xyz[0], y=xyz[1], z=xyz[2])

    def _color(self, rgba: tuple[float, float, float, float]) -> Any:
        return self._m.Color(r=rgba[0], g=rgba[1], b=rgba[2], a=rgba[3])

    def _pose(self, xyz: Sequence[float], q: tuple[float, float, float, float] | None = None) -> Any:
        orientation = self._identity if q is None else self._m.Quaternion(x=q[0], y=q[1], z=q[2], w=q[3])
        return self._m.Pose(position=self._vector(xyz), orientation=orientation)

    def _cube(self, name: str, centre: list[float], size: list[float], rgba: tuple[float, float, float, float]) -> Any:
        cube = self._m.CubePrimitive(pose=self._pose(centre), size=self._vector(size), color=self._colors[rgba])
        return self._m.SceneEntity(frame_id=FRAME_ID, id=name, cubes=[cube])

    def _sphere(self, name: str, centre: list[float], diameter: float, rgba: tuple[float, float, float, float]) -> Any:
        sphere = self._m.SpherePrimitive(pose=self._pose(centre), size=self._sizes[diameter], color=self._colors[rgba])
        return self._m.SceneEntity(frame_id=FRAME_ID, id=name, spheres=[sphere])

    def _arrow(self, origin: list[float], motion: list[float]) -> Any | None:
        """The commanded motion as an arrow from the gripper, or None when it is too short to draw."""
        length = math.sqrt(sum(m * m for m in motion))
        if not (math.isfinite(length) and length > ARROW_MIN_LENGTH_M):
            return None
        head = min(length / 3.0, 2.0 * ARROW_HEAD_DIAMETER_M)
        arrow = self._m.ArrowPrimitive(
            pose=self._pose(origin, arrow_orientation(motion)),
            shaft_length=length - head,
            shaft_diameter=ARROW_SHAFT_DIAMETER_M,
            head_length=head,
            head_diameter=ARROW_HEAD_DIAMETER_M,
            color=self._colors[ARROW_RGBA],
        )
        return self._m.SceneEntity(frame_id=FRAME_ID, id="command", arrows=[arrow])

    def update(self, record: TickRecord) -> Any:
        """The scene of ``record``'s tick (the goal, bound and arrow appear when the tick has them)."""
        dims = self._dims
        entities = [self._box]
        deletions = []
        gripper = record.state[self._pos].tolist() if record.state.size >= self._pos.stop else []
        arrow = None
        if gripper and _finite(gripper):
            entities.append(self._sphere("gripper", gripper, GRIPPER_DIAMETER_M, GRIPPER_RGBA))
            motion = (commanded_motion_m(record.sent, dims, self._gain_m) * ARROW_SCALE).tolist()
            arrow = self._arrow(gripper, motion)
        if arrow is not None:
            entities.append(arrow)
        else:
            deletions.append(self._deletions["command"])
        goal = record.goal[:dims].tolist()
        if len(goal) == dims and _finite(goal):
            entities.append(self._sphere("goal", goal, GOAL_DIAMETER_M, GOAL_RGBA))
        else:
            deletions.append(self._deletions["goal"])
        low, high = record.bound_low.tolist(), record.bound_high.tolist()
        if len(low) == dims and len(high) == dims and _finite(low + high):
            centre = [(a + b) / 2.0 for a, b in zip(low, high, strict=True)]
            size = [b - a for a, b in zip(low, high, strict=True)]
            entities.append(self._cube("bound", centre, size, BOUND_RGBA))
        else:
            deletions.append(self._deletions["bound"])
        return self._m.SceneUpdate(entities=entities, deletions=deletions)
