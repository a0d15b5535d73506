"""The live view's 3D scene of one tick: the workspace box, the goal, the gripper, the position bound the checker
keeps, and the commanded motion as an arrow (Foxglove ``SceneUpdate``, frame ``world``, metres).

Pure geometry here (``arrow_orientation``, ``commanded_motion_m``); ``SceneBuilder`` turns it into the SDK's
messages (``foxglove.messages``, passed in, so this module imports without the [live] extra).
"""

from __future__ import annotations

import math
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


def arrow_orientation(direction: np.ndarray) -> tuple[float, float, float, float]:
    """The quaternion (x, y, z, w) that turns +x (where an arrow primitive points) onto ``direction``."""
    d = np.asarray(direction, dtype=np.float64)
    norm = float(np.linalg.norm(d))
    if not norm > 0.0:
        return QUATERNION_IDENTITY
    d = d / norm
    cos = float(np.clip(d[0], -1.0, 1.0))
    axis = np.array([0.0, -d[2], d[1]])  # +x cross d
    axis_norm = float(np.linalg.norm(axis))
    if axis_norm < 1e-12:  # along +x or -x: no turn, or half a turn about z
        return QUATERNION_IDENTITY if cos > 0 else (0.0, 0.0, 1.0, 0.0)
    half = math.acos(cos) / 2.0
    x, y, z = axis / axis_norm * math.sin(half)
    return (float(x), float(y), float(z), math.cos(half))


def commanded_motion_m(sent: np.ndarray, dims: int, gain_m: np.ndarray) -> np.ndarray:
    """The displacement (metres) the sent command asks of the gripper in one control step: command x metres per
    unit command (the spec's command scale times its nominal gain)."""
    if sent.size < dims:
        return np.zeros(dims)
    return np.asarray(sent[:dims], dtype=np.float64) * gain_m


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
        low, high = (np.asarray(c, dtype=np.float64) for c in box)
        self._box = self._cube("workspace", (low + high) / 2.0, high - low, BOX_RGBA)

    def _vector(self, xyz: np.ndarray) -> Any:
        return self._m.Vector3(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))

    def _color(self, rgba: tuple[float, float, float, float]) -> Any:
        return self._m.Color(r=rgba[0], g=rgba[1], b=rgba[2], a=rgba[3])

    def _pose(self, xyz: np.ndarray, q: tuple[float, float, float, float] = QUATERNION_IDENTITY) -> Any:
        orientation = self._m.Quaternion(x=q[0], y=q[1], z=q[2], w=q[3])
        return self._m.Pose(position=self._vector(xyz), orientation=orientation)

    def _cube(self, name: str, centre: np.ndarray, size: np.ndarray, rgba: tuple[float, float, float, float]) -> Any:
        cube = self._m.CubePrimitive(pose=self._pose(centre), size=self._vector(size), color=self._color(rgba))
        return self._m.SceneEntity(frame_id=FRAME_ID, id=name, cubes=[cube])

    def _sphere(self, name: str, centre: np.ndarray, diameter: float, rgba: tuple[float, float, float, float]) -> Any:
        size = self._vector(np.full(3, diameter))
        sphere = self._m.SpherePrimitive(pose=self._pose(centre), size=size, color=self._color(rgba))
        return self._m.SceneEntity(frame_id=FRAME_ID, id=name, spheres=[sphere])

    def update(self, record: TickRecord) -> Any:
        """The scene of ``record``'s tick (the goal, bound and arrow appear when the tick has them)."""
        entities = [self._box]
        deletions = []
        gripper = record.state[self._pos] if record.state.size >= self._pos.stop else None
        if gripper is not None and np.all(np.isfinite(gripper)):
            entities.append(self._sphere("gripper", gripper, GRIPPER_DIAMETER_M, GRIPPER_RGBA))
            motion = commanded_motion_m(record.sent, self._dims, self._gain_m) * ARROW_SCALE
            length = float(np.linalg.norm(motion))
            if np.isfinite(length) and length > ARROW_MIN_LENGTH_M:
                head = min(length / 3.0, 2.0 * ARROW_HEAD_DIAMETER_M)
                arrow = self._m.ArrowPrimitive(
                    pose=self._pose(gripper, arrow_orientation(motion)),
                    shaft_length=length - head,
                    shaft_diameter=ARROW_SHAFT_DIAMETER_M,
                    head_length=head,
                    head_diameter=ARROW_HEAD_DIAMETER_M,
                    color=self._color(ARROW_RGBA),
                )
                entities.append(self._m.SceneEntity(frame_id=FRAME_ID, id="command", arrows=[arrow]))
            else:
                deletions.append("command")
        if record.goal.size >= self._dims and np.all(np.isfinite(record.goal[: self._dims])):
            entities.append(self._sphere("goal", record.goal[: self._dims], GOAL_DIAMETER_M, GOAL_RGBA))
        else:
            deletions.append("goal")
        low, high = record.bound_low, record.bound_high
        if low.size == self._dims and high.size == self._dims and np.all(np.isfinite(low) & np.isfinite(high)):
            entities.append(self._cube("bound", (low + high) / 2.0, high - low, BOUND_RGBA))
        else:
            deletions.append("bound")
        removed = [
            self._m.SceneEntityDeletion(type=self._m.SceneEntityDeletionType.MatchingId, id=i) for i in deletions
        ]
        return self._m.SceneUpdate(entities=entities, deletions=removed)
