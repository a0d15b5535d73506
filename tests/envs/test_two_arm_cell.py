"""The two-arm cell: PettingZoo API, bit-exact snapshots (both arms, both delay lines), the separation rule."""

from __future__ import annotations

import pickle

import gymnasium as gym
import mujoco
import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

import envs
from envs.cell_goals import crossing_shares, straight_path_closest
from envs.cell_solo import CellSoloReachEnv
from envs.two_arm_cell import TwoArmCellEnv
from envs.two_arm_cell_parallel import AGENTS

REPLAY_STEPS = 50
WARMUP_STEPS = 5  # snapshot mid-episode, with commands pending in both delay lines


def test_parallel_api_test_passes() -> None:
    parallel_api_test(envs.two_arm_cell_parallel_env(), num_cycles=120)


def test_registered_id_makes_the_cell() -> None:
    env = gym.make("TwoArmCell-v0", delay=1)
    obs, _ = env.reset(seed=0)
    assert obs["observation"].shape == (2, 10 + 4 * 1 + 3)
    assert isinstance(env.unwrapped, TwoArmCellEnv)


def _random_actions(seed: int, n: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{agent: rng.uniform(-1, 1, 4).astype(np.float32) for agent in AGENTS} for _ in range(n)]


def _play(env, actions) -> list:
    out = []
    for action in actions:
        if not env.agents:
            out.append(env.reset())
        out.append(env.step(action))
    return out


def _same(a, b) -> None:
    """Bit-identical nested structures of dicts, tuples and arrays."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _same(a[key], b[key])
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    else:
        assert a == b or (a != a and b != b)


def test_snapshot_restore_is_bit_exact_over_50_random_steps() -> None:
    env = envs.two_arm_cell_parallel_env(delay_range=(1, 3), end_on_violation=False)
    env.reset(seed=3)
    for action in _random_actions(0, WARMUP_STEPS):
        env.step(action)
    snapshot = pickle.loads(pickle.dumps(env.unwrapped.snapshot()))  # picklable, as SubprocVecEnv needs
    assert any(len(set(h.reshape(-1))) > 1 for h in snapshot.histories)  # commands are in flight
    actions = _random_actions(1, REPLAY_STEPS)
    first = _play(env, actions)
    other = envs.two_arm_cell_parallel_env(delay_range=(1, 3), end_on_violation=False)
    other.reset(seed=99)  # a different episode: everything must come from the snapshot
    restored = other.reset(options={"snapshot": snapshot})
    assert restored[0]["arm_0"]["observation"].tobytes() == snapshot.observation["observation"][0].tobytes()
    _same(first, _play(other, actions))
    assert restored[1]["arm_0"]["delays"] == snapshot.delays


def test_snapshot_carries_each_arms_own_delay() -> None:
    env = TwoArmCellEnv(delay_range=(0, 3))
    delays = set()
    for seed in range(12):
        env.reset(seed=seed)
        delays.add(tuple(env.delays))
    assert any(a != b for a, b in delays)  # the arms draw their delays independently


def test_driving_the_grippers_together_is_a_violation_that_ends_the_episode() -> None:
    env = envs.two_arm_cell_parallel_env(delay=0)
    env.reset(seed=0)
    toward = {agent: np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32) for agent in AGENTS}  # each arm's +x: the other
    for _ in range(10):
        _, rewards, terms, _, infos = env.step(toward)
        if any(terms.values()):
            break
    assert all(terms.values()) and not env.agents
    assert infos["arm_0"]["violation"] in ("separation", "contact")
    assert infos["arm_0"]["closest_m"] < 0.10
    assert infos["arm_0"]["is_success"] == infos["arm_1"]["is_success"] == 0.0
    assert rewards == {"arm_0": -1.0, "arm_1": -1.0}


def test_frozen_violation_runs_to_the_time_limit_as_a_failure() -> None:
    env = TwoArmCellEnv(delay=0, end_on_violation=False, max_episode_steps=12)
    env.reset(seed=0)
    toward = np.array([[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    seen, positions = [], []
    for _ in range(12):
        obs, reward, terminated, truncated, info = env.step(toward)
        seen.append(info["violation"])
        if info["violation"] is not None:
            positions.append(obs["achieved_goal"].copy())
        assert not terminated
    assert truncated and seen[-1] is not None and reward == -1.0 and info["is_success"] == 0.0
    assert all(np.array_equal(p, positions[0]) for p in positions)  # frozen after the violation


def test_team_success_needs_both_arms_and_compute_reward_matches() -> None:
    env = TwoArmCellEnv(delay=0)
    env.reset(seed=0)
    achieved = env.goals.copy()
    assert env.compute_reward(achieved, env.goals, None) == 0.0
    achieved[1, 2] += 0.06  # arm 1 six centimetres off: the team fails
    assert env.compute_reward(achieved, env.goals, None) == -1.0
    batch = np.stack([env.goals, achieved])
    assert env.compute_reward(batch, np.stack([env.goals] * 2), None).tolist() == [0.0, -1.0]


def test_arm_frames_mirror_the_cell() -> None:
    env = TwoArmCellEnv(delay=0)
    obs, _ = env.reset(seed=0)
    # Both arms see their own gripper at (almost) the same place in their own frames: the task looks the same.
    np.testing.assert_allclose(obs["achieved_goal"][0], obs["achieved_goal"][1], atol=1e-4)
    # The partner block is the other gripper in the arm's frame: 0.3 m straight ahead (+x).
    np.testing.assert_allclose(obs["observation"][0, -3:] - obs["achieved_goal"][0], [0.3, 0, 0], atol=1e-3)
    world = env.goals_world()
    assert np.linalg.norm(world[0] - world[1]) >= env.min_goal_gap_m


def test_goal_sampling_makes_the_arms_cross_often() -> None:
    env = TwoArmCellEnv(delay=0)
    goals = []
    for seed in range(400):
        env.reset(seed=seed)
        goals.append(env.goals_world())
    shares = crossing_shares(env.start_world(), np.array(goals), env.min_separation_m)
    assert 0.25 < shares["swap"] < 0.4  # a third of the episodes put each goal on the partner's side (31% of 10,000)


def _drive_straight(env: TwoArmCellEnv, seed: int, contacts: bool = True) -> dict:
    """Both arms straight at their goals, blind to each other (the solo policies' way); the last step's info.
    ``contacts=False`` steps with MuJoCo's contacts off (the goals are drawn with them on)."""
    obs, _ = env.reset(seed=seed)
    model = env.scene.model
    flags = model.opt.disableflags
    if not contacts:
        model.opt.disableflags = flags | int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    try:
        for _ in range(env.max_episode_steps):
            action = np.zeros((2, 4))
            action[:, :3] = np.clip((obs["desired_goal"] - obs["achieved_goal"]) / 0.05 * 0.6, -1.0, 1.0)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
    finally:
        model.opt.disableflags = flags
    mujoco.mj_forward(model, env.scene.data)
    return info


def test_arms_driven_straight_at_their_goals_often_touch_yet_every_goal_pair_is_reachable_together() -> None:
    env = TwoArmCellEnv(delay=2)
    touched = sum(_drive_straight(env, seed)["violation"] == "contact" for seed in range(60))
    assert touched >= 3  # the paths cross: 13 of seeds 0-99 touched, the links behind the grippers first
    # ...yet no goal pair has arms that touch once both grippers are there: with contacts off on the way, both arms
    # reach their goals, and the pose they end in is clear of contacts
    for seed in range(40):
        info = _drive_straight(env, seed, contacts=False)
        assert all(info["arm_success"]), f"seed {seed}: an arm did not reach its goal with contacts off"
        assert not env.scene.arms_in_contact(), f"seed {seed}: the arms touch with both grippers on their goals"


def test_a_goal_pair_whose_arms_would_touch_is_redrawn() -> None:
    env = TwoArmCellEnv(delay=0)
    scene = env.scene
    # both grippers at the cell centre's far sides, level: each forearm lies over the partner's gripper
    centre = np.array([*scene.centre, scene.start_grip[0][2]])
    shift = np.array([0.12, 0.0, 0.0])
    crossed = np.stack([centre + shift, centre - shift])
    assert scene.arms_touch_at(crossed)
    assert not scene.arms_touch_at(np.stack([scene.start_grip[0], scene.start_grip[1]]))
    state = scene.get_state()
    scene.arms_touch_at(crossed)
    np.testing.assert_array_equal(scene.get_state(), state)  # a scratch copy: the episode's physics is untouched


def test_straight_path_closest_arithmetic() -> None:
    # Grippers 0.3 m apart swapping places along x at the same pace meet halfway: closest 0.
    start = np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.0]])
    assert straight_path_closest(start, start[::-1].copy()) == pytest.approx(0.0)
    # Both moving +y by 0.2 keep their 0.3 m.
    assert straight_path_closest(start, start + np.array([0, 0.2, 0])) == pytest.approx(0.3)


def test_solo_arm_observation_is_the_cell_row_without_the_partner() -> None:
    solo, cell = CellSoloReachEnv(arm=1, delay=2), TwoArmCellEnv(delay=2)
    solo_obs, _ = solo.reset(seed=0)
    cell_obs, _ = cell.reset(seed=0)
    assert solo_obs["observation"].shape == (cell_obs["observation"].shape[1] - 3,)
    np.testing.assert_allclose(solo_obs["observation"][:3], cell_obs["observation"][1, :3], atol=1e-3)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"goal_range_m": 0.5}, "goal_range_m"), ({"min_separation_m": 0.0}, "min_separation_m"), ({"delay": 9}, "delay")],
)
def test_bad_arguments_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TwoArmCellEnv(**kwargs)


def test_bad_action_shape_is_refused() -> None:
    env = TwoArmCellEnv(delay=0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="one row per arm"):
        env.step(np.zeros(4))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.full((2, 4), np.nan))


def test_proximity_term_is_goal_independent_and_reported() -> None:
    env = TwoArmCellEnv(delay=0, proximity_coef=1.0, end_on_violation=False, max_episode_steps=8)
    env.reset(seed=0)
    toward = np.array([[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    offsets = []
    for _ in range(8):
        _, reward, _, _, info = env.step(toward)
        offsets.append(info["reward_offset"])
        assert reward == -1.0 + info["reward_offset"]  # never at the goals here: the sparse part is -1
    # Start 0.30 m apart, clear of the 0.20 m band: no term; closing in: below -1 at the limit and after.
    assert offsets[0] == 0.0 and min(offsets) < -1.0 and offsets[-1] == offsets[-2]  # frozen arms keep theirs
    off = TwoArmCellEnv(delay=0)
    off.reset(seed=0)
    assert off.step(toward)[4]["reward_offset"] == 0.0


@pytest.mark.parametrize("env_id", ["TwoArmCell-v0", "CellSoloReach-v0"])
def test_gymnasium_env_checker_passes(env_id: str) -> None:
    import warnings

    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*infinity.*")  # goal-env positions are unbounded, as Fetch's
        check_env(gym.make(env_id).unwrapped, skip_render_check=True)


def test_a_given_goal_pair_is_posed_and_a_bad_one_refused() -> None:
    env = TwoArmCellEnv(delay=1)
    drawn, _ = env.reset(seed=3)
    given = np.array([[1.45, 0.70, 0.50], [1.40, 0.80, 0.55]])
    obs, _ = env.reset(seed=3, options={"goals": given})
    assert obs["desired_goal"] == pytest.approx(given)  # each arm's goal in its own frame, as given
    assert obs["achieved_goal"] == pytest.approx(drawn["achieved_goal"])  # the same start
    assert env.goals_world()[1] == pytest.approx(env.scene.to_arm(1, given[1]))
    for bad in (given[0], [[1.4, 0.7, np.nan], [1.4, 0.8, 0.5]]):
        with pytest.raises(ValueError, match="options\\['goals'\\] must be 2 finite 3-D goals"):
            env.reset(options={"goals": bad})
