"""RETRACT: what the controller does from an episode's last policy step to its next HOME, in a cell.

numpy only (robot side). On each accepted state: the retract's next command toward home (``Retraction.command``, given
the partner's newest reported position, which a give-way moves away from) through the safety filter and the
separation barrier, planned from the checker's bounds like any RUN command (``CommandPath.filtered``), sent as RUN
sends (``RunTicks.apply``; no policy step is counted). When the retract is over (home within its tolerance, or its
steps spent) the next episode starts as after RUN (``ModeRules.next_episode``: the HOME, or HOLD while the partner is
stale or still in its episode). A period without a fresh state is RUN's (a heartbeat, then the filter's hold, then
the watchdog's stop). A HOMED state here answers no HOME: the robot homed by itself; the retract is abandoned and
the arm re-homed from HOLD, as in RUN. Acts through the controller's actions (``deploy.runtime.loop.Controller``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deploy.runtime.safety import UNREQUESTED_HOME
from deploy.runtime.state_machine import LoopState
from deploy.runtime.tick_record import EMPTY, TickRecord
from deploy.wire import StateMsg

if TYPE_CHECKING:
    from deploy.runtime.loop import Controller
    from deploy.runtime.loop_modes import ModeRules

UNREQUESTED_HOMES_IN_RETRACT = "unrequested_homes_in_retract"  # count: HOMED while retracting (the robot homed itself)


class RetractTicks:
    """The RETRACT ticks of one controller (module docstring); the retract's steps are the ``Retraction``'s.

    :param controller: the controller whose parts are asked and whose actions are used.
    :param modes: the controller's ``ModeRules`` (the next episode after the retract, RUN's sending and silence).
    """

    def __init__(self, controller: Controller, modes: ModeRules) -> None:
        self.ctl = controller
        self.modes = modes

    def begin(self, t_in: float, msg: StateMsg) -> TickRecord | None:
        """The episode just ended on ``msg`` (received at ``t_in``, seconds): retract from here, or, with the retract
        off, go on to the next episode at once."""
        ctl = self.ctl
        if not ctl.retraction.enabled:
            self.modes.next_episode()
            return None
        ctl.retraction.start()
        ctl.enter(LoopState.RETRACT, "episode over: retract toward home before the HOME")
        return self.on_state(t_in, msg)

    def on_state(self, t_in: float, msg: StateMsg) -> TickRecord | None:
        """An accepted state in RETRACT: the next retract command, filtered and cut; or, the retract over, the next
        episode."""
        ctl = self.ctl
        position = msg.state[ctl.position_slice]
        separation = ctl.path.separation
        partner = None if separation is None else separation.partner_position()  # as last polled (one tick old)
        command = ctl.retraction.command(position, partner)
        if command is None:
            self.modes.next_episode()
            return None
        ctl.line.sync(msg.pending)
        age = ctl.clock() - ctl.intake.last_valid_t
        result = ctl.path.filtered(command, ctl.intake.bounds, position, age)
        return self.modes.run.apply(result, t_in, msg, EMPTY, command, False)

    def homed_by_itself(self, msg: StateMsg) -> TickRecord:
        """A HOMED state while retracting: no HOME awaits it (the robot homed by itself). Hold and re-home."""
        self.ctl.counts[UNREQUESTED_HOMES_IN_RETRACT] += 1
        return self.modes.resets.abort_to_hold(msg, UNREQUESTED_HOME, "the robot homed by itself while retracting")
