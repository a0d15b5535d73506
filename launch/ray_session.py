"""The Ray connection of a job: join an existing cluster (``scale.address``) or start a local Ray.

A local Ray (no address) uses this machine's cores and listens on loopback only. Joining a cluster finds its token
and checks the head first (``launch.ray_auth``), so a refused token, a wrong address and a version mismatch each
end in their own one-line error. When the process is already connected (a test module, a notebook), the job uses
that connection and leaves it open.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from launch.ray_auth import START_HEAD, find_cluster_token, probe_head, use_cluster_token
from launch.schema import LaunchError

LOOPBACK_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's node address is 127.0.0.1 (read at import)


@contextmanager
def ray_connection(address: str | None, auth_token_file: str | None = None) -> Iterator[None]:
    """Connected to Ray for the duration of the block (shut down at the end if this opened it).

    :param address: ``host:port`` of a running head (``ray start --head``), or None for a local Ray.
    :param auth_token_file: the cluster's token file (``scale.auth_token_file``); None: Ray's variables or
        ``~/.ray/auth_token`` (see ``launch.ray_auth``). Unused for a local Ray.
    """
    token = None
    if address is None:
        os.environ.setdefault(LOOPBACK_ONLY_ENV, "0")
    else:
        token = find_cluster_token(auth_token_file)
        use_cluster_token(token)
    import ray

    if ray.is_initialized():
        yield
        return
    if address is None:
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    else:
        probe_head(address, token)
        try:
            ray.init(address=address, log_to_driver=False)
        except (ConnectionError, TimeoutError) as err:
            raise LaunchError(f"'scale.address' = {address!r}: cannot connect to Ray ({err}); {START_HEAD}") from None
    try:
        yield
    finally:
        ray.shutdown()
