"""hold_cpu_latency: the PM QoS request is one native s32 written to a descriptor held open until released; a device
that is missing or refused says how to fix it; nothing is asked for None."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from deploy.runtime import cpu_latency
from deploy.runtime.cpu_latency import MAX_CPU_LATENCY_US, hold_cpu_latency


def _open_on(path: Path) -> list[int]:
    """This process's descriptors open on ``path``."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == str(path):
                fds.append(int(name))
        except OSError:  # the listing's own descriptor is gone by now
            continue
    return fds


def test_the_request_is_written_and_held_until_released(tmp_path: Path) -> None:
    device = tmp_path / "cpu_dma_latency"
    device.write_bytes(b"")
    release = hold_cpu_latency(0, str(device))
    assert device.read_bytes() == struct.pack("=i", 0)
    assert len(_open_on(device)) == 1  # the request lasts as long as the descriptor is open
    release()
    assert _open_on(device) == []
    release()  # twice is harmless


def test_a_nonzero_bound_is_written_as_microseconds(tmp_path: Path) -> None:
    device = tmp_path / "cpu_dma_latency"
    device.write_bytes(b"")
    release = hold_cpu_latency(20, str(device))
    try:
        assert struct.unpack("=i", device.read_bytes()) == (20,)
    finally:
        release()


def test_none_asks_nothing(tmp_path: Path) -> None:
    device = tmp_path / "absent"
    hold_cpu_latency(None, str(device))()
    assert not device.exists()


@pytest.mark.parametrize("value", [-1, MAX_CPU_LATENCY_US + 1, 1.5, True, "0"])
def test_a_bad_bound_is_refused_before_anything_opens(tmp_path: Path, value) -> None:
    with pytest.raises(ValueError, match="cpu_latency_us must be an integer"):
        hold_cpu_latency(value, str(tmp_path / "never_opened"))


def test_a_missing_device_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no PM QoS CPU latency device; set cpu_latency_us=None"):
        hold_cpu_latency(0, str(tmp_path / "absent"))


def test_a_refused_device_names_the_fix(monkeypatch, tmp_path: Path) -> None:
    def refuse(path, flags):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(cpu_latency.os, "open", refuse)
    with pytest.raises(PermissionError, match="run as root or give the runtime's user write access"):
        hold_cpu_latency(0, str(tmp_path / "device"))


def test_a_short_write_closes_the_descriptor(monkeypatch, tmp_path: Path) -> None:
    device = tmp_path / "cpu_dma_latency"
    device.write_bytes(b"")
    monkeypatch.setattr(cpu_latency.os, "write", lambda fd, data: 2)
    with pytest.raises(OSError, match="took 2 of 4 bytes"):
        hold_cpu_latency(0, str(device))
    assert _open_on(device) == []
