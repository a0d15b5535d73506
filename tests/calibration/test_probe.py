"""Calibration over the wire against the simulated robot (lock-step), and the probe's abort paths."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from calibration.probe import HOME_MARGIN_M, ProbeConfig, calibrate, home_pose
from calibration.probe_session import CalibrationError, ProbeAbortError, ProbeSession
from deploy.contract import fetch_reach_contract
from deploy.robot_spec import RobotSpecError, load_robot_spec, save_robot_spec
from deploy.runtime.safety import SafetyLimits
from deploy.wire import SEQ_MAX, CommandMsg, Link, StateFlags, StateMsg, encode

sim_robot = pytest.importorskip("envs.sim_robot")

FULL_BOX = ((1.05, 0.40, 0.40), (1.65, 1.10, 0.95))  # launch/calibrate.yaml's safe box
SMALL_BOX = ((1.26, 0.67, 0.45), (1.42, 0.83, 0.61))  # +-8 cm around home: the arm reaches far beyond it
NOISE_TOLERANCE = 0.25


class RecordingLink:
    """A Link wrapper that records what the probe sends and can act after the n-th command."""

    def __init__(self, link: Link, after: int | None = None, action=None) -> None:
        self.link, self.after, self.action = link, after, action
        self.sent: list = []

    def send(self, msg):
        self.sent.append(msg)
        commands = sum(isinstance(m, CommandMsg) for m in self.sent)
        if self.action is not None and commands == self.after:
            self.action()
        return self.link.send(msg)

    def poll(self, timeout_s=None):
        return self.link.poll(timeout_s)


def run_probe(delay: int, noise_m: float, box=FULL_BOX, seed: int = 0, **config):
    robot = sim_robot.SimRobot(mode="lockstep", delay=delay, obs_noise_std_m=noise_m, seed=seed).start()
    try:
        with Link(robot.port_name) as link:
            recorder = RecordingLink(link)
            cfg = ProbeConfig(safe_box_low=box[0], safe_box_high=box[1], robot_id="sim_test", seed=seed, **config)
            calibration, report = calibrate(recorder, cfg)  # type: ignore[arg-type]
    finally:
        robot.stop()
    return calibration, report, np.array(robot.trace), recorder


def inside(points: np.ndarray, box) -> bool:
    return bool(np.all(points >= np.asarray(box[0])) and np.all(points <= np.asarray(box[1])))


@pytest.mark.parametrize(("delay", "noise_m"), [(0, 0.001), (1, 0.002), (2, 0.003), (3, 0.005), (2, 0.005)])
def test_delay_exact_and_noise_within_25_percent(delay, noise_m):
    calibration, report, trace, _ = run_probe(delay, noise_m, seed=delay)
    assert report.delay_lags == [delay] * 5  # every repeat, not just the majority
    assert calibration.delay_steps == delay
    assert calibration.delay_spread_steps == 0.0
    assert calibration.delay_ms == pytest.approx(delay * 40.0)
    np.testing.assert_allclose(calibration.observation_noise_std_m, noise_m, rtol=NOISE_TOLERANCE)
    assert inside(trace, FULL_BOX)


def test_a_box_smaller_than_the_reach_is_never_left():
    calibration, report, trace, recorder = run_probe(2, 0.002, box=SMALL_BOX, seed=5)
    assert inside(trace, SMALL_BOX)  # the true gripper, every physics step
    assert trace.shape[0] > 500
    # every face was reached through the barrier, not by a stop, and the workspace is the (inner) safe box
    assert set(report.limited_by.values()) == {"safe_box"}
    assert inside(np.array([calibration.workspace_low, calibration.workspace_high]), SMALL_BOX)
    # the probe went close to every face of the small box (it did probe the reach)
    reach = np.array([report.reach_low, report.reach_high])
    assert np.all(np.abs(reach - np.array(SMALL_BOX)) < 0.03)
    assert all(np.all(np.isfinite(m.action)) for m in recorder.sent if isinstance(m, CommandMsg))


def test_calibration_file_feeds_the_env_and_the_safety_filter(tmp_path):
    from envs.delayed_fetch_reach import DelayedFetchReachEnv

    calibration, _, _, _ = run_probe(3, 0.004, box=SMALL_BOX, seed=3)
    path = save_robot_spec(calibration, tmp_path / "sim_test.yaml")
    loaded = load_robot_spec(path)
    assert loaded.delay_steps == 3
    assert loaded.measurements["delay_runs_steps"] == [3] * 5
    # the homing time (HOME sent -> HOMED read) is measured and written rounded up to whole milliseconds
    # (three homings: at the start, after the delay probes, after the faces)
    homings = loaded.measurements["homing_runs_s"]
    assert len(homings) == 3 and all(h > 0.0 for h in homings)
    assert max(homings) <= loaded.homing_s < max(homings) + 0.0011 and loaded.homing_s == calibration.homing_s
    # the home pose: the mean of the three HOMED positions, its tolerance their spread plus the margin
    homes = np.array(loaded.measurements["home_runs_m"])
    assert homes.shape == (3, 3)
    np.testing.assert_allclose(loaded.home_position_m, homes.mean(axis=0), atol=1e-4)
    spread = np.max(np.linalg.norm(homes - homes.mean(axis=0), axis=1))
    assert loaded.home_tolerance_m == pytest.approx(spread + HOME_MARGIN_M, abs=1e-4)
    assert spread < 4 * 0.004 * np.sqrt(3)  # the homings differ by the noise only (the sim homes exactly)
    env = DelayedFetchReachEnv(spec=str(path))
    try:
        env.reset(seed=0)
        assert env.delay == 3
        np.testing.assert_array_equal(env.obs_noise_std_m, loaded.observation_noise_std_m)
    finally:
        env.close()
    limits = SafetyLimits.from_spec(loaded, fetch_reach_contract(3))
    assert limits.workspace_low == loaded.workspace_low
    assert limits.workspace_high == loaded.workspace_high


class SlowHomingLink(RecordingLink):
    """The robot's homing motion takes ``homing_s``: its HOMED state reaches the probe that much later."""

    def __init__(self, link: Link, homing_s: float) -> None:
        super().__init__(link)
        self.homing_s = homing_s

    def poll(self, timeout_s=None):
        if self.sent and type(self.sent[-1]).__name__ == "HomeMsg" and self.homing_s:
            time.sleep(self.homing_s)  # the arm is on its way home
            self.homing_s = 0.0
        return self.link.poll(timeout_s)


def test_the_probe_measures_how_long_the_arm_takes_to_home():
    robot = sim_robot.SimRobot(mode="lockstep", delay=2, seed=0).start()
    try:
        with Link(robot.port_name) as link:
            slow = SlowHomingLink(link, homing_s=0.25)
            session = ProbeSession(slow, fetch_reach_contract(2), ProbeConfig(FULL_BOX[0], FULL_BOX[1]))  # type: ignore[arg-type]
            session.home()
    finally:
        robot.stop()
    (homing,) = session.log.homing_s
    assert 0.25 <= homing < 1.0


def _abort_with(fault, after: int, **config):
    robot = sim_robot.SimRobot(mode="lockstep", delay=2, obs_noise_std_m=0.001, seed=0).start()
    try:
        with Link(robot.port_name) as link:
            recorder = RecordingLink(link, after=after, action=lambda: fault(robot))
            cfg = ProbeConfig(safe_box_low=FULL_BOX[0], safe_box_high=FULL_BOX[1], **config)
            with pytest.raises(ProbeAbortError) as info:
                calibrate(recorder, cfg)  # type: ignore[arg-type]
    finally:
        robot.stop()
    last = recorder.sent[-1]
    assert isinstance(last, CommandMsg) and not np.any(last.action)  # the robot is left holding
    return info.value, robot


def test_abort_on_estop_from_the_robot():
    error, robot = _abort_with(lambda r: r.trigger_estop(), after=400)
    assert error.reason == "estop"
    assert robot.estop_active


def test_abort_on_a_dead_link():
    error, _ = _abort_with(lambda r: setattr(r.faults, "link_cut", True), after=50, state_timeout_s=0.3)
    assert error.reason == "dead_link"


def test_abort_on_a_nan_state():
    error, _ = _abort_with(lambda r: setattr(r.faults, "nan_state", True), after=20)
    assert error.reason == "bad_state"


class ScriptedLink:
    """A fake robot: answers HOME and every command with the next scripted gripper position."""

    def __init__(self, positions, flags=0) -> None:
        self.positions = list(positions)
        self.flags = flags
        self.sent: list = []
        self._seq = 0
        self._due = 0

    def send(self, msg):
        self.sent.append(msg)
        self._due += 1

    def poll(self, timeout_s=None):
        if not self._due or not self.positions:
            return []
        self._due -= 1
        self._seq += 1
        state = np.zeros(10)
        state[:3] = self.positions.pop(0)
        flags = StateFlags.HOMED | self.flags if self._seq == 1 else self.flags
        return [StateMsg(self._seq, 0.0, state, int(flags), ())]


def test_the_probe_numbers_its_messages_like_every_sender_wrapping_to_one():
    """After SEQ_MAX comes 1 (not 2^32, which no frame can carry, nor 0, a robot's hold in a delay line)."""
    link = ScriptedLink([np.array([1.34, 0.75, 0.53])] * 4)
    session = ProbeSession(
        link, fetch_reach_contract(2), ProbeConfig(safe_box_low=FULL_BOX[0], safe_box_high=FULL_BOX[1])
    )
    session._seq = SEQ_MAX - 1  # a long session: billions of messages in, as a 1 kHz robot reaches in 7 weeks
    session.home()
    session.hold(2)
    assert [m.seq for m in link.sent] == [SEQ_MAX, 1, 2]
    assert all(encode(m) for m in link.sent)  # every one fits a frame


def test_abort_on_unexpected_motion_while_holding():
    home = np.array([1.34, 0.75, 0.53])
    # 4 mm per step while only hold commands are sent; after 10 settle + 21 rest steps z is 0.65 m, still
    # well inside the safe box: the rest-speed check (3 mm per step) must be what stops it
    drifting = [home + np.array([0.0, 0.0, 0.004 * i]) for i in range(400)]
    link = ScriptedLink(drifting)
    cfg = ProbeConfig(safe_box_low=FULL_BOX[0], safe_box_high=FULL_BOX[1])
    with pytest.raises(ProbeAbortError) as info:
        calibrate(link, cfg)  # type: ignore[arg-type]
    assert info.value.reason == "unexpected_motion"
    assert "while holding" in str(info.value)
    assert isinstance(link.sent[-1], CommandMsg) and not np.any(link.sent[-1].action)


def test_abort_when_home_is_outside_the_safe_box():
    link = ScriptedLink([np.array([1.0, 0.75, 0.53])])
    cfg = ProbeConfig(safe_box_low=FULL_BOX[0], safe_box_high=FULL_BOX[1])
    with pytest.raises(ProbeAbortError, match="outside the safe box"):
        calibrate(link, cfg)  # type: ignore[arg-type]
    assert not any(isinstance(m, CommandMsg) and np.any(m.action) for m in link.sent)


def test_abort_on_an_estop_flag():
    link = ScriptedLink([np.array([1.34, 0.75, 0.53])] * 3, flags=StateFlags.ESTOP_ACTIVE)
    cfg = ProbeConfig(safe_box_low=FULL_BOX[0], safe_box_high=FULL_BOX[1])
    with pytest.raises(ProbeAbortError) as info:
        calibrate(link, cfg)  # type: ignore[arg-type]
    assert info.value.reason == "estop"


def test_probe_config_is_checked():
    with pytest.raises(ValueError, match="margin"):
        ProbeConfig(safe_box_low=(0, 0, 0), safe_box_high=(0.01, 1, 1))
    with pytest.raises(ValueError, match="settle_steps"):
        ProbeConfig(safe_box_low=(0, 0, 0), safe_box_high=(1, 1, 1), settle_steps=3)


def test_abort_on_a_jump_no_command_explains():
    home = np.array([1.34, 0.75, 0.53])
    # still through HOME, settle and rest (1 + 10 + 300 states), then a 15 cm jump during the delay probe,
    # more than two full-size commands (2 x 5 cm) plus the noise allowance could move it
    positions = [home] * 330 + [home + np.array([0.15, 0.0, 0.0])] * 10
    link = ScriptedLink(positions)
    cfg = ProbeConfig(safe_box_low=FULL_BOX[0], safe_box_high=FULL_BOX[1])
    with pytest.raises(ProbeAbortError, match="jumped 0.150 m") as info:
        calibrate(link, cfg)  # type: ignore[arg-type]
    assert info.value.reason == "unexpected_motion"


@pytest.mark.parametrize("given_out", [True, False], ids=["out", "default_out_in_the_current_folder"])
def test_command_line_writes_the_file_over_a_pty(tmp_path, monkeypatch, given_out: bool):
    from calibration.__main__ import main

    monkeypatch.chdir(tmp_path)  # the default file is an output: under the current folder, not the package's
    robot = sim_robot.SimRobot(mode="lockstep", delay=1, obs_noise_std_m=0.002, seed=4).start()
    out = tmp_path / "cli_robot.yaml" if given_out else tmp_path / "calibration" / "cli_robot.yaml"
    try:
        args = ["--port", robot.port_name, "--robot-id", "cli_robot", "--repeats", "2"]
        args += ["--out", str(out)] if given_out else []
        args += ["--safe-box-low", *map(str, SMALL_BOX[0]), "--safe-box-high", *map(str, SMALL_BOX[1])]
        assert main(args) == 0
    finally:
        robot.stop()
    loaded = load_robot_spec(out)
    assert (loaded.robot_id, loaded.delay_steps) == ("cli_robot", 1)


def test_command_line_reports_a_missing_port(capsys):
    from calibration.__main__ import EXIT_FAILED, main

    args = ["--port", "/dev/does-not-exist", "--robot-id", "x", "--safe-box-low", "0", "0", "0"]
    assert main([*args, "--safe-box-high", "1", "1", "1"]) == EXIT_FAILED
    assert "cannot open" in capsys.readouterr().err


@pytest.mark.slow
def test_real_time_robot_at_25_hz():
    # the deadline-paced robot (one step per 40 ms, hold when no command came in time): ~40 s
    robot = sim_robot.SimRobot(mode="realtime", delay=2, obs_noise_std_m=0.003, seed=7).start()
    try:
        with Link(robot.port_name) as link:
            cfg = ProbeConfig(safe_box_low=SMALL_BOX[0], safe_box_high=SMALL_BOX[1], repeats=3, rest_steps=150, seed=7)
            calibration, report = calibrate(link, cfg)
    finally:
        robot.stop()
    assert report.delay_lags == [2, 2, 2]
    np.testing.assert_allclose(calibration.observation_noise_std_m, 0.003, rtol=NOISE_TOLERANCE)
    assert inside(np.array(robot.trace), SMALL_BOX)


def test_home_pose_is_the_mean_homing_and_its_spread_plus_the_margin():
    homes = [np.array([1.30, 0.75, 0.60]), np.array([1.302, 0.75, 0.60]), np.array([1.298, 0.75, 0.60])]
    position, tolerance = home_pose(homes)
    assert position == pytest.approx((1.30, 0.75, 0.60))
    assert tolerance == pytest.approx(0.002 + HOME_MARGIN_M)


def test_a_robot_that_homes_to_different_poses_has_no_home_to_check_against():
    # a homing that ends 20 cm apart is no anchor: the probe refuses to write a home pose and says why
    homes = [np.array([1.30, 0.75, 0.60]), np.array([1.50, 0.75, 0.60]), np.array([1.30, 0.75, 0.60])]
    with pytest.raises(CalibrationError, match="homings ended up to 0.133 m apart.*check the robot's homing"):
        home_pose(homes)


FINGERS = {"gripper_state": (0.0, 0.05)}  # the Fetch model's finger joint range, metres


def test_state_bounds_from_the_robot_model_are_written_to_the_spec(tmp_path):
    calibration, _, _, _ = run_probe(1, 0.002, box=SMALL_BOX, seed=4, state_bounds=FINGERS)
    assert calibration.state_bounds == FINGERS
    assert "state_bounds" not in calibration.measurements["probe"]  # once, in the spec's own section
    assert load_robot_spec(save_robot_spec(calibration, tmp_path / "fingers.yaml")).state_bounds == FINGERS


def test_a_robot_outside_the_given_state_bounds_stops_the_probe():
    """The sim's blocked fingers read 0..0.4 mm; bounds that exclude it are wrong (or the sensor is): the probe stops
    at the first state and says which field, instead of writing bounds the runtime would stop every run on."""
    with pytest.raises(ProbeAbortError, match=r"state field gripper_state = \[.*\] lies outside state_bounds"):
        run_probe(1, 0.002, box=SMALL_BOX, state_bounds={"gripper_state": (0.01, 0.05)})


@pytest.mark.parametrize(
    ("bounds", "error", "match"),
    [
        ({"gripper_stat": (0.0, 0.05)}, ValueError, r"'gripper_stat', which is not a field.*gripper_state, grip_velp"),
        ({"grip_pos": (0.0, 2.0)}, ValueError, r"'grip_pos', which is not a field of the fetch_reach state"),
        ({"gripper_state": (0.05, 0.0)}, RobotSpecError, "low must not exceed high"),
    ],
)
def test_bad_state_bounds_are_refused_before_the_robot_moves(bounds, error, match):
    robot = sim_robot.SimRobot(mode="lockstep", delay=1, seed=0).start()
    try:
        with Link(robot.port_name) as link:
            recorder = RecordingLink(link)
            with pytest.raises(error, match=match):
                config = ProbeConfig(safe_box_low=SMALL_BOX[0], safe_box_high=SMALL_BOX[1], state_bounds=bounds)
                calibrate(recorder, config)  # type: ignore[arg-type]
            assert not recorder.sent  # nothing was commanded
    finally:
        robot.stop()


def _listen(mode: str, robot_period_s: float = 0.04) -> ProbeSession:
    """Home a simulated robot (``mode``: realtime = free-running, stepping every ``robot_period_s``; FetchReach's
    contract says 0.04 s) and time the states it sends while the probe sends nothing."""
    robot = sim_robot.SimRobot(mode=mode, delay=2, seed=0, control_period_s=robot_period_s).start()
    try:
        with Link(robot.port_name) as link:
            session = ProbeSession(link, fetch_reach_contract(2), ProbeConfig(FULL_BOX[0], FULL_BOX[1]))
            session.home()
            session.measure_rate(ProbeConfig(FULL_BOX[0], FULL_BOX[1]).rate_listen_periods)
    finally:
        robot.stop()
    return session


@pytest.mark.parametrize("robot_period_s", [0.02, 0.08])
def test_a_robot_stepping_at_another_rate_than_the_contract_aborts_the_probe(robot_period_s: float):
    """Before: a robot configured for 50 Hz (or 12.5 Hz) was calibrated as if it stepped at the contract's 25 Hz and
    written to a spec; the run then ended at startup on the loop's rate check (at half the rate: held for ever).
    Now the probe stops half a second in, naming both rates."""
    with pytest.raises(ProbeAbortError) as info:
        _listen("realtime", robot_period_s)
    assert info.value.reason == "rate_mismatch"
    measured = float(re.search(r"steps every ([0-9.]+) s", str(info.value)).group(1))  # type: ignore[union-attr]
    assert measured == pytest.approx(robot_period_s, rel=0.1)
    assert "control period is 0.04 s" in str(info.value)


def test_a_free_running_robot_at_the_contract_rate_is_measured():
    assert _listen("realtime").measured_period_s == pytest.approx(0.04, rel=0.1)


def test_a_lock_step_robot_sends_nothing_unprompted_and_has_no_rate_of_its_own():
    assert _listen("lockstep").measured_period_s is None  # it steps once per command, at the probe's pace


def test_the_listen_must_be_long_enough_to_tell_the_robots_apart():
    with pytest.raises(ValueError, match="rate_listen_periods must be >= 6"):
        ProbeConfig(FULL_BOX[0], FULL_BOX[1], rate_listen_periods=3)
