"""The CPUs' wake-up latency held down while the loop runs: a Linux PM QoS request on ``/dev/cpu_dma_latency``.

stdlib only (robot side). An idle CPU sleeps in an idle state; waking it for the robot's next state costs that
state's exit latency, and on a virtual machine whose guest halts (``cpuidle-haltpoll`` with polling off: every idle
is a VM exit) the hypervisor's wake-up too. The loop sleeps most of each period, so every tick begins with that wake.
The kernel's PM QoS interface lets a process ask for a bound: while a file descriptor of ``/dev/cpu_dma_latency``
with a value written to it is held open, no CPU enters an idle state whose exit latency exceeds that many
microseconds (0: idle CPUs poll; the kernel's ``Documentation/power/pm_qos_interface.rst``). The request is the
process's and ends when the descriptor closes (also when the process dies): nothing is left behind.

This is what a real-time Linux host does for its control loop (``cyclictest`` holds 0 by default). The cost is power:
an idle CPU that polls does not sleep. A polling CPU still runs whatever becomes runnable at once, so it takes no
time from other work.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable

CPU_DMA_LATENCY = "/dev/cpu_dma_latency"
MAX_CPU_LATENCY_US = 2_000_000_000  # the request is a signed 32-bit number of microseconds
_REQUEST = struct.Struct("=i")  # what the device reads: one native s32


def check_cpu_latency_us(max_us: object) -> None:
    """Refuse a latency request that is not an integer in 0..``MAX_CPU_LATENCY_US`` microseconds (ValueError)."""
    if isinstance(max_us, bool) or not isinstance(max_us, int) or not 0 <= max_us <= MAX_CPU_LATENCY_US:
        raise ValueError(f"cpu_latency_us must be an integer in 0..{MAX_CPU_LATENCY_US} microseconds, got {max_us!r}")


def hold_cpu_latency(max_us: int | None, device: str = CPU_DMA_LATENCY) -> Callable[[], None]:
    """Ask that no CPU sleeps in an idle state slower than ``max_us`` microseconds to leave (None: ask nothing).

    :param max_us: the largest idle-state exit latency allowed while the request is held (microseconds, >= 0; 0
        keeps idle CPUs polling).
    :param device: the PM QoS device (a test passes a file of its own).
    :return: the function that ends the request (closes the descriptor; safe to call twice).
    :raises ValueError: ``max_us`` outside 0..``MAX_CPU_LATENCY_US``.
    :raises PermissionError, FileNotFoundError: the device cannot be opened; the message says how to grant it or
        to set ``cpu_latency_us`` to None.
    """
    if max_us is None:
        return lambda: None
    check_cpu_latency_us(max_us)
    try:
        fd = os.open(device, os.O_WRONLY)
    except FileNotFoundError as err:
        raise FileNotFoundError(
            f"{device} does not exist ({err}): this kernel has no PM QoS CPU latency device; set cpu_latency_us=None"
        ) from err
    except PermissionError as err:
        raise PermissionError(
            f"{device} refused ({err}): run as root or give the runtime's user write access to it (a udev rule), "
            "or set cpu_latency_us=None"
        ) from err
    try:
        written = os.write(fd, _REQUEST.pack(max_us))
        if written != _REQUEST.size:
            raise OSError(f"{device} took {written} of {_REQUEST.size} bytes of the latency request")
    except BaseException:
        os.close(fd)
        raise
    held = [fd]

    def release() -> None:
        while held:
            with contextlib.suppress(OSError):
                os.close(held.pop())

    return release
