"""Helpers for the export tests: a small policy trained here, in seconds, and a byte-flipping tamperer.

The policy is the GRPO policy's shape (normaliser inside, 64x64 SiLU MLP, output clipped to the bounds),
trained by behaviour cloning of a scripted PointReach expert that accounts for the commands in flight:

    pending_m = action_scale_m * sum(last k commands sent)         (k = the delay = history_len)
    action    = clip((desired_goal - position - pending_m) / action_scale_m, -1, 1)

so its closed-loop success is high and parity/closed-loop checks mean something. It also takes the env's dict
observation directly (``predict_dict``), concatenating the keys itself in torch, for the end-to-end contract test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from deploy.contract import ObservationContract
from deploy.export.rollouts import collect_observations, env_contract, make_env

POINT_ENV_ID = "PointReach-v0"
POINT_ENV_KWARGS = {"delay": 2}
HIDDEN = 64
BC_SAMPLES = 8_000
BC_STEPS = 600
BC_BATCH = 512
BC_LR = 3e-3
NORM_CLIP = 5.0
STD_FLOOR = 1e-3
EXPERT_NOISE_STD = 0.5


class TinyGoalPolicy(nn.Module):
    """float32 [B, flat_dim] -> clipped action [B, action_dim]; normaliser inside, like GoalGaussianPolicy's."""

    def __init__(self, contract: ObservationContract, mean: np.ndarray, std: np.ndarray) -> None:
        super().__init__()
        self.register_buffer("obs_mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("obs_std", torch.as_tensor(np.maximum(std, STD_FLOOR), dtype=torch.float32))
        self.net = nn.Sequential(
            nn.Linear(contract.flat_dim, HIDDEN),
            nn.SiLU(),
            nn.Linear(HIDDEN, HIDDEN),
            nn.SiLU(),
            nn.Linear(HIDDEN, contract.action_dim),
        )
        self.low, self.high = contract.action_low, contract.action_high

    def raw(self, obs: torch.Tensor) -> torch.Tensor:
        """The action before clipping (what behaviour cloning fits, so it stays inside the bounds' scale)."""
        return self.net(torch.clamp((obs - self.obs_mean) / self.obs_std, -NORM_CLIP, NORM_CLIP))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.clamp(self.raw(obs), self.low, self.high)

    def predict_dict(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Action for one dict observation (keys concatenated here in torch, independent of the contract code)."""
        parts = [torch.as_tensor(obs[k], dtype=torch.float32) for k in ("observation", "achieved_goal", "desired_goal")]
        with torch.no_grad():
            return self.forward(torch.cat(parts)[None])[0].numpy()


def point_expert(contract: ObservationContract, flat: np.ndarray) -> np.ndarray:
    """The scripted PointReach expert of the module docstring, on flat observations [B, D]."""
    state_dim, h, a = contract.state_dim, contract.history_len, contract.action_dim
    pos = flat[:, :3]
    pending = flat[:, state_dim : state_dim + h * a].reshape(-1, h, a).sum(axis=1)[:, :3]
    goal = flat[:, -contract.goal_dim :]
    return np.clip((goal - pos - contract.action_scale_m * pending) / contract.action_scale_m, -1.0, 1.0)


def train_bc_policy(env_id: str = POINT_ENV_ID, env_kwargs: dict | None = None, seed: int = 0) -> TinyGoalPolicy:
    torch.manual_seed(seed)
    env = make_env(env_id, env_kwargs if env_kwargs is not None else POINT_ENV_KWARGS)
    contract = env_contract(env)

    def expert(obs: np.ndarray) -> np.ndarray:
        return point_expert(contract, obs).astype(np.float32)

    obs = collect_observations(env, expert, BC_SAMPLES, seed=seed, action_noise_std=EXPERT_NOISE_STD)
    env.close()
    policy = TinyGoalPolicy(contract, obs.mean(axis=0), obs.std(axis=0))
    x, y = torch.from_numpy(obs), torch.from_numpy(expert(obs))
    optim = torch.optim.Adam(policy.net.parameters(), lr=BC_LR)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(BC_STEPS):
        idx = torch.randint(0, len(x), (BC_BATCH,), generator=gen)
        loss = (policy.raw(x[idx]) - y[idx]).square().mean()
        optim.zero_grad()
        loss.backward()
        optim.step()
    return policy.eval()


def flip_byte(path: Path) -> None:
    """Invert one byte in the middle of ``path`` (a tampered or corrupted file)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
