"""The simulated robot: MuJoCo delayed FetchReach (or the FetchPush cell) serving the wire protocol on a pty or any
pyserial URL.

The default "robot" of the demo, the tests and calibration. It speaks ``deploy.wire`` exactly as a real arm
would, so the runtime cannot tell it from hardware:

- ``mode="realtime"``: a deadline-paced loop (``next_t += period``) steps the physics once per control period
  with the newest command received since the last step, or the hold command (zeros) when none came; it sends
  one ``StateMsg`` per step. A ``HomeMsg`` resets the episode and restarts the period clock.
- ``mode="lockstep"``: one physics step per ``CommandMsg`` received, answered at once with a state; a
  ``HeartbeatMsg`` is answered with the current state (no step). For fast, timing-independent tests.

The actuation delay and the observation noise are those of ``DelayedFetchReachEnv`` (from the robot spec unless
given), so a state the robot sends equals, bit for bit, the one the env returns for the same seed and commands.
``task="push"`` serves the push cell instead (``DelayedFetchPushEnv``, spec ``calibration/sim_fetch_push.yaml``): its
state carries the block's position as the cell's tracker reports it (the spec's noise and rate);
``SimFaults.block_jump`` makes the tracker report the block elsewhere for some frames (a tracker glitch) while the
physics stays true.
E-stop: an ``EStopMsg`` from the runtime, or ``trigger_estop()`` on the robot side (an operator / fault), stops the
arm: the delay line is emptied, commands are ignored (answered with ``ErrorMsg``) and every state carries
``ESTOP_ACTIVE``. A ``HomeMsg`` clears a runtime e-stop; a robot-side one needs ``release_estop()``.

Fault injection for tests (``SimFaults``, switchable while running): cut link, byte corruption, replies held
back N control periods, NaN state, frozen sensor (repeated sequence number); CRC-valid lies: a state vector
rewritten by a function for N frames (a shifted or absurd position), stamps shifted for N frames, a sequence jump,
malformed lengths; plus ``trigger_estop()`` and ``restart()`` (the controller reboots: its clock and sequence
counter start over and the arm is back at home). The fault models of ``envs.faults`` act through the same switches
and the hooks of ``SimFaults``. Many runs on one robot (a fault campaign): ``halt()``, ``rewind(seed)``, ``start()``.

    robot = SimRobot(mode="lockstep", delay=2).start()
    link = Link(robot.port_name)     # /dev/pts/N
    ...
    robot.stop()
"""

from __future__ import annotations

import os
import termios
import threading
import time
import tty
from collections import deque
from typing import Any

import numpy as np

from deploy.robot_spec import RobotSpec
from deploy.wire import (
    HOLD_SEQ,
    CommandMsg,
    ErrorCode,
    ErrorMsg,
    EStopMsg,
    EStopReason,
    FdTransport,
    FrameDecoder,
    HeartbeatMsg,
    HomeMsg,
    Link,
    LinkError,
    Message,
    StateFlags,
    StateMsg,
    encode,
    seq_after,
)
from envs.delayed_fetch_push import DelayedFetchPushEnv
from envs.delayed_fetch_reach import DelayedFetchReachEnv
from envs.sim_faults import SimFaults

TASK_ENVS = {"reach": DelayedFetchReachEnv, "push": DelayedFetchPushEnv}  # what the simulated robot can serve

ROBOT_MODES = ("realtime", "lockstep")
NO_TRUNCATION_STEPS = 2**62  # the robot never ends an episode by itself; the runtime sends HomeMsg
IDLE_POLL_S = 0.005  # longest wait for input in lock-step mode, so stop() and fault switches act promptly
TRACE_LEN = 100_000  # true gripper positions kept for tests (metres)
COUNTS = ("commands", "holds", "bad_commands", "homes", "estops", "overruns")  # counters every robot starts with


class SimRobot:
    """Serves the wire protocol for a simulated Fetch arm (see the module docstring).

    :param port: a pyserial port or URL to serve on; ``None`` opens a new pty (see ``port_name``).
    :param mode: ``"realtime"`` or ``"lockstep"``.
    :param delay: actuation delay in control steps (None: the spec's).
    :param obs_noise_std_m: gripper position noise std, metres (None: the spec's).
    :param spec: the robot spec or its file (None: ``calibration/sim_fetch.yaml``, ``sim_fetch_push.yaml`` for push).
    :param control_period_s: real-time period and the unit of ``reply_delay_periods`` (None: the contract's 0.04 s).
    :param action_gain: actuator gain error of the simulated arm (1.1 = moves 10% further than commanded).
    :param seed: seed of the first episode and of the fault injection RNG.
    :param faults: fault switches (a fresh ``SimFaults`` if None).
    :param task: ``"reach"`` (the Fetch arm) or ``"push"`` (the arm over a table with a tracked block).
    :param plant: the arm to serve instead of a new env of ``task`` (one arm of the simulated cell,
        ``envs.sim_cell_robot``, which steps both arms' physics itself): it offers ``contract``, ``history``,
        ``reset(seed=)``, ``step(action)`` and ``_physics_state()`` as the env does; ``delay``, ``obs_noise_std_m``,
        ``spec`` and ``action_gain`` are then the plant's own.
    """

    def __init__(
        self,
        port: str | None = None,
        mode: str = "realtime",
        delay: int | None = None,
        obs_noise_std_m: float | None = None,
        spec: RobotSpec | str | None = None,
        control_period_s: float | None = None,
        action_gain: float = 1.0,
        seed: int = 0,
        faults: SimFaults | None = None,
        task: str = "reach",
        plant: Any = None,
    ) -> None:
        if mode not in ROBOT_MODES:
            raise ValueError(f"mode must be one of {ROBOT_MODES}, got {mode!r}")
        if task not in TASK_ENVS:
            raise ValueError(f"task must be one of {sorted(TASK_ENVS)}, got {task!r}")
        self.task = task
        self.env = plant
        if plant is None:
            self.env = TASK_ENVS[task](
                delay=delay,
                obs_noise_std_m=obs_noise_std_m,
                spec=spec,
                max_episode_steps=NO_TRUNCATION_STEPS,
                action_gain=action_gain,
            )
        self.contract = self.env.contract
        self.period_s = float(control_period_s or self.contract.control_period_s)
        if self.period_s <= 0:
            raise ValueError(f"control_period_s must be > 0 seconds, got {control_period_s}")
        self.mode = mode
        self.faults = faults or SimFaults()
        self._rng = np.random.default_rng(seed)
        self._slave_fd: int | None = None
        if port is None:
            master, slave = os.openpty()
            tty.setraw(slave)  # no echo, no line editing before the runtime opens (and configures) its side
            self._slave_fd = slave  # kept open so the master never reads EIO while the runtime reconnects
            self.port_name = os.ttyname(slave)
            self._transport = FdTransport(master)
        else:
            self.port_name = port
            self._transport = Link(port).transport
        self._decoder = FrameDecoder()
        self._outbox: deque[tuple[float, bytes]] = deque()
        self._seq = 0
        self._last_state: StateMsg | None = None
        self._latest_cmd: CommandMsg | None = None
        self._pending: deque[int] = deque([HOLD_SEQ] * self.contract.history_len, maxlen=self.contract.history_len)
        self._estop: str | None = None  # None, "runtime" or "robot"
        self._estop_request: int | None = None
        self._release_request = False
        self._homed = False
        self._clock_origin = 0.0  # the robot's clock reads time.monotonic() - origin (restart() sets it to now)
        self._restart_request = False
        self._home_request = False
        self._last_home_seed = seed
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self.link_error: LinkError | None = None
        self.steps = 0
        self.trace: deque[np.ndarray] = deque(maxlen=TRACE_LEN)
        self.sent_states: deque[StateMsg] = deque(maxlen=TRACE_LEN)  # every state frame sent (tests check them)
        # (time.monotonic(), message, heard): every message that came over the port; heard=False if a fault lost it
        self.received: deque[tuple[float, Message, bool]] = deque(maxlen=TRACE_LEN)
        self.counts = dict.fromkeys(COUNTS, 0)
        self._obs, _ = self.env.reset(seed=seed)

    # Lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> SimRobot:
        """Serve in a background thread; returns self."""
        if self._thread is not None:
            raise RuntimeError("SimRobot already started")
        self._thread = threading.Thread(target=self.serve, name="sim-robot", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port (idempotent)."""
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join()
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._slave_fd is not None:
            os.close(self._slave_fd)
            self._slave_fd = None
        self.env.close()

    def halt(self) -> None:
        """Stop serving but keep the port open (``rewind`` then ``start`` serve again)."""
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join()
        self._thread = None
        self._stop_event.clear()

    def rewind(self, seed: int, faults: SimFaults | None = None) -> None:
        """Make a halted robot as new for another run: bytes still in the pty are discarded both ways, the clock
        and numbering start over, the arm is at home (episode ``seed``), no e-stop, the records and counters are
        empty, and ``faults`` (a fresh ``SimFaults`` if None) replace the old ones."""
        if self._thread is not None:
            raise RuntimeError("rewind() needs a halted robot: call halt() first")
        while self._transport.read(0.0):
            pass
        if self._slave_fd is not None:
            termios.tcflush(self._slave_fd, termios.TCIOFLUSH)  # what the robot sent that no runtime read
        self.faults = faults or SimFaults()
        self._rng = np.random.default_rng(seed)
        self._decoder = FrameDecoder()
        self._outbox.clear()
        self._seq = 0
        self._clock_origin = time.monotonic()
        self._last_state = self._latest_cmd = None
        self._pending.extend([HOLD_SEQ] * self.contract.history_len)
        self._estop = self._estop_request = None
        self._release_request = self._restart_request = self._home_request = self._homed = False
        self._last_home_seed = seed
        self.link_error = None
        self.steps = 0
        for record in (self.trace, self.sent_states, self.received):
            record.clear()
        self.counts = dict.fromkeys(COUNTS, 0)
        self._obs, _ = self.env.reset(seed=seed)

    def __enter__(self) -> SimRobot:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def trigger_estop(self, reason: int = EStopReason.OPERATOR) -> None:
        """Robot-side e-stop (button or fault); applied by the serving thread at its next iteration."""
        self._estop_request = int(reason)

    def release_estop(self) -> None:
        """The operator clears a robot-side e-stop; the robot then waits for a HomeMsg."""
        self._release_request = True

    def restart(self) -> None:
        """The controller reboots (applied by the serving thread): its clock and sequence counter start over, the
        arm is back at home, the delay line is empty, an e-stop the runtime sent is forgotten."""
        self._restart_request = True

    def home_unprompted(self) -> None:
        """The robot homes by itself (applied by the serving thread), as a controller's own fault reaction would
        (a protective stop that returns the arm home): the episode resets, the delay line empties, the next state is
        flagged HOMED, though no HomeMsg asked for it."""
        self._home_request = True

    @property
    def estop_active(self) -> bool:
        return self._estop is not None

    @property
    def gripper_position_m(self) -> np.ndarray:
        """True (noise-free) gripper position, metres."""
        return self.env._physics_state()[slice(*self.contract.position_slice)].copy()

    @property
    def block_position_m(self) -> np.ndarray | None:
        """True (noise-free) block position, metres (None: the task has no block)."""
        if self.contract.block_slice is None:
            return None
        return self.env._physics_state()[slice(*self.contract.block_slice)].copy()

    # Serving -------------------------------------------------------------------------------------------------
    def serve(self) -> None:
        """Run until ``stop()`` or until the port fails (``link_error`` then says why)."""
        try:
            self._serve()
        except LinkError as err:
            self.link_error = err

    def _serve(self) -> None:
        next_step = time.monotonic() + self.period_s
        while not self._stop_event.is_set():
            self._apply_requests()
            now = time.monotonic()
            wait = IDLE_POLL_S if self.mode == "lockstep" else max(0.0, next_step - now)
            if self._outbox:
                wait = min(wait, max(0.0, self._outbox[0][0] - now))
            for msg in self._receive(wait):
                if self._handle(msg):
                    next_step = time.monotonic() + self.period_s  # a HomeMsg restarts the period clock
            if self.mode == "realtime" and time.monotonic() >= next_step:
                self._step(self._take_command())
                next_step += self.period_s
                if time.monotonic() > next_step:  # fell behind by a whole period: resynchronise, count it
                    self.counts["overruns"] += 1
                    next_step = time.monotonic() + self.period_s
            self._flush()
        for msg in self._receive(0.0):  # what the peer wrote before stop() (e.g. its final e-stop) still counts
            self._handle(msg)

    def _apply_requests(self) -> None:
        if self._restart_request:
            self._restart_request = False
            self._seq = 0
            self._clock_origin = time.monotonic()
            self._obs, _ = self.env.reset(seed=self._last_home_seed)
            self._pending.extend([HOLD_SEQ] * self.contract.history_len)
            self._latest_cmd = None
            self._last_state = None
            if self._estop == "runtime":
                self._estop = None
            self.counts["restarts"] = self.counts.get("restarts", 0) + 1
        if self._home_request:
            self._home_request = False
            self.counts["unprompted_homes"] = self.counts.get("unprompted_homes", 0) + 1
            self._go_home(self._last_home_seed)
        if self._estop_request is not None:
            reason, self._estop_request = self._estop_request, None
            self._enter_estop("robot")
            self._emit(EStopMsg(self._next_seq(), self._now(), reason))
            self._send_state()
        if self._release_request:
            self._release_request = False
            if self._estop == "robot":
                self._estop = None

    def _receive(self, wait_s: float) -> list[Message]:
        data = self._transport.read(wait_s)
        if not data:
            return []
        heard = []
        for msg in self._decoder.feed(self._corrupt(data)):
            if self.faults.schedule is not None:  # one robot tick per message, heard or lost
                self._outbox.extend((time.monotonic(), f) for f in self.faults.schedule.advance(self))
            lost = self.faults.link_cut or not self.faults.accepts(msg)
            self.received.append((time.monotonic(), msg, not lost))
            if not lost:
                heard.append(msg)
        return heard

    def _handle(self, msg: Message) -> bool:
        """React to one message; True when it was a HomeMsg that reset the episode."""
        if isinstance(msg, CommandMsg):
            self._on_command(msg)
        elif isinstance(msg, HomeMsg):
            return self._on_home(msg)
        elif isinstance(msg, EStopMsg):
            if self.faults.drop_estops > 0:
                self.faults.drop_estops -= 1
                return False
            if self._estop is None:
                self._enter_estop("runtime")
            self._send_state()
        elif isinstance(msg, HeartbeatMsg) and self.mode == "lockstep":
            self._send_state()
        return False

    def _on_command(self, msg: CommandMsg) -> None:
        if self._estop is not None:
            self._emit(ErrorMsg(self._next_seq(), self._now(), ErrorCode.ESTOPPED, "e-stop active"))
            if self.mode == "lockstep":
                self._send_state()
            return
        if msg.action.shape != (self.contract.action_dim,) or not np.all(np.isfinite(msg.action)):
            self.counts["bad_commands"] += 1
            text = f"command seq {msg.seq}: need {self.contract.action_dim} finite values; holding"
            self._emit(ErrorMsg(self._next_seq(), self._now(), ErrorCode.BAD_COMMAND, text))
            msg = None  # type: ignore[assignment]
        if self.mode == "lockstep":
            self._step(msg)
        elif msg is not None:
            self._latest_cmd = msg  # the newest command wins at the next step

    def _on_home(self, msg: HomeMsg) -> bool:
        if self._estop == "robot":
            self._emit(ErrorMsg(self._next_seq(), self._now(), ErrorCode.ESTOPPED, "robot e-stop: home refused"))
            self._send_state()
            return False
        self._estop = None
        self.counts["homes"] += 1
        self._last_home_seed = msg.seed
        if self.faults.fakes_home():  # answers HOMED, the arm and its delay line stay where they are
            self.counts["fake_homes"] = self.counts.get("fake_homes", 0) + 1
            self._homed = True
        else:
            self._go_home(msg.seed)
        self._send_state()
        for _ in range(self.faults.states_after_home):
            self._send_state()
        return True

    def _go_home(self, seed: int) -> None:
        """Reset the episode (the arm at home), empty the delay line, flag the next state HOMED."""
        self._obs, _ = self.env.reset(seed=seed)
        self._pending.extend([HOLD_SEQ] * self.contract.history_len)
        self._latest_cmd = None
        self._homed = True

    def _take_command(self) -> CommandMsg | None:
        cmd, self._latest_cmd = self._latest_cmd, None
        return cmd

    def _enter_estop(self, source: str) -> None:
        self._estop = source
        self.counts["estops"] += 1
        self.env.history.clear()  # commands in flight are dropped: the arm stops now
        self._pending.extend([HOLD_SEQ] * self.contract.history_len)
        self._latest_cmd = None

    def _step(self, cmd: CommandMsg | None) -> None:
        """One control step with ``cmd`` (None: hold), then send the state."""
        action, seq = self.step_input(cmd)
        obs, *_ = self.env.step(action)
        self.step_done(obs, seq, holding=cmd is None)

    def step_input(self, cmd: CommandMsg | None) -> tuple[np.ndarray, int]:
        """The action a control step applies for ``cmd`` (None: hold; also while e-stopped) and the sequence number
        the delay line records for it; counted as a command or a hold."""
        if cmd is None or self._estop is not None:
            self.counts["holds"] += 1
            return self.contract.hold(), HOLD_SEQ
        self.counts["commands"] += 1
        return self.faults.actuation(cmd.action), cmd.seq

    def step_done(self, obs: dict[str, np.ndarray], seq: int, holding: bool) -> None:
        """After the physics stepped: the new observation, the delay line moved on by ``seq``, the state sent."""
        self._obs = obs
        self._pending.append(seq)
        self.steps += 1
        self.trace.append(self.gripper_position_m)
        self._send_state(holding=holding)

    # Serving from a host thread (the simulated cell serves its arms from one thread: envs.sim_cell_robot) -------
    @property
    def fileno(self) -> int:
        """The file descriptor the robot reads from (a host waits on it with ``select``)."""
        return self._transport.fd

    def service(self) -> None:
        """Without waiting: apply requests, read and answer what arrived, send what is due. (A HOME does not restart
        a host's period clock: the host steps all its arms on one.)"""
        self._apply_requests()
        for msg in self._receive(0.0):
            self._handle(msg)
        self._flush()

    def next_due_s(self) -> float:
        """When (``time.monotonic``) the next delayed frame is due to be sent; inf when none waits."""
        return self._outbox[0][0] if self._outbox else float("inf")

    def take_step_input(self) -> tuple[np.ndarray, int, bool]:
        """For a host's control step: (action, sequence number, holding) of the newest command received."""
        cmd = self._take_command()
        action, seq = self.step_input(cmd)
        return action, seq, cmd is None

    # Sending ---------------------------------------------------------------------------------------------
    def _next_seq(self) -> int:
        if self.faults.seq_jump:
            self._seq, self.faults.seq_jump = self._seq + self.faults.seq_jump, 0
        self._seq = seq_after(self._seq)
        return self._seq

    def _now(self) -> float:
        """The robot's clock (seconds since its last boot), with a stamp glitch applied while one is set."""
        t = self.faults.stamp(time.monotonic() - self._clock_origin)
        if self.faults.stamp_frames > 0:
            self.faults.stamp_frames -= 1
            t += self.faults.stamp_offset_s
        return t

    def _send_state(self, holding: bool = False) -> None:
        if self.faults.freeze_seq and self._last_state is not None:
            self._emit(self._last_state)
            return
        flags = StateFlags(self.faults.extra_flags())
        if holding:
            flags |= StateFlags.HOLDING
        if self._estop is not None:
            flags |= StateFlags.ESTOP_ACTIVE
        if self._estop == "robot":
            flags |= StateFlags.ESTOP_FROM_ROBOT
        if self._homed:
            flags |= StateFlags.HOMED
            self._homed = False
        state = self.faults.reported_state(self._obs["observation"][: self.contract.state_dim].copy())
        if self.faults.nan_state:
            state[:] = np.nan
        if self.faults.block_jump_frames > 0 and self.contract.block_slice is not None:
            self.faults.block_jump_frames -= 1
            state[slice(*self.contract.block_slice)] += self.faults.block_jump_m
        if self.faults.state_glitch is not None and self.faults.glitch_frames > 0:
            self.faults.glitch_frames -= 1
            state = np.asarray(self.faults.state_glitch(state), dtype=np.float64)
        pending = tuple(self._pending)
        if self.faults.pending_length is not None:
            pending = (pending + (HOLD_SEQ,) * self.faults.pending_length)[: self.faults.pending_length]
        msg = StateMsg(self._next_seq(), self._now(), state, int(flags), pending)
        self._last_state = msg
        self.sent_states.append(msg)
        if flags & StateFlags.HOMED and self.faults.lose_homed_states > 0:
            self.faults.lose_homed_states -= 1
            return
        self._emit(msg)

    def _emit(self, msg: Message) -> None:
        due = time.monotonic() + self.faults.reply_delay_periods * self.period_s
        self._outbox.extend((due, frame) for frame in self.faults.outgoing(encode(msg)))
        self._flush()

    def _flush(self) -> None:
        now = time.monotonic()
        while self._outbox and self._outbox[0][0] <= now:
            _, data = self._outbox.popleft()
            if not self.faults.link_cut:
                self._transport.write(self._corrupt(data))

    def _corrupt(self, data: bytes) -> bytes:
        p = self.faults.corrupt_prob
        if p <= 0:
            return data
        raw = np.frombuffer(data, dtype=np.uint8).copy()
        hit = self._rng.random(raw.size) < p
        raw[hit] ^= self._rng.integers(1, 256, size=int(hit.sum()), dtype=np.uint8)  # never a no-op
        return raw.tobytes()
