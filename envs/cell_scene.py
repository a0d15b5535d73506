"""The two-arm cell's MuJoCo scene: gymnasium-robotics' own Fetch arm, attached twice with MjSpec, facing each other.

Nothing is copied from the Fetch XML: each arm is FetchReach's ``reach.xml`` loaded as an ``MjSpec`` with its
floor, table, target and light removed, attached into a new scene under the name prefix ``arm_<i>/`` through a
frame. Arm 0 stands where FetchReach puts it; arm 1 is arm 0 turned half a turn about the vertical axis through
the cell centre, so the two grippers start ``start_gap_m`` apart across one table, facing each other.

Arm frames. Each arm sees the cell in its own frame: arm 0's is the world frame, arm 1's is the world turned half a
turn about the cell centre (x and y mirrored through the centre, z unchanged). A point, a velocity and a command
map with :meth:`CellScene.to_arm` / :meth:`CellScene.vector_to_arm` (the map is its own inverse, and the robot
side's, ``deploy.cell.layout``), so both arms face the same-looking task and one set of weights can drive either.

Setup follows ``MujocoFetchEnv._env_setup``: slide joints at FetchReach's initial values, the mocap welds reset,
the mocap moved to FetchReach's start pose and ten control steps run; the result is every episode's start state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import gymnasium_robotics.envs as robotics_envs
import mujoco
import numpy as np
from gymnasium_robotics.envs.fetch import reach as fetch_reach

from deploy.cell.layout import CellLayout, mirror_point, mirror_vector

N_SUBSTEPS = 20  # MuJoCo steps of 2 ms per 25 Hz control step (FetchReach)
ACTION_SCALE_M = 0.05  # metres of mocap displacement per unit command (FetchReach's pos_ctrl scale)
SETUP_CONTROL_STEPS = 10  # FetchReach's settling steps at construction
FETCH_INITIAL_SLIDES = (("robot0:slide0", 0.4049), ("robot0:slide1", 0.48), ("robot0:slide2", 0.0))
FETCH_GRIPPER_OFFSET_M = np.array([-0.498, 0.005, -0.431 + 0.2])  # FetchReach: offset + gripper_extra_height
FETCH_GRIPPER_QUAT = np.array([1.0, 0.0, 1.0, 0.0])  # FetchReach's gripper orientation target (added each step)
FETCH_START_GRIPPER_XY = np.array([1.3418, 0.7491])  # where FetchReach's gripper settles (metres, world)
SCENE_ONLY = {"bodies": ("floor0", "table0"), "geoms": ("floor0",), "lights": ("light0",)}
GRIP_SITE, FINGER_JOINTS = "robot0:grip", ("robot0:l_gripper_finger_joint", "robot0:r_gripper_finger_joint")
GRIPPER_JOINTS = ("robot0:l_gripper_finger_joint", "robot0:r_gripper_finger_joint")  # FetchReach's gripper_state
TABLE_HALF_SIZE_M = np.array([0.45, 0.45, 0.2])
# Settling both arms onto goal grippers, contacts off, to see whether their bodies would overlap there: after 0.3 s
# of physics every gripper is within 14 mm of its target from the start pose across the goal box (5 mm median; the
# weld's own steady offset, more time does not shrink it), and no pair it passed touched when both arms were driven
# to their goals step by step (0 of 600; at 0.2 s, 1 of 300 did).
SETTLE_CHECK_SUBSTEPS = 150
# ...and the settled arms must keep this clearance (metres): a pose reached along another path differs by up to the
# settling error, and a pair the check passed at 0 clearance touched at its goals (seed 39, delay 0)
GOAL_POSE_CLEARANCE_M = 0.02
NO_CONTACTS = int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
HALF_TURN_QUAT = np.array([0.0, 0.0, 0.0, 1.0])  # 180 degrees about z (w, x, y, z)


def arm_prefix(arm: int) -> str:
    return f"arm_{arm}/"


def _fetch_arm_spec() -> mujoco.MjSpec:
    """FetchReach's model without its scene (floor, table, target, light): the arm, its mocap, weld and assets."""
    path = os.path.join(os.path.dirname(robotics_envs.__file__), "assets", fetch_reach.MODEL_XML_PATH)
    spec = mujoco.MjSpec.from_file(path)
    for name in SCENE_ONLY["bodies"]:
        spec.delete(spec.body(name))
    for name in SCENE_ONLY["geoms"]:
        spec.delete(spec.geom(name))
    for name in SCENE_ONLY["lights"]:
        spec.delete(spec.light(name))
    return spec


@dataclass(frozen=True)
class ArmIndices:
    """MuJoCo indices of one arm, resolved once."""

    grip_site: int
    mocap: int  # index into data.mocap_pos
    weld_body: int  # the body the mocap is welded to (its pose resets the mocap each step, as Fetch does)
    finger_qpos: np.ndarray
    gripper_qpos: np.ndarray
    gripper_qvel: np.ndarray
    rot_target: np.ndarray  # the gripper orientation term added to the mocap quaternion each step (arm frame)


class CellScene:
    """The compiled cell: model, data, per-arm indices and the arm-frame maps.

    :param arms: which arms the scene holds: (0, 1) for the cell, (0,) or (1,) for one arm alone (same place).
    :param start_gap_m: distance between the two grippers' start positions along x, metres.
    """

    def __init__(self, arms: tuple[int, ...] = (0, 1), start_gap_m: float = 0.3) -> None:
        if not arms or len(set(arms)) != len(arms) or not set(arms) <= {0, 1}:
            raise ValueError(f"arms must be a non-empty subset of (0, 1) without repeats, got {arms}")
        if not 0.1 <= start_gap_m <= 0.6:
            raise ValueError(f"start_gap_m must be in [0.1, 0.6] metres, got {start_gap_m}")
        self.arms = tuple(arms)
        self.centre = np.array([FETCH_START_GRIPPER_XY[0] + start_gap_m / 2, FETCH_START_GRIPPER_XY[1]])
        spec = mujoco.MjSpec()
        spec.option.timestep = 0.002
        spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[2.0, 2.0, 1.0])
        table = spec.worldbody.add_body(name="table", pos=[*self.centre, TABLE_HALF_SIZE_M[2]])
        table.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_BOX, size=TABLE_HALF_SIZE_M, mass=2000.0)
        spec.worldbody.add_light(
            name="light", pos=[*self.centre, 4.0], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
        )
        for arm in self.arms:
            pos = [0.0, 0.0, 0.0] if arm == 0 else [2 * self.centre[0], 2 * self.centre[1], 0.0]
            quat = [1.0, 0.0, 0.0, 0.0] if arm == 0 else HALF_TURN_QUAT
            frame = spec.worldbody.add_frame(pos=pos, quat=quat)
            spec.attach(_fetch_arm_spec(), prefix=arm_prefix(arm), frame=frame)
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        self.indices = {arm: self._index(arm) for arm in self.arms}
        self.body_arm = self._body_owners()
        self._settle()
        self.initial_state = self.get_state()
        d = self.data  # the start of every episode, per field (one arm's HOME restores its own entries)
        self._start = (d.qpos.copy(), d.qvel.copy(), d.mocap_pos.copy(), d.mocap_quat.copy())
        # the mocap's offset from the gripper site at the start, per arm (world, metres): where to put a mocap so
        # that its gripper settles at a given point
        self._mocap_from_grip = {
            arm: d.mocap_pos[i.mocap] - d.site_xpos[i.grip_site] for arm, i in self.indices.items()
        }
        self._scratch: mujoco.MjData | None = None  # for arms_touch_at: never the episode's own data
        self.last_contact: tuple[str, str] | None = None  # the links of the last control step's first touch
        self._arm_geoms = np.flatnonzero(self.body_arm[self.model.geom_bodyid] >= 0)

    # Frames -------------------------------------------------------------------------------------------------
    def to_arm(self, arm: int, point: np.ndarray) -> np.ndarray:
        """A world point [..., 3] in ``arm``'s frame (and back: the map is its own inverse), metres."""
        point = np.asarray(point, dtype=np.float64)
        return point.copy() if arm == 0 else mirror_point(point, self.centre)

    @staticmethod
    def vector_to_arm(arm: int, vector: np.ndarray) -> np.ndarray:
        """A world vector [..., 3] (velocity, displacement) in ``arm``'s frame, and back."""
        return np.array(vector, dtype=np.float64) if arm == 0 else mirror_vector(vector)

    def layout(self) -> CellLayout:
        """The cell's frames as the robot side needs them (``deploy.cell.layout``)."""
        return CellLayout((float(self.centre[0]), float(self.centre[1])))

    # Indices ----------------------------------------------------------------------------------------------
    def _index(self, arm: int) -> ArmIndices:
        m, p = self.model, arm_prefix(arm)

        def ident(kind: mujoco.mjtObj, name: str) -> int:
            i = mujoco.mj_name2id(m, kind, p + name)
            if i < 0:
                raise RuntimeError(f"the cell scene lacks {p + name}: has gymnasium-robotics' Fetch model changed?")
            return i

        joints = [ident(mujoco.mjtObj.mjOBJ_JOINT, n) for n in GRIPPER_JOINTS]
        fingers = [ident(mujoco.mjtObj.mjOBJ_JOINT, n) for n in FINGER_JOINTS]
        mocap_body = ident(mujoco.mjtObj.mjOBJ_BODY, "robot0:mocap")
        weld_body = ident(mujoco.mjtObj.mjOBJ_BODY, "robot0:gripper_link")
        rot = FETCH_GRIPPER_QUAT.copy()
        if arm == 1:
            mujoco.mju_mulQuat(rot, HALF_TURN_QUAT, FETCH_GRIPPER_QUAT)
        return ArmIndices(
            grip_site=ident(mujoco.mjtObj.mjOBJ_SITE, GRIP_SITE),
            mocap=int(m.body_mocapid[mocap_body]),
            weld_body=weld_body,
            finger_qpos=m.jnt_qposadr[fingers].copy(),
            gripper_qpos=m.jnt_qposadr[joints].copy(),
            gripper_qvel=m.jnt_dofadr[joints].copy(),
            rot_target=rot,
        )

    def _body_owners(self) -> np.ndarray:
        """For every body, the arm it belongs to (-1: the world, floor, table)."""
        owners = np.full(self.model.nbody, -1, dtype=np.int64)
        for body in range(self.model.nbody):
            name = mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_BODY, body) or ""
            for arm in self.arms:
                if name.startswith(arm_prefix(arm)):
                    owners[body] = arm
        return owners

    def _settle(self) -> None:
        """FetchReach's ``_env_setup`` for every arm at once."""
        m, d = self.model, self.data
        for arm in self.arms:
            for name, value in FETCH_INITIAL_SLIDES:
                joint = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, arm_prefix(arm) + name)
                d.qpos[m.jnt_qposadr[joint]] = value
        for eq in range(m.neq):
            if m.eq_type[eq] == mujoco.mjtEq.mjEQ_WELD:
                m.eq_data[eq, :7] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
        mujoco.mj_forward(m, d)
        for arm, idx in self.indices.items():
            offset = self.vector_to_arm(arm, FETCH_GRIPPER_OFFSET_M)
            d.mocap_pos[idx.mocap] = d.site_xpos[idx.grip_site] + offset
            d.mocap_quat[idx.mocap] = idx.rot_target
        for _ in range(SETUP_CONTROL_STEPS):
            mujoco.mj_step(m, d, nstep=N_SUBSTEPS)
        self.start_grip = {arm: d.site_xpos[idx.grip_site].copy() for arm, idx in self.indices.items()}

    # State ------------------------------------------------------------------------------------------------
    def state_size(self) -> int:
        return mujoco.mj_stateSize(self.model, mujoco.mjtState.mjSTATE_INTEGRATION)

    def get_state(self) -> np.ndarray:
        state = np.empty(self.state_size(), dtype=np.float64)
        mujoco.mj_getState(self.model, self.data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
        return state

    def set_state(self, state: np.ndarray) -> None:
        state = np.asarray(state, dtype=np.float64)
        if state.shape != (self.state_size(),):
            raise ValueError(f"cell MuJoCo state must have {self.state_size()} values, got {state.shape}")
        mujoco.mj_resetData(self.model, self.data)
        mujoco.mj_setState(self.model, self.data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
        mujoco.mj_forward(self.model, self.data)

    def reset_arm(self, arm: int) -> None:
        """Put one arm back where every episode starts (its joints, their velocities, its mocap), leaving the other
        arm where it is: the simulated cell's HOME of one arm (``envs.sim_cell_robot``)."""
        m, d = self.model, self.data
        if arm not in self.indices:
            raise ValueError(f"arm {arm} is not in this scene (it holds {self.arms})")
        qpos0, qvel0, mocap_pos0, mocap_quat0 = self._start
        joints = np.flatnonzero(self.body_arm[m.jnt_bodyid] == arm)
        sizes = {mujoco.mjtJoint.mjJNT_FREE: (7, 6), mujoco.mjtJoint.mjJNT_BALL: (4, 3)}
        for joint in joints:
            nq, nv = sizes.get(m.jnt_type[joint], (1, 1))
            q, v = m.jnt_qposadr[joint], m.jnt_dofadr[joint]
            d.qpos[q : q + nq] = qpos0[q : q + nq]
            d.qvel[v : v + nv] = qvel0[v : v + nv]
        mocap = self.indices[arm].mocap
        d.mocap_pos[mocap], d.mocap_quat[mocap] = mocap_pos0[mocap], mocap_quat0[mocap]
        mujoco.mj_forward(m, d)

    def grip_pos(self, arm: int) -> np.ndarray:
        """The gripper site of ``arm`` in world coordinates (metres, a copy)."""
        return self.data.site_xpos[self.indices[arm].grip_site].copy()

    def arms_in_contact(self) -> bool:
        """Whether any geom of one arm touches a geom of the other in the current contact list."""
        return self._touching(self.data)

    def contact_links(self) -> tuple[str, str] | None:
        """The links (body names without the arm prefix, arm 0's first) of the first contact between the arms in the
        current contact list; None when they do not touch. What a contact record names (which links met)."""
        m, d = self.model, self.data
        for k in range(d.ncon):
            bodies = m.geom_bodyid[d.contact.geom[k]]
            owners = self.body_arm[bodies]
            if owners[0] >= 0 and owners[1] >= 0 and owners[0] != owners[1]:
                names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(b)) for b in bodies]
                by_arm = dict(zip((int(o) for o in owners), names, strict=True))
                return by_arm[0].removeprefix(arm_prefix(0)), by_arm[1].removeprefix(arm_prefix(1))
        return None

    def arms_touch_at(self, grips_world: np.ndarray) -> bool:
        """Whether the two arms, each settled from the start pose with its gripper at ``grips_world[arm]`` (world,
        metres), would touch or come within ``GOAL_POSE_CLEARANCE_M``: such a goal pair cannot be a team success
        (or only by a hair), however the arms move. Runs in a scratch copy of the physics (the episode's state is
        untouched), contacts off while settling, then one collision pass.
        """
        if len(self.arms) < 2:
            return False
        m = self.model
        if self._scratch is None:
            self._scratch = mujoco.MjData(m)
        d = self._scratch
        d.qpos[:], d.qvel[:], d.mocap_pos[:], d.mocap_quat[:] = self._start
        for arm, idx in self.indices.items():
            d.mocap_pos[idx.mocap] = np.asarray(grips_world[arm], dtype=np.float64) + self._mocap_from_grip[arm]
        flags = m.opt.disableflags
        m.opt.disableflags = flags | NO_CONTACTS
        try:
            mujoco.mj_step(m, d, nstep=SETTLE_CHECK_SUBSTEPS)
        finally:
            m.opt.disableflags = flags
        margins = m.geom_margin.copy()
        m.geom_margin[self._arm_geoms] = GOAL_POSE_CLEARANCE_M  # contacts found this far apart, not only touching
        try:
            mujoco.mj_forward(m, d)
        finally:
            m.geom_margin[:] = margins
        return self._touching(d, GOAL_POSE_CLEARANCE_M)

    def _touching(self, d: mujoco.MjData, within_m: float = 0.0) -> bool:
        """Whether a geom of one arm is within ``within_m`` metres of (0: touches) a geom of the other in ``d``'s
        contact list."""
        ncon = d.ncon
        if ncon == 0 or len(self.arms) < 2:
            return False
        geoms = d.contact.geom[:ncon]
        owners = self.body_arm[self.model.geom_bodyid[geoms]]
        between = (owners[:, 0] >= 0) & (owners[:, 1] >= 0) & (owners[:, 0] != owners[:, 1])
        if within_m > 0.0:
            between &= d.contact.dist[:ncon] < within_m
        return bool(np.any(between))

    # Control ----------------------------------------------------------------------------------------------
    def control_step(self, commands: dict[int, np.ndarray]) -> tuple[float, bool]:
        """Apply one 25 Hz control step: each arm's command (3-D displacement in its own frame, unit = 5 cm).

        As FetchReach's ``_set_action`` + ``_mujoco_step`` + ``_step_callback`` (the gripper is blocked), for
        every arm at once; the substeps run one at a time so that the separation is checked at each (2 ms).

        :return: the smallest distance between the two grippers seen during the step (metres; inf with one arm)
            and whether the arms touched at any substep (``last_contact`` names the links of the first touch).
        """
        m, d = self.model, self.data
        for arm, command in commands.items():
            idx = self.indices[arm]
            d.mocap_pos[idx.mocap] = d.xpos[idx.weld_body] + self.vector_to_arm(arm, command[:3]) * ACTION_SCALE_M
            d.mocap_quat[idx.mocap] = d.xquat[idx.weld_body] + idx.rot_target
        self.last_contact = None
        closest, touched = self.gripper_distance(), self._touch_noted()
        for _ in range(N_SUBSTEPS):
            mujoco.mj_step(m, d)
            closest = min(closest, self.gripper_distance())
            touched = touched or self._touch_noted()
        for idx in self.indices.values():
            d.qpos[idx.finger_qpos] = 0.0
        mujoco.mj_forward(m, d)
        return min(closest, self.gripper_distance()), touched or self._touch_noted()

    def _touch_noted(self) -> bool:
        """``arms_in_contact``, noting the links of the step's first touch in ``last_contact``."""
        if not self.arms_in_contact():
            return False
        if self.last_contact is None:
            self.last_contact = self.contact_links()
        return True

    def gripper_distance(self) -> float:
        """Centre-to-centre distance of the two grippers (metres; inf when the scene has one arm)."""
        if len(self.arms) < 2:
            return float("inf")
        a, b = (self.data.site_xpos[self.indices[arm].grip_site] for arm in self.arms)
        return float(np.sqrt(np.sum((a - b) ** 2)))

    def arm_state(self, arm: int) -> np.ndarray:
        """FetchReach's 10 state values of ``arm`` in its own frame: grip_pos (m), gripper_state (m),
        grip_velp (m per control step), gripper_vel (m per control step)."""
        m, d, idx = self.model, self.data, self.indices[arm]
        dt_s = N_SUBSTEPS * m.opt.timestep
        jacp = np.zeros((3, m.nv))
        mujoco.mj_jacSite(m, d, jacp, None, idx.grip_site)
        grip_velp = self.vector_to_arm(arm, (jacp @ d.qvel) * dt_s)
        return np.concatenate(
            (
                self.to_arm(arm, d.site_xpos[idx.grip_site]),
                d.qpos[idx.gripper_qpos],
                grip_velp,
                d.qvel[idx.gripper_qvel] * dt_s,
            )
        )
