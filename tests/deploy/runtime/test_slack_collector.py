"""SlackCollector: no automatic collection during a run, cycles still collected in the ticks' slack."""

import gc
import weakref

from deploy.runtime.loop_config import LoopConfig
from deploy.runtime.slack_collector import MIDDLE_EVERY_TICKS, OLDEST_EVERY_TICKS, SlackCollector
from tests.deploy.runtime.loop_fixtures import DelayAwareP, robot_spec, run_loop, seeded_goals


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_the_collector_is_off_during_a_run_and_restored_after():
    assert gc.isenabled()
    collector = SlackCollector()
    collector.start()
    try:
        assert not gc.isenabled()
        lost = cycle()
        for _ in range(10_000):  # far past CPython's young threshold: nothing automatic collects the cycle
            Node()
        assert lost() is not None
        collector.after_command()
        assert lost() is None
    finally:
        collector.stop()
    assert gc.isenabled()


def test_older_generations_follow_cpythons_ratios():
    collector = SlackCollector()
    collector.start()
    try:
        for _ in range(OLDEST_EVERY_TICKS):
            collector.after_command()
    finally:
        collector.stop()
    oldest = 1
    middle = OLDEST_EVERY_TICKS // MIDDLE_EVERY_TICKS - oldest
    assert collector.collections == [OLDEST_EVERY_TICKS - middle - oldest, middle, oldest]


def test_a_disabled_collector_stays_disabled_after_a_run():
    gc.disable()
    try:
        collector = SlackCollector()
        collector.start()
        collector.stop()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_loop_collects_in_every_ticks_slack_and_never_automatically():
    enabled: list[bool] = []
    seen = []

    def on_tick(controller, record):
        enabled.append(gc.isenabled())
        seen[:] = [controller]

    config = LoopConfig(period_s=0.01, max_episode_steps=3, max_ticks=30)
    run = run_loop(DelayAwareP(), seeded_goals([0]), config, robot_spec(), on_tick=on_tick)
    assert run.report.episodes
    assert enabled and not any(enabled)
    assert gc.isenabled()
    controller = seen[0]
    assert sum(controller.collector.collections) == controller.tick
