"""The train job's behaviour-cloned start: the launch file's demonstrator run on the training env, cloned into GRPO.

``train.demonstrations`` (``DEMONSTRATIONS`` below, a section of launch.jobs.TRAIN) names the demonstrator and how
many episodes it runs; this module builds it, runs it on ``DEMONSTRATION_ENVS`` copies of the training env (seeded
apart from training's) and hands the rows to ``robot_grpo.behaviour_cloning.clone_into``. The benchmark
(benchmarks/learning.py) and ``robot-grpo train`` both start GRPO this way, so the figures are what the launch file
trains.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from launch.schema import Field, Section

logger = logging.getLogger(__name__)

DEMONSTRATION_ENVS = 50  # env copies the demonstrator steps together
DEMONSTRATION_SEED_OFFSET = 50_000  # the demonstrations' env seeds start at train.seed + this: apart from training's

# The launch file's train.demonstrations (launch.jobs.TRAIN takes it; loads without torch).
# demonstrators() builds each (envs.scripted_*): scripted_push goes over the block (the learning benchmark's),
# scripted_push_around beside it at its height (the push cell's: its safety filter slows every descent to the floor)
DEMONSTRATORS = ("scripted_push", "scripted_push_around", "scripted_pick_and_place")
DEMONSTRATOR_ENVS = {
    "scripted_push": ("DelayedFetchPush-v0",),
    "scripted_push_around": ("DelayedFetchPush-v0",),
    "scripted_pick_and_place": ("DelayedFetchPickAndPlace-v0",),
}
DEMONSTRATIONS = Section(
    {
        "episodes": Field(
            "int", 0, low=0, high=1_000_000, doc="demonstrated episodes cloned before GRPO starts (0: none)"
        ),
        "expert": Field("str", "scripted_push", choices=DEMONSTRATORS, doc="the demonstrator"),
        "action_noise": Field(
            "float", 0.05, low=0.0, high=1.0, doc="std of the noise on each executed command (command units, DART)"
        ),
        "successful_only": Field("bool", True, doc="clone only the episodes that ended in success"),
        "epochs": Field("int", 30, low=1, high=10_000, doc="behaviour-cloning passes over the rows"),
        "batch_size": Field("int", 256, low=1, doc="rows per behaviour-cloning step"),
        "learning_rate": Field("float", 1e-3, low=1e-7, high=1.0, doc="behaviour cloning's Adam step size"),
        "log_std": Field("float", -3.0, low=-10.0, high=2.0, doc="the policy's log-std after cloning (GRPO's noise)"),
        "dagger_rounds": Field(
            "int", 0, low=0, high=100, doc="DAgger rounds after the clone: the clone drives, the demonstrator labels"
        ),
        "dagger_episodes": Field("int", 500, low=1, high=1_000_000, doc="episodes the clone drives per DAgger round"),
        "dagger_epochs": Field("int", 15, low=1, high=10_000, doc="behaviour-cloning passes after each DAgger round"),
    },
    doc="behaviour cloning before GRPO (robot_grpo.behaviour_cloning); its env steps count in the summary",
)


def demonstrators() -> dict[str, Callable[[], Callable[[Any], Any]]]:
    """Name -> factory of each demonstrator ``DEMONSTRATORS`` offers (imports envs: the training side)."""
    from envs.scripted_pick_and_place import ScriptedPickAndPlace
    from envs.scripted_push import ScriptedPush

    return {
        "scripted_push": functools.partial(ScriptedPush, route="over"),
        "scripted_push_around": functools.partial(ScriptedPush, route="around"),
        "scripted_pick_and_place": ScriptedPickAndPlace,
    }


def clone_demonstrations(
    settings: dict[str, Any], env: Any, env_kwargs: dict[str, Any] | None, model: Any, seed: int
) -> dict[str, float] | None:
    """Run the demonstrator of ``settings`` (a resolved ``train.demonstrations``) on ``env`` (an env id or factory, as
    ``make_vec_env`` takes it) and clone it into ``model`` (a GRPO model). None when ``settings`` asks for no
    episodes; else the clone's figures (rows, losses, episodes, successes, env_steps, seconds)."""
    if not settings["episodes"]:
        return None
    from stable_baselines3.common.env_util import make_vec_env

    from robot_grpo.behaviour_cloning import clone_into, collect_demonstrations, dagger_rounds

    start = time.perf_counter()
    expert = demonstrators()[settings["expert"]]()
    demo_env = make_vec_env(
        env, n_envs=DEMONSTRATION_ENVS, seed=seed + DEMONSTRATION_SEED_OFFSET, env_kwargs=env_kwargs
    )
    try:
        demos = collect_demonstrations(
            demo_env,
            expert,
            settings["episodes"],
            successful_only=settings["successful_only"],
            action_noise=settings["action_noise"],
            seed=seed,
        )
        figures = clone_into(
            model,
            demos,
            settings["log_std"],
            epochs=settings["epochs"],
            batch_size=settings["batch_size"],
            learning_rate=settings["learning_rate"],
        )
        if settings["dagger_rounds"]:
            demos, rounds = dagger_rounds(
                model,
                demos,
                demo_env,
                expert,
                settings["dagger_rounds"],
                settings["dagger_episodes"],
                epochs=settings["dagger_epochs"],
                batch_size=settings["batch_size"],
                learning_rate=settings["learning_rate"],
            )
            model.reset_reference()  # GRPO's KL anchors to the clone after its last round
            figures.update(rows=float(len(demos.observations)), mse_last_epoch=rounds[-1]["mse_last_epoch"])
            figures["env_steps"] = float(demos.env_steps)
            figures["dagger_success_last_round"] = rounds[-1]["successes"] / rounds[-1]["episodes"]
    finally:
        demo_env.close()
    figures["seconds"] = time.perf_counter() - start
    logger.info(
        "cloned %s: %d of %d demonstrated episodes succeeded, %d rows, %d env steps, MSE %.4f -> %.4f, %.0f s",
        settings["expert"],
        figures["successes"],
        figures["episodes"],
        figures["rows"],
        figures["env_steps"],
        figures["mse_first_epoch"],
        figures["mse_last_epoch"],
        figures["seconds"],
    )
    return figures
