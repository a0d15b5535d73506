"""The simulated robot's fault switches (``envs.sim_robot.SimRobot.faults``): what a test makes the link and the
robot's sensors do wrong while the physics stays true (``SimRobot.trace`` is the truth).

Two layers: the switches below (set by hand in a test, or by a fault model), and the fault models of
``envs.faults`` active now (``models``), whose hooks the robot calls through the methods of ``SimFaults``; a
``schedule`` begins and ends the models at their robot ticks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from envs.faults.base import RobotFault
    from envs.faults.schedule import FaultSchedule


@dataclass
class SimFaults:
    """Faults to inject; change the fields from any thread while the robot runs.

    :param link_cut: drop every byte in both directions (a cut cable).
    :param corrupt_prob: probability that each byte, in either direction, is replaced by a random other value.
    :param reply_delay_periods: hold every outgoing frame back this many control periods (a latency spike).
    :param nan_state: send NaN for every state value.
    :param freeze_seq: resend the last state frame unchanged, same sequence number (a frozen sensor).
    :param state_glitch: rewrites the state vector of the next ``glitch_frames`` states (CRC-valid lies: a shifted
        position, x = 1e30, a vector of the wrong length); the true physics is untouched.
    :param glitch_frames: states still to be rewritten by ``state_glitch`` (decremented per state).
    :param stamp_offset_s: seconds added to the timestamp of the next ``stamp_frames`` messages (a clock glitch).
    :param stamp_frames: messages still to be stamped with the offset.
    :param seq_jump: added once to the sequence counter at the next message (the numbering continues from there).
    :param pending_length: report this many pending sequence numbers instead of the real line (malformed).
    :param drop_estops: ignore the next N e-stop messages from the runtime (lost on the way).
    :param states_after_home: extra states sent right behind the HOMED one (a streaming robot whose runtime reads
        late: the HOMED state reaches the runtime in one read with newer ones).
    :param lose_homed_states: the next N HOMED states are lost on the way (numbered, never delivered): the runtime
        sees the arm at the home pose in states without the flag.
    :param block_jump_m: metres added to the reported block position (x, y, z) while ``block_jump_frames`` > 0: a
        block tracker glitch (the block itself does not move); see ``block_jump``.
    :param block_jump_frames: states still to carry the block jump (decremented per state).
    :param models: the fault models active now (``envs.faults``; a ``schedule`` adds and removes them).
    :param schedule: begins and ends fault models at their robot ticks (``SimRobot`` advances it per message).
    """

    link_cut: bool = False
    corrupt_prob: float = 0.0
    reply_delay_periods: int = 0
    nan_state: bool = False
    freeze_seq: bool = False
    state_glitch: Callable[[np.ndarray], np.ndarray] | None = None
    glitch_frames: int = 0
    stamp_offset_s: float = 0.0
    stamp_frames: int = 0
    seq_jump: int = 0
    pending_length: int | None = None
    drop_estops: int = 0
    states_after_home: int = 0
    lose_homed_states: int = 0
    block_jump_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    block_jump_frames: int = 0
    models: list[RobotFault] = field(default_factory=list)
    schedule: FaultSchedule | None = None

    def clear(self) -> None:
        self.link_cut = self.nan_state = self.freeze_seq = False
        self.corrupt_prob = 0.0
        self.reply_delay_periods = 0
        self.state_glitch = None
        self.glitch_frames = self.stamp_frames = self.seq_jump = self.drop_estops = self.states_after_home = 0
        self.lose_homed_states = self.block_jump_frames = 0
        self.block_jump_m = (0.0, 0.0, 0.0)
        self.stamp_offset_s = 0.0
        self.pending_length = None
        self.models = []
        self.schedule = None

    def block_jump(self, offset_m: tuple[float, float, float], frames: int = 1) -> None:
        """The block tracker reports the block ``offset_m`` metres away for the next ``frames`` states."""
        if frames < 0:
            raise ValueError(f"frames must be >= 0, got {frames}")
        self.block_jump_m = (float(offset_m[0]), float(offset_m[1]), float(offset_m[2]))
        self.block_jump_frames = int(frames)

    # Hooks of the active fault models (called by SimRobot on its serving thread) ---------------------------------
    def reported_state(self, state: np.ndarray) -> np.ndarray:
        for model in self.models:
            state = model.reported_state(state)
        return state

    def extra_flags(self) -> int:
        flags = 0
        for model in self.models:
            flags |= model.extra_flags()
        return flags

    def stamp(self, t_s: float) -> float:
        for model in self.models:
            t_s = model.stamp(t_s)
        return t_s

    def actuation(self, action: np.ndarray) -> np.ndarray:
        for model in self.models:
            action = model.actuation(action)
        return action

    def accepts(self, msg: Any) -> bool:
        return all([model.accepts(msg) for model in self.models])  # every model draws its own chance

    def outgoing(self, frame: bytes) -> list[bytes]:
        frames = [frame]
        for model in self.models:
            frames = [out for f in frames for out in model.outgoing(f)]
        return frames

    def fakes_home(self) -> bool:
        return any(model.fakes_home() for model in self.models)
