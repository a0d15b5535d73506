"""GRPO with hindsight: critic-free, group-relative policy optimization for sparse-reward goal envs.

Group Relative Policy Optimization (Shao et al. 2024, "DeepSeekMath", https://arxiv.org/abs/2402.03300):
the baseline of a rollout is its group of G siblings from the same start state and goal, not a critic.
Sparse-reward groups are relabelled with goals they reached (Andrychowicz et al. 2017, HER) and corrected with
per-decision importance weights (Rauber et al. 2019, "Hindsight Policy Gradients").
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import safe_mean
from stable_baselines3.common.vec_env import VecEnv

from robot_grpo.arguments import CHECKED_ARGUMENTS, check_grpo_arguments
from robot_grpo.buffers import GroupRolloutBuffer, GroupRolloutSamples, HindsightGroupBuffer, info_reward_offsets
from robot_grpo.env_originals import EnvOriginals
from robot_grpo.group_reset import check_snapshot_support, episode_length, group_reset
from robot_grpo.grpo_update import ClippedGroupUpdate
from robot_grpo.losses import ExtraLossTerm
from robot_grpo.policies import GoalGaussianPolicy, flatten_obs_np
from robot_grpo.restarts import RestartPool
from robot_grpo.schedules import check_log_std_bounds, log_std_bound, make_schedule

SelfGRPO = TypeVar("SelfGRPO", bound="GRPO")

DEFAULT_GROUP_SIZE = 8  # members per group (G)
# Groups per update: 6 (2,400 env steps) reached 95% on DelayedFetchReach k=2 in fewer env steps than 8 or 4 groups
# (median 7,200 vs 9,600 and 11,200 over 10 seeds; see benchmarks/learning.py).
DEFAULT_N_GROUPS = 6
DEFAULT_N_ENVS = DEFAULT_GROUP_SIZE * DEFAULT_N_GROUPS  # the envs that the defaults need
RUN_PATHS = ("tensorboard_log", "snapshot_dir")  # where this process writes: never saved in a checkpoint


class GRPO(ClippedGroupUpdate, BaseAlgorithm):
    """Group Relative Policy Optimization with whole-group hindsight relabelling (no critic).

    Paper: DeepSeekMath (https://arxiv.org/abs/2402.03300); hindsight: HER (https://arxiv.org/abs/1707.01495)
    and Hindsight Policy Gradients (https://arxiv.org/abs/1711.06006).

    Every rollout starts with :func:`robot_grpo.group_reset.group_reset`: envs [g*G, (g+1)*G) share one
    snapshot, then all episodes run to the time limit (``n_steps`` control steps).

    :param policy: "MultiInputPolicy" (dict goal observations), "MlpPolicy" or a policy class.
    :param env: a VecEnv with ``group_size * n_groups`` envs, or a registered env id (then such a DummyVecEnv
        is built with ``make_vec_env``).
    :param learning_rate: float or schedule of progress_remaining (see ``robot_grpo.schedules.make_schedule``
        for constant / linear / cosine).
    :param group_size: members per group (G), each starting from the same snapshot.
    :param n_groups: groups per rollout; the env needs ``group_size * n_groups`` envs (``DEFAULT_N_ENVS`` with
        the defaults).
    :param n_steps: control steps per episode; None reads the env's ``max_episode_steps`` (or its spec's).
    :param n_epochs: passes over the training rows per update.
    :param batch_size: minibatch size in rows (original plus relabelled samples).
    :param gamma: discount of the returns-to-go.
    :param clip_range: lower clip epsilon of the ratio (float or schedule, e.g. a linear decay).
    :param clip_range_high: upper clip epsilon (DAPO-style asymmetric clip); None uses ``clip_range``.
    :param dual_clip: c > 1 bounds the surrogate of rows with a negative advantage at ``c * A`` (dual-clip PPO; see
        ``robot_grpo.losses``), so a row whose action is far from the mean cannot drive the update; None: off.
        Hindsight rows of object tasks need it (delayed FetchPush overflowed the gradient without it).
    :param max_log_std: upper bound of the policy's log-std, applied after every update: a float, a schedule, or
        ``[start, end]`` (linear over training, as a launch file writes it), ``[start, end, end_fraction]`` (at its
        end after that share of training); None leaves the learned log-std free.
        Hindsight with achieved goals does not penalize action noise (a member's own end point is its goal, however
        noisy its path), so on precision tasks the learned std hardly shrinks and the deterministic policy settles
        ~1 cm off the goal (2 cm reach, std 0.6); a falling bound brings the precision back.
    :param min_log_std: lower bound of the policy's log-std, applied after every update (the same forms as
        ``max_log_std``); None leaves it free. A floor keeps exploring where the clipped surrogate shrinks the
        std faster than the task is learned. On delayed FetchPush (std 0.57 -> 0.17 over 1M env steps) a floor at
        -1.0 kept the block moving in 44-50% of episodes instead of 25-32%, but not the success rate
        (docs/benchmarks/push-study.md, source push_probe_std_floor_1m).
    :param beta: coefficient of the k3 KL to the reference policy.
    :param adaptive_beta: adapt ``beta`` (x2 or /2) after each update to keep kl_ref near ``target_kl``.
    :param target_kl: approx-KL budget per update; None turns off early stop, rollback and adaptive beta.
    :param ent_coef: entropy bonus coefficient.
    :param bound_coef: coefficient of the penalty on the policy mean outside the action bounds (rl_games'
        ``bounds_loss``; see ``robot_grpo.losses.action_bound_penalty``). The env clips actions, so without it the
        mean can drift past the bounds where its noise no longer explores; 0 turns it off.
    :param max_grad_norm: gradient clipping norm.
    :param scale_advantages: "group" (divide by the group std), "batch" (by the batch std) or "none".
    :param outcome_only: score members by their episode outcome (last reward) instead of returns-to-go.
    :param ref_update_interval: copy the policy into the reference every N updates (iterative GRPO); 0 keeps
        the initial reference (fine-tuning).
    :param restart_fraction: share of each rollout's groups that start from a state one member of the previous
        rollout reached mid-episode (goal kept; ``robot_grpo.restarts``), compared from there on: a baseline for the
        middle of an episode, e.g. next to the block of a push. 0 (default): every group starts fresh.
    :param rollout_buffer_class: group buffer class (default ``HindsightGroupBuffer`` for goal envs,
        ``GroupRolloutBuffer`` otherwise; pass ``GroupRolloutBuffer`` to turn hindsight off).
    :param rollout_buffer_kwargs: extra buffer arguments (hindsight_strategy, n_sampled_goal, is_correction,
        is_clip, is_self_normalize).
    :param extra_loss_terms: objects with ``name`` and ``__call__(policy) -> scalar tensor`` added to the loss.
    :param snapshot_dir: where a snapshot is written when a loss or gradient becomes NaN/inf. None (default):
        ``<log folder>/nonfinite_snapshots`` when the run logs to a folder (``tensorboard_log``, or a logger given
        with ``set_logger``), else ``nonfinite_snapshots`` in the working directory at the time of the failure.
        The folder is created only when a snapshot is written. Not saved with the model (see ``load``).
    :param n_torch_threads: ``torch.set_num_threads`` for this process (small MLPs: 1 is fastest); None leaves it.
    :param stats_window_size: window of the SB3 episode-info buffers.
    :param tensorboard_log: TensorBoard log directory (None: no TensorBoard). Not saved with the model: a loaded
        model logs to TensorBoard only when ``load(..., tensorboard_log=...)`` says where.
    :param policy_kwargs: extra policy arguments (net_arch, activation_fn, log_std_init, norm_clip, ...).
    :param verbose: 0 silent, 1 training info.
    :param seed: seed of python, numpy, torch, the env and the hindsight goal sampler.
    :param device: torch device of the learner: "cpu" (the default: fastest for these small networks at the default
        batch), "cuda", or "auto" (CUDA when this process has one: large batches, e.g. many Ray workers' groups).
    :param _init_setup_model: build the networks now (False when loading).
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": GoalGaussianPolicy,
        "MultiInputPolicy": GoalGaussianPolicy,
    }
    policy: GoalGaussianPolicy
    rollout_buffer: GroupRolloutBuffer

    def __init__(
        self,
        policy: str | type[GoalGaussianPolicy],
        env: GymEnv | str | None,
        learning_rate: float | Schedule = 3e-4,
        group_size: int = DEFAULT_GROUP_SIZE,
        n_groups: int = DEFAULT_N_GROUPS,
        n_steps: int | None = None,
        n_epochs: int = 8,
        batch_size: int = 2048,
        gamma: float = 0.98,
        clip_range: float | Schedule = 0.2,
        clip_range_high: float | Schedule | None = None,
        dual_clip: float | None = None,
        max_log_std: float | Sequence[float] | Schedule | None = None,
        min_log_std: float | Sequence[float] | Schedule | None = None,
        beta: float = 0.0,
        adaptive_beta: bool = False,
        target_kl: float | None = None,
        ent_coef: float = 0.0,
        bound_coef: float = 0.0,
        max_grad_norm: float = 1.0,
        scale_advantages: str = "group",
        outcome_only: bool = False,
        ref_update_interval: int = 10,
        restart_fraction: float = 0.0,
        rollout_buffer_class: type[GroupRolloutBuffer] | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        extra_loss_terms: Sequence[ExtraLossTerm] | None = None,
        snapshot_dir: str | None = None,
        n_torch_threads: int | None = 1,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "cpu",
        _init_setup_model: bool = True,
    ) -> None:
        if isinstance(env, str):
            env = make_vec_env(env, n_envs=group_size * n_groups, seed=seed)
        super().__init__(
            policy,
            env,
            learning_rate,
            policy_kwargs=policy_kwargs,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            verbose=verbose,
            device=device,
            support_multi_env=True,
            seed=seed,
            supported_action_spaces=(spaces.Box,),
        )
        self.group_size = group_size
        self.n_groups = n_groups
        self.n_steps = n_steps
        self.n_epochs = n_epochs
        self.batch_size = batch_size
        self.gamma = gamma
        self.clip_range = clip_range
        self.clip_range_high = clip_range_high
        self.dual_clip = dual_clip
        self.max_log_std = max_log_std
        self.min_log_std = min_log_std
        self.beta = beta
        self.adaptive_beta = adaptive_beta
        self.target_kl = target_kl
        self.ent_coef = ent_coef
        self.bound_coef = bound_coef
        self.max_grad_norm = max_grad_norm
        self.scale_advantages = scale_advantages
        self.outcome_only = outcome_only
        self.ref_update_interval = ref_update_interval
        self.restart_fraction = restart_fraction
        self._restarts = RestartPool()  # the previous rollout's mid-episode snapshots
        self.rollout_buffer_class = rollout_buffer_class
        self.rollout_buffer_kwargs = rollout_buffer_kwargs or {}
        self.extra_loss_terms = list(extra_loss_terms or [])
        self.snapshot_dir = snapshot_dir
        self.n_torch_threads = n_torch_threads
        self._lr_factor = 1.0
        self._rollout_stats: dict[str, float] = {}
        if _init_setup_model:
            self._setup_model()

    # Setup ------------------------------------------------------------------------------------------------
    def _check_args(self) -> None:
        if self.env is not None:
            check_snapshot_support(self.env)
        n_envs = None if self.env is None else self.n_envs
        check_grpo_arguments(n_envs=n_envs, **{name: getattr(self, name) for name in CHECKED_ARGUMENTS})

    def _setup_model(self) -> None:
        self._check_args()
        if self.n_torch_threads is not None:
            th.set_num_threads(self.n_torch_threads)
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        self._seed_generators(self.seed)
        if self.n_steps is None:
            self.n_steps = episode_length(self.env)
        if self.n_steps < 1:
            raise ValueError(f"n_steps must be >= 1 control step, got {self.n_steps}")
        self.clip_range_schedule = make_schedule(self.clip_range)
        high = self.clip_range if self.clip_range_high is None else self.clip_range_high
        self.clip_range_high_schedule = make_schedule(high)
        self.max_log_std_schedule = None if self.max_log_std is None else log_std_bound(self.max_log_std)
        self.min_log_std_schedule = None if self.min_log_std is None else log_std_bound(self.min_log_std)
        check_log_std_bounds(self.min_log_std_schedule, self.max_log_std_schedule)

        self.policy = self.policy_class(
            self.observation_space, self.action_space, self.lr_schedule, **self.policy_kwargs
        )
        self.policy = self.policy.to(self.device)
        self.ref_policy = self.policy_class(
            self.observation_space, self.action_space, self.lr_schedule, **self.policy_kwargs
        ).to(self.device)
        self.ref_policy.load_state_dict(self.policy.state_dict())
        self.ref_policy.requires_grad_(False)
        self.ref_policy.set_training_mode(False)

        buffer_class = self.rollout_buffer_class
        if buffer_class is None:
            is_goal = isinstance(self.observation_space, spaces.Dict)
            buffer_class = HindsightGroupBuffer if is_goal else GroupRolloutBuffer
        self.rollout_buffer = buffer_class(
            self.n_steps,
            self.observation_space,
            self.action_space,
            self.group_size,
            self.n_groups,
            device=self.device,
            gamma=self.gamma,
            scale_advantages=self.scale_advantages,
            outcome_only=self.outcome_only,
            **self.rollout_buffer_kwargs,
        )

    def set_random_seed(self, seed: int | None = None) -> None:
        """Seed python, numpy, torch, the action space, the env and the hindsight goal sampler."""
        super().set_random_seed(seed)
        self._seed_generators(seed)

    def _seed_generators(self, seed: int | None) -> None:
        """Model-owned generators (goal draws, action noise, minibatch order): two models never share RNG state."""
        self._rng = np.random.default_rng(seed)
        self._th_gen = th.Generator(device=self.device)
        if seed is None:
            self._th_gen.seed()
        else:
            self._th_gen.manual_seed(seed)

    def _excluded_save_params(self) -> list[str]:
        excluded = ["extra_loss_terms", "_th_gen", "_rollout_stats", "_restarts"]
        return [*super()._excluded_save_params(), *RUN_PATHS, *excluded]

    @classmethod
    def load(  # type: ignore[override]
        cls: type[SelfGRPO],
        path: Any,
        env: GymEnv | None = None,
        device: th.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> SelfGRPO:
        """SB3's ``load``; where the loaded model writes (``tensorboard_log``, ``snapshot_dir``) comes from ``kwargs``
        only, never from the checkpoint (older checkpoints stored relative paths of the run that saved them)."""
        model = super().load(path, env, device, custom_objects, print_system_info, force_reset, **kwargs)
        for name in RUN_PATHS:
            setattr(model, name, kwargs.get(name))
        return model

    def set_env(self, env: GymEnv, force_reset: bool = True) -> None:
        """SB3's ``set_env``, refusing an env that cannot give group resets (no ``snapshot()``)."""
        super().set_env(env, force_reset)
        assert self.env is not None
        check_snapshot_support(self.env)
        self._restarts.clear()  # states of the old env: not restorable into the new one

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        return ["policy", "policy.optimizer", "ref_policy"], []

    # Rollouts ---------------------------------------------------------------------------------------------
    def _compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        assert self.env is not None
        return self.env.env_method("compute_reward", achieved_goal, desired_goal, info, indices=[0])[0]

    def collect_rollouts(self, env: VecEnv, callback: BaseCallback, rollout_buffer: GroupRolloutBuffer) -> bool:
        """Run one group rollout (every env to the time limit) and build the training rows.

        :return: False when a callback asked to stop training.
        """
        self.policy.set_training_mode(False)
        starts = self._restarts.draw(self.restart_fraction, self.n_groups, self._rng)
        self._last_obs = group_reset(env, self.group_size, starts=starts)
        capture_after = RestartPool.capture_step(self.restart_fraction, self.n_steps, self._rng)
        originals = EnvOriginals(self._vec_normalize_env, self.observation_space)  # identity without VecNormalize
        original_obs = originals.obs(self._last_obs)
        rollout_buffer.reset()
        callback.on_rollout_start()
        low, high = self.action_space.low, self.action_space.high
        is_goal = isinstance(self._last_obs, dict)
        T = rollout_buffer.n_steps
        for t in range(T):
            flat = flatten_obs_np(self._last_obs)
            with th.no_grad():
                mean, log_std = self.policy.distribution_params(th.as_tensor(flat, device=self.device))
                noise = th.randn(mean.shape, generator=self._th_gen, device=self.device)
                actions = (mean + noise * th.exp(log_std)).cpu().numpy()
            new_obs, rewards, dones, infos = env.step(np.clip(actions, low, high))
            self.num_timesteps += env.num_envs
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            last = t == T - 1
            if not np.all(dones == last):
                raise ValueError(
                    f"episodes must all end exactly at the time limit (n_steps={T}); at step {t + 1} the done flags "
                    f"were {dones.astype(int).tolist()}. GRPO groups need envs without early termination; "
                    "pass n_steps equal to the env's episode length"
                )
            new_original = originals.obs(new_obs)
            achieved = None
            if is_goal:
                achieved = originals.terminal_achieved_goals(infos) if last else new_original["achieved_goal"]
            rollout_buffer.add(
                flatten_obs_np(original_obs), actions, originals.rewards(rewards), achieved, info_reward_offsets(infos)
            )
            self._last_obs, original_obs = new_obs, new_original
            self._last_episode_starts = dones
            if t + 1 == capture_after:
                self._restarts.capture(env, self.group_size, self.n_groups, self._rng)

        self._score_rollout(rollout_buffer, is_goal, originals.normalizer)
        self._rollout_stats["rollout/restarted_groups"] = float(self._restarts.last_drawn)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _score_rollout(
        self, rollout_buffer: GroupRolloutBuffer, is_goal: bool, normalize: Callable[[np.ndarray], np.ndarray] | None
    ) -> None:
        """After a full rollout (filled here or by ``robot_grpo.scale``'s workers): the observation normalizer
        and the training rows (advantages, hindsight). ``normalize`` maps stored (original) observations to what
        the policy sees under a VecNormalize (None: the identity)."""
        flat_rows = rollout_buffer.observations.reshape(-1, rollout_buffer.obs_dim)
        rows = flat_rows if normalize is None else normalize(flat_rows)
        self.policy.update_normalizer(th.as_tensor(rows, device=self.device))  # the normalizer lives on the device
        compute_reward = self._compute_reward if is_goal else None
        ref_policy = self.ref_policy if self.beta > 0 else None  # no reference term: do not even score it
        self._rollout_stats = rollout_buffer.compute(self.policy, ref_policy, compute_reward, self._rng, normalize)

    # Training ---------------------------------------------------------------------------------------------
    def rollout_samples(self) -> GroupRolloutSamples:
        """Collect one group rollout on the model's env and return its training rows, without an update.

        Counts ``n_envs * n_steps`` env steps toward ``num_timesteps``. Fine-tuning uses it to mix fresh sim groups
        into :meth:`train_on_samples`.
        """
        if self.env is None:
            raise ValueError("rollout_samples() needs an env; give the model one with set_env(env)")
        _, callback = self._setup_learn(self.n_envs * self.n_steps, None, reset_num_timesteps=False)
        self.collect_rollouts(self.env, callback, self.rollout_buffer)
        return self.rollout_buffer.samples

    # Loop -------------------------------------------------------------------------------------------------
    def dump_logs(self, iteration: int = 0) -> None:
        """Record rollout/hindsight/time keys and write them (SB3 logger: stdout, TensorBoard, CSV, ...)."""
        elapsed = max((time.time_ns() - self.start_time) / 1e9, sys.float_info.epsilon)
        fps = int((self.num_timesteps - self._num_timesteps_at_start) / elapsed)
        if iteration > 0:
            self.logger.record("time/iterations", iteration, exclude="tensorboard")
        if len(self.ep_info_buffer) > 0 and len(self.ep_info_buffer[0]) > 0:  # SB3's windowed episode statistics
            self.logger.record("rollout/ep_rew_mean", safe_mean([info["r"] for info in self.ep_info_buffer]))
            self.logger.record("rollout/ep_len_mean", safe_mean([info["l"] for info in self.ep_info_buffer]))
        if len(self.ep_success_buffer) > 0:
            self.logger.record("rollout/success_rate", safe_mean(self.ep_success_buffer))
        for key, value in self._rollout_stats.items():
            self.logger.record(key, value)
        self.logger.record("time/fps", fps)
        self.logger.record("time/time_elapsed", int(elapsed), exclude="tensorboard")
        self.logger.record("time/total_timesteps", self.num_timesteps, exclude="tensorboard")
        self.logger.dump(step=self.num_timesteps)

    def learn(
        self: SelfGRPO,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "GRPO",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfGRPO:
        """Alternate group rollouts (``n_envs * n_steps`` env steps each) and updates until ``total_timesteps``."""
        iteration = 0
        total_timesteps, callback = self._setup_learn(
            total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar
        )
        callback.on_training_start(locals(), globals())
        assert self.env is not None
        while self.num_timesteps < total_timesteps:
            if not self.collect_rollouts(self.env, callback, self.rollout_buffer):
                break
            iteration += 1
            self._update_current_progress_remaining(self.num_timesteps, total_timesteps)
            if log_interval is not None and iteration % log_interval == 0:
                self.dump_logs(iteration)
            self.train()
        callback.on_training_end()
        return self
