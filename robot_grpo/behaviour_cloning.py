"""Behaviour cloning: a GRPO policy's start fitted to demonstrations, then fine-tuned with a KL to that start.

The recipe GRPO comes from (a language model is first trained on examples, then GRPO improves it with a KL penalty
to that supervised start) applied to a contact task: a demonstrator (a scripted controller in simulation, a teleop
log on a real cell) is run on the training env, its successful episodes become (observation, action) rows, the
policy's normalizer takes their statistics and its mean network is fitted to the actions (mean squared error, Adam);
the policy's log-std is then set for fine-tuning and the cloned policy becomes GRPO's KL reference. GRPO's group
comparison needs a group whose members differ in outcome: from a cloned start that lands some pushes it has them
from the first update, where a policy that starts at random almost never moves the block (push study, finding 2).

Noise while demonstrating (DART, Laskey et al. 2017, https://arxiv.org/abs/1703.09327): the demonstrator's command
is executed with Gaussian noise (``action_noise``, command units) and the row keeps the command it chose, so the
rows cover the states a slightly-off policy reaches and say how to recover from them. Cloned from clean
demonstrations of the first scripted push (89%), the delayed push lands 44% deterministically and 12% with a std of
0.05; from demonstrations with noise 0.05, 94% and 74% (seed 0; docs/benchmarks/push-study.md).

Learner-driven rows (DAgger, Ross et al. 2011, https://arxiv.org/abs/1011.0686): a clone makes small errors that
take it to states no demonstration visited, and its errors there compound. ``dagger_rounds`` runs the clone itself
(``actor``) for some episodes while the demonstrator labels every state it visits; the rows join the demonstrations
and the clone is fitted again. On the delayed push whose demonstrator goes around the block (envs.scripted_push,
97%), the clone of 1,000 noisy demonstrations landed 66%; after four rounds of 500 learner-driven episodes, 86%. With
the over route that plans from the commands in flight (100%), the clone of 2,000 lands 93-94% on 500 held-out
episodes (tuned seeds 0 and 1); after two rounds 96-98%, after four 98% (seed 1).

torch + numpy; the demonstrator is any callable on the env's batched observations (robot_grpo does not import envs).
The env steps the demonstrator took are reported (``Demonstrations.env_steps``): they count against a budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch as th

from robot_grpo.policies import GoalGaussianPolicy, flatten_obs_np

Expert = Callable[[Any], np.ndarray]  # batched observations (dict of [n, d] arrays) -> actions [n, action_dim]


@dataclass(frozen=True)
class Demonstrations:
    """The rows of the demonstrations kept (flat observations in the policy's ``OBS_KEYS`` order, float32
    ``[N, obs_dim]``; actions in command units, float32 ``[N, action_dim]``) and what it took to collect them.

    :param episodes: episodes the demonstrator ran.
    :param successes: of those, the ones that ended in success (``info["is_success"]``).
    :param env_steps: env steps the demonstrator took (all episodes, kept or not).
    """

    observations: np.ndarray
    actions: np.ndarray
    episodes: int
    successes: int
    env_steps: int

    def __post_init__(self) -> None:
        obs, act = self.observations, self.actions
        if obs.ndim != 2 or act.ndim != 2 or len(obs) != len(act):
            raise ValueError(f"demonstrations need rows [N, obs_dim] and [N, action_dim], got {obs.shape}, {act.shape}")
        if not len(obs):
            raise ValueError(
                f"no demonstration rows were kept ({self.successes} of {self.episodes} episodes succeeded): run more "
                "episodes, keep failed ones (successful_only=False) or check the demonstrator on this env"
            )
        if not (np.isfinite(obs).all() and np.isfinite(act).all()):
            raise ValueError("demonstrations hold NaN or inf: check the demonstrator and the env")


def collect_demonstrations(
    env: Any,
    expert: Expert,
    episodes: int,
    successful_only: bool = True,
    action_noise: float = 0.0,
    seed: int = 0,
    actor: Expert | None = None,
) -> Demonstrations:
    """Run ``expert`` on the vectorized ``env`` (SB3 ``VecEnv``, auto-reset) until ``episodes`` episodes ended.

    :param successful_only: keep only the rows of episodes that ended in success (a cleaner target: the failures of
        a scripted controller are its mistakes).
    :param action_noise: std of the Gaussian noise added to each executed command (command units; clipped to the
        action box); the rows keep the demonstrator's own command (module docstring).
    :param seed: seed of the noise.
    :param actor: what drives the env (e.g. the clone, for DAgger; None: the demonstrator); the rows always keep
        the demonstrator's command for the state the actor reached.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if not (math.isfinite(action_noise) and action_noise >= 0.0):
        raise ValueError(f"action_noise must be a finite std >= 0 (command units), got {action_noise}")
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    n = env.num_envs
    rows: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n)]
    kept_obs: list[np.ndarray] = []
    kept_act: list[np.ndarray] = []
    ended = successes = steps = 0
    obs = env.reset()
    while ended < episodes:
        actions = np.asarray(expert(obs), dtype=np.float32)
        flat = flatten_obs_np(obs)
        for i in range(n):
            rows[i].append((flat[i], actions[i]))
        executed = actions if actor is None else np.asarray(actor(obs), dtype=np.float32)
        if action_noise > 0.0:
            executed = np.clip(executed + action_noise * rng.standard_normal(actions.shape), low, high)
        obs, _, dones, infos = env.step(executed.astype(np.float32))
        steps += n
        for i in np.flatnonzero(dones):
            if ended >= episodes:
                break
            ended += 1
            success = bool(infos[i].get("is_success", False))
            successes += success
            if success or not successful_only:
                kept_obs += [o for o, _ in rows[i]]
                kept_act += [a for _, a in rows[i]]
            rows[i] = []
    obs_dim, act_dim = flatten_obs_np(obs).shape[1], env.action_space.shape[0]
    return Demonstrations(
        np.asarray(kept_obs, dtype=np.float32).reshape(-1, obs_dim),
        np.asarray(kept_act, dtype=np.float32).reshape(-1, act_dim),
        ended,
        successes,
        steps,
    )


def behaviour_clone(
    policy: GoalGaussianPolicy,
    demos: Demonstrations,
    epochs: int = 30,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    seed: int = 0,
    fit_normalizer: bool = True,
) -> dict[str, float]:
    """Fit ``policy``'s normalizer and mean network to ``demos`` (in place); returns the fit's figures.

    The normalizer takes the demonstrations' statistics first (the mean is fitted to what the policy will see;
    ``fit_normalizer=False``: the caller merged the rows it had not seen yet); the log-std is left alone
    (``clone_into`` sets it). Mean squared error of the mean against the demonstrated actions, summed over action
    dims, minibatches drawn with a generator seeded by ``seed``.
    """
    if epochs < 1 or batch_size < 1 or not (math.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(
            f"behaviour cloning needs epochs >= 1, batch_size >= 1 and a learning rate > 0, got {epochs}, "
            f"{batch_size}, {learning_rate}"
        )
    device = policy.device
    obs = th.as_tensor(demos.observations, device=device)
    act = th.as_tensor(demos.actions, device=device)
    if obs.shape[1] != policy.obs_dim or act.shape[1] != policy.action_dim:
        raise ValueError(
            f"demonstrations are {obs.shape[1]}-D observations and {act.shape[1]}-D actions; the policy takes "
            f"{policy.obs_dim} and {policy.action_dim}: collect them on the env the policy trains on"
        )
    if fit_normalizer:
        policy.update_normalizer(obs)
    optimizer = th.optim.Adam(policy.mean_net.parameters(), lr=learning_rate)
    generator = th.Generator().manual_seed(seed)
    losses: list[float] = []
    for epoch in range(epochs):
        order = th.randperm(len(obs), generator=generator).to(device)
        total = 0.0
        for start in range(0, len(obs), batch_size):
            idx = order[start : start + batch_size]
            mean = policy.mean_net(policy._normalize(obs[idx]))
            loss = (mean - act[idx]).square().sum(-1).mean()
            if not th.isfinite(loss):
                raise FloatingPointError(f"behaviour cloning loss is {loss.item()} at epoch {epoch + 1}")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        losses.append(total / len(obs))
    return {"rows": float(len(obs)), "mse_first_epoch": losses[0], "mse_last_epoch": losses[-1]}


def clone_into(
    model: Any,
    demos: Demonstrations,
    log_std: float,
    epochs: int = 30,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
) -> dict[str, float]:
    """Behaviour-clone ``model.policy`` (a GRPO model), set its log-std to ``log_std`` on every action dim, and make
    the result GRPO's KL reference (``reset_reference``: with ``beta > 0`` and ``ref_update_interval=0`` the
    fine-tuning stays anchored to it). Returns the fit's figures and the demonstrations' counts."""
    if not math.isfinite(log_std):
        raise ValueError(f"log_std must be finite, got {log_std}")
    figures = behaviour_clone(model.policy, demos, epochs, batch_size, learning_rate, seed=int(model.seed or 0))
    with th.no_grad():
        model.policy.log_std.fill_(log_std)
    model.reset_reference()
    return {
        **figures,
        "episodes": float(demos.episodes),
        "successes": float(demos.successes),
        "env_steps": float(demos.env_steps),
    }


def joined(first: Demonstrations, second: Demonstrations) -> Demonstrations:
    """Both sets of rows, with their episodes, successes and env steps summed."""
    return Demonstrations(
        np.concatenate([first.observations, second.observations]),
        np.concatenate([first.actions, second.actions]),
        first.episodes + second.episodes,
        first.successes + second.successes,
        first.env_steps + second.env_steps,
    )


def dagger_rounds(
    model: Any,
    demos: Demonstrations,
    env: Any,
    expert: Expert,
    rounds: int,
    episodes: int,
    epochs: int = 15,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    action_noise: float = 0.0,
) -> tuple[Demonstrations, list[dict[str, float]]]:
    """DAgger after a clone (module docstring): ``rounds`` times, run ``model``'s deterministic policy on ``env`` for
    ``episodes`` episodes (with ``action_noise`` on each executed command) while ``expert`` labels each state; join
    every row (successful or not: the labels are the demonstrator's) to ``demos`` and fit ``model.policy`` again
    (``epochs`` passes, continuing from its weights). Returns all the rows and each round's fit figures."""
    if rounds < 0 or episodes < 1:
        raise ValueError(f"DAgger needs rounds >= 0 and episodes >= 1 per round, got {rounds} and {episodes}")

    def clone_acts(obs: Any) -> np.ndarray:
        return model.predict(obs, deterministic=True)[0]

    seed = int(model.seed or 0)
    figures = []
    for index in range(rounds):
        visited = collect_demonstrations(
            env, expert, episodes, False, action_noise, seed=seed + index + 1, actor=clone_acts
        )
        demos = joined(demos, visited)
        model.policy.update_normalizer(th.as_tensor(visited.observations, device=model.policy.device))
        fit = behaviour_clone(
            model.policy, demos, epochs, batch_size, learning_rate, seed=seed + index + 1, fit_normalizer=False
        )
        figures.append({**fit, "successes": float(visited.successes), "episodes": float(visited.episodes)})
    return demos, figures
