"""A scripted lock-step robot on the test's clock: a given ``Link`` stand-in for loop tests that must not wait on wall
time.

The arm rests at ``POSE`` unless ``follows_commands`` is on: then each command that leaves its delay line (applied)
moves it by the command times the contract's scale and the spec's nominal gain, as the state checker expects an arm
to follow the commands its line shows applied (a HOME puts it back at ``POSE``). Every message the loop sends is
answered at once (``ANSWER_S`` later on the test's clock) with one state; a poll with nothing to answer waits out
its timeout on that clock, so a loop of a thousand ticks takes milliseconds. The robot reports its delay line (the
last ``history_len`` commands it received, 0 for holds), latches an e-stop when it receives one (its states then
carry ESTOP_ACTIVE) and releases it on a HOME unless ``release_on_home`` is off. Knobs bend what it sends:
``state_length`` (values per state), ``invalid`` ("nan": NaN values; "outside": the position 10 m off),
``pending_offset`` (added to every command number it reports), ``ignore_estops`` (receives e-stops but never latches
one), ``drop_commands`` (receives commands but never executes one: its line stays all holds), ``homing_s`` (seconds
on the test's clock from a HOME to its HOMED state: the arm's homing motion; states in between are not flagged
HOMED) and ``restart_homing`` (a HOME received while homing starts the motion again, as an arm that re-plans to home
does).
"""

from __future__ import annotations

from collections import Counter, deque

import numpy as np

from deploy.contract import ObservationContract
from deploy.robot_spec import load_robot_spec
from deploy.wire import HOLD_SEQ, CommandMsg, EStopMsg, HomeMsg, Message, StateFlags, StateMsg
from deploy.wire.messages import SEQ_MODULUS

ANSWER_S = 1e-4  # seconds the scripted robot takes to answer a message
POSE = tuple(load_robot_spec().home_position_m)  # metres: the gripper rests at the sim robot's home (its spec's)
OUTSIDE_M = 10.0  # metres added to x by invalid="outside": beyond any reachable envelope


class ScriptedClock:
    """The loop's clock in seconds; only the scripted robot moves it."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock (what a down link's poll does)."""
        self.t += max(0.0, seconds)


class ScriptedRobot:
    """See the module docstring.

    :param clock: the test's clock (the robot stamps its states with it).
    :param contract: the contract whose state the robot sends (position first).
    """

    name = "scripted-robot"

    def __init__(self, clock: ScriptedClock, contract: ObservationContract) -> None:
        self.clock, self.contract = clock, contract
        self.decoder = type("Decoder", (), {"errors": Counter()})()
        self.received: Counter[str] = Counter()
        self.commands: list[int] = []  # sequence numbers of the commands received
        self.state_length = contract.state_dim
        self.invalid = ""
        self.pending_offset = 0
        self.release_on_home = True
        self.ignore_estops = False
        self.drop_commands = False
        self.homing_s = 0.0
        self.restart_homing = False
        self.follows_commands = False
        self.estop = False
        self.position = np.array(POSE, dtype=np.float64)  # metres (moves only with follows_commands)
        self._sent_moves: dict[int, np.ndarray] = {}  # command seq -> its move (metres at the nominal gain)
        spec = load_robot_spec()
        self._metres_per_unit = np.asarray(spec.actuator_gain) * spec.command_scale_m
        self._homing_since: float | None = None  # test-clock time the homing motion began (None: not homing)
        self._line: deque[int] = deque([HOLD_SEQ] * contract.history_len, maxlen=contract.history_len)
        self._unanswered = 0
        self._seq = 0

    def send(self, msg: Message) -> int:
        self.received[type(msg).__name__] += 1
        if isinstance(msg, CommandMsg):
            self.commands.append(msg.seq)
            self._sent_moves[msg.seq] = np.asarray(msg.action[: len(POSE)], dtype=np.float64) * self._metres_per_unit
            applied = self._line[0]  # leaves the full line as the new entry joins it
            self._line.append(HOLD_SEQ if self.estop or self.drop_commands else msg.seq)
            if self.follows_commands and applied != HOLD_SEQ:
                self.position = self.position + self._sent_moves.pop(applied)
        elif isinstance(msg, EStopMsg):
            self.estop = self.estop or not self.ignore_estops
        elif isinstance(msg, HomeMsg):
            self.estop = self.estop and not self.release_on_home
            if self._homing_since is None or self.restart_homing:
                self._homing_since = self.clock.t
            self._line.extend([HOLD_SEQ] * len(self._line))
            self.position = np.array(POSE, dtype=np.float64)
        self._unanswered += 1
        return 0

    def poll(self, timeout_s: float) -> list[Message]:
        if not self._unanswered:
            self.clock.t += max(0.0, timeout_s)
            return []
        self._unanswered -= 1
        self.clock.t += ANSWER_S
        return [self._state()]

    def _state(self) -> StateMsg:
        state = np.zeros(self.state_length)
        state[: len(POSE)] = self.position
        if self.invalid == "nan":
            state[:] = np.nan
        elif self.invalid == "outside":
            state[0] += OUTSIDE_M
        homed = self._homing_since is not None and self.clock.t - self._homing_since >= self.homing_s
        if homed:
            self._homing_since = None
        flags = (StateFlags.ESTOP_ACTIVE if self.estop else 0) | (StateFlags.HOMED if homed else 0)
        line = tuple(s if s == HOLD_SEQ else (s + self.pending_offset) % SEQ_MODULUS for s in self._line)
        self._seq += 1
        return StateMsg(self._seq, self.clock.t, state, int(flags), line)

    def close(self) -> None:
        pass
