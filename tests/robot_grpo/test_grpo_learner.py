"""The GRPO update against the plain loop it stands for, and the learner's device.

The update reads back one finiteness flag per minibatch and keeps its logs as tensors until it ends; the KL
guards run only with ``target_kl``. It must compute what the plain loop computes (minibatches -> loss ->
backward -> clip -> Adam step, logging every minibatch as a float): the same weights to float tolerance and the
same logged means. ``device="auto"`` takes CUDA when there is one; on a CUDA machine the CUDA learner trains to
the CPU learner's weights to float tolerance.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.utils import get_device

import envs  # noqa: F401  (registers PointReach-v0)
from robot_grpo import GRPO
from robot_grpo.buffers import minibatches
from robot_grpo.losses import clip_fraction, grpo_loss

G, N_GROUPS, EP_STEPS = 4, 3, 10
SMALL = {"group_size": G, "n_groups": N_GROUPS, "batch_size": 32, "n_epochs": 3, "policy_kwargs": {"net_arch": [16]}}
UPDATE_STEPS = G * N_GROUPS * EP_STEPS


def model(device: str = "cpu", **overrides) -> GRPO:
    env = make_vec_env("PointReach-v0", n_envs=G * N_GROUPS, seed=0, env_kwargs={"max_episode_steps": EP_STEPS})
    return GRPO("MultiInputPolicy", env, seed=0, device=device, **{**SMALL, **overrides})


def plain_update(m: GRPO) -> dict[str, float]:
    """The update as the plain loop (what the model's update stood for before it was trimmed)."""
    rows, clip = m.rollout_buffer.samples, m.clip_range_schedule(m._current_progress_remaining)
    logs: dict[str, list[float]] = {"approx_kl": [], "clip_fraction": [], "grad_norm": [], "loss": []}
    m.policy.set_training_mode(True)
    for _ in range(m.n_epochs):
        for batch in minibatches(rows, m.batch_size, m._th_gen):
            step = grpo_loss(m.policy, batch, clip, clip, m.beta, m.ent_coef, (), m.bound_coef, m.dual_clip)
            m.policy.optimizer.zero_grad(set_to_none=True)
            step.terms["loss"].backward()
            grad_norm = th.nn.utils.clip_grad_norm_(m.policy.parameters(), m.max_grad_norm)
            m.policy.optimizer.step()
            logs["approx_kl"].append(float(step.approx_kl.detach()))
            logs["clip_fraction"].append(float(clip_fraction(step.ratio, clip, clip)))
            logs["grad_norm"].append(float(grad_norm))
            logs["loss"].append(float(step.terms["loss"].detach()))
    m._n_updates += 1
    return {f"train/{k}": float(np.mean(v)) for k, v in logs.items()}


DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not th.cuda.is_available(), reason="needs CUDA (the GPU check)")),
]


@pytest.mark.parametrize("device", DEVICES)
def test_the_update_trains_to_the_plain_loops_weights_and_logs(device):
    fast, plain = model(device), model(device)
    for m in (fast, plain):
        m.set_logger(Logger(folder=None, output_formats=[]))
        m.learn(UPDATE_STEPS)  # one update each (identical so far), then one rollout more
        _, callback = m._setup_learn(UPDATE_STEPS, None, reset_num_timesteps=False)
        m.collect_rollouts(m.env, callback, m.rollout_buffer)
    assert th.equal(fast.rollout_buffer.samples.observations, plain.rollout_buffer.samples.observations)
    fast.train()
    logged = dict(fast.logger.name_to_value)
    expected = plain_update(plain)
    for (name, a), b in zip(fast.policy.state_dict().items(), plain.policy.state_dict().values(), strict=True):
        th.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    for key, value in expected.items():
        assert logged[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key


def test_a_nonfinite_loss_still_names_its_term_and_leaves_the_weights(tmp_path):
    from robot_grpo import NonFiniteError

    m = model(snapshot_dir=str(tmp_path))
    m.learn(UPDATE_STEPS)
    before = copy.deepcopy(m.policy.state_dict())
    rows = m.rollout_buffer.samples
    bad = rows._replace(advantages=th.full_like(rows.advantages, float("nan")))
    with pytest.raises(NonFiniteError, match="non-finite value in policy_gradient_loss"):
        m.train_on_samples(bad)
    for name, value in m.policy.state_dict().items():
        assert th.equal(value, before[name]), name


def test_auto_takes_cuda_when_there_is_one_and_the_cpu_otherwise():
    m = model(device="auto")
    assert m.device == get_device("auto") == th.device("cuda" if th.cuda.is_available() else "cpu")
    m.learn(2 * UPDATE_STEPS)
    assert m.rollout_buffer.samples.observations.device.type == m.device.type
    assert m.policy.obs_normalizer.mean.device.type == m.device.type


@pytest.mark.skipif(not th.cuda.is_available(), reason="needs a CUDA device (the GPU check runs it)")
def test_a_cuda_learner_scores_a_cpu_rollout_as_the_cpu_learner_does():
    # CUDA draws other random numbers than the CPU from one seed (rollout noise, minibatch order), so the two
    # learners are compared where no draw is made: scoring one rollout (normalizer, log-probs, hindsight goals from
    # the model's numpy generator, advantages)
    cpu, cuda = model(device="cpu"), model(device="cuda")
    cpu.learn(UPDATE_STEPS)
    cuda.policy.load_state_dict(cpu.policy.state_dict())
    cuda.rollout_buffer = cpu.rollout_buffer
    cuda.rollout_buffer.device = cuda.device
    for m in (cpu, cuda):
        m._rng = np.random.default_rng(7)
        m._score_rollout(m.rollout_buffer, True, None)
        rows = m.rollout_buffer.samples
        assert rows.observations.device.type == m.device.type
        if m is cpu:
            expected = [t.clone() for t in rows]
    for a, b in zip(expected, cuda.rollout_buffer.samples, strict=True):
        th.testing.assert_close(a, b.cpu(), rtol=1e-4, atol=1e-5)
