"""One tick log record: what the control loop did in one tick.

Every field names the tick log channel it is logged on (``deploy.runtime.tick_channels`` derives the channels'
schemas from these declarations, ``deploy.runtime.ticklog`` writes them to MCAP). A new field is one edit here:
declare it with ``field(metadata=logged(channel))`` (and a default, so logs written before it existed still read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

EMPTY = np.zeros(0)  # an absent array of a TickRecord: a held tick's observation, no episode's goal
NO_EPISODE = -1  # episode_id of ticks outside an episode (connect, hold, safe stop)
MAX_POLICY_ID_BYTES = 0xFF

# The tick log's channels (MCAP topics; the Foxglove live view publishes the same ones)
STATE = "/robot/state"  # the robot state as received
VERDICT = "/check/verdict"  # the state checker's verdict and the position bound it keeps
PROPOSAL = "/policy/proposal"  # what the policy was asked and answered
COMMAND = "/command"  # the command sent and the safety filter's interventions
TIMING = "/timing"  # when the tick ran and how long it took
TICK_CHANNELS = (STATE, VERDICT, PROPOSAL, COMMAND, TIMING)


def logged(channel: str, dtype: type | None = None) -> dict[str, Any]:
    """The metadata of a TickRecord field logged on ``channel``: ``field(metadata=logged(...))``. ``dtype``: the
    element type of an array field (numpy), which the log keeps exactly (float32 stays float32)."""
    if channel not in TICK_CHANNELS:
        raise ValueError(f"{channel!r} is not a tick log channel; choose one of {TICK_CHANNELS}")
    return {"channel": channel, "dtype": dtype}


def empty() -> np.ndarray:
    """The default of an array field a log written before it existed lacks (shared, never written to)."""
    return EMPTY


@dataclass(eq=False)
class TickRecord:
    """One control tick. Units: seconds, metres, command units.

    :param t_s: time of the tick (seconds, the loop's monotonic clock).
    :param tick: tick counter since the loop started.
    :param state: robot state vector from the state message (float64, contract order).
    :param obs_flat: the flat observation given to the policy (float32).
    :param goal: the desired goal (metres).
    :param proposed: the policy's action before the safety filter.
    :param sent: the action sent to the robot.
    :param reasons: the safety filter's interventions this tick.
    :param latency_s: state frame in -> command frame out (seconds).
    :param jitter_s: tick start minus its deadline (seconds).
    :param episode_id: the episode the tick belongs to (``NO_EPISODE`` outside one).
    :param state_seq: sequence number of the state message used (-1: none).
    :param stop: True on the tick that triggered a safe stop.
    :param policy_id: the policy asked this tick (its package's ``manifest_sha256``); "" when no policy was asked
        (hold, homing, a stale state) or the controller was given a bare backend without an id.
    :param verdict: the state checker's verdict on the tick's state: "accepted", or the kind of rejection; ""
        when the controller did not record one.
    :param bound_low: lower corner of where the gripper is, per the checker (metres; empty when not recorded).
    :param bound_high: upper corner (metres).
    """

    t_s: float = field(metadata=logged(TIMING))
    tick: int = field(metadata=logged(TIMING))
    state: np.ndarray = field(metadata=logged(STATE, np.float64))
    obs_flat: np.ndarray = field(metadata=logged(PROPOSAL, np.float32))
    goal: np.ndarray = field(metadata=logged(PROPOSAL, np.float64))
    proposed: np.ndarray = field(metadata=logged(PROPOSAL, np.float64))
    sent: np.ndarray = field(metadata=logged(COMMAND, np.float64))
    reasons: tuple[str, ...] = field(metadata=logged(COMMAND))
    latency_s: float = field(metadata=logged(TIMING))
    jitter_s: float = field(metadata=logged(TIMING))
    episode_id: int = field(default=NO_EPISODE, metadata=logged(PROPOSAL))
    state_seq: int = field(default=-1, metadata=logged(STATE))
    stop: bool = field(default=False, metadata=logged(COMMAND))
    policy_id: str = field(default="", metadata=logged(PROPOSAL))
    verdict: str = field(default="", metadata=logged(VERDICT))
    bound_low: np.ndarray = field(default_factory=empty, metadata=logged(VERDICT, np.float64))
    bound_high: np.ndarray = field(default_factory=empty, metadata=logged(VERDICT, np.float64))


def check_policy_id(policy_id: str) -> str:
    """``policy_id`` if the log can hold it (printable ASCII, at most ``MAX_POLICY_ID_BYTES``), else ValueError."""
    if (
        not isinstance(policy_id, str)
        or len(policy_id) > MAX_POLICY_ID_BYTES
        or not (policy_id.isascii() and policy_id.isprintable())
    ):
        raise ValueError(
            f"a policy id must be printable ASCII of at most {MAX_POLICY_ID_BYTES} characters (a package's "
            f"manifest_sha256), got {policy_id!r}"
        )
    return policy_id
