"""GRPO's update: clipped-ratio epochs over training rows, with the KL guards and the NaN/inf checks.

A mixin of :class:`robot_grpo.grpo.GRPO` (the class keeps its settings, policy and logger): ``train`` (after a
rollout) and ``train_on_samples`` (fine-tuning on given rows) both run :meth:`ClippedGroupUpdate._update`;
``reset_reference`` moves the KL reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch as th
from stable_baselines3.common.logger import Logger

from robot_grpo.arguments import check_loss_terms
from robot_grpo.buffers import GroupRolloutSamples, minibatches
from robot_grpo.losses import ExtraLossTerm, clip_fraction, grpo_loss
from robot_grpo.stability import (
    KL_EARLY_STOP,
    KL_OK,
    KL_ROLLBACK,
    LastGood,
    NonFiniteError,
    adapted_beta,
    first_nonfinite,
    first_nonfinite_grad,
    kl_verdict,
    nonfinite_dir,
)
from robot_grpo.stability import write_nonfinite_snapshot as _write_snapshot

ROLLBACK_LR_FACTOR = 0.5  # after a KL rollback (stability.kl_verdict) the lr is halved


class ClippedGroupUpdate:
    """The update step of GRPO (see the module docstring); expects GRPO's attributes."""

    policy: Any
    logger: Any

    def train(self) -> None:
        """One update on the last rollout's rows; the reference policy is refreshed every ``ref_update_interval``."""
        self._update(self.rollout_buffer.samples, self.extra_loss_terms, self._th_gen)
        if self.ref_update_interval > 0 and self._n_updates % self.ref_update_interval == 0:
            self.reset_reference()

    def _bound_log_std(self) -> None:
        """Clamp the policy's log-std into [min_log_std, max_log_std] at the current training progress."""
        progress = self._current_progress_remaining
        with th.no_grad():
            if self.max_log_std_schedule is not None:
                self.policy.log_std.clamp_(max=self.max_log_std_schedule(progress))
            if self.min_log_std_schedule is not None:
                self.policy.log_std.clamp_(min=self.min_log_std_schedule(progress))

    def train_on_samples(
        self,
        samples: GroupRolloutSamples,
        extra_loss_terms: Sequence[ExtraLossTerm] = (),
        generator: th.Generator | None = None,
    ) -> dict[str, float]:
        """One GRPO update on given training rows: fine-tuning on logged episodes, or mixing in fresh sim rows.

        The same loss, clip, KL guards, log-std bounds and learning-rate schedule as :meth:`train`. The rows carry
        their own pi_old and reference log-probs (``robot_grpo.finetune_data.build_finetune_samples`` scores logged
        episodes under the deployed policy; :meth:`rollout_samples` under this one), so the model's reference policy
        is neither read nor refreshed here.

        :param samples: training rows (all tensors on the model's device).
        :param extra_loss_terms: loss terms added for this update only (e.g. an EWC penalty); the model's own
            ``extra_loss_terms`` are not used.
        :param generator: torch generator of the minibatch order (None: the model's own, seeded with ``seed``);
            torch's global RNG is never used.
        :return: the update's ``train/...`` values (also recorded in the logger).
        """
        terms = list(extra_loss_terms)
        check_loss_terms(terms)
        if getattr(self, "_logger", None) is None:  # no learn() yet: record into a logger that writes nothing
            self.set_logger(Logger(folder=None, output_formats=[]))
        return self._update(samples, terms, self._th_gen if generator is None else generator)

    def reset_reference(self) -> None:
        """Make the current policy the KL reference (iterative GRPO does it every ``ref_update_interval`` updates;
        a fine-tuning round once, so that the deployed policy is the reference of the whole round)."""
        self.ref_policy.load_state_dict(self.policy.state_dict())

    def _set_lr(self) -> float:
        lr = self.lr_schedule(self._current_progress_remaining) * self._lr_factor
        for group in self.policy.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _raise_nonfinite(self, name: str, batch: Any, terms: dict[str, th.Tensor], epoch: int) -> None:
        update = self._n_updates + 1
        logs_to_folder = self._custom_logger or self.tensorboard_log is not None  # else SB3's temp folder
        folder = nonfinite_dir(self.snapshot_dir, self.logger.get_dir() if logs_to_folder else None)
        path = _write_snapshot(folder, update, name, self.policy, self.policy.optimizer, batch._asdict(), terms)
        raise NonFiniteError(
            f"non-finite value in {name} at update {update} (epoch {epoch}); weights, optimizer state and the "
            f"offending minibatch were saved to {path} (torch.load(path, weights_only=True))"
        )

    def _update(
        self, rows: GroupRolloutSamples, extra_loss_terms: Sequence[ExtraLossTerm], generator: th.Generator
    ) -> dict[str, float]:
        """Clipped-ratio epochs over ``rows`` with KL guards (early stop, rollback); returns the logged values.

        Per minibatch the loop reads nothing back from the device but one finiteness flag (loss and gradient norm
        together); the logged values stay tensors until the update ends, and the KL guards (which need the
        minibatch's approx KL at once, and a copy of the weights per epoch) run only when ``target_kl`` is set.
        """
        self.policy.set_training_mode(True)
        lr = self._set_lr()
        clip_low = self.clip_range_schedule(self._current_progress_remaining)
        clip_high = self.clip_range_high_schedule(self._current_progress_remaining)
        guard_kl = self.target_kl is not None
        last_good = LastGood()
        logs: dict[str, list[th.Tensor]] = {"approx_kl": [], "clip_fraction": [], "grad_norm": []}
        entropy = self.policy.entropy()
        early_stop, rolled_back, epochs_done = False, False, 0
        for epoch in range(self.n_epochs):
            if guard_kl:
                last_good.capture(self.policy, self.policy.optimizer)
            for batch in minibatches(rows, self.batch_size, generator):
                step = grpo_loss(
                    self.policy,
                    batch,
                    clip_low,
                    clip_high,
                    self.beta,
                    self.ent_coef,
                    extra_loss_terms,
                    self.bound_coef,
                    self.dual_clip,
                )
                entropy = step.terms["entropy"]
                verdict = kl_verdict(float(step.approx_kl.detach()), self.target_kl) if guard_kl else KL_OK
                if verdict == KL_ROLLBACK:  # restore the last good weights, halve the lr, end the update
                    last_good.restore(self.policy, self.policy.optimizer)
                    self._lr_factor *= ROLLBACK_LR_FACTOR
                    lr, rolled_back = self._set_lr(), True
                    if self.verbose >= 1:
                        print(f"GRPO: approx KL {float(step.approx_kl):.4f} > target; rolled back, lr={lr:.2e}")
                    break
                if verdict == KL_EARLY_STOP:
                    early_stop = True
                    break
                terms = step.terms
                self.policy.optimizer.zero_grad(set_to_none=True)
                terms["loss"].backward()
                grad_norm = th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                if not bool(th.isfinite(terms["loss"].detach()) & th.isfinite(grad_norm)):  # the weights are untouched
                    bad = first_nonfinite(terms) or first_nonfinite_grad(self.policy.named_parameters()) or "grad_norm"
                    self._raise_nonfinite(bad, batch, terms, epoch)
                self.policy.optimizer.step()
                logs["approx_kl"].append(step.approx_kl.detach())
                logs["clip_fraction"].append(clip_fraction(step.ratio.detach(), clip_low, clip_high))
                logs["grad_norm"].append(grad_norm.detach())
                for key, value in terms.items():  # losses, kl_ref (when beta > 0), extra terms; entropy logged below
                    if key != "entropy":
                        logs.setdefault(key, []).append(value.detach())
            if early_stop or rolled_back:
                break
            epochs_done += 1

        self._n_updates += 1
        self._bound_log_std()  # after every update, fine-tuning's too
        means = {key: float(th.stack(values).double().mean()) for key, values in logs.items() if values}
        if self.adaptive_beta and "kl_ref" in means:
            assert self.target_kl is not None
            self.beta = adapted_beta(self.beta, means["kl_ref"], self.target_kl)
        record = {f"train/{key}": value for key, value in means.items()}
        record.update(
            {
                "train/entropy_loss": -float(entropy.detach()),  # SB3's key and sign
                "train/std": float(th.exp(self.policy.log_std.detach()).mean()),
                "train/learning_rate": lr,
                "train/beta": self.beta,
                "train/clip_range": clip_low,
                "train/epochs_completed": epochs_done,
                "train/early_stop": int(early_stop),
                "train/rollback": int(rolled_back),
            }
        )
        for key, value in record.items():
            self.logger.record(key, value)
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        return record
