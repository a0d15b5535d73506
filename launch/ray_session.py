"""The Ray connection of a job: join an existing cluster (``scale.address``) or start a local Ray.

A local Ray (no address) uses this machine's cores and listens on loopback only. When the process is already
connected (a test module, a notebook), the job uses that connection and leaves it open.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from launch.schema import LaunchError

LOOPBACK_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's node address is 127.0.0.1 (read at import)


@contextmanager
def ray_connection(address: str | None) -> Iterator[None]:
    """Connected to Ray for the duration of the block (shut down at the end if this opened it).

    :param address: ``host:port`` of a running head (``ray start --head``), or None for a local Ray.
    """
    if address is None:
        os.environ.setdefault(LOOPBACK_ONLY_ENV, "0")
    import ray

    if ray.is_initialized():
        yield
        return
    try:
        if address is None:
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    except (ConnectionError, TimeoutError) as err:
        raise LaunchError(
            f"'scale.address' = {address!r}: cannot connect to Ray ({err}). Start the head with "
            "`ray start --head --port=6379` and pass <head-ip>:6379, or leave scale.address null for a local Ray"
        ) from None
    try:
        yield
    finally:
        ray.shutdown()
