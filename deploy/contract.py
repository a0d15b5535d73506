"""The observation/action contract shared by the sim envs, the exporter and the robot runtime.

numpy only: the robot imports this module, so it must not pull in torch, gymnasium or MuJoCo.

Observation (a dict, as gymnasium goal envs return it):

    observation   = [robot state fields in ``state_fields`` order, then the action history]
    achieved_goal = the gripper / point position (metres); the block's with a block (see below)
    desired_goal  = the target position (metres)

Action history: the last ``history_len`` commands *sent* (not yet necessarily applied), oldest first,
newest last, each ``action_dim`` long, flattened row-major. Before any command is sent every slot holds the
hold command (all zeros: zero displacement). With a fixed delay ``k == history_len`` the history is exactly
the commands still pending: slot 0 is applied at the next control step. With a randomized delay
``k <= history_len`` the pending commands are the last ``k`` slots.

Flat layout (what ONNX takes, float32): ``concat(observation, achieved_goal, desired_goal)``.

A task with a block (push): the robot state also carries the block's position (``block_slice``, metres; on a real
cell a tracker or camera measures it, the robot spec's ``block_tracker`` says its noise and rate), and the achieved
goal is the block's position, not the gripper's. Contract format 1 has no block; format 2 adds ``block_slice``
(written only when set, so a reach contract stays format 1 and older readers keep reading it).

Action: ``action_dim`` floats in [action_low, action_high]; the first three are a Cartesian displacement of
``action_scale_m`` metres per unit per control step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

import numpy as np

from deploy.contract_dict import INTEGER_KEYS, NUMBER_KEYS, check_contract_dict, is_int, is_number

OBS_KEYS = ("observation", "achieved_goal", "desired_goal")
CONTRACT_FORMAT_VERSION = 1  # a contract without a block
BLOCK_CONTRACT_FORMAT_VERSION = 2  # a contract whose state carries a block's position (``block_slice``)
MAX_DELAY_STEPS = 8  # longest actuation delay (control steps) any robot, env, spec or probe may have
FLOAT32_MAX = float(np.finfo(np.float32).max)  # the policy takes float32: a value of larger magnitude becomes inf


@dataclass(frozen=True)
class ObservationContract:
    """Field order, dimensions, action history length, scale and bounds of one robot task.

    :param name: task name, e.g. ``"fetch_reach"``.
    :param state_fields: robot state fields in order, as (name, size) pairs.
    :param action_dim: length of one command.
    :param history_len: number of past commands carried in the observation (control steps).
    :param goal_dim: length of the achieved and desired goal (3: x, y, z in metres).
    :param action_scale_m: metres of displacement per unit command per control step.
    :param action_low: lower bound of every action component.
    :param action_high: upper bound of every action component.
    :param control_period_s: seconds per control step.
    :param position_slice: (start, stop) of the gripper position (metres) inside the robot state.
    :param block_slice: (start, stop) of the block position (metres) inside the robot state, for a task with a
        block (the achieved goal is then the block's position); None: no block (the achieved goal is the gripper's).
    """

    name: str
    state_fields: tuple[tuple[str, int], ...]
    action_dim: int
    history_len: int
    goal_dim: int = 3
    action_scale_m: float = 0.05
    action_low: float = -1.0
    action_high: float = 1.0
    control_period_s: float = 0.04
    position_slice: tuple[int, int] = (0, 3)
    block_slice: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        for field in INTEGER_KEYS:
            if not is_int(getattr(self, field)):
                raise ValueError(f"{field} must be an integer, got {getattr(self, field)!r}")
        for field in NUMBER_KEYS:
            value = getattr(self, field)
            if not is_number(value) or not math.isfinite(value):
                raise ValueError(f"{field} must be a finite number, got {value!r}")
        if self.history_len < 0:
            raise ValueError(f"history_len must be >= 0 control steps, got {self.history_len}")
        if self.action_dim < 1:
            raise ValueError(f"action_dim must be >= 1, got {self.action_dim}")
        if self.goal_dim < 1:
            raise ValueError(f"goal_dim must be >= 1 (3: x, y, z in metres), got {self.goal_dim}")
        if not self.action_low < self.action_high:
            raise ValueError(f"action_low ({self.action_low}) must be below action_high ({self.action_high})")
        if self.control_period_s <= 0:
            raise ValueError(f"control_period_s must be > 0 seconds, got {self.control_period_s}")
        if self.action_scale_m <= 0:
            raise ValueError(f"action_scale_m must be > 0 metres per command unit, got {self.action_scale_m}")
        self._check_state_fields()
        self._check_position_slice()
        if self.block_slice is not None:
            self._check_slice(self.block_slice, "block_slice", "block")

    @property
    def has_block(self) -> bool:
        """The robot state carries a block's position (a push task)."""
        return self.block_slice is not None

    @property
    def achieved_slice(self) -> tuple[int, int]:
        """Where the achieved goal sits in the robot state: the block's position, or the gripper's without a block."""
        return self.block_slice if self.block_slice is not None else self.position_slice

    def _check_state_fields(self) -> None:
        """Every state field is a (non-empty name, size >= 1) pair; names are unique."""
        if not isinstance(self.state_fields, tuple) or not self.state_fields:
            raise ValueError(f"state_fields must be a non-empty tuple of (name, size) pairs, got {self.state_fields!r}")
        names = []
        for entry in self.state_fields:
            if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str) and entry[0]):
                raise ValueError(f"state field {entry!r} must be a (name, size) pair with a non-empty name")
            if not is_int(entry[1]) or entry[1] < 1:
                raise ValueError(f"state field {entry[0]!r} must have an integer size >= 1, got {entry[1]!r}")
            names.append(entry[0])
        if len(set(names)) != len(names):
            raise ValueError(f"state field names must be unique, got {names}")

    def _check_position_slice(self) -> None:
        """``position_slice`` holds the ``goal_dim`` gripper coordinates (metres), inside one state field."""
        self._check_slice(self.position_slice, "position_slice", "gripper")

    def _check_slice(self, position: tuple[int, int], key: str, what: str) -> None:
        """``position`` (a ``key`` of this contract) holds ``goal_dim`` coordinates (metres) inside one state field."""
        if not (isinstance(position, tuple) and len(position) == 2 and all(is_int(v) for v in position)):
            raise ValueError(f"{key} must be a (start, stop) pair of integers, got {position!r}")
        start, stop = position
        state_dim = self.state_dim
        layout = ", ".join(f"{name!r} {lo}:{hi}" for name, lo, hi in self.field_spans())
        if not (0 <= start < stop <= state_dim and stop - start == self.goal_dim):
            raise ValueError(
                f"{key} {list(position)} must hold the goal_dim = {self.goal_dim} {what} coordinates "
                f"(metres) inside the {state_dim} robot state values (0 <= start < stop <= {state_dim}, "
                f"stop - start = {self.goal_dim}); the state is {layout}. Point it at the {what} position field"
            )
        if not any(lo <= start and stop <= hi for _, lo, hi in self.field_spans()):
            raise ValueError(
                f"{key} {list(position)} straddles two state fields; the {what} position must lie inside one "
                f"field (the state is {layout})"
            )

    def field_spans(self) -> list[tuple[str, int, int]]:
        """(name, start, stop) of every state field inside the robot state vector."""
        spans, start = [], 0
        for name, size in self.state_fields:
            spans.append((name, start, start + size))
            start += size
        return spans

    @property
    def position_field(self) -> str:
        """Name of the state field that holds the gripper position (``position_slice`` lies inside it)."""
        start = self.position_slice[0]
        return next(name for name, lo, hi in self.field_spans() if lo <= start < hi)

    # Dimensions ------------------------------------------------------------------------------------
    @property
    def state_dim(self) -> int:
        return sum(size for _, size in self.state_fields)

    @property
    def observation_dim(self) -> int:
        """Length of the ``observation`` entry: robot state + action history."""
        return self.state_dim + self.history_len * self.action_dim

    @property
    def flat_dim(self) -> int:
        """Length of the flat float32 vector the exported policy takes."""
        return self.observation_dim + 2 * self.goal_dim

    def hold(self) -> np.ndarray:
        """The hold command: zero displacement (float64, ``action_dim``)."""
        return np.zeros(self.action_dim, dtype=np.float64)

    # Building and flattening -----------------------------------------------------------------------
    def build(
        self,
        state: np.ndarray,
        history: ActionHistory,
        desired_goal: np.ndarray,
        achieved_goal: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        """Build the observation dict from a robot state vector, the action history and the target.

        ``achieved_goal`` defaults to the position inside ``state`` (``achieved_slice``: the block's, else the
        gripper's).
        """
        state = np.asarray(state, dtype=np.float64)
        if state.shape != (self.state_dim,):
            raise ValueError(f"robot state must have shape ({self.state_dim},), got {state.shape}")
        if history.length != self.history_len or history.action_dim != self.action_dim:
            raise ValueError(
                f"action history is {history.length}x{history.action_dim}, "
                f"the contract needs {self.history_len}x{self.action_dim}"
            )
        if achieved_goal is None:
            achieved_goal = state[slice(*self.achieved_slice)]
        return {
            "observation": np.concatenate([state, history.flat()]),
            "achieved_goal": np.array(achieved_goal, dtype=np.float64),
            "desired_goal": np.array(desired_goal, dtype=np.float64),
        }

    def flatten(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """Flatten one dict observation (or a batch, leading axis) into the float32 layout ONNX takes."""
        for key in OBS_KEYS:
            if key not in obs:
                raise KeyError(f"observation is missing {key!r}; it needs the keys {OBS_KEYS}")
        parts = [np.asarray(obs[key]) for key in OBS_KEYS]
        sizes = (self.observation_dim, self.goal_dim, self.goal_dim)
        for key, part, size in zip(OBS_KEYS, parts, sizes, strict=True):
            if part.ndim == 0 or part.shape[-1] != size:
                raise ValueError(
                    f"{key!r} has shape {part.shape}; the contract {self.name!r} expects {size} values in its last "
                    f"axis (flat layout: observation {self.observation_dim} + 2 x goal {self.goal_dim})"
                )
        return np.concatenate(parts, axis=-1).astype(np.float32)

    def flat_observation(self, state: np.ndarray, history: ActionHistory, desired_goal: np.ndarray) -> np.ndarray:
        """``flatten(build(state, history, desired_goal))`` written straight into one float32 vector, without the
        dict: the control loop's per-tick path (same values bit for bit, a few copies instead of six arrays)."""
        state_dim, observation_dim, position, flat_dim = self._flat_layout
        if state.shape != (state_dim,):
            raise ValueError(f"robot state must have shape ({state_dim},), got {state.shape}")
        if history.length != self.history_len or history.action_dim != self.action_dim:
            raise ValueError(
                f"action history is {history.length}x{history.action_dim}, "
                f"the contract needs {self.history_len}x{self.action_dim}"
            )
        flat = np.empty(flat_dim, dtype=np.float32)
        flat[:state_dim] = state
        flat[state_dim:observation_dim] = history.view()
        flat[observation_dim : observation_dim + self.goal_dim] = state[position]
        flat[observation_dim + self.goal_dim :] = desired_goal
        return flat

    @cached_property
    def _flat_layout(self) -> tuple[int, int, slice, int]:
        """(state_dim, observation_dim, achieved-goal slice, flat_dim), computed once."""
        return self.state_dim, self.observation_dim, slice(*self.achieved_slice), self.flat_dim

    def clip_action(self, action: np.ndarray) -> np.ndarray:
        return np.clip(action, self.action_low, self.action_high)

    # Manifest (de)serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description, written into the policy package manifest (format 2 only with a block)."""
        block = {} if self.block_slice is None else {"block_slice": list(self.block_slice)}
        return {
            "format_version": BLOCK_CONTRACT_FORMAT_VERSION if block else CONTRACT_FORMAT_VERSION,
            "name": self.name,
            "state_fields": [[name, size] for name, size in self.state_fields],
            "action_dim": self.action_dim,
            "history_len": self.history_len,
            "history_order": "oldest_first",
            "goal_dim": self.goal_dim,
            "action_scale_m": self.action_scale_m,
            "action_low": self.action_low,
            "action_high": self.action_high,
            "control_period_s": self.control_period_s,
            "position_slice": list(self.position_slice),
            **block,
            "flat_layout": ["observation", "achieved_goal", "desired_goal"],
            "flat_dim": self.flat_dim,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ObservationContract:
        """Read the manifest's ``contract`` section (what :meth:`to_dict` writes), refusing anything else.

        Raises ``ValueError`` on an unknown key (a misspelt one would silently take its default), a missing key, a
        value of the wrong type (``"2"`` is not an integer, ``true`` is not a number) or dimensions that do not add
        up (``flat_dim``).
        """
        check_contract_dict(data)  # keys and JSON types, before any value is read
        version = data["format_version"]
        readable = (CONTRACT_FORMAT_VERSION, BLOCK_CONTRACT_FORMAT_VERSION)
        if not is_int(version) or version not in readable:
            raise ValueError(
                f"contract format_version {version!r} is not supported (this build reads {list(readable)}); "
                "re-export the policy with this version of robot-grpo"
            )
        if (version == BLOCK_CONTRACT_FORMAT_VERSION) != ("block_slice" in data):
            raise ValueError(
                f"contract format_version {version} {'needs' if version == 2 else 'has no'} 'block_slice' "
                "(format 2 is a contract whose state carries a block's position, format 1 one without); re-export"
            )
        block = data.get("block_slice")
        if block is not None and not (isinstance(block, list) and len(block) == 2 and all(is_int(v) for v in block)):
            raise ValueError(f"contract block_slice must be a [start, stop] pair of integers, got {block!r}")
        if data.get("history_order", "oldest_first") != "oldest_first":
            raise ValueError(
                f"unsupported history_order {data.get('history_order')!r}; this build reads 'oldest_first'"
            )
        if "flat_layout" in data and list(data["flat_layout"]) != list(OBS_KEYS):
            raise ValueError(f"unsupported flat_layout {data['flat_layout']!r}; this build reads {list(OBS_KEYS)}")
        contract = cls(
            name=data["name"],
            state_fields=tuple((str(n), int(s)) for n, s in data["state_fields"]),
            action_dim=int(data["action_dim"]),
            history_len=int(data["history_len"]),
            goal_dim=int(data["goal_dim"]),
            action_scale_m=float(data["action_scale_m"]),
            action_low=float(data["action_low"]),
            action_high=float(data["action_high"]),
            control_period_s=float(data["control_period_s"]),
            position_slice=(int(data["position_slice"][0]), int(data["position_slice"][1])),
            block_slice=None if block is None else (int(block[0]), int(block[1])),
        )
        if "flat_dim" in data and (not is_int(data["flat_dim"]) or data["flat_dim"] != contract.flat_dim):
            raise ValueError(f"contract flat_dim {data['flat_dim']!r} does not match its fields ({contract.flat_dim})")
        return contract


class ActionHistory:
    """The last ``length`` commands sent, oldest first (see the module docstring).

    The env uses it to apply the command sent ``k`` steps ago; the runtime uses the same class to build the
    observation, so both produce the same bytes.
    """

    def __init__(self, length: int, action_dim: int) -> None:
        if length < 0:
            raise ValueError(f"history length must be >= 0 control steps, got {length}")
        self.length = length
        self.action_dim = action_dim
        self._buf = np.zeros((length, action_dim), dtype=np.float64)

    def clear(self) -> None:
        """Fill every slot with the hold command (zeros)."""
        self._buf[:] = 0.0

    def sent_ago(self, steps: int) -> np.ndarray:
        """The command sent ``steps`` control steps before the next push (1 = the newest)."""
        if not 1 <= steps <= self.length:
            raise ValueError(f"steps must be in 1..{self.length}, got {steps}")
        return self._buf[self.length - steps].copy()

    def push(self, command: np.ndarray) -> None:
        """Append the command just sent, dropping the oldest."""
        if np.shape(command) != (self.action_dim,):
            raise ValueError(f"command must have shape ({self.action_dim},), got {np.shape(command)}")
        if self.length == 0:
            return
        self._buf[:-1] = self._buf[1:]
        self._buf[-1] = command

    def flat(self) -> np.ndarray:
        return self._buf.reshape(-1).copy()

    def view(self) -> np.ndarray:
        """The history flattened, oldest first, without a copy (read-only: valid until the next change)."""
        view = self._buf.reshape(-1)
        view.flags.writeable = False
        return view

    def get_state(self) -> np.ndarray:
        return self._buf.copy()

    def set_state(self, buf: np.ndarray) -> None:
        buf = np.asarray(buf, dtype=np.float64)
        if buf.shape != self._buf.shape:
            raise ValueError(f"history state must have shape {self._buf.shape}, got {buf.shape}")
        self._buf[:] = buf


def apply_delay(history: ActionHistory, command: np.ndarray, delay: int) -> np.ndarray:
    """Return the command that takes effect now under a ``delay``-step actuation lag, and record ``command``.

    The command sent at step t is applied at step t + delay; before the first ``delay`` steps of an
    episode the applied command is the hold command (the history starts filled with it).
    """
    if not 0 <= delay <= history.length:
        raise ValueError(f"delay must be in 0..{history.length} control steps, got {delay}")
    command = np.asarray(command, dtype=np.float64)
    applied = command.copy() if delay == 0 else history.sent_ago(delay)
    history.push(command)
    return applied


def in_flight_displacement_m(commands: np.ndarray, scale_m: float, dims: int) -> np.ndarray:
    """Metres the gripper still moves, at nominal gain, once ``commands`` (sent, not yet applied) are applied.

    :param commands: the commands in flight, ``[n, action_dim]`` command units (any order; n may be 0).
    :param scale_m: metres per unit command per control step (the contract's ``action_scale_m``).
    :param dims: how many leading components are a Cartesian displacement.
    :returns: ``[dims]`` metres (float64): the summed displacement. Multiply by an actuator gain for the real arm.
    """
    rows = np.asarray(commands, dtype=np.float64)
    if rows.size == 0:
        return np.zeros(dims)
    return rows.reshape(-1, rows.shape[-1])[:, :dims].sum(axis=0) * scale_m


FETCH_STATE_FIELDS: tuple[tuple[str, int], ...] = (
    ("grip_pos", 3),  # metres, world frame
    ("gripper_state", 2),  # finger joint positions, metres
    ("grip_velp", 3),  # metres per control step
    ("gripper_vel", 2),  # finger joint velocities, metres per control step
)

POINT_STATE_FIELDS: tuple[tuple[str, int], ...] = (
    ("pos", 3),  # metres
    ("vel", 3),  # metres per control step
)


def fetch_reach_contract(history_len: int) -> ObservationContract:
    """The FetchReach contract: 10 state values, 4-D action (dx, dy, dz, gripper), 25 Hz."""
    return ObservationContract(
        name="fetch_reach",
        state_fields=FETCH_STATE_FIELDS,
        action_dim=4,
        history_len=history_len,
        action_scale_m=0.05,
        control_period_s=0.04,
    )


def point_reach_contract(history_len: int) -> ObservationContract:
    """The numpy point-mass contract: 6 state values, 3-D displacement action, 25 Hz."""
    return ObservationContract(
        name="point_reach",
        state_fields=POINT_STATE_FIELDS,
        action_dim=3,
        history_len=history_len,
        action_scale_m=0.05,
        control_period_s=0.04,
    )


#: FetchPush-v4's observation (gymnasium-robotics ``MujocoFetchEnv._get_obs``), in its order.
FETCH_PUSH_STATE_FIELDS: tuple[tuple[str, int], ...] = (
    ("grip_pos", 3),  # metres, world frame
    ("object_pos", 3),  # the block's position, metres, world frame (a tracker or camera on a real cell)
    ("object_rel_pos", 3),  # object_pos - grip_pos, metres
    ("gripper_state", 2),  # finger joint positions, metres
    ("object_rot", 3),  # the block's orientation, Euler angles (radians)
    ("object_velp", 3),  # the block's velocity relative to the gripper, metres per control step
    ("object_velr", 3),  # the block's angular velocity, radians per control step
    ("grip_velp", 3),  # metres per control step
    ("gripper_vel", 2),  # finger joint velocities, metres per control step
)
FETCH_PUSH_BLOCK_SLICE = (3, 6)  # ``object_pos``


def fetch_push_contract(history_len: int) -> ObservationContract:
    """The FetchPush contract: 25 state values with the block's position, 4-D action, 25 Hz; the goal is the
    block's."""
    return ObservationContract(
        name="fetch_push",
        state_fields=FETCH_PUSH_STATE_FIELDS,
        action_dim=4,
        history_len=history_len,
        action_scale_m=0.05,
        control_period_s=0.04,
        block_slice=FETCH_PUSH_BLOCK_SLICE,
    )


def contract_from_fields(name: str, history_len: int) -> ObservationContract:
    """Look up a known contract by task name."""
    builders = {
        "fetch_reach": fetch_reach_contract,
        "point_reach": point_reach_contract,
        "fetch_push": fetch_push_contract,
    }
    if name not in builders:
        raise ValueError(f"unknown contract {name!r}; known: {sorted(builders)}")
    return builders[name](history_len)


def known_task_differences(contract: ObservationContract) -> list[str]:
    """Where ``contract`` differs from the built-in contract of the task it names (empty: it matches, or the
    task is not one this module knows). The history length is the policy's own choice and is not compared.

    A ``fetch_reach`` contract whose ``position_slice`` points at the velocity, or whose scale is not FetchReach's,
    describes another robot under a known name: the runtime would read the wrong values as the gripper position.
    """
    try:
        known = contract_from_fields(contract.name, contract.history_len)
    except ValueError:
        return []
    return [
        f"{f.name} {getattr(contract, f.name)!r} (the {contract.name!r} task has {getattr(known, f.name)!r})"
        for f in fields(ObservationContract)
        if f.name != "history_len" and getattr(contract, f.name) != getattr(known, f.name)
    ]


def as_history(values: Sequence[Sequence[float]], action_dim: int) -> ActionHistory:
    """Build an ActionHistory from explicit rows (oldest first), for tests and replays."""
    rows = np.asarray(values, dtype=np.float64).reshape(-1, action_dim)
    history = ActionHistory(rows.shape[0], action_dim)
    history.set_state(rows)
    return history
