"""The control loop's homing: when HOLD may home, how long a HOME's HOMED answer is waited for, resending it, and
giving up; and which HOMED states a HOME of the episode asked for.

numpy-free, robot side. A HOME's answer is waited for ``retry_ticks()``: twice the slowest of the measured round
trips and the spec's ``homing_s``, at least the configured ticks. The first HOME waits in HOLD until a round trip is
known (``round_trip_known``). ``max_home_retries`` resent HOMEs without an answer stop the robot safely. A HOMED state
away from the spec's home pose is rejected by the state checker (``homed_off_home``) and counts as no answer.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from enum import Enum

from deploy.runtime.loop_config import HOME_RETRY_ROUND_TRIPS, LoopConfig

logger = logging.getLogger(__name__)

ROUND_TRIP_SAMPLES = 16  # HOME round trips remembered for the retry interval
ROUND_TRIP_UNMEASURED = "round_trip_unmeasured"  # count: homed before any round trip was measured (see HOLD)
HOMED_WITH_ESTOP = "homed_with_estop_active"  # count: a HOMED state with the e-stop latched (homing not complete)
LATE_HOME_ANSWERS = "late_home_answers"  # count: a resent HOME's answer read in RUN (the episode goes on)


class HomeWait(Enum):
    """What a tick without a HOMED answer does: wait, resend the HOME, or give up (safe stop)."""

    WAIT = "wait"
    RESEND = "resend"
    GIVE_UP = "give_up"


class Homing:
    """The homing counters, timers and round trips of one run.

    :param config: the loop's settings (``home_retry_ticks``, ``max_home_retries``).
    :param period_s: the control period (seconds).
    :param homing_s: the spec's measured HOME-to-HOMED time (seconds).
    """

    def __init__(self, config: LoopConfig, period_s: float, homing_s: float) -> None:
        self._configured_ticks = config.home_retry_ticks
        self._max_retries = config.max_home_retries
        self._period_s = period_s
        self._homing_s = homing_s
        self.round_trips: deque[float] = deque(maxlen=ROUND_TRIP_SAMPLES)  # seconds
        self.home_tick = 0  # the tick the last HOME went out
        self.retries = 0  # HOMEs resent for the current episode without an answer
        self.unanswered = 0  # HOMEs of the current episode whose HOMED answer has not come (resent included)
        self._sent_t = 0.0  # when the last HOME went out (seconds, the loop's clock)

    def new_episode(self) -> None:
        self.retries = 0
        self.unanswered = 0

    def sent(self, tick: int, t: float) -> None:
        """A HOME went out at ``tick``, time ``t`` (seconds)."""
        self.home_tick = tick
        self._sent_t = t
        self.unanswered += 1

    def resent(self) -> None:
        self.retries += 1

    def answered(self, t_in: float) -> None:
        """The episode's HOMED state came at ``t_in``: after a resent HOME it is unknown which one it answers (Karn),
        so only an unrepeated HOME's round trip is sampled."""
        if not self.retries:
            self.round_trips.append(t_in - self._sent_t)

    def note_round_trip(self, seconds: float) -> None:
        self.round_trips.append(seconds)

    def round_trip_known(self, reports_line: bool, estop_latched: bool, waited_s: float, limit_s: float) -> bool:
        """True once a round trip was measured, or when none can be: the robot reports no delay line, or its e-stop
        is latched (it executes no command until a HOME releases it). Without it the first HOME would be resent after
        the configured ``home_retry_ticks`` even on a link slower than that, homing the robot twice. A robot whose
        line shows none of the holds within ``limit_s`` (``watchdog_stop_s``) of entering HOLD is not waited on for
        ever: the configured ticks size the wait (``round_trip_unmeasured``, counted by the caller)."""
        if self.round_trips or not reports_line or estop_latched:
            return True
        if waited_s < limit_s:
            return False
        logger.warning(
            "no state reported a command of this loop in %.3f s of HOLD; homing with the configured home_retry_ticks "
            "(%d) as the wait for its answer",
            waited_s,
            self._configured_ticks,
        )
        return True

    def retry_ticks(self) -> int:
        """Ticks to wait for a HOME's answer before resending it: the configured ticks, or ``HOME_RETRY_ROUND_TRIPS``
        of the slowest of the recent round trips and the spec's ``homing_s`` (HOME to HOMED, the arm's motion
        included), whichever is longer."""
        slowest = max(max(self.round_trips, default=0.0), self._homing_s)
        return max(self._configured_ticks, math.ceil(HOME_RETRY_ROUND_TRIPS * slowest / self._period_s))

    def wait(self, tick: int) -> HomeWait:
        """No HOMED state yet at ``tick``: wait, resend, or give up after ``max_home_retries`` resent HOMEs."""
        if tick - self.home_tick < self.retry_ticks():
            return HomeWait.WAIT
        if self.retries >= self._max_retries:
            return HomeWait.GIVE_UP
        return HomeWait.RESEND

    def asked_for(self, in_run: bool, accepted: bool) -> tuple[bool, bool]:
        """A HOMED state in HOMING or RUN: (whether a HOME of this episode awaited it, whether it is a resent HOME's
        late answer read in RUN). Each HOME is answered once. Not asked for only when accepted in RUN with none
        awaited: the robot homed by itself."""
        asked = self.unanswered > 0
        self.unanswered = max(0, self.unanswered - 1)
        if not in_run or not accepted:
            return True, False
        return asked, asked
