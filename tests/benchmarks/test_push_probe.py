"""Which runs each probe of benchmarks/push_probe.py makes, and its refusal of a variant it does not have."""

import pytest

from benchmarks.learning import TASKS, grpo_demonstrations, grpo_hyperparameters
from benchmarks.push_probe import CLONE_FINE_TUNING_KEYS, DEFAULT_VARIANTS, demonstrations, hyperparameters, probe_names


def test_each_probe_defaults_to_its_own_runs():
    assert probe_names("variants", None) == list(DEFAULT_VARIANTS)
    assert probe_names("fixed-goal", None) == ["grpo", "ppo", "scripted", "zero"]
    assert probe_names("directions", None) == []
    assert probe_names("variants", ["launch_file_restart_0.5"]) == ["launch_file_restart_0.5"]


@pytest.mark.parametrize(
    ("probe", "variants", "message"),
    [
        ("variants", ["scripted"], "--probe variants has no variant scripted"),
        ("fixed-goal", ["launch_file"], "--probe fixed-goal has no variant launch_file; it runs grpo, ppo"),
        ("directions", ["launch_file"], "takes no --variants"),
    ],
)
def test_a_variant_the_probe_does_not_have_is_refused(probe: str, variants: list[str], message: str):
    with pytest.raises(ValueError, match=message):
        probe_names(probe, variants)


def test_a_variant_merges_its_buffer_options_into_the_launch_files():
    hyper = hyperparameters("launch_file_future_16")
    base = hyperparameters("launch_file")
    assert hyper["rollout_buffer_kwargs"] == {
        **base.get("rollout_buffer_kwargs", {}),
        "hindsight_strategy": "future",
        "n_sampled_goal": 16,
    }
    assert {k: v for k, v in hyper.items() if k != "rollout_buffer_kwargs"} == {
        k: v for k, v in base.items() if k != "rollout_buffer_kwargs"
    }


def test_the_probes_learn_from_scratch_unless_a_variant_clones():
    base = hyperparameters("launch_file")
    assert not set(CLONE_FINE_TUNING_KEYS) & set(base)  # the launch file's clone fine-tuning is not a probe's
    assert demonstrations("launch_file") is None
    clone = hyperparameters("launch_file_clone")
    assert {k: clone[k] for k in CLONE_FINE_TUNING_KEYS} == grpo_hyperparameters_of_launch_file()
    assert demonstrations("launch_file_clone") == grpo_demonstrations(TASKS["push"])
    assert demonstrations("launch_file_clone_clean_demonstrations")["action_noise"] == 0.0


def grpo_hyperparameters_of_launch_file():
    hyper = grpo_hyperparameters(TASKS["push"])
    return {k: hyper[k] for k in CLONE_FINE_TUNING_KEYS}
