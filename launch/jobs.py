"""The launch-file schema of every job, and loading a launch file (yaml + stdlib only).

A launch file names its job and gives that job's sections::

    job: train
    name: fetch_k2
    env: {id: DelayedFetchReach-v0, delay: 2}
    train: {total_timesteps: 16000, seed: 0}

Every run writes its resolved config (defaults filled in) as ``resolved_config.yaml`` next to its outputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from deploy.contract import MAX_DELAY_STEPS
from deploy.robot_spec_sections import SAFE_NAME
from deploy.runtime.package_names import ONNX_VARIANTS
from launch.demonstrations import DEMONSTRATIONS, DEMONSTRATOR_ENVS
from launch.robot_jobs import CELL_JOB, DEFAULT_PACKAGE, ROBOT, RUN_JOB
from launch.schema import Field, LaunchError, Section, validate

JOBS = ("train", "eval", "export", "run", "cell", "calibrate", "finetune", "demo", "population", "campaign")
ENV_IDS = (
    "DelayedFetchReach-v0",
    "PointReach-v0",
    "DelayedFetchPush-v0",
    "DelayedFetchPushRobot-v0",
    "DelayedFetchPickAndPlace-v0",
    "DelayedFetchSlide-v0",
    "TwoArmCell-v0",
)
CELL_ENV_ID = "TwoArmCell-v0"  # the two-arm cell (launch.cell_training imports it; this module loads without torch)
OBJECT_TASK_IDS = ("DelayedFetchPush-v0", "DelayedFetchPickAndPlace-v0", "DelayedFetchSlide-v0")
MAX_APPROACH_COEF = 100.0  # reward per metre; the sparse reward is -1 per step, so far above any useful weight
SCALE_BACKENDS = ("threaded", "ray")
DEFAULT_CHECKPOINT = "shipped:models/default_checkpoint.zip"  # shipped: found from any folder (deploy.shipped)

ENV = Section(
    {
        "id": Field("str", "DelayedFetchReach-v0", choices=ENV_IDS, doc="registered env id"),
        "delay": Field(
            "int", None, low=0, high=MAX_DELAY_STEPS, nullable=True, doc="override: fixed delay, control steps"
        ),
        "delay_range": Field(
            "list[int]", None, length=2, low=0, high=MAX_DELAY_STEPS, nullable=True, doc="override: [low, high] steps"
        ),
        "obs_noise_std_m": Field(
            "float", None, low=0.0, high=0.1, nullable=True, doc="override: position noise, metres"
        ),
        "distance_threshold": Field("float", 0.05, low=1e-3, high=0.5, doc="success radius, metres"),
        "approach_coef": Field(
            "float",
            None,
            low=0.0,
            high=MAX_APPROACH_COEF,
            nullable=True,
            doc="object tasks: reward per metre of new closest gripper-to-object approach (a training signal)",
        ),
        "near_goal_share": Field(
            "float",
            None,
            low=0.0,
            high=1.0,
            nullable=True,
            doc="push tasks, train job: share of training episodes that start near the goal (envs.near_goal_starts); "
            "evaluation keeps the task's own starts",
        ),
        "calibration": Field(
            "path",
            None,
            nullable=True,
            doc="robot spec file: delay and noise (default shipped:calibration/sim_fetch.yaml)",
        ),
        "safety_spec": Field(
            "path",
            None,
            nullable=True,
            doc="object tasks and TwoArmCell-v0: robot spec file whose safety filter (and in the two-arm cell the "
            "separation barrier) each command passes (envs.safety_shield, envs.cell_shield): train for the cell the "
            "policy will run on",
        ),
        "min_separation_m": Field(
            "float", None, low=0.02, high=0.5, nullable=True, doc="TwoArmCell-v0: closest allowed grippers, metres"
        ),
        "proximity_coef": Field(
            "float", None, low=0.0, high=10.0, nullable=True, doc="TwoArmCell-v0: proximity term, reward per step"
        ),
    },
    doc="the simulated task",
)

TRAIN = Section(
    {
        "total_timesteps": Field("int", 16_000, low=1, doc="env steps"),
        "seed": Field("int", 0, low=0),
        "target_success": Field("float", 0.95, low=0.0, high=1.0, doc="stop early at this eval success"),
        "eval_episodes": Field("int", 30, low=1, doc="deterministic episodes per evaluation"),
        "env_threads": Field(
            "int", 2, low=1, high=64, doc="threads that step the training envs (same result for any number)"
        ),
        "hyperparameters": Field("mapping", {}, doc="GRPO constructor arguments, checked against its signature"),
        "eval_every": Field(
            "int", None, low=1, nullable=True, doc="TwoArmCell-v0: cell steps between evaluations (null: every update)"
        ),
        "demonstrations": DEMONSTRATIONS,
    }
)

SCALE = Section(
    {
        "backend": Field(
            "str",
            "threaded",
            choices=SCALE_BACKENDS,
            doc="threaded: envs on this machine; ray: rollouts on Ray workers",
        ),
        "workers": Field(
            "int", None, low=1, high=4096, nullable=True, doc="Ray rollout workers, one CPU each; null = every CPU"
        ),
        "address": Field(
            "str", None, nullable=True, doc="Ray head (host:port of `ray start --head`); null = a local Ray"
        ),
        "auth_token_file": Field(
            "path",
            None,
            nullable=True,
            doc="the cluster's Ray token file; null = RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token",
        ),
    },
    doc="where the rollouts run (see README: running on a cluster)",
)

MUTATIONS = Section(
    {
        "learning_rate": Field("list[float]", [1e-4, 1e-3], length=2, low=1e-7, high=1.0, doc="log-uniform range"),
        "clip_range": Field("list[float]", [0.1, 0.3], length=2, low=0.01, high=0.9, doc="uniform range"),
        "ent_coef": Field("list[float]", [0.0, 0.01], length=2, low=0.0, high=1.0, doc="uniform range"),
        "group_size": Field("list[int]", [4, 6, 8, 12], low=2, high=256, doc="group sizes a member may use"),
    },
    doc="ranges of the hyperparameters PBT perturbs",
)

SCHEMAS: dict[str, Section] = {
    "train": Section({"env": ENV, "train": TRAIN, "scale": SCALE, "output": Field("path", "runs", doc="runs folder")}),
    "population": Section(
        {
            "env": ENV,
            "members": Field("int", 8, low=2, high=64, doc="learners in the population"),
            "total_timesteps": Field("int", 48_000, low=1, doc="env steps per member"),
            "interval_timesteps": Field("int", 4_800, low=1, doc="env steps per member between PBT rounds"),
            "quantile_fraction": Field(
                "float", 0.15, low=0.01, high=0.5, doc="share replaced per round, rounded up (0.15: 2 of 10)"
            ),
            "resample_probability": Field("float", 0.25, low=0.0, high=1.0, doc="explore draws afresh"),
            "envs_per_update": Field(
                "int", 48, low=2, high=4096, doc="group_size x n_groups of every member (n_groups follows)"
            ),
            "mutations": MUTATIONS,
            "hyperparameters": Field("mapping", {}, doc="fixed GRPO arguments of every member"),
            "eval_episodes": Field("int", 30, low=1, doc="deterministic episodes per member and interval (score)"),
            "diversity_states": Field("int", 64, low=2, doc="probe states of the diversity figure"),
            # robot_grpo.scale.population.DEFAULT_MIN_PAIR_JS (a test checks it; this module imports no Ray)
            "min_pair_js": Field(
                "float",
                0.001,
                low=1e-6,
                high=0.69,
                doc="nats: a member closer than this to another is replaced and perturbed away from it",
            ),
            "cpus_per_member": Field("float", 1.0, low=0.1, high=64.0, doc="CPUs Tune reserves per member"),
            "seed": Field("int", 0, low=0),
            "scale": Section(
                {"address": SCALE.fields["address"], "auth_token_file": SCALE.fields["auth_token_file"]},
                doc="the Ray cluster the members run on (null = local)",
            ),
            "output": Field("path", "runs"),
        }
    ),
    "eval": Section(
        {
            "env": ENV,
            "checkpoint": Field("path", required=True, doc="GRPO checkpoint (.zip) or policy package folder"),
            "episodes": Field("int", 100, low=1),
            "seed": Field("int", 0, low=0),
            "output": Field("path", "runs"),
        }
    ),
    "export": Section(
        {
            "env": ENV,
            "checkpoint": Field("path", required=True, doc="GRPO checkpoint (.zip)"),
            "out_dir": Field("path", required=True, doc="policy package folder to write"),
            "parity_observations": Field("int", 10_000, low=100),
            "closed_loop_episodes": Field("int", 100, low=1),
            "variants": Field(
                "list[str]",
                list(ONNX_VARIANTS),
                choices=ONNX_VARIANTS,
                doc="ONNX variants to build, check and ship (fp32 always); leave out one that misses its tolerance",
            ),
            "output": Field("path", "runs"),
        }
    ),
    "run": RUN_JOB,
    "cell": CELL_JOB,
    "calibrate": Section(
        {
            "robot": ROBOT,
            "robot_id": Field("str", "sim_fetch", doc="names the spec file: letters, digits, '.', '_', '-'"),
            "out": Field("path", None, nullable=True, doc="calibration file to write (default runs/<name>/<id>.yaml)"),
            "safe_box_low": Field("list[float]", [1.05, 0.40, 0.40], length=3, doc="metres"),
            "safe_box_high": Field("list[float]", [1.65, 1.10, 0.95], length=3, doc="metres"),
            "repeats": Field("int", 5, low=1, high=100, doc="delay measurements"),
            "state_bounds": Field(
                "mapping", {}, doc="state field -> [low, high] from the robot's model (e.g. finger joint limits)"
            ),
            "output": Field("path", "runs"),
        }
    ),
    "finetune": Section(
        {
            "store": Field("path", "runs/store", doc="package store (current/previous); seeded from package"),
            "package": Field("path", DEFAULT_PACKAGE, doc="the running package, installed first into an empty store"),
            "checkpoint": Field("path", DEFAULT_CHECKPOINT, doc="its GRPO checkpoint (training side)"),
            "logs": Field("path", required=True, doc="tick log file or folder from the runtime (explore: true)"),
            "env": ENV,
            "robot": ROBOT,
            "calibration": Field(
                "path", None, nullable=True, doc="robot spec now (gate: limits, delay, noise; default sim_fetch.yaml)"
            ),
            "ewc_lambda": Field("float", None, low=0.0, nullable=True, doc="EWC strength; 0 = plain; null = default"),
            "n_updates": Field("int", 10, low=1, high=1000, doc="GRPO updates over the logged rows"),
            "trained_action": Field(
                "str",
                "sent",
                choices=("sent", "proposed"),
                doc="logged action trained on: the filter's or the policy's",
            ),
            "intervention_penalty": Field(
                "float",
                None,
                low=0.0,
                high=100.0,
                nullable=True,
                doc="reward subtracted per logged tick the safety filter changed; 0 = task reward only; null = default",
            ),
            "group_size": Field("int", 8, low=2, high=256, doc="attempts at one target that form a GRPO group"),
            "gate_episodes": Field("int", 100, low=10, doc="seeded episodes per task and policy in the gate"),
            "seed": Field("int", 0, low=0),
            "output": Field("path", "runs"),
        }
    ),
    "campaign": Section(
        {
            "runs": Field("int", 200, low=1, high=10_000_000, doc="samples to run: seeds seed .. seed + runs - 1"),
            "seed": Field("int", 0, low=0, doc="the first sample's seed (a failure's seed replays it with runs: 1)"),
            "workers": Field("int", 2, low=1, high=256, doc="worker processes (each holds a robot and the policies)"),
            "period_s": Field("float", 0.01, low=1e-3, high=1.0, doc="loop period; time settings scale with it"),
            "episodes": Field("int", 2, low=1, high=100, doc="goals per run"),
            "episode_steps": Field("int", 15, low=1, high=10_000, doc="policy commands per episode"),
            "max_faults": Field("int", 3, low=0, high=20, doc="robot faults per run, at most"),
            "max_fault_ticks": Field("int", 60, low=1, high=100_000, doc="longest fault, robot ticks"),
            "run_timeout_s": Field("float", 30.0, low=1.0, high=3600.0, doc="a run longer than this is a hang"),
            "package": Field("path", DEFAULT_PACKAGE, doc="the shipped policy package (one of the policies)"),
            "box_tolerance_m": Field("float", 0.001, low=0.0, high=1.0, doc="true gripper outside the box, metres"),
            "output": Field("path", "runs"),
        }
    ),
    "demo": Section(
        {
            "quick": Field("bool", False, doc="start from the shipped default model instead of training"),
            "train": TRAIN,
            "robot": ROBOT,
            "episodes": Field("int", 20, low=1, doc="episodes on the simulated robot per stage"),
            "quick_episodes": Field("int", 12, low=1, doc="episodes per stage with quick: true (3-minute budget)"),
            "shift_delay": Field(
                "int", 6, low=0, high=MAX_DELAY_STEPS, doc="the robot's drifted delay (>= the policy's history)"
            ),
            "shift_action_gain": Field("float", 1.5, low=0.5, high=1.5, doc="the robot's drifted actuator gain"),
            "line_targets": Field("int", 16, low=1, doc="targets of the production line (fine-tuning data)"),
            "line_attempts": Field("int", 8, low=2, doc="attempts per target (a GRPO group)"),
            "finetune_ewc_lambda": Field("float", 10.0, low=0.0, doc="EWC strength of the demo's fine-tuning"),
            "finetune_updates": Field("int", 20, low=1, high=1000, doc="GRPO updates over the line's logs"),
            "gate_episodes": Field("int", 100, low=10),
            "output": Field("path", "runs"),
        }
    ),
}


def validate_launch(data: Any, source: str = "<launch>") -> dict[str, Any]:
    """Validate a parsed launch mapping; returns ``{"job", "name", **resolved job sections}``."""
    try:
        if not isinstance(data, dict):
            raise LaunchError(f"the top level must be a mapping with 'job', got {type(data).__name__}")
        job = data.get("job")
        if job not in SCHEMAS:
            raise LaunchError(f"'job' = {job!r} is not allowed; allowed values: {', '.join(JOBS)}")
        name = data.get("name", job)
        if not isinstance(name, str) or not SAFE_NAME.fullmatch(name):
            raise LaunchError(
                f"'name' = {name!r} is not a safe folder name: use 1-64 letters, digits, '.', '_' or '-', starting "
                "with a letter or digit (it names runs/<name>/)"
            )
        body = {k: v for k, v in data.items() if k not in ("job", "name")}
        resolved = validate(body, SCHEMAS[job])
        _check_consistency(job, resolved)
        robot_id = resolved.get("robot_id")
        if robot_id is not None and not SAFE_NAME.fullmatch(robot_id):
            raise LaunchError(
                f"'robot_id' = {robot_id!r} is not a safe file name: use 1-64 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit (it names the spec file)"
            )
    except LaunchError as err:
        raise LaunchError(f"{source}: {err}") from None
    return {"job": job, "name": name, **resolved}


def _check_consistency(job: str, resolved: dict[str, Any]) -> None:
    """Checks across keys that a per-key schema cannot make."""
    env = resolved.get("env")
    if env is not None and env.get("approach_coef") is not None and env["id"] not in OBJECT_TASK_IDS:
        raise LaunchError(
            f"'env.approach_coef' scores the gripper's approach to an object; {env['id']} has no object. Use it with "
            f"{', '.join(OBJECT_TASK_IDS)}, or remove it"
        )
    if env is not None and env.get("safety_spec") is not None and env["id"] not in (*OBJECT_TASK_IDS, CELL_ENV_ID):
        raise LaunchError(
            f"'env.safety_spec' puts a robot cell's safety filter into an object task or the two-arm cell; "
            f"{env['id']} is neither ({', '.join((*OBJECT_TASK_IDS, CELL_ENV_ID))}). A robot env takes its spec as "
            f"'env.calibration'"
        )
    near_goal = env is not None and env.get("near_goal_share") is not None
    if near_goal and (env["id"] not in OBJECT_TASK_IDS or job != "train"):
        raise LaunchError(
            f"'env.near_goal_share' starts training episodes near the goal of an object task; it is a key of the "
            f"train job on {', '.join(OBJECT_TASK_IDS)} (the {job} job on {env['id']} has no use for it)"
        )
    _check_cell_keys(job, resolved)
    demos = resolved["train"]["demonstrations"] if job == "train" else None
    if demos is not None and demos["episodes"] and env["id"] not in DEMONSTRATOR_ENVS[demos["expert"]]:
        raise LaunchError(
            f"'train.demonstrations.expert' {demos['expert']!r} demonstrates "
            f"{', '.join(DEMONSTRATOR_ENVS[demos['expert']])}, not {env['id']}; set train.demonstrations.episodes "
            "to 0 for this env"
        )
    scale = resolved.get("scale")
    if job == "train" and scale["backend"] != "ray":
        for key in ("workers", "address", "auth_token_file"):
            if scale[key] is not None:
                raise LaunchError(
                    f"'scale.{key}' is only used with scale.backend=ray (got backend {scale['backend']!r})"
                )
    if job == "population":
        if resolved["interval_timesteps"] > resolved["total_timesteps"]:
            raise LaunchError(
                f"'interval_timesteps' = {resolved['interval_timesteps']} exceeds 'total_timesteps' = "
                f"{resolved['total_timesteps']}: PBT needs at least one interval"
            )
        for key in ("learning_rate", "clip_range", "ent_coef"):
            low, high = resolved["mutations"][key]
            if low > high:
                raise LaunchError(f"'mutations.{key}' = {[low, high]} must be [low, high] with low <= high")
        envs = resolved["envs_per_update"]
        uneven = [g for g in resolved["mutations"]["group_size"] if envs % g]
        if uneven:
            raise LaunchError(
                f"'mutations.group_size' {uneven} do not divide envs_per_update = {envs}: every member runs "
                "envs_per_update envs per update (n_groups = envs_per_update / group_size), so members are compared "
                "at equal env steps; use divisors of it"
            )
        if "n_groups" in resolved["hyperparameters"]:
            raise LaunchError("'hyperparameters.n_groups' is set per member as envs_per_update / group_size; remove it")


def _check_cell_keys(job: str, resolved: dict[str, Any]) -> None:
    """Keys that only the two-arm cell takes, and what the cell does not take."""
    env = resolved.get("env")
    if env is None:
        return
    cell = env["id"] == CELL_ENV_ID
    eval_every = resolved.get("train", {}).get("eval_every") if job == "train" else None
    cell_keys = [f"env.{k}" for k in ("min_separation_m", "proximity_coef") if env.get(k) is not None]
    cell_keys += ["train.eval_every"] if eval_every is not None else []
    if not cell and cell_keys:
        key = cell_keys[0]
        raise LaunchError(f"'{key}' is a key of the two-arm cell (env.id {CELL_ENV_ID}); {env['id']} has no use for it")
    if cell and env.get("obs_noise_std_m") is not None:
        raise LaunchError(f"'env.obs_noise_std_m' is not supported by {CELL_ENV_ID} (its arms observe without noise)")
    if cell and job not in ("train", "eval", "export"):
        raise LaunchError(
            f"{CELL_ENV_ID} runs with the train, eval and export jobs; '{job}' is not available for the cell yet"
        )
    if cell and job == "train" and resolved["scale"]["backend"] != "threaded":
        raise LaunchError(f"{CELL_ENV_ID} trains with scale.backend=threaded (the Ray workers run one-agent envs)")


def read_launch_yaml(path: str | Path) -> Any:
    """The parsed YAML of a launch file (not yet validated)."""
    path = Path(path)
    if not path.is_file():
        raise LaunchError(f"launch file {path} does not exist (see launch/*.yaml for examples)")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise LaunchError(f"{path}: not valid YAML: {err}") from None


def load_launch(path: str | Path) -> dict[str, Any]:
    """Read and validate a launch file."""
    return validate_launch(read_launch_yaml(path), source=str(path))


def write_resolved(config: dict[str, Any], run_dir: Path) -> Path:
    """Write the resolved config next to a run's outputs."""
    run_dir.mkdir(parents=True, exist_ok=True)
    out = run_dir / "resolved_config.yaml"
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    return out
