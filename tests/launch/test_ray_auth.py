"""Finding a cluster's Ray token and naming why a head refuses the driver (no Ray cluster needed: the slow
``test_cluster_ray_start.py`` runs the whole recipe against ``ray start`` nodes)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from launch.ray_auth import (
    ClusterToken,
    auth_failure,
    check_port_open,
    find_cluster_token,
    split_address,
    use_cluster_token,
    version_mismatch,
)
from launch.schema import LaunchError


def home_with_token(tmp_path: Path, token: str = "abc123") -> Path:
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text(token)
    return tmp_path


def test_the_launch_file_wins_then_rays_variables_then_the_default_file(tmp_path):
    (tmp_path / "home").mkdir()
    home = home_with_token(tmp_path / "home")
    own = tmp_path / "cluster_token"
    own.write_text("xyz")
    env = {"HOME": str(home), "RAY_AUTH_TOKEN": "t", "RAY_AUTH_TOKEN_PATH": str(own)}
    assert find_cluster_token(str(own), env) == ClusterToken(f"scale.auth_token_file {own}", own)
    assert find_cluster_token(None, env) == ClusterToken("RAY_AUTH_TOKEN", None)
    del env["RAY_AUTH_TOKEN"]
    assert find_cluster_token(None, env) == ClusterToken(f"RAY_AUTH_TOKEN_PATH {own}", own)
    del env["RAY_AUTH_TOKEN_PATH"]
    default = home / ".ray" / "auth_token"
    assert find_cluster_token(None, env) == ClusterToken(str(default), default)
    default.unlink()
    assert find_cluster_token(None, env) is None


def test_a_launch_file_token_that_is_missing_or_empty_is_refused(tmp_path):
    with pytest.raises(LaunchError, match=r"'scale.auth_token_file' = '.*nope': no token there; copy the head's"):
        find_cluster_token(str(tmp_path / "nope"), {})
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(LaunchError, match="no token there"):
        find_cluster_token(str(empty), {})


def test_a_found_token_turns_token_mode_on_unless_the_user_chose_a_mode(tmp_path):
    own = tmp_path / "t"
    own.write_text("xyz")
    env: dict[str, str] = {}
    assert use_cluster_token(ClusterToken(f"scale.auth_token_file {own}", own), env)
    assert env == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(own)}
    chosen = {"RAY_AUTH_MODE": "disabled"}
    assert not use_cluster_token(ClusterToken("RAY_AUTH_TOKEN", None), chosen)
    assert chosen == {"RAY_AUTH_MODE": "disabled"}
    assert not use_cluster_token(None, {})


@pytest.mark.parametrize("address", ["head", "head:", ":6379", "head:port", "head:70000"])
def test_an_address_that_is_not_host_port_says_so(address):
    with pytest.raises(LaunchError, match="is not host:port"):
        split_address(address)


def test_a_port_where_nothing_listens_is_named_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(LaunchError, match=rf"'scale.address' = '127.0.0.1:{port}': nothing answers there"):
            check_port_open(f"127.0.0.1:{port}", timeout_s=2.0)


def test_versions_other_than_the_heads_are_named():
    import platform

    import ray

    same = {"ray_version": ray.__version__, "python_version": platform.python_version()}
    assert version_mismatch(same) is None and version_mismatch(None) is None
    message = version_mismatch({**same, "ray_version": "2.9.0"})
    assert message is not None and message.startswith(f"the head runs Ray 2.9.0 on Python {same['python_version']}")


def test_a_refused_driver_is_told_whether_it_lacked_the_token_or_had_another(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert "this driver has none" in str(auth_failure("h:1", None))
    assert "refused the Ray token from RAY_AUTH_TOKEN" in str(auth_failure("h:1", ClusterToken("RAY_AUTH_TOKEN", None)))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert "RAY_AUTH_MODE='disabled' turns it off" in str(auth_failure("h:1", ClusterToken("RAY_AUTH_TOKEN", None)))
