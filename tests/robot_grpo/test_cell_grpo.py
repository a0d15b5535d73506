"""CellGRPO on the two-arm cell (tiny budgets): the three sharing modes, PettingZoo predict, save/load, determinism,
and the per-agent export module."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env

import envs
from robot_grpo import CellGRPO, GroupRolloutBuffer
from robot_grpo.cell_buffer import agent_rows

G, N_GROUPS, EPISODE_STEPS = 2, 1, 6
CELL = {"end_on_violation": False, "delay": 1, "max_episode_steps": EPISODE_STEPS}
TINY = {"group_size": G, "n_groups": N_GROUPS, "batch_size": 64, "n_epochs": 1, "policy_kwargs": {"net_arch": [16]}}


def make_model(sharing: str = "heads", seed: int = 0, **kwargs) -> CellGRPO:
    vec = make_vec_env("TwoArmCell-v0", n_envs=G * N_GROUPS, seed=seed, env_kwargs=CELL)
    return CellGRPO("MultiInputPolicy", vec, sharing=sharing, seed=seed, **{**TINY, **kwargs})


@pytest.mark.parametrize("sharing", ["heads", "agent_id", "none"])
def test_learns_predicts_by_agent_and_round_trips(sharing: str, tmp_path) -> None:
    model = make_model(sharing)
    model.learn(2 * G * N_GROUPS * EPISODE_STEPS)
    assert model.num_timesteps == 2 * G * N_GROUPS * EPISODE_STEPS and model.agents == ["arm_0", "arm_1"]
    env = envs.two_arm_cell_parallel_env(delay=1)
    obs, _ = env.reset(seed=0)
    actions, state = model.predict(obs, deterministic=True)
    assert state is None and set(actions) == {"arm_0", "arm_1"} and actions["arm_0"].shape == (4,)
    env.step(actions)  # the PettingZoo env takes them as they are
    model.save(tmp_path / "cell.zip")
    loaded = CellGRPO.load(tmp_path / "cell.zip")
    again, _ = loaded.predict(obs, deterministic=True)
    assert all(np.array_equal(actions[a], again[a]) for a in actions)
    assert loaded.policy.sharing == sharing


def test_sharing_modes_share_what_they_say() -> None:
    sizes = {s: sum(p.numel() for p in make_model(s).policy.mean_net.parameters()) for s in ("heads", "none")}
    obs_dim = make_model("heads").policy.agent_obs_dim
    # heads: trunk (obs_dim*16 + 16) + 2 heads of 4 (16*8 + 8); none: two full nets (obs_dim*16 + 16 + 16*4 + 4) each.
    assert sizes["heads"] == obs_dim * 16 + 16 + 16 * 8 + 8
    assert sizes["none"] == 2 * (obs_dim * 16 + 16 + 16 * 4 + 4)
    model = make_model("none")
    rows = th.as_tensor(np.random.default_rng(0).normal(size=(4, model.policy.obs_dim)), dtype=th.float32)
    rows[:, -2:] = th.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    before = model.policy.distribution_params(rows)[0].detach().clone()
    with th.no_grad():  # change only agent 1's network: agent 0's actions stay
        for p in model.policy.mean_net.nets[1].parameters():
            p.add_(0.5)
    after = model.policy.distribution_params(rows)[0].detach()
    assert th.equal(before[:2], after[:2]) and not th.equal(before[2:], after[2:])


def test_same_seed_same_weights() -> None:
    a, b = make_model(seed=3), make_model(seed=3)
    a.learn(G * N_GROUPS * EPISODE_STEPS)
    b.learn(G * N_GROUPS * EPISODE_STEPS)
    for (name, x), (_, y) in zip(a.policy.state_dict().items(), b.policy.state_dict().items(), strict=True):
        assert th.equal(x, y), name


def test_agent_export_module_is_the_deterministic_action() -> None:
    model = make_model("agent_id")
    model.learn(G * N_GROUPS * EPISODE_STEPS)
    env = envs.two_arm_cell_parallel_env(delay=1)
    obs, _ = env.reset(seed=1)
    actions, _ = model.predict(obs, deterministic=True)
    for i, agent in enumerate(("arm_0", "arm_1")):
        module = model.policy.make_agent_export_module(i).eval()
        flat = np.concatenate([obs[agent][k] for k in ("observation", "achieved_goal", "desired_goal")])
        with th.no_grad():
            exported = module(th.as_tensor(flat[None], dtype=th.float32)).numpy()[0]
        np.testing.assert_allclose(exported, actions[agent], atol=1e-6)
    stacked = {k: np.stack([obs[a][k] for a in ("arm_0", "arm_1")])[None] for k in obs["arm_0"]}
    assert agent_rows(stacked).shape[-1] == model.policy.obs_dim


def test_refuses_what_it_cannot_do() -> None:
    with pytest.raises(ValueError, match="CellGroupBuffer"):
        make_model(rollout_buffer_class=GroupRolloutBuffer)
    with pytest.raises(ValueError, match="restart_fraction"):
        make_model(restart_fraction=0.5)
    with pytest.raises(ValueError, match="sharing"):
        make_model("everything")
    vec = make_vec_env("TwoArmCell-v0", n_envs=G * N_GROUPS, env_kwargs={**CELL, "end_on_violation": True, "delay": 0})
    model = CellGRPO("MultiInputPolicy", vec, seed=0, **TINY)
    with th.no_grad():  # drive both arms straight at each other: a violation ends an episode early
        model.policy.mean_net.net[-1].bias.copy_(th.tensor([1.0, 0.0, 0.0, 0.0] * 2))
        model.policy.log_std.fill_(-10.0)
    with pytest.raises(ValueError, match="end_on_violation=False"):
        model.learn(G * N_GROUPS * EPISODE_STEPS * 4)
