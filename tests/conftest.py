"""Suite-wide test setup: Ray (the scale-out tests) binds to loopback only, and starts once per test module.

``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray use 127.0.0.1 for its node address instead of the machine's
network address (Ray reads it when it is imported, so it is set here, before any test module imports Ray).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
RAY_TEST_CPUS = 2  # the CI machine's cores: two one-CPU rollout workers


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray with two CPUs for the whole test module (started once: Ray takes seconds to start)."""
    import ray

    ray.init(num_cpus=RAY_TEST_CPUS, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()
