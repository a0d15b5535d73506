"""The block's reported position, checked like the gripper's: a push cell's tracker is believed only where physics
allows it.

numpy-free, stdlib only (robot side). One ``BlockCheck`` per controller of a task with a block (the contract's
``block_slice``, the spec's ``block_tracker``); it owns its reference (the last accepted block and gripper positions,
the block's last step) and nothing else. Per state whose gripper part the state checker accepted:

- the block moves only while the gripper is near it (``gripper_near_m`` of the spec, at the reference or now) or while
  it still slides from a push (at most as far as its own last step: friction only slows it), or falls (gravity
  explains a downward motion only); otherwise the motion is ``block_moved_alone``;
- it never moves further in one step than the gripper's own step explains (``PUSH_FACTOR`` x the gripper's step,
  plus its slide, the fall and the tracker's noise); a reading beyond that is a tracker glitch: ``block_jump``.

A rejected reading never becomes the reference (the next is judged against the last believed one, over the steps
since). A HOMED state (a new episode, the block placed anew) or a restart starts a new reference. A block whose centre
leaves the spec's table box has fallen off: ``off_table`` says so, and the controller ends the episode with
``BLOCK_OFF_TABLE``. Allowances scale with the control steps between two readings (the tracker's rate).
"""

from __future__ import annotations

import math

from deploy.block_tracker_spec import BlockTrackerSpec
from deploy.contract import ObservationContract

BLOCK_JUMP = "block_jump"  # rejection kind: the block moved further than any push explains (a tracker glitch)
BLOCK_MOVED_ALONE = "block_moved_alone"  # rejection kind: the block moved with the gripper far from it
BLOCK_OFF_TABLE = "block_off_table"  # episode end reason: the block's centre left the table box
NOISE_SIGMAS = 6.0  # tracker noise allowance, standard deviations (per reading pair: x sqrt 2)
REST_JITTER_M = 0.002  # a resting block's contact jitter and settling after it is placed, metres per reading
PUSH_FACTOR = 1.5  # a pushed block moves at most this share of the gripper's step (contact can flick it a little)
GRAVITY_M_S2 = 9.81  # a block tipping off an edge gains this much speed per second


class BlockCheck:
    """Judges each reported block position against the gripper's motion (see the module docstring).

    :param tracker: the spec's ``block_tracker`` section (noise, rate, gripper distance, table box).
    :param contract: the policy's contract (``position_slice``: the gripper, ``block_slice``: the block).
    :param period_s: the loop's control period (seconds).
    :param max_step_m: the longest gripper step the robot can make in one control step (``RobotSpec.max_step_m``).
    """

    def __init__(
        self, tracker: BlockTrackerSpec, contract: ObservationContract, period_s: float, max_step_m: float
    ) -> None:
        if contract.block_slice is None:
            raise ValueError(f"contract {contract.name!r} has no block_slice: there is no block to check")
        self.tracker = tracker
        self._grip = slice(*contract.position_slice)
        self._block = slice(*contract.block_slice)
        noise = math.hypot(*tracker.noise_std_m)
        self._noise_m = NOISE_SIGMAS * math.sqrt(2.0) * noise + REST_JITTER_M
        self._steps_per_reading = tracker.steps_per_reading(period_s)
        self._fall_m = GRAVITY_M_S2 * period_s**2  # extra step a fall adds per control step, metres
        self._max_push_m = PUSH_FACTOR * max_step_m  # the longest step a push can give the block, metres
        self.block: list[float] | None = None  # the last accepted block position (metres)
        self.gripper: list[float] | None = None  # the gripper position in that state (metres)
        self.last_step_m = 0.0  # the block's last accepted step, per control step (metres)
        self.steps_since = 0  # control steps (states) since the reference
        self.last_distance_m = math.nan  # the distance the last judged reading moved the block (metres)

    def reset(self) -> None:
        """Forget the reference: the next accepted state starts one (a HOME, a restart, a stop)."""
        self.block = self.gripper = None
        self.last_step_m = 0.0
        self.steps_since = 0

    @property
    def off_table(self) -> bool:
        """The believed block's centre is outside the spec's table box: it fell off."""
        if self.block is None:
            return False
        low, high = self.tracker.table_low, self.tracker.table_high
        return any(not lo <= b <= hi for b, lo, hi in zip(self.block, low, high, strict=True))

    def judge(self, state: list[float]) -> str:
        """ "" when the state's block position is plausible against the reference, else the rejection kind."""
        if self.block is None or self.gripper is None:
            return ""
        block, gripper = state[self._block], state[self._grip]
        steps = (self.steps_since + 1) * self._steps_per_reading
        dx, dy, dz = (b - r for b, r in zip(block, self.block, strict=True))
        if dz < 0:  # a fall explains up to g x t^2 of a downward motion (it never explains a sideways one)
            dz = min(0.0, dz + self._fall_m * steps * steps)
        moved = math.hypot(dx, dy, dz)
        self.last_distance_m = moved
        allowed_alone = self._noise_m + min(self.last_step_m, self._max_push_m) * steps  # noise and the slide
        if moved <= allowed_alone:
            return ""
        gripper_step = math.dist(gripper, self.gripper)
        near = min(math.dist(self.block, self.gripper), math.dist(block, gripper)) <= (
            self.tracker.gripper_near_m + gripper_step
        )
        if moved > allowed_alone + min(PUSH_FACTOR * gripper_step, self._max_push_m * steps):
            return BLOCK_JUMP if near or moved > allowed_alone + self._max_push_m * steps else BLOCK_MOVED_ALONE
        return "" if near else BLOCK_MOVED_ALONE

    def rejected(self) -> None:
        """The state was rejected (by this check or another): the reference stays, one more step has passed."""
        self.steps_since += 1

    def accept(self, state: list[float]) -> None:
        """The state was accepted: its block and gripper positions become the reference."""
        block = state[self._block]
        if self.block is not None:
            steps = (self.steps_since + 1) * self._steps_per_reading
            self.last_step_m = math.dist(block, self.block) / steps
        self.block, self.gripper = list(block), list(state[self._grip])
        self.steps_since = 0
