"""SlackCollector: no automatic collection during a run; CPython's own schedule runs in the ticks' slack."""

import gc
import weakref

from deploy.runtime.loop_config import LoopConfig
from deploy.runtime.slack_collector import SlackCollector
from tests.deploy.runtime.loop_fixtures import DelayAwareP, robot_spec, run_loop, seeded_goals


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def allocate_past_the_young_threshold() -> list[Node]:
    return [Node() for _ in range(gc.get_threshold()[0] + 1)]


def test_nothing_collects_during_a_tick_and_the_slack_collects_what_is_due():
    assert gc.isenabled()
    collector = SlackCollector()
    collector.start()
    try:
        assert not gc.isenabled()
        lost = cycle()
        kept = allocate_past_the_young_threshold()  # CPython would have collected by now; nothing did
        assert lost() is not None
        collector.after_command()
        assert lost() is None
        assert collector.collections == [1, 0, 0]
        del kept
    finally:
        collector.stop()
    assert gc.isenabled()


def test_a_slack_with_nothing_due_collects_nothing():
    collector = SlackCollector()
    collector.start()  # its full collection leaves every count at 0
    try:
        collector.after_command()
        assert collector.collections == [0, 0, 0]
    finally:
        collector.stop()


def test_older_generations_follow_cpythons_thresholds():
    collector = SlackCollector()
    collector.start()
    try:
        middle = gc.get_threshold()[1]
        for _ in range(middle + 2):  # more young collections than the middle threshold
            kept = allocate_past_the_young_threshold()
            collector.after_command()
            del kept
    finally:
        collector.stop()
    assert collector.collections[1] >= 1
    assert collector.collections[0] > collector.collections[1]


def test_a_disabled_collector_stays_disabled_after_a_run():
    gc.disable()
    try:
        collector = SlackCollector()
        collector.start()
        collector.stop()
        assert not gc.isenabled()
    finally:
        gc.enable()


LITTER = 400  # cycles per policy call: 800 objects, past CPython's young threshold (700) in one call


class LitteringP(DelayAwareP):
    """The P policy that leaves cyclic garbage behind on every call (as a careless backend might)."""

    def __init__(self) -> None:
        super().__init__()
        self.cycles: list[weakref.ref] = []

    def __call__(self, obs):
        self.cycles += [cycle() for _ in range(LITTER)]
        return super().__call__(obs)


def test_the_loop_never_collects_automatically_and_collects_its_garbage_in_the_slack():
    enabled: list[bool] = []
    seen = []

    def on_tick(controller, record):
        enabled.append(gc.isenabled())
        seen[:] = [controller]

    policy = LitteringP()
    config = LoopConfig(period_s=0.01, max_episode_steps=3, max_ticks=60)
    run = run_loop(policy, seeded_goals([0]), config, robot_spec(), on_tick=on_tick)
    assert run.report.episodes
    assert enabled and not any(enabled)
    assert gc.isenabled()
    assert sum(seen[0].collector.collections) >= 1
    older = policy.cycles[:-LITTER]  # all but the last call's litter, which no slack after it may have seen
    assert older and all(ref() is None for ref in older)
