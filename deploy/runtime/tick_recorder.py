"""Each tick's record (the tick log's row) and the episode a safe stop cut short.

numpy only (robot side). A record names the state answered (or none), the observation, the policy's proposal, the
command sent, the filter's reasons, the checker's verdict and the position bound. The tick that stopped an episode in
RUN belongs to that episode, although the stop ended it just before the record is made: this part remembers the
episode the last safe stop aborted until that record is made.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from deploy.runtime.episodes import EpisodeTracker
from deploy.runtime.goals import Episode
from deploy.runtime.safety import IMPLAUSIBLE_STATE
from deploy.runtime.tick_record import EMPTY, NO_EPISODE, TickRecord
from deploy.wire import StateMsg

REJECTION_PREFIXES = ("implausible_", "nan_state", "malformed_")  # reasons that name why a state was rejected
Bounds = tuple[tuple[float, ...], tuple[float, ...]]  # where the gripper can be (metres per axis: low, high)


class TickRecorder:
    """Builds the tick log's rows.

    :param clock: the loop's clock (seconds): a record's time.
    :param episodes: the episodes served (the current one names a record's goal and episode).
    """

    def __init__(self, clock: Callable[[], float], episodes: EpisodeTracker) -> None:
        self._clock = clock
        self.episodes = episodes
        self._stopped: Episode | None = None  # the episode the last safe stop aborted in RUN, until its record

    def note_stop(self, in_run: bool) -> None:
        """A safe stop is about to abort the current episode (``in_run``: the loop was in RUN)."""
        self._stopped = self.episodes.current if in_run else None

    def record(
        self,
        tick: int,
        in_run: bool,
        bounds: Bounds | None,
        msg: StateMsg | None,
        flat: np.ndarray,
        proposed: np.ndarray,
        sent: np.ndarray,
        reasons: tuple[str, ...],
        latency_s: float,
        stop: bool,
        policy_id: str = "",
    ) -> TickRecord:
        """The record of ``tick`` (``in_run``: the loop is in RUN; ``bounds``: the checker's, None without a state)."""
        episode = self.episodes.current
        in_episode = episode is not None and in_run
        if stop and not in_episode and self._stopped is not None:
            # the tick that stopped an episode belongs to it (the stop ended it just before this record): a reader
            # of the log sees the episode was cut short, not a stray tick outside any episode
            episode, in_episode, self._stopped = self._stopped, True, None
        return TickRecord(
            t_s=self._clock(),
            tick=tick,
            state=msg.state if msg is not None else EMPTY,
            obs_flat=flat,
            goal=episode.goal if in_episode else EMPTY,  # type: ignore[union-attr]
            proposed=proposed,
            sent=sent,
            reasons=reasons,
            latency_s=latency_s,
            jitter_s=0.0,
            episode_id=episode.index if in_episode else NO_EPISODE,  # type: ignore[union-attr]
            state_seq=msg.seq if msg is not None else -1,
            stop=stop,
            policy_id=policy_id,
            verdict=verdict(msg, reasons),
            bound_low=np.asarray(bounds[0] if bounds else EMPTY, dtype=np.float64),
            bound_high=np.asarray(bounds[1] if bounds else EMPTY, dtype=np.float64),
        )


def verdict(msg: StateMsg | None, reasons: tuple[str, ...]) -> str:
    """The tick log's verdict on the tick's state: the rejection kind (``implausible_<kind>``, ``nan_state``,
    ``malformed_*``) when one of the reasons names it, "accepted" otherwise; "" for a tick without a state."""
    rejected = [r for r in reasons if r.startswith(REJECTION_PREFIXES) and r != IMPLAUSIBLE_STATE]
    if rejected:
        return rejected[-1]
    return "accepted" if msg is not None else ""
