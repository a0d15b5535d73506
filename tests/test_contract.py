"""The observation/action contract shared by the envs, the exporter and the runtime (deploy/contract.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deploy.contract import (
    ActionHistory,
    ObservationContract,
    apply_delay,
    as_history,
    contract_from_fields,
    fetch_reach_contract,
    known_task_differences,
    point_reach_contract,
)


def test_fetch_dimensions() -> None:
    c = fetch_reach_contract(2)
    # 10 state values + 2 pending commands x 4 = 18; flat: 18 + achieved 3 + desired 3 = 24
    assert (c.state_dim, c.observation_dim, c.flat_dim) == (10, 18, 24)
    assert (c.action_dim, c.action_scale_m, c.control_period_s) == (4, 0.05, 0.04)


def test_point_dimensions() -> None:
    c = point_reach_contract(3)
    # 6 state values + 3 x 3 = 15; flat 15 + 3 + 3 = 21
    assert (c.state_dim, c.observation_dim, c.flat_dim) == (6, 15, 21)


def test_build_puts_state_then_history_and_goal_from_the_position_slice() -> None:
    c = point_reach_contract(2)
    state = np.arange(6.0)  # pos = [0, 1, 2], vel = [3, 4, 5]
    history = as_history([[10, 11, 12], [20, 21, 22]], action_dim=3)  # oldest first
    obs = c.build(state, history, desired_goal=[7.0, 8.0, 9.0])
    np.testing.assert_array_equal(obs["observation"], [0, 1, 2, 3, 4, 5, 10, 11, 12, 20, 21, 22])
    np.testing.assert_array_equal(obs["achieved_goal"], [0, 1, 2])
    np.testing.assert_array_equal(obs["desired_goal"], [7, 8, 9])
    assert all(v.dtype == np.float64 for v in obs.values())
    state[0] = 99.0  # the observation owns its memory
    assert obs["achieved_goal"][0] == 0.0


def test_flatten_order_is_observation_achieved_desired() -> None:
    c = point_reach_contract(1)
    obs = {
        "desired_goal": np.array([30.0, 31, 32]),
        "observation": np.arange(9.0),
        "achieved_goal": np.array([20.0, 21, 22]),
    }
    flat = c.flatten(obs)
    assert flat.dtype == np.float32
    np.testing.assert_array_equal(flat, [*range(9), 20, 21, 22, 30, 31, 32])


def test_flatten_batch() -> None:
    c = point_reach_contract(1)
    batch = {"observation": np.zeros((5, 9)), "achieved_goal": np.ones((5, 3)), "desired_goal": np.full((5, 3), 2.0)}
    flat = c.flatten(batch)
    assert flat.shape == (5, 15)
    np.testing.assert_array_equal(flat[:, 9:12], 1.0)


def test_flatten_missing_key() -> None:
    with pytest.raises(KeyError, match="desired_goal"):
        point_reach_contract(1).flatten({"observation": np.zeros(9), "achieved_goal": np.zeros(3)})


def test_flatten_wrong_size_names_the_expected_layout() -> None:
    c = point_reach_contract(2)  # flat_dim 18
    obs = {"observation": np.zeros(9), "achieved_goal": np.zeros(3), "desired_goal": np.zeros(3)}
    with pytest.raises(ValueError, match="observation"):
        c.flatten(obs)


def test_flatten_rejects_a_wrong_split_with_the_right_total() -> None:
    """observation one short and desired_goal one long: the total matches, the layout does not."""
    c = point_reach_contract(1)
    obs = {"observation": np.zeros(8), "achieved_goal": np.zeros(3), "desired_goal": np.zeros(4)}
    with pytest.raises(ValueError, match="observation"):
        c.flatten(obs)


def test_build_rejects_bad_shapes() -> None:
    c = fetch_reach_contract(2)
    with pytest.raises(ValueError, match=r"robot state must have shape \(10,\)"):
        c.build(np.zeros(9), ActionHistory(2, 4), np.zeros(3))
    with pytest.raises(ValueError, match="the contract needs 2x4"):
        c.build(np.zeros(10), ActionHistory(3, 4), np.zeros(3))


@pytest.mark.parametrize("history_len", [0, 2, 8])
def test_to_dict_from_dict_round_trip_through_json(history_len: int) -> None:
    for c in (fetch_reach_contract(history_len), point_reach_contract(history_len)):
        data = json.loads(json.dumps(c.to_dict()))
        assert data["history_order"] == "oldest_first"
        assert data["flat_layout"] == ["observation", "achieved_goal", "desired_goal"]
        assert ObservationContract.from_dict(data) == c


def test_from_dict_rejects_other_versions_and_inconsistent_dims() -> None:
    data = fetch_reach_contract(2).to_dict()
    with pytest.raises(ValueError, match="format_version 3 is not supported"):
        ObservationContract.from_dict({**data, "format_version": 3})
    with pytest.raises(ValueError, match="format_version 2 needs 'block_slice'"):
        ObservationContract.from_dict({**data, "format_version": 2})
    with pytest.raises(ValueError, match="history_order"):
        ObservationContract.from_dict({**data, "history_order": "newest_first"})
    with pytest.raises(ValueError, match="flat_dim 25 does not match"):
        ObservationContract.from_dict({**data, "flat_dim": 25})


def test_constructor_rejects_bad_values() -> None:
    fields = (("pos", 3),)
    with pytest.raises(ValueError, match="history_len must be >= 0"):
        ObservationContract("x", fields, action_dim=3, history_len=-1)
    with pytest.raises(ValueError, match="action_dim must be >= 1"):
        ObservationContract("x", fields, action_dim=0, history_len=1)
    with pytest.raises(ValueError, match="must be below action_high"):
        ObservationContract("x", fields, action_dim=3, history_len=1, action_low=1.0, action_high=1.0)
    with pytest.raises(ValueError, match="control_period_s must be > 0"):
        ObservationContract("x", fields, action_dim=3, history_len=1, control_period_s=0.0)
    with pytest.raises(ValueError, match="unknown contract 'arm'"):
        contract_from_fields("arm", 2)


@pytest.mark.parametrize(
    ("position_slice", "match"),
    [
        ((0, 2), r"position_slice \[0, 2\] must hold the goal_dim = 3 gripper coordinates"),  # 2 values, not 3
        ((8, 11), r"position_slice \[8, 11\] must hold .* inside the 10 robot state values"),  # past the end
        ((-1, 2), "must hold the goal_dim = 3"),  # a negative start would slice from the end
        ((3, 6), r"position_slice \[3, 6\] straddles two state fields"),  # gripper_state 3:5 + grip_velp 5:6
        ((0, 3.0), "must be a \\(start, stop\\) pair of integers"),
    ],
)
def test_position_slice_must_hold_goal_dim_values_inside_one_state_field(position_slice, match: str) -> None:
    # fetch state: grip_pos 0:3, gripper_state 3:5, grip_velp 5:8, gripper_vel 8:10 (10 values); goal_dim 3
    fields = fetch_reach_contract(2).state_fields
    with pytest.raises(ValueError, match=match) as err:
        ObservationContract("arm", fields, action_dim=4, history_len=2, position_slice=position_slice)
    assert "'grip_pos' 0:3" in str(err.value) or "integers" in str(err.value)  # the message shows the layout
    data = fetch_reach_contract(2).to_dict() | {"position_slice": list(position_slice)}
    with pytest.raises(ValueError, match="position_slice"):
        ObservationContract.from_dict(data)


def test_from_dict_refuses_unknown_missing_and_mistyped_keys() -> None:
    data = point_reach_contract(2).to_dict()
    misspelt = {k: v for k, v in data.items() if k != "history_order"} | {"histroy_order": "newest_first"}
    with pytest.raises(ValueError, match=r"unknown contract key\(s\) \['histroy_order'\]; a contract has the keys"):
        ObservationContract.from_dict(misspelt)
    with pytest.raises(ValueError, match=r"the contract is missing \['goal_dim'\]"):
        ObservationContract.from_dict({k: v for k, v in data.items() if k != "goal_dim"})
    with pytest.raises(ValueError, match="history_len must be an integer, got '2'"):
        ObservationContract.from_dict(data | {"history_len": "2"})
    with pytest.raises(ValueError, match="action_dim must be an integer, got 3.0"):
        ObservationContract.from_dict(data | {"action_dim": 3.0})
    with pytest.raises(ValueError, match="action_scale_m must be a number, got True"):
        ObservationContract.from_dict(data | {"action_scale_m": True})
    with pytest.raises(ValueError, match="flat_layout"):
        ObservationContract.from_dict(data | {"flat_layout": ["desired_goal", "achieved_goal", "observation"]})


def test_known_task_differences_name_the_field_that_moved() -> None:
    moved = ObservationContract(
        "fetch_reach", fetch_reach_contract(2).state_fields, action_dim=4, history_len=2, position_slice=(5, 8)
    )  # grip_velp: 3 values inside the state, but the velocity
    assert known_task_differences(moved) == ["position_slice (5, 8) (the 'fetch_reach' task has (0, 3))"]
    assert known_task_differences(fetch_reach_contract(5)) == []  # the history length is the policy's choice
    assert known_task_differences(ObservationContract("arm", (("pos", 3),), action_dim=3, history_len=1)) == []


def test_apply_delay_arithmetic() -> None:
    history = ActionHistory(3, 1)
    sent = [np.array([float(t + 1)]) for t in range(6)]  # command t is the value t + 1
    applied = [apply_delay(history, command, delay=2)[0] for command in sent]
    # delay 2: step 0, 1 apply the hold command (0); step t >= 2 applies the command sent at t - 2 (value t - 1)
    assert applied == [0.0, 0.0, 1.0, 2.0, 3.0, 4.0]
    np.testing.assert_array_equal(history.flat(), [4.0, 5.0, 6.0])  # the last 3 sent, oldest first


def test_apply_delay_zero_is_immediate_and_bad_delay_is_rejected() -> None:
    history = ActionHistory(2, 2)
    np.testing.assert_array_equal(apply_delay(history, np.array([0.5, -0.5]), delay=0), [0.5, -0.5])
    with pytest.raises(ValueError, match="delay must be in 0..2"):
        apply_delay(history, np.zeros(2), delay=3)


def test_history_rejects_bad_shapes() -> None:
    history = ActionHistory(2, 3)
    with pytest.raises(ValueError, match="must have shape"):
        history.set_state(np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"steps must be in 1..2"):
        history.sent_ago(0)
    with pytest.raises(ValueError, match="history length must be >= 0"):
        ActionHistory(-1, 3)
    with pytest.raises(ValueError, match=r"command must have shape \(3,\)"):
        history.push(np.float64(1.0))  # a scalar must not silently fill every component
    with pytest.raises(ValueError, match=r"command must have shape \(3,\)"):
        history.push(np.zeros(4))


@pytest.mark.parametrize("history_len", [0, 2, 6])
def test_flat_observation_is_flatten_of_build_bit_for_bit(history_len: int) -> None:
    """The control loop's one-step path writes the same float32 bytes as ``flatten(build(...))``."""
    contract = fetch_reach_contract(history_len)
    rng = np.random.default_rng(history_len)
    history = ActionHistory(contract.history_len, contract.action_dim)
    for _ in range(history_len + 1):
        history.push(rng.uniform(-1.0, 1.0, contract.action_dim))
    state = rng.normal(size=contract.state_dim) * 1.7  # values that do not fit float32 exactly
    goal = rng.normal(size=contract.goal_dim)
    want = contract.flatten(contract.build(state, history, goal))
    got = contract.flat_observation(state, history, goal)
    assert got.dtype == np.float32 and got.shape == (contract.flat_dim,)
    assert got.tobytes() == want.tobytes()


def test_flat_observation_rejects_bad_shapes_and_leaves_the_history_alone() -> None:
    contract = fetch_reach_contract(2)
    history = ActionHistory(2, contract.action_dim)
    history.push(np.ones(contract.action_dim))
    with pytest.raises(ValueError, match="robot state must have shape"):
        contract.flat_observation(np.zeros(contract.state_dim + 1), history, np.zeros(3))
    with pytest.raises(ValueError, match="action history is 3x4"):
        contract.flat_observation(np.zeros(contract.state_dim), ActionHistory(3, 4), np.zeros(3))
    flat = contract.flat_observation(np.zeros(contract.state_dim), history, np.zeros(3))
    flat[:] = 7.0  # the result is a new array: writing it cannot change the history
    np.testing.assert_array_equal(history.get_state(), [np.zeros(4), np.ones(4)])
    with pytest.raises(ValueError, match="read-only"):
        history.view()[0] = 1.0


def test_the_position_field_is_the_state_field_holding_the_position_slice():
    from deploy.contract import fetch_reach_contract

    contract = fetch_reach_contract(2)
    assert contract.field_spans() == [
        ("grip_pos", 0, 3),
        ("gripper_state", 3, 5),
        ("grip_velp", 5, 8),
        ("gripper_vel", 8, 10),
    ]
    assert contract.position_field == "grip_pos"


def test_the_push_contract_is_format_2_and_its_achieved_goal_is_the_block() -> None:
    from deploy.contract import BLOCK_CONTRACT_FORMAT_VERSION, fetch_push_contract

    push = fetch_push_contract(2)
    data = json.loads(json.dumps(push.to_dict()))
    assert data["format_version"] == BLOCK_CONTRACT_FORMAT_VERSION and data["block_slice"] == [3, 6]
    assert ObservationContract.from_dict(data) == push
    state = np.arange(push.state_dim, dtype=np.float64)  # gripper 0..2, block 3..5
    history = ActionHistory(2, 4)
    flat = push.flat_observation(state, history, np.array([7.0, 8.0, 9.0]))
    obs = push.build(state, history, np.array([7.0, 8.0, 9.0]))
    assert obs["achieved_goal"].tolist() == [3.0, 4.0, 5.0]  # the block, not the gripper
    assert flat.tobytes() == push.flatten(obs).tobytes()


def test_a_contract_without_a_block_stays_format_1_and_format_1_with_a_block_is_refused() -> None:
    reach = fetch_reach_contract(2).to_dict()
    assert reach["format_version"] == 1 and "block_slice" not in reach
    with pytest.raises(ValueError, match="format_version 1 has no 'block_slice'"):
        ObservationContract.from_dict({**reach, "block_slice": [0, 3]})
    with pytest.raises(ValueError, match="block_slice .* straddles two state fields"):
        ObservationContract(
            name="x", state_fields=(("a", 3), ("b", 4)), action_dim=3, history_len=0, block_slice=(2, 5)
        )
