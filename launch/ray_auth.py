"""Joining a Ray cluster that was started with ``ray start``: its token, and one-line errors that name the cause.

Ray 2.60 turns token authentication on for a head started with ``ray start --head`` whenever a token exists on
that machine (``~/.ray/auth_token``, written by ``ray get-auth-token --generate`` or by any earlier local
``ray.init()``), and a driver whose ``RAY_AUTH_MODE`` is unset is refused (``InvalidAuthToken``). A driver of this
project therefore looks for the cluster's token itself, in this order:

1. the launch file's ``scale.auth_token_file`` (a file holding the token);
2. ``RAY_AUTH_TOKEN`` (the token itself) or ``RAY_AUTH_TOKEN_PATH`` (a file), Ray's own variables;
3. ``~/.ray/auth_token``, where ``ray start --head`` and ``ray get-auth-token`` keep it.

When it finds one and ``RAY_AUTH_MODE`` is unset, it sets ``RAY_AUTH_MODE=token`` for this process (an explicit
``RAY_AUTH_MODE=disabled`` is respected). Before ``ray.init`` it probes the head: nothing listening at the address,
a token the head refuses, and a Ray or Python version other than the head's each get their own one-line error.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launch.schema import LaunchError

AUTH_MODE_ENV = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
DEFAULT_TOKEN_FILE = Path("~/.ray/auth_token")  # Ray's default token file, on every machine of the cluster
TCP_PROBE_TIMEOUT_S = 5.0  # seconds to wait for the head's port to accept a connection
START_HEAD = "start the head with `ray start --head --port=6379` and pass <head-ip>:6379"


@dataclass(frozen=True)
class ClusterToken:
    """Where the driver's Ray token comes from (the token itself is never printed).

    :param source: what the user set, for error messages ("scale.auth_token_file /x", "RAY_AUTH_TOKEN", ...).
    :param path: the token file, or None when the token is in ``RAY_AUTH_TOKEN``.
    """

    source: str
    path: Path | None


def find_cluster_token(auth_token_file: str | None, environ: dict[str, str] | None = None) -> ClusterToken | None:
    """The token this driver will present (see the module docstring for the order), or None when there is none.

    :param auth_token_file: the launch file's ``scale.auth_token_file`` (None: not set).
    :param environ: the environment to read (None: ``os.environ``).
    :raises LaunchError: ``auth_token_file`` names a file that does not exist or is empty.
    """
    env = os.environ if environ is None else environ
    if auth_token_file is not None:
        path = Path(auth_token_file).expanduser()
        if not path.is_file() or not path.read_text().strip():
            raise LaunchError(
                f"'scale.auth_token_file' = {auth_token_file!r}: no token there; copy the head's ~/.ray/auth_token "
                "to this machine (or run `ray get-auth-token` on the head) and point the key at it"
            )
        return ClusterToken(f"scale.auth_token_file {path}", path)
    if env.get(TOKEN_ENV):
        return ClusterToken(TOKEN_ENV, None)
    if env.get(TOKEN_PATH_ENV):
        path = Path(env[TOKEN_PATH_ENV]).expanduser()
        return ClusterToken(f"{TOKEN_PATH_ENV} {path}", path)
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    default = home / DEFAULT_TOKEN_FILE.relative_to("~")
    if default.is_file() and default.read_text().strip():
        return ClusterToken(f"{default}", default)
    return None


def use_cluster_token(token: ClusterToken | None, environ: dict[str, str] | None = None) -> bool:
    """Point Ray at ``token`` for this process and the processes it starts; returns whether token auth is on.

    Sets ``RAY_AUTH_TOKEN_PATH`` for a launch-file token and ``RAY_AUTH_MODE=token`` unless the user set a mode.
    When Ray is already imported its cached configuration and token are refreshed (as Ray itself does when it
    turns token auth on for a local cluster).
    """
    env = os.environ if environ is None else environ
    if token is None:
        return env.get(AUTH_MODE_ENV, "").lower() == "token"
    if token.source.startswith("scale.auth_token_file"):
        env[TOKEN_PATH_ENV] = str(token.path)
    env.setdefault(AUTH_MODE_ENV, "token")
    if environ is None and "ray" in sys.modules:
        _refresh_ray_auth_config()
    return env[AUTH_MODE_ENV].lower() == "token"


def _refresh_ray_auth_config() -> None:
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` -> (host, port), or a LaunchError that says what a Ray address looks like."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise LaunchError(f"'scale.address' = {address!r} is not host:port; {START_HEAD}")
    return host, int(port)


def check_port_open(address: str, timeout_s: float = TCP_PROBE_TIMEOUT_S) -> None:
    """Raise a LaunchError naming the address when nothing accepts a TCP connection there within ``timeout_s``."""
    host, port = split_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as err:
        raise LaunchError(
            f"'scale.address' = {address!r}: nothing answers there ({err.strerror or err}); is the head running "
            f"(`ray status` on it) and is port {port} open from this machine? Otherwise {START_HEAD}"
        ) from None


def version_mismatch(cluster_metadata: dict[str, Any] | None) -> str | None:
    """A one-line description of a Ray or Python version that differs from the head's, else None."""
    if not cluster_metadata:
        return None
    import ray

    head_ray, head_python = cluster_metadata.get("ray_version"), cluster_metadata.get("python_version")
    mine_ray, mine_python = ray.__version__, platform.python_version()
    if head_ray == mine_ray and head_python == mine_python:
        return None
    return (
        f"the head runs Ray {head_ray} on Python {head_python}, this driver Ray {mine_ray} on Python {mine_python}; "
        "install the same Ray and Python on every machine (one environment, e.g. `make install`)"
    )


def auth_failure(address: str, token: ClusterToken | None) -> LaunchError:
    """The error for a head that refused this driver's token (or its lack of one)."""
    if token is None:
        return LaunchError(
            f"'scale.address' = {address!r}: the head requires a Ray token and this driver has none; copy the "
            "head's ~/.ray/auth_token to this machine's ~/.ray/auth_token, or set RAY_AUTH_TOKEN or "
            "'scale.auth_token_file' (docs: guides/cluster)"
        )
    mode = os.environ.get(AUTH_MODE_ENV, "")
    if mode.lower() != "token":
        return LaunchError(
            f"'scale.address' = {address!r}: the head requires a Ray token but {AUTH_MODE_ENV}={mode!r} turns it "
            f"off for this driver; unset {AUTH_MODE_ENV} or set it to token"
        )
    return LaunchError(
        f"'scale.address' = {address!r}: the head refused the Ray token from {token.source}; use the head's own "
        "token (its ~/.ray/auth_token, or `ray get-auth-token` on the head)"
    )


def probe_head(address: str, token: ClusterToken | None) -> None:
    """Check that a Ray head at ``address`` accepts this driver: reachable, token accepted, same versions.

    :raises LaunchError: one line naming the cause (address, token, or version).
    """
    check_port_open(address)
    try:  # Ray's own client of the head's GCS (what ray.init uses first); private, so absent in another Ray
        from ray._common.usage.usage_lib import get_cluster_metadata
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError, RpcError
    except ImportError:
        return  # this Ray has no such client: ray.init reports what it finds

    try:
        metadata = get_cluster_metadata(GcsClient(address=address))
    except AuthenticationError:
        raise auth_failure(address, token) from None
    except RpcError as err:
        raise LaunchError(
            f"'scale.address' = {address!r}: something listens there but it is not a Ray head ({err}); {START_HEAD}"
        ) from None
    mismatch = version_mismatch(metadata)
    if mismatch is not None:
        raise LaunchError(f"'scale.address' = {address!r}: {mismatch}")
