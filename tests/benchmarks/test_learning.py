"""The off-policy peers of benchmarks/learning.py: rl-zoo's settings, the smaller configuration, TQC's own class."""

import pytest

import envs  # noqa: F401  (registers the ids build_model makes)
from benchmarks.learning import SAC_SETTINGS, SMALL_OFF_POLICY, TASKS, build_model, off_policy_settings


def test_the_small_configuration_changes_only_the_network_and_the_batch():
    full = off_policy_settings(TASKS["push"], "tqc_her")
    small = off_policy_settings(TASKS["push"], "tqc_her_small")
    assert full == SAC_SETTINGS["push"]
    assert small == {**SAC_SETTINGS["push"], **SMALL_OFF_POLICY}
    assert small["policy_kwargs"]["net_arch"] == [256, 256] and small["batch_size"] == 256
    assert SAC_SETTINGS["push"]["policy_kwargs"]["net_arch"] == [512, 512, 512]  # the table's copy is left alone


def test_a_small_configuration_on_a_reach_task_is_refused():
    with pytest.raises(ValueError, match="defined for the push settings"):
        off_policy_settings(TASKS["easy"], "sac_her_small")


@pytest.mark.parametrize(("variant", "algorithm"), [("tqc_her", "TQC"), ("sac_her_small", "SAC")])
def test_each_peer_is_built_with_its_own_algorithm_and_hindsight(variant: str, algorithm: str):
    pytest.importorskip("sb3_contrib")
    model = build_model(TASKS["push"], variant, seed=0)
    assert type(model).__name__ == algorithm
    assert type(model.replay_buffer).__name__ == "HerReplayBuffer"
    assert model.batch_size == off_policy_settings(TASKS["push"], variant)["batch_size"]
