"""Name lookups resolved once for gymnasium-robotics' Fetch envs: the same observation, fewer Python calls per step.

``MujocoFetchEnv.generate_mujoco_observations`` reads every robot joint by name each step (``robot_get_obs``: two
``mj_name2id`` calls and a copy per joint, 15 joints) to keep the last two (the fingers), and looks each site up by
name again; ``_step_callback`` sets the two finger joints by name. On delayed FetchPush that Python is about a
quarter of a control step (``benchmarks/env_throughput.py``). :func:`cache_fetch_lookups` replaces both methods on
one env instance with versions that read the same MuJoCo memory through indices resolved once, and checks, before
it returns, that the replacement observation equals the original bit for bit (a gymnasium-robotics change that
moves a field fails loudly instead of training on something else).

``envs.delayed_fetch_reach`` does the same for the robot task inside its own env class, with this module's names and
index helpers (:func:`site_id`, :func:`scalar_joint_addresses`).
"""

from __future__ import annotations

import types
from typing import Any

import mujoco
import numpy as np
from gymnasium_robotics.utils import rotations

ROBOT_JOINT_PREFIX = "robot"  # gymnasium-robotics' robot_get_obs keeps the joints whose names start with it
FINGER_JOINTS = ("robot0:l_gripper_finger_joint", "robot0:r_gripper_finger_joint")  # _step_callback's joints
GRIP_SITE = "robot0:grip"
OBJECT_SITE = "object0"
GRIPPER_JOINTS_OBSERVED = 2  # gripper_state / gripper_vel: the last two robot joints
# ints: from mujoco 3.12 on, ``mjtJoint.X == np.int32(...)`` is False, so an enum tuple never contains jnt_type
_SCALAR_JOINTS = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


def site_id(model: mujoco.MjModel, name: str) -> int:
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, name)
    if site < 0:
        raise ValueError(f"the Fetch model has no site {name!r}; is this a gymnasium-robotics Fetch env?")
    return site


def scalar_joint_addresses(model: mujoco.MjModel, names: list[str] | tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """qpos and qvel addresses of hinge/slide joints (one value each), in the order of ``names``."""
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name) for name in names]
    if any(j < 0 or int(model.jnt_type[j]) not in _SCALAR_JOINTS for j in ids):
        raise ValueError(f"Fetch joints {list(names)} must all exist and be hinge or slide joints")
    return model.jnt_qposadr[ids].copy(), model.jnt_dofadr[ids].copy()


def cache_fetch_lookups(fetch: Any) -> None:
    """Give one ``MujocoFetchEnv`` instance cached-index versions of its observation and step callback.

    :param fetch: the unwrapped gymnasium-robotics Fetch env (Reach, Push, PickAndPlace, Slide), already reset
        (``gym.make`` resets nothing, but ``MujocoRobotEnv.__init__`` runs ``_env_setup``, so the state is valid).
    :raises RuntimeError: when the cached observation differs from the env's own in any bit.
    """
    model, data = fetch.model, fetch.data
    robot_joints = [name for name in fetch._model_names.joint_names if name.startswith(ROBOT_JOINT_PREFIX)]
    gripper_qpos, gripper_qvel = scalar_joint_addresses(model, robot_joints[-GRIPPER_JOINTS_OBSERVED:])
    finger_qpos, _ = scalar_joint_addresses(model, FINGER_JOINTS)
    grip_site = site_id(model, GRIP_SITE)
    object_site = site_id(model, OBJECT_SITE) if fetch.has_object else -1
    dt_s = fetch.n_substeps * model.opt.timestep  # seconds per control step: velocities are metres per step
    jacp = np.zeros((3, model.nv))
    jacr = np.zeros((3, model.nv))
    reference = fetch.generate_mujoco_observations()

    def generate_mujoco_observations(self: Any) -> tuple[np.ndarray, ...]:
        grip_pos = data.site_xpos[grip_site]
        mujoco.mj_jacSite(model, data, jacp, None, grip_site)
        grip_velp = (jacp @ data.qvel) * dt_s
        gripper_state = data.qpos[gripper_qpos]
        gripper_vel = data.qvel[gripper_qvel] * dt_s
        if object_site < 0:
            empty = np.zeros(0)
            return grip_pos, empty, empty, gripper_state, empty, empty, empty, grip_velp, gripper_vel
        object_pos = data.site_xpos[object_site]
        object_rot = rotations.mat2euler(data.site_xmat[object_site].reshape(3, 3))
        mujoco.mj_jacSite(model, data, jacp, None, object_site)
        object_velp = (jacp @ data.qvel) * dt_s
        mujoco.mj_jacSite(model, data, None, jacr, object_site)
        object_velr = (jacr @ data.qvel) * dt_s
        object_velp -= grip_velp
        object_rel_pos = object_pos - grip_pos
        return (
            grip_pos,
            object_pos,
            object_rel_pos,
            gripper_state,
            object_rot,
            object_velp,
            object_velr,
            grip_velp,
            gripper_vel,
        )

    def _step_callback(self: Any) -> None:
        if self.block_gripper:
            data.qpos[finger_qpos] = 0.0
            mujoco.mj_forward(model, data)

    fetch.generate_mujoco_observations = types.MethodType(generate_mujoco_observations, fetch)
    fetch._step_callback = types.MethodType(_step_callback, fetch)
    cached = fetch.generate_mujoco_observations()
    if any(np.asarray(a).tobytes() != np.asarray(b).tobytes() for a, b in zip(cached, reference, strict=True)):
        raise RuntimeError(
            "the cached Fetch observation differs from gymnasium-robotics' own; update envs/fetch_lookups.py "
            "for this gymnasium-robotics version"
        )
