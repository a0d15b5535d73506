"""HOMING: what the controller does from the HOME of an episode to its HOMED answer.

numpy only (robot side). An episode starts from HOLD: the next goal (none left: the run ends, saying how many were
served and aborted), its HOME sent, HOMING entered. The accepted HOMED state without ESTOP_ACTIVE starts RUN; no
answer after ``Homing.retry_ticks()`` resends the HOME; ``max_home_retries`` resent in a row without an answer ->
SAFE_STOP, with a hint built from the homing faults seen since the episode's first HOME (HOMED states with the e-stop
latched, HOMED states off the spec's home). The counters and timers are ``Homing``'s; this part owns the fault
counts at the episode's start. Acts through the controller's actions (``deploy.runtime.loop.Controller``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from deploy.runtime.diagnostics import homing_failure
from deploy.runtime.homing import HOMED_WITH_ESTOP, HomeWait
from deploy.runtime.loop_safe_stop import ESTOP_ACTIVE
from deploy.runtime.state_intake import HOMED, OFF_HOME_REASON
from deploy.runtime.state_machine import LoopState
from deploy.wire import StateMsg

if TYPE_CHECKING:
    from deploy.runtime.loop import Controller

logger = logging.getLogger(__name__)


class HomingTicks:
    """The start of each episode and the HOMING ticks of one controller (module docstring).

    :param controller: the controller whose parts are asked and whose actions are used.
    """

    def __init__(self, controller: Controller) -> None:
        self.ctl = controller
        self._faults_at_start = (0, 0)  # ``_faults()`` when the episode's first HOME went out

    def start_episode(self) -> None:
        """Start the next episode (HOME, HOMING) or, with no goal left, end the run."""
        ctl = self.ctl
        episode = ctl.episodes.start_next()
        if episode is None:
            ctl.finish(ctl.episodes.all_taken())
            return
        ctl.line.new_episode()
        ctl.path.note_sent(ctl.hold.copy())
        ctl.homing.new_episode()
        self._faults_at_start = self._faults()
        ctl.enter(LoopState.HOMING, f"episode {episode.index}: home (seed {episode.seed})")
        self._send_home()

    def on_state(self, t_in: float, msg: StateMsg) -> bool:
        """An accepted state in HOMING, received at ``t_in`` (seconds): True when it is the HOMED answer (RUN was
        entered: the caller asks the policy), else wait, resend or stop."""
        ctl = self.ctl
        if msg.flags & HOMED and not msg.flags & ESTOP_ACTIVE:
            ctl.homing.answered(t_in)
            ctl.enter(LoopState.RUN, f"episode {ctl.episodes.current.index} starts")  # type: ignore[union-attr]
            return True
        if msg.flags & HOMED:  # homed, but its e-stop is latched: it would execute no command of the episode
            ctl.counts[HOMED_WITH_ESTOP] += 1
            logger.warning("tick %d: the robot reports HOMED with its e-stop active; not starting", ctl.tick)
        self.wait()
        return False

    def wait(self) -> None:
        """No HOMED state yet (or one with the e-stop active): wait, resend the HOME, or stop."""
        ctl = self.ctl
        wait = ctl.homing.wait(ctl.tick)
        if wait is HomeWait.WAIT:
            ctl.outbox.heartbeat()
            return
        if wait is HomeWait.GIVE_UP:
            ctl.counts["homing_failures"] += 1
            start = self._faults_at_start
            latched, off_home = (now - before for now, before in zip(self._faults(), start, strict=True))
            hint = homing_failure(latched, off_home, ctl.spec, ctl.intake.checker, ctl.inbox.repeats_since_fresh)
            ctl.safe_stop(
                f"the robot never reported HOMED: {ctl.homing.retries + 1} HOMEs for episode "
                f"{ctl.episodes.current.index} went unanswered; check the robot's homing{hint}"  # type: ignore[union-attr]
            )
            return
        ctl.homing.resent()
        ctl.counts["home_retries"] += 1
        self._send_home()

    def _faults(self) -> tuple[int, int]:
        """HOMED states seen so far with the e-stop latched, and off the spec's home (running counts)."""
        counts = self.ctl.counts
        return counts[HOMED_WITH_ESTOP], counts[OFF_HOME_REASON]

    def _send_home(self) -> None:
        """Send the current episode's HOME: the arm moves by itself until its HOMED state is accepted."""
        ctl = self.ctl
        t = ctl.clock()
        ctl.homing.sent(ctl.tick, t)
        ctl.intake.expect_home()
        ctl.outbox.home(t, ctl.episodes.current.seed)  # type: ignore[union-attr]
