"""enter_realtime and pin_threads: every thread they changed is restored, also when the OS refuses one of them."""

import os

import pytest

from deploy.runtime import realtime
from deploy.runtime.realtime import enter_realtime, pin_threads


class FakeScheduler:
    """os.sched_* on a table of threads; refuses SCHED_FIFO for the thread ids in ``refuse``."""

    def __init__(self, refuse: set[int]) -> None:
        self.policies: dict[int, int] = {}
        self.refuse = refuse

    def getscheduler(self, tid: int) -> int:
        return self.policies.get(tid, os.SCHED_OTHER)

    def getparam(self, tid: int) -> os.sched_param:
        return os.sched_param(0)

    def setscheduler(self, tid: int, policy: int, param: os.sched_param) -> None:
        if policy == os.SCHED_FIFO and tid in self.refuse:
            raise PermissionError(1, "Operation not permitted")
        self.policies[tid] = policy


@pytest.fixture
def scheduler(monkeypatch):
    fake = FakeScheduler(refuse={12})
    monkeypatch.setattr(realtime.os, "sched_getscheduler", fake.getscheduler)
    monkeypatch.setattr(realtime.os, "sched_getparam", fake.getparam)
    monkeypatch.setattr(realtime.os, "sched_setscheduler", fake.setscheduler)
    return fake


def test_the_caller_and_its_helpers_are_switched_and_restored(scheduler):
    restore = enter_realtime(10, threads=(11,))
    assert scheduler.policies == {0: os.SCHED_FIFO, 11: os.SCHED_FIFO}
    restore()
    assert scheduler.policies == {0: os.SCHED_OTHER, 11: os.SCHED_OTHER}


def test_a_refused_helper_restores_the_threads_already_switched(scheduler):
    with pytest.raises(PermissionError, match="CAP_SYS_NICE"):
        enter_realtime(10, threads=(11, 12))
    assert scheduler.policies == {0: os.SCHED_OTHER, 11: os.SCHED_OTHER}


def test_no_priority_changes_nothing(scheduler):
    enter_realtime(None, threads=(11,))()
    assert scheduler.policies == {}


class FakeAffinity:
    """os.sched_{get,set}affinity on a table of threads of a 2-CPU machine."""

    def __init__(self) -> None:
        self.cpus: dict[int, set[int]] = {}

    def get(self, tid: int) -> set[int]:
        return set(self.cpus.get(tid, {0, 1}))

    def set(self, tid: int, cpus: set[int]) -> None:
        self.cpus[tid] = set(cpus)


@pytest.fixture
def affinity(monkeypatch):
    fake = FakeAffinity()
    monkeypatch.setattr(realtime.os, "sched_getaffinity", fake.get)
    monkeypatch.setattr(realtime.os, "sched_setaffinity", fake.set)
    return fake


def test_the_loop_and_its_policy_thread_are_pinned_to_one_cpu_and_freed_after(affinity):
    restore = pin_threads(1, threads=(11,))
    assert affinity.cpus == {0: {1}, 11: {1}}
    restore()
    assert affinity.cpus == {0: {0, 1}, 11: {0, 1}}


def test_a_cpu_the_process_may_not_use_is_refused_with_the_ones_it_may(affinity):
    with pytest.raises(ValueError, match=r"CPU 5 is not one this process may run on \(\[0, 1\]\)"):
        pin_threads(5)
    assert affinity.cpus == {}
