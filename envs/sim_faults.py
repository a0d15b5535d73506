"""The simulated robot's fault switches (``envs.sim_robot.SimRobot.faults``): what a test makes the link and the
robot's sensors do wrong while the physics stays true (``SimRobot.trace`` is the truth).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


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

    def clear(self) -> None:
        self.link_cut = self.nan_state = self.freeze_seq = False
        self.corrupt_prob = 0.0
        self.reply_delay_periods = 0
        self.state_glitch = None
        self.glitch_frames = self.stamp_frames = self.seq_jump = self.drop_estops = self.states_after_home = 0
        self.lose_homed_states = 0
        self.stamp_offset_s = 0.0
        self.pending_length = None
