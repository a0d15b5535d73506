"""Launch files: every shipped file validates; bad files give errors naming the key and the allowed values."""

from pathlib import Path

import pytest
import yaml

from launch.cli import apply_overrides, main, resolve_config
from launch.jobs import JOBS, load_launch, validate_launch, write_resolved
from launch.schema import LaunchError

LAUNCH_DIR = Path(__file__).resolve().parents[2] / "launch"


@pytest.mark.parametrize("path", sorted(LAUNCH_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_launch_files_validate(path):
    config = load_launch(path)
    assert config["job"] in JOBS


def test_every_job_has_a_launch_file():
    jobs = {load_launch(p)["job"] for p in LAUNCH_DIR.glob("*.yaml")}
    assert jobs == set(JOBS)


def test_defaults_are_filled_in():
    config = validate_launch({"job": "train"})
    assert config["name"] == "train"
    assert config["train"]["total_timesteps"] == 16_000
    assert config["env"]["id"] == "DelayedFetchReach-v0"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"job": "fly"}, "'job' = 'fly' is not allowed; allowed values: train, eval"),
        (
            {"job": "train", "train": {"gamma": 0.9}},
            "unknown key 'train.gamma'; allowed keys: demonstrations, env_threads, eval_episodes",
        ),
        ({"job": "train", "train": {"seed": -1}}, "'train.seed' = -1 is out of range: it must be >= 0"),
        ({"job": "train", "env": {"id": "CartPole-v1"}}, "'env.id' = 'CartPole-v1' is not allowed"),
        ({"job": "train", "env": {"delay": 9}}, "'env.delay' = 9 is out of range: allowed values are 0 to 8"),
        ({"job": "train", "env": {"delay_range": [1]}}, "'env.delay_range' must have 2 items"),
        ({"job": "run", "robot": {"lockstep": "yes"}}, "'robot.lockstep' must be true or false"),
        ({"job": "run", "backend": "cuda"}, "'backend' = 'cuda' is not allowed; allowed values: ort-cpu, ort-cuda"),
        ({"job": "eval"}, "missing key 'checkpoint'"),
        ({"job": "train", "env": [1, 2]}, "'env' must be a mapping"),
        ({"job": "train", "train": {"total_timesteps": 1.5}}, "'train.total_timesteps' must be an integer"),
        ({"job": "train", "name": "a/b"}, "'name' = 'a/b' is not a safe folder name"),
        ({"job": "run", "explore_std_scale": 0.0}, "'explore_std_scale' = 0.0 is out of range"),
        (
            {"job": "finetune", "logs": "x.mcap", "intervention_penalty": -1.0},
            "'intervention_penalty' = -1.0 is out of range",
        ),
        (
            {"job": "train", "env": {"approach_coef": 5.0}},
            "'env.approach_coef' scores the gripper's approach to an object; DelayedFetchReach-v0 has no object",
        ),
        ({"job": "train", "env": {"id": "DelayedFetchPush-v0", "approach_coef": -1}}, "'env.approach_coef' = -1"),
        (
            {"job": "export", "checkpoint": "m.zip", "out_dir": "p", "variants": ["fp32", "int4"]},
            "'variants[1]' = 'int4' is not allowed; allowed values: fp32, fp16, int8",
        ),
        ({"job": "run", "cpu": -1}, "'cpu' = -1 is out of range"),
        (
            {"job": "train", "env": {"near_goal_share": 0.5}},
            "'env.near_goal_share' starts training episodes near the goal of an object task",
        ),
        ({"job": "train", "env": {"id": "DelayedFetchPush-v0", "near_goal_share": 1.5}}, "'env.near_goal_share' = 1.5"),
        ({"job": "cell", "arm_cpus": [0]}, "'arm_cpus' must have 2 items"),
        ({"job": "cell", "cpu_latency_us": -1}, "'cpu_latency_us' = -1 is out of range"),
        ({"job": "run", "cpu_latency_us": 0.5}, "'cpu_latency_us'"),
        (
            {"job": "train", "env": {"safety_spec": "shipped:calibration/sim_fetch_push.yaml"}},
            "'env.safety_spec' puts a robot cell's safety filter into an object task or the two-arm cell; "
            "DelayedFetchReach-v0",
        ),
        (
            {"job": "train", "env": {"id": "DelayedFetchPush-v0", "safety_spec": "shipped:calibration/nope.yaml"}},
            "'env.safety_spec'",
        ),
    ],
)
def test_bad_launch_data_names_the_key(data, message):
    with pytest.raises(LaunchError) as err:
        validate_launch(data, source="t.yaml")
    assert message in str(err.value)
    assert str(err.value).startswith("t.yaml: ")


def test_malformed_file_names_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("job: train\nenv: {id: [unclosed\n")
    with pytest.raises(LaunchError, match="bad.yaml: not valid YAML"):
        load_launch(bad)
    with pytest.raises(LaunchError, match="does not exist"):
        load_launch(tmp_path / "missing.yaml")


def test_overrides_are_parsed_as_yaml_and_validated():
    raw = apply_overrides({"job": "train"}, ["train.seed=3", "env.delay_range=[1, 3]", "name=x"])
    config = validate_launch(raw)
    assert config["train"]["seed"] == 3
    assert config["env"]["delay_range"] == [1, 3]
    assert config["name"] == "x"
    with pytest.raises(LaunchError, match="expects key.sub=value"):
        apply_overrides({}, ["train.seed"])


def test_subcommand_refuses_a_launch_file_of_another_job(tmp_path):
    other = tmp_path / "run.yaml"
    other.write_text(yaml.safe_dump({"job": "run"}))
    with pytest.raises(LaunchError, match="'job' is 'run' but the subcommand is 'train'"):
        resolve_config("train", str(other), [])


def test_resolved_config_is_written(tmp_path):
    config = validate_launch({"job": "train"})
    path = write_resolved(config, tmp_path / "run")
    assert yaml.safe_load(path.read_text()) == config


def test_cli_bad_key_exits_2_with_message(capsys):
    assert main(["train", "--set", "train.sed=1"]) == 2
    assert "unknown key 'train.sed'" in capsys.readouterr().err


def test_cli_unknown_subcommand_names_the_commands_in_one_line(capsys):
    assert main(["fly"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "unknown command 'fly'; choose from" in captured.err
    for job in JOBS:
        assert job in captured.err


def test_cli_no_subcommand_prints_help(capsys):
    assert main([]) == 2
    assert "usage: robot-grpo" in capsys.readouterr().out


def test_the_baud_rate_default_is_the_links():
    """launch/jobs.py keeps the literal so that it loads without pyserial (training machines); it must not drift."""
    from deploy.wire import DEFAULT_BAUDRATE
    from launch.robot_jobs import ROBOT

    assert ROBOT.fields["baudrate"].default == DEFAULT_BAUDRATE


def test_a_safety_spec_reaches_the_env_as_data_for_workers_in_other_folders():
    from deploy.robot_spec import RobotSpec
    from launch.training import env_kwargs_as_data, env_kwargs_from

    resolved = validate_launch(
        {"job": "train", "env": {"id": "DelayedFetchPush-v0", "safety_spec": "shipped:calibration/sim_fetch_push.yaml"}}
    )
    kwargs = env_kwargs_from(resolved["env"])
    assert kwargs["safety_spec"].endswith("calibration/sim_fetch_push.yaml")  # the task's: in evaluations too
    spec = env_kwargs_as_data("DelayedFetchPush-v0", kwargs)["safety_spec"]
    assert isinstance(spec, RobotSpec) and spec.robot_id == "sim_fetch_push"


def test_training_only_env_keys_stay_out_of_every_evaluation():
    from launch.training import env_kwargs_from

    section = {"id": "DelayedFetchPush-v0", "delay": 2, "approach_coef": 10.0, "near_goal_share": 0.5}
    assert env_kwargs_from(section, training=True) == {"delay": 2, "approach_coef": 10.0, "near_goal_share": 0.5}
    assert env_kwargs_from(section) == {"delay": 2, "approach_coef": 10.0}  # the task's own starts


def test_the_cell_takes_a_safety_spec_and_its_envs_run_behind_the_runtimes_filters():
    from deploy.export.rollouts import make_env
    from launch.training import env_kwargs_as_data, env_kwargs_from

    resolved = validate_launch(
        {"job": "train", "env": {"id": "TwoArmCell-v0", "safety_spec": "shipped:calibration/sim_fetch.yaml"}}
    )
    kwargs = env_kwargs_as_data("TwoArmCell-v0", env_kwargs_from(resolved["env"]))
    env = make_env("TwoArmCell-v0", kwargs)
    env.reset(seed=0)
    assert env.unwrapped.shield is not None
    assert "shield_cut" in env.step(env.action_space.sample() * 0)[4]
