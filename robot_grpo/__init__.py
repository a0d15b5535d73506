"""robot_grpo: GRPO with hindsight relabelling for goal-conditioned control (torch + stable-baselines3).

Works on any gymnasium env (goal envs get hindsight) that offers ``snapshot()`` (on the env or a wrapper) and
``reset(options={"snapshot": s})``; the simulation package's ``envs.with_snapshots`` gives any MuJoCo env both.
Imports neither ``envs`` nor ``deploy``.
"""

from robot_grpo.buffers import GroupRolloutBuffer, GroupRolloutSamples, HindsightGroupBuffer
from robot_grpo.cell_buffer import CellGroupBuffer
from robot_grpo.cell_grpo import CellGRPO
from robot_grpo.cell_policy import CellGaussianPolicy
from robot_grpo.grpo import DEFAULT_N_ENVS, GRPO
from robot_grpo.losses import ExtraLossTerm
from robot_grpo.policies import OBS_KEYS, GoalGaussianPolicy, MlpPolicy, MultiInputPolicy
from robot_grpo.schedules import make_schedule
from robot_grpo.stability import NonFiniteError

__all__ = [
    "DEFAULT_N_ENVS",
    "GRPO",
    "OBS_KEYS",
    "CellGRPO",
    "CellGaussianPolicy",
    "CellGroupBuffer",
    "ExtraLossTerm",
    "GoalGaussianPolicy",
    "GroupRolloutBuffer",
    "GroupRolloutSamples",
    "HindsightGroupBuffer",
    "MlpPolicy",
    "MultiInputPolicy",
    "NonFiniteError",
    "make_schedule",
]
