"""The simulated cell over two real ptys: each arm answers on its own port in its own frame, a HOME puts back only
its arm, and the physics' separation record counts what happens between the arms."""

from __future__ import annotations

import numpy as np
import pytest
from test_sim_robot import Client

from deploy.wire import CommandMsg, HomeMsg, StateFlags, StateMsg
from envs.cell_scene import CellScene
from envs.sim_cell_robot import SeparationRecord, SimCellRobot, cell_goals

TOWARD_PARTNER = np.array([1.0, 0.0, 0.0, 0.0])  # each arm's +x points at the other arm (its own frame)


def test_reset_arm_puts_back_one_arm_only() -> None:
    scene = CellScene()
    start = {arm: scene.grip_pos(arm) for arm in (0, 1)}
    for _ in range(5):
        scene.control_step({0: np.array([0.5, 0.5, 0.0]), 1: np.array([0.0, 0.5, 0.5])})
    moved = scene.grip_pos(1)
    assert np.linalg.norm(moved - start[1]) > 0.05
    scene.reset_arm(0)
    assert scene.grip_pos(0) == pytest.approx(start[0], abs=1e-5)  # start: kinematics of the last substep
    assert scene.grip_pos(1) == pytest.approx(moved, abs=1e-9)
    scene.reset_arm(1)
    scene.set_state(scene.get_state())  # nothing is remembered outside the state
    assert scene.grip_pos(1) == pytest.approx(start[1], abs=1e-5)
    with pytest.raises(ValueError, match="not in this scene"):
        CellScene((0,)).reset_arm(1)


@pytest.fixture
def cell():
    robot = SimCellRobot().start()
    clients = [Client(port) for port in robot.port_names]
    yield robot, clients
    for client in clients:
        client.link.close()
    robot.stop()


def test_each_arm_is_served_in_its_own_frame_and_homes_alone(cell) -> None:
    robot, clients = cell
    states = [client.wait(StateMsg) for client in clients]  # both stream at the control period
    # each arm sees itself at FetchReach's start, in its own frame: the same numbers for both
    assert states[0].state[:3] == pytest.approx(states[1].state[:3], abs=1e-3)  # a hold sags a little
    assert robot.layout().point_to_cell(1, states[1].state[:3]) == pytest.approx(robot.home_m(1), abs=1e-3)
    for _ in range(6):  # arm 1 moves along its +x (toward arm 0) for a while; arm 0 holds
        clients[1].state_after(CommandMsg, TOWARD_PARTNER * 0.5)
    moved = clients[1].wait(StateMsg).state[:3]
    assert moved[0] - states[1].state[0] > 0.03
    homed = clients[0].state_after(HomeMsg, 7)
    assert homed.flags & StateFlags.HOMED
    assert homed.state[:3] == pytest.approx(states[0].state[:3], abs=1e-3)
    after = clients[1].wait(StateMsg).state[:3]
    assert after[0] - states[1].state[0] >= moved[0] - states[1].state[0]  # arm 1 was not put back
    assert robot.robots[0].counts["homes"] == 1 and robot.robots[1].counts["homes"] == 0


def test_arms_driven_into_each_other_are_recorded(cell) -> None:
    robot, clients = cell
    for _ in range(15):
        for client in clients:
            client.send(CommandMsg, TOWARD_PARTNER)
        clients[0].wait(StateMsg)
    clients[1].wait(StateMsg)
    summary = robot.separation.summary()
    assert summary["violation_steps"] > 0 and summary["closest_m"] < 0.1
    assert robot.separation.violations[0]["episodes"] == [0, 0]
    assert all(steps >= 0 for steps in robot.separation.violations[0]["steps_since_home"])  # nobody homed: the start


def test_a_touch_names_the_links_that_met() -> None:
    scene = CellScene()
    record = SeparationRecord(0.1)
    touched = False
    for step in range(40):  # head-on, both arms at full speed: they meet within a few steps
        closest, touched = scene.control_step({0: TOWARD_PARTNER[:3], 1: TOWARD_PARTNER[:3]})
        record.add(step, closest, touched, (0, 0), scene.last_contact, (step + 1, 0))
        if touched:
            break
    assert touched, "the arms never met"
    arm_0_link, arm_1_link = scene.last_contact
    names = {scene.model.body(i).name for i in range(scene.model.nbody)}
    assert "arm_0/" + arm_0_link in names and "arm_1/" + arm_1_link in names  # each arm's own link, no prefix
    assert record.summary()["contact_links"] == {f"{arm_0_link} / {arm_1_link}": 1}
    assert record.violations[-1]["links"] == f"{arm_0_link} / {arm_1_link}"
    assert record.violations[-1]["steps_since_home"] == [step + 1, 0]
    assert record.summary()["contacts_after_home"] == 1  # arm 1 "homed" 0 steps before: counted as the HOME's
    assert record.summary()["contacts"] == [record.violations[-1]]  # the record itself, to trace a contact back
    scene.reset_arm(1)
    scene.control_step({0: np.zeros(3), 1: np.zeros(3)})
    assert scene.last_contact is None  # a step without a touch names none


def test_cell_goals_are_each_arms_own() -> None:
    goals = cell_goals(1000, 3)
    assert goals.shape == (3, 2, 3)
    assert not np.allclose(goals[:, 0], goals[:, 1])
