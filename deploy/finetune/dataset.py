"""Tick logs -> logged episodes for the fine-tuner (``robot_grpo.finetune_data``).

Reads the runtime's crash-tolerant tick log (``deploy.runtime.ticklog``), cuts it into episodes by episode id
and turns each into transitions with :func:`robot_grpo.finetune_data.episode_from_ticks`. Ticks where the filter
intervened are counted per episode, which the gate compares. Episodes the policy did not drive throughout are
skipped and counted (``LogDataset.skipped_*``): a held tick, a safe stop, a policy fault (the runtime held in the
policy's place and logged the hold as its proposal), NaN / inf in an observation or an action, damage in the log
next to or inside the episode (the reader skipped bytes there: ticks may be missing), and - given the id of the
package being fine-tuned - an episode another policy drove (a hot swap mid-run, a log folder holding the logs of
earlier packages, a version 1 log that names none): its actions are not this policy's samples.

Which action GRPO trains on (``action``):

- ``"sent"`` (default): the command the safety filter let through, what the robot executed. Each outcome is
  credited to the action that caused it. Where the filter changed the proposal (clip, rate limit, barrier) the
  action was not drawn from the policy, so its ratio is off-policy there; the clipped ratio bounds the step. As
  with a shield that hands its own action to the learner, the policy learns to propose what the filter allows;
- ``"proposed"``: the sample the policy drew (exact on-policy log-probabilities; the filter is part of the
  environment). On a drifted robot whose barrier changes a third of the commands, the outcome then often belongs
  to a different action than the one credited: measured on the demo's drift (delay 6, gain x1.5, 128 line
  episodes, 10 updates), fine-tuning on proposals took the gate's success on the drifted robot from 0.79 to
  0.62 and on sent commands held it at 0.78 (``README.md``, demo).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from deploy.contract import ObservationContract
from deploy.runtime.safety import POLICY_FAULT
from deploy.runtime.tick_record import TickRecord
from deploy.runtime.ticklog import scan_ticklog, split_episodes, stack_field, warn_damage
from robot_grpo.finetune_data import LoggedEpisode, episode_from_ticks

MIN_EPISODE_TICKS = 2  # one transition needs two ticks
TRAINED_ACTIONS = ("sent", "proposed")  # tick record fields GRPO may train on
DEFAULT_TRAINED_ACTION = "sent"


@dataclass
class LogDataset:
    """Episodes read from a tick log, with what was skipped and why."""

    episodes: list[LoggedEpisode] = field(default_factory=list)
    n_records: int = 0
    skipped_wrong_shape: int = 0  # episodes whose observations do not match the contract
    skipped_held: int = 0  # episodes with ticks the runtime held without asking the policy (stale, implausible state)
    skipped_stopped: int = 0  # episodes that ended in a safe stop
    skipped_policy_fault: int = 0  # episodes with ticks where the policy failed and the runtime held in its place
    skipped_nonfinite: int = 0  # episodes with NaN / inf in an observation or the trained action
    skipped_damaged: int = 0  # episodes a damaged stretch of the log touches (records of them may be missing)
    skipped_other_policy: int = 0  # episodes with a tick another policy (or an unnamed one) was asked on
    other_policies: Counter[str] = field(default_factory=Counter)  # policy id -> ticks of skipped episodes ("": none)

    def skipped(self) -> dict[str, int]:
        """Episodes skipped, by reason (the ``skipped_*`` counts without the prefix), JSON-ready."""
        names = [name for name in vars(self) if name.startswith("skipped_")]
        return {name.removeprefix("skipped_"): getattr(self, name) for name in names}

    @property
    def interventions_per_episode(self) -> float:
        """Mean number of ticks per episode where the safety filter changed the proposal."""
        if not self.episodes:
            return 0.0
        return float(np.mean([ep.interventions for ep in self.episodes]))


def episodes_from_records(
    records: list[TickRecord],
    contract: ObservationContract,
    keep_stopped: bool = False,
    action: str = DEFAULT_TRAINED_ACTION,
    damage_at: Sequence[int] = (),
    policy_id: str | None = None,
) -> LogDataset:
    """Cut tick records into logged episodes (see the module docstring).

    :param records: tick records in log order.
    :param contract: the running policy's contract (checks the flat observation layout).
    :param keep_stopped: keep episodes that ended in a safe stop (default: skip them, they were cut short by
        the safety layer and their last ticks are holds, not the policy's doing). Episodes with a held tick, a
        policy fault or a NaN / inf value are always skipped (counted in the result).
    :param action: the action to train on, ``"sent"`` or ``"proposed"`` (see the module docstring).
    :param damage_at: where the log reader skipped damaged bytes (``TickLogScan.damage_at``: the index of the record
        read after each stretch). An episode with such a place between its records, just before its first or just
        after its last is skipped: its ticks may be missing, and the ticks either side would be stitched into one
        transition whose motion the lost command made.
    :param policy_id: keep only episodes every tick of which names this policy (``PolicyPackage.policy_id`` of the
        package being fine-tuned); None keeps episodes whoever drove them.
    """
    check_trained_action(action)
    out = LogDataset(n_records=len(records))
    index = {id(r): i for i, r in enumerate(records)} if damage_at else {}
    for ticks in split_episodes(records, min_length=MIN_EPISODE_TICKS):
        if index and _touches(damage_at, index[id(ticks[0])], index[id(ticks[-1])]):
            out.skipped_damaged += 1
            continue
        if any(t.obs_flat.size == 0 for t in ticks):  # a held tick: no observation, not the policy's doing
            out.skipped_held += 1
            continue
        obs = stack_field(ticks, "obs_flat")
        actions = stack_field(ticks, action)
        if obs.shape[1] != contract.flat_dim or actions.shape[1] != contract.action_dim:
            out.skipped_wrong_shape += 1
            continue
        if not keep_stopped and any(t.stop for t in ticks):
            out.skipped_stopped += 1
            continue
        if policy_id is not None and any(t.policy_id != policy_id for t in ticks):
            out.skipped_other_policy += 1
            out.other_policies.update(t.policy_id for t in ticks if t.policy_id != policy_id)
            continue
        if any(POLICY_FAULT in t.reasons for t in ticks):  # the logged proposal there is the runtime's hold
            out.skipped_policy_fault += 1
            continue
        if not (np.all(np.isfinite(obs)) and np.all(np.isfinite(actions))):
            out.skipped_nonfinite += 1
            continue
        intervened = np.array([bool(t.reasons) for t in ticks])
        out.episodes.append(
            episode_from_ticks(
                ticks[0].episode_id,
                obs,
                actions,
                contract.goal_dim,
                interventions=int(intervened.sum()),
                intervened=intervened,
            )
        )
    return out


def _touches(damage_at: Sequence[int], first: int, last: int) -> bool:
    """Whether a damaged stretch lies between records ``first`` and ``last`` (indices) or right next to them."""
    return any(first <= at <= last + 1 for at in damage_at)


def check_trained_action(action: str) -> None:
    """Refuse an unknown trained-action name, naming the choices."""
    if action not in TRAINED_ACTIONS:
        raise ValueError(f"the action to train on must be one of {TRAINED_ACTIONS}, got {action!r}")


def load_log_dataset(
    path: str | Path,
    contract: ObservationContract,
    keep_stopped: bool = False,
    action: str = DEFAULT_TRAINED_ACTION,
    policy_id: str | None = None,
) -> LogDataset:
    """Read a tick log (a log file, or a folder of ``*.mcap`` logs) into a :class:`LogDataset`; ``action``: the
    tick record field to train on (see the module docstring); ``policy_id``: keep only the episodes that policy
    drove (see :func:`episodes_from_records`).

    :raises ValueError: no episode matches the contract, or ``policy_id`` drove none of them (the message names
        the ids that did)."""
    check_trained_action(action)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"tick log {path} does not exist; point the fine-tuner at the runtime's log folder")
    scan = warn_damage(scan_ticklog(path), path)
    dataset = episodes_from_records(scan.records, contract, keep_stopped, action, scan.damage_at, policy_id)
    if dataset.skipped_wrong_shape and not dataset.episodes:
        raise ValueError(
            f"{path}: no episode matches the contract {contract.name!r} (flat_dim {contract.flat_dim}, action_dim "
            f"{contract.action_dim}); was it logged by a different policy?"
        )
    if dataset.skipped_other_policy and not dataset.episodes:
        names = dataset.other_policies.items()
        seen = ", ".join(
            f"{pid[:12] or '(no id: a version 1 log, or a backend run without one)'} ({n} ticks)" for pid, n in names
        )
        raise ValueError(
            f"{path}: none of its {dataset.skipped_other_policy} episodes was driven by the package being fine-tuned "
            f"(policy id {policy_id[:12]}...); they name {seen}. Run the robot on the store's current package "
            "(robot-grpo run) to log episodes of it"
        )
    return dataset
