"""Control-loop timing over a real pty: tick latency (state frame in -> command frame out), period jitter,
wake-up lateness and overruns at 25 Hz and 250 Hz, with the ORT CPU backend; peak RSS of the runtime process.

Three processes per case, so nothing measured shares an interpreter with MuJoCo:

- the simulated robot (``envs.sim_robot_process.SimRobotProcess``), real-time paced at the case's period;
- the runtime (``deploy.runtime.loop.Controller`` + ``make_backend("ort-cpu", ...)`` + the safety filter + the
  tick log), in a fresh spawned interpreter that imports only the robot side; it reports its own ru_maxrss and
  whether torch / mujoco / gymnasium got imported (they must not);
- this orchestrating process (builds the ONNX model and the goals).

Side by side: the runtime with and without the tick log, and with and without the state checks (the
``deploy.runtime.state_check.StateChecker`` every state goes through, against ``UncheckedStates`` defined here,
which believes every state: a benchmark-only stand-in that measures what the checks cost), at each rate. The
policy is ``models/default``'s fp32 ONNX when that package exists, else an untrained policy of the default shape
(64x64 SiLU MLP, clipped output), which costs the same to run. Targets (issues 5 and 12): tick p99 <= 1 ms with
the checks on, jitter p99 <= 2 ms, runtime RSS < 200 MB.

Telemetry: the live view (``deploy.runtime.live_view``) serving the run over the Foxglove WebSocket protocol with
one client connected (a thread of this orchestrating process, on loopback, reading every channel), against the
same case without it (target: tick p99 <= 1 ms with telemetry on). ``--telemetry-only`` runs just that pair.

CPU idle latency: the runtime holding a PM QoS request that no CPU idles in a state slower than 0 us to leave
(``LoopConfig.cpu_latency_us=0``, ``/dev/cpu_dma_latency``: idle CPUs poll instead of halting), against the same case
without it, under the default scheduler and SCHED_FIFO. ``--cpu-latency-only`` runs just those four cases (needs
root) and writes ``control_loop_cpu_latency.{json,md}``.

Every case runs ``--repeats`` times (3 by default), the whole case list over and over, so a burst of load from
other jobs on a shared machine hits one repeat of a case rather than decides a side-by-side comparison; the table
shows each case's median run and every repeat's p99. Writes benchmarks/results/control_loop.json (every run) and
.md.

    .venv/bin/python benchmarks/control_loop.py [--seconds 20] [--repeats 3] [--telemetry-only | --cpu-latency-only]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_PACKAGE = ROOT / "models" / "default"
RATES_HZ = (25.0, 250.0)
DELAY_STEPS = 2
EPISODE_STEPS = 50
N_GOALS = 400  # more than any run needs; the run ends on its tick budget
HIDDEN = 64
TARGET_TICK_P99_S = 1e-3
TARGET_JITTER_P99_S = 2e-3
TARGET_RSS_MB = 200.0
CLIENT_WAIT_S = 30.0  # telemetry cases: the client connects and subscribes before the run starts
WATCHDOG_HOLD_PERIODS = 2.5  # the loop's watchdog scales with the period
WATCHDOG_STOP_PERIODS = 12.5
RUNTIME_RT_PRIORITY = 50  # SCHED_FIFO priorities of the "fifo" cases (ros2_control's default is 50)
ROBOT_RT_PRIORITY = 49
HEAVY_MODULES = ("torch", "mujoco", "gymnasium", "stable_baselines3", "robot_grpo", "envs")


def _peak_rss_mb() -> tuple[float, float]:
    """(ru_maxrss, /proc VmHWM) of this process in MB. Linux carries ru_maxrss across exec, which is why the
    runtime processes are started before this orchestrator imports torch and MuJoCo; VmHWM is per address space."""
    import resource

    hwm = float("nan")
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm = float(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, hwm


STEAL_FIELD = 7  # /proc/stat cpu line: user nice system idle iowait irq softirq steal ...


def _cpu_times() -> tuple[float, float, float]:
    """(busy, total, steal) jiffies of all CPUs from /proc/stat (nan on systems without it). Steal is time the
    hypervisor gave this virtual machine's CPUs to other guests: a run with steal was disturbed from outside."""
    stat = Path("/proc/stat")
    if not stat.is_file():
        return float("nan"), float("nan"), float("nan")
    fields = [float(x) for x in stat.read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    steal = fields[STEAL_FIELD] if len(fields) > STEAL_FIELD else 0.0
    return sum(fields) - idle, sum(fields), steal


def _pty_ping_pong(conn: Any, period_s: float, count: int, fifo: bool) -> None:
    """Baseline without any of our code: one byte each way over a bare pty, paced at ``period_s``; round trips (s)."""
    import os
    import select
    import tty

    master, slave = os.openpty()
    tty.setraw(slave)
    pid = os.fork()
    if pid == 0:  # the echo side
        if fifo:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(ROBOT_RT_PRIORITY))
        while (data := os.read(master, 64)) != b"q":
            os.write(master, data)
        os._exit(0)
    if fifo:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RUNTIME_RT_PRIORITY))
    trips = []
    next_t = time.monotonic()
    for _ in range(count):
        next_t += period_s
        time.sleep(max(0.0, next_t - time.monotonic()))
        t0 = time.monotonic()
        os.write(slave, b"x")
        select.select([slave], [], [], 1.0)
        os.read(slave, 64)
        trips.append(time.monotonic() - t0)
    os.write(slave, b"q")
    os.waitpid(pid, 0)
    conn.send(trips)


def pty_baseline(period_s: float, count: int, fifo: bool) -> dict[str, float]:
    import numpy as np

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_pty_ping_pong, args=(child, period_s, count, fifo))
    process.start()
    trips = np.asarray(parent.recv())
    process.join()
    return {
        "period_s": period_s,
        "scheduler": f"SCHED_FIFO {RUNTIME_RT_PRIORITY}/{ROBOT_RT_PRIORITY}" if fifo else "default",
        "round_trips": int(trips.size),
        "p50_s": float(np.percentile(trips, 50)),
        "p99_s": float(np.percentile(trips, 99)),
        "max_s": float(trips.max()),
    }


class UncheckedStates:
    """Benchmark only: the StateChecker's interface, believing every state (bounds = the reported position). It
    keeps the clock offset the watchdog needs, so the loop runs the same; what it saves is what the checks cost."""

    def __init__(self, spec: Any, contract: Any, loop_period_s: float, resync_states: int = 3) -> None:
        self._pos = slice(*contract.position_slice)
        self.offset_s = float("inf")
        self.follow_noise_m = 0.0  # the position bound's noise allowance: none for believed states
        self.home_expected = False  # a HOMED state is believed wherever it is
        self.home_error_m = 0.0
        self.home_tolerance_m = spec.home_tolerance_m
        self.anchor = None  # no motion reference: the intake takes the certain moves from its own anchor

    def reset(self) -> None:
        self.offset_s = float("inf")

    def expect_home(self) -> None:
        pass

    def robot_time_local(self, t_robot: float) -> float:
        return t_robot + self.offset_s

    def check(
        self,
        msg: Any,
        t_recv: float,
        applied_units: float,
        homed: bool = False,
        prompts: int = 0,
        applied_for_sure: Any = None,
    ) -> Any:
        from deploy.runtime.state_check import Verdict

        self.offset_s = min(self.offset_s, t_recv - msg.t_s)
        position = msg.state[self._pos]
        return Verdict(True, low=position, high=position)


def _runtime_child(conn: Any) -> None:
    """The measured process: waits for its job, then runs the controller with robot-side imports only."""
    job: dict[str, Any] = conn.recv()

    from dataclasses import replace

    from deploy.contract import fetch_reach_contract
    from deploy.robot_spec import load_robot_spec
    from deploy.runtime.backends import make_backend
    from deploy.runtime.goals import GoalSource
    from deploy.runtime.loop import Controller, LoopConfig
    from deploy.runtime.state_check import StateChecker
    from deploy.runtime.ticklog import TickLogWriter

    period = job["period_s"]
    contract = fetch_reach_contract(DELAY_STEPS)
    spec = replace(
        load_robot_spec(),
        watchdog_hold_s=WATCHDOG_HOLD_PERIODS * period,
        watchdog_stop_s=WATCHDOG_STOP_PERIODS * period,
    )
    backend = make_backend("ort-cpu", job["model"])
    config = LoopConfig(
        period_s=period,
        max_episode_steps=EPISODE_STEPS,
        max_ticks=job["ticks"],
        startup_timeout_s=10,
        realtime_priority=job["rt_priority"],
        cpu_latency_us=job["cpu_latency_us"],
    )
    live = None
    if job["telemetry"]:
        from deploy.runtime.live_view import LiveView

        live = LiveView((spec.workspace_low, spec.workspace_high), contract.position_slice, [0.05] * 3, port=0)
        conn.send({"live_port": live.port})
        deadline = time.monotonic() + CLIENT_WAIT_S
        while not live.subscribed():  # the orchestrator's client subscribes before the first tick
            if time.monotonic() > deadline:
                raise TimeoutError(f"no client subscribed to the live view within {CLIENT_WAIT_S} s")
            time.sleep(0.01)
    log = TickLogWriter(job["ticklog"], fsync_interval_s=1.0, live=live) if job["ticklog"] else None
    controller = Controller(
        job["port"],
        contract,
        backend,
        spec,
        GoalSource(job["goals"], job["seeds"]),
        config,
        ticklog=log,
        checker_class=StateChecker if job["checks"] else UncheckedStates,
    )
    try:
        report = controller.run()
    finally:
        if log is not None:
            log.close()
        if live is not None:
            live.close()
    conn.send(
        {
            "live": live.stats.summary() if live is not None else None,
            "timing": report.timing,
            "episodes": len(report.episodes),
            "success_rate": report.success_rate,
            "interventions": report.interventions,
            "counts": report.counts,
            "decoder_errors": report.decoder_errors,
            "ru_maxrss_mb": _peak_rss_mb()[0],
            "vm_hwm_mb": _peak_rss_mb()[1],
            "heavy_modules_loaded": sorted(m for m in HEAVY_MODULES if m in sys.modules),
        }
    )


def _model_path(workdir: Path) -> tuple[str, str]:
    """(path of an fp32 ONNX policy, where it came from)."""
    if (DEFAULT_PACKAGE / "manifest.json").is_file():
        from deploy.runtime.package import load_package

        package = load_package(DEFAULT_PACKAGE)
        return str(package.model_path("fp32")), "models/default (fp32)"
    import torch

    from deploy.contract import fetch_reach_contract
    from deploy.export.onnx_fp32 import export_onnx

    contract = fetch_reach_contract(DELAY_STEPS)

    class Clipped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(contract.flat_dim, HIDDEN),
                torch.nn.SiLU(),
                torch.nn.Linear(HIDDEN, HIDDEN),
                torch.nn.SiLU(),
                torch.nn.Linear(HIDDEN, contract.action_dim),
            )

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return torch.clamp(self.net(obs), contract.action_low, contract.action_high)

    torch.manual_seed(0)
    path = export_onnx(Clipped(), contract.flat_dim, workdir / "policy.onnx")
    return str(path), "untrained 64x64 SiLU MLP (models/default absent)"


def _goals(n: int) -> tuple[list[list[float]], list[int]]:
    from envs.delayed_fetch_reach import DelayedFetchReachEnv

    env = DelayedFetchReachEnv(delay=DELAY_STEPS)
    goals = []
    for seed in range(n):
        env.reset(seed=seed)
        goals.append(env.goal.tolist())
    env.close()
    return goals, list(range(n))


def start_runtime() -> tuple[Any, Any]:
    """A runtime process, started now (while this process is small) and waiting for its job."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_runtime_child, args=(child,))
    process.start()
    return process, parent


def _watch(port: int, counts: dict[str, int]) -> None:
    """One Foxglove client (what a person watching the run has open): subscribes to every channel and reads all
    that comes until the server closes; counts messages and bytes."""
    import json as _json

    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{port}", subprotocols=["foxglove.sdk.v1"], max_size=None) as ws:
        try:
            while True:
                message = ws.recv()
                if isinstance(message, str):
                    data = _json.loads(message)
                    if data.get("op") == "advertise":
                        subs = [{"id": i + 1, "channelId": c["id"]} for i, c in enumerate(data["channels"])]
                        ws.send(_json.dumps({"op": "subscribe", "subscriptions": subs}))
                    continue
                counts["messages"] += 1
                counts["bytes"] += len(message)
        except ConnectionClosed:
            return


def run_case(
    runtime: tuple[Any, Any],
    rate_hz: float,
    ticks: int,
    model: str,
    goals,
    seeds,
    ticklog: str | None,
    fifo: bool,
    checks: bool,
    telemetry: bool = False,
    cpu_latency_us: int | None = None,
) -> dict[str, Any]:
    import threading

    from envs.sim_robot_process import SimRobotProcess

    period = 1.0 / rate_hz
    robot = SimRobotProcess(
        priority=ROBOT_RT_PRIORITY if fifo else None, mode="realtime", delay=DELAY_STEPS, control_period_s=period
    )
    process, conn = runtime
    job = {
        "port": robot.port_name,
        "period_s": period,
        "ticks": ticks,
        "model": model,
        "goals": goals,
        "seeds": seeds,
        "ticklog": ticklog,
        "rt_priority": RUNTIME_RT_PRIORITY if fifo else None,
        "checks": checks,
        "telemetry": telemetry,
        "cpu_latency_us": cpu_latency_us,
    }
    started = time.perf_counter()
    _, total0, steal0 = _cpu_times()
    conn.send(job)
    watcher, seen = None, {"messages": 0, "bytes": 0}
    try:
        result = conn.recv()
        if "live_port" in result:
            watcher = threading.Thread(target=_watch, args=(result["live_port"], seen), daemon=True)
            watcher.start()
            result = conn.recv()
    finally:
        process.join()
        robot_counts = robot.stop()
        if watcher is not None:
            watcher.join(timeout=CLIENT_WAIT_S)
    result["client"] = seen if telemetry else None
    _, total1, steal1 = _cpu_times()
    result["wall_s"] = time.perf_counter() - started
    result["steal_pct"] = 100.0 * (steal1 - steal0) / max(total1 - total0, 1.0)
    result["robot"] = robot_counts
    result["rate_hz"] = rate_hz
    result["ticklog"] = ticklog is not None
    result["checks"] = checks
    result["telemetry"] = telemetry
    result["cpu_latency_us"] = cpu_latency_us
    result["scheduler"] = f"SCHED_FIFO {RUNTIME_RT_PRIORITY}/{ROBOT_RT_PRIORITY}" if fifo else "default"
    return result


def _case_key(result: dict[str, Any]) -> tuple:
    return (
        result["rate_hz"],
        result["scheduler"],
        result["ticklog"],
        result["checks"],
        result.get("telemetry", False),
        result.get("cpu_latency_us"),
    )


def median_runs(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One run per case: the one with the median latency p99 over its repeats (upper median for an even count),
    with every repeat's p99 attached (``latency_p99_runs_s``), in the order the cases first ran."""
    by_case: dict[tuple, list[dict[str, Any]]] = {}
    for result in results:
        by_case.setdefault(_case_key(result), []).append(result)
    out = []
    for runs in by_case.values():
        ranked = sorted(runs, key=lambda r: r["timing"]["latency_s_p99"])
        chosen = dict(ranked[len(ranked) // 2])
        chosen["latency_p99_runs_s"] = [r["timing"]["latency_s_p99"] for r in runs]
        chosen["steal_pct_runs"] = [r.get("steal_pct", float("nan")) for r in runs]
        out.append(chosen)
    return out


def _ms(value: float) -> str:
    return f"{value * 1e3:.3f}"


def _telemetry(result: dict[str, Any]) -> str:
    if not result.get("telemetry"):
        return "off"
    client = result.get("client") or {}
    return f"on (1 client, {client.get('messages', 0)} messages)"


def _cpu_latency(result: dict[str, Any]) -> str:
    value = result.get("cpu_latency_us")
    return "not asked" if value is None else f"<= {value} us"


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Control loop timing (benchmarks/control_loop.py)",
        "",
        f"Policy: {meta['policy']}. Robot: SimRobot real-time over a pty, delay {DELAY_STEPS} steps. "
        f"Backend: ort-cpu. {meta['seconds']} s per case, {meta['repeats']} interleaved repeats of every case; each "
        "row is the case's run with the median latency p99 (every repeat's p99 beside it). "
        f"Machine: {meta['machine']}; load average at start "
        f"{meta['loadavg']}; all CPUs {meta['cpu_busy_pct']:.0f}% busy during the run (this machine is shared "
        "with other jobs: the SCHED_FIFO rows show what a real-time priority buys on a loaded machine). A pty "
        "hands bytes to its reader through a kernel worker thread of normal priority, so under full load a state "
        "can reach even a SCHED_FIFO loop late; that shows up as jitter, not as tick latency. Host steal = share "
        "of CPU time the hypervisor gave to other guests during the run (this is a virtual machine): a repeat with "
        "steal was disturbed from outside, whatever the scheduler.",
        "",
        "Latency = state frame in -> command frame out. Jitter = |interval between consecutive commands - period|; "
        "the loop answers each robot state as it arrives, so it includes the robot's own state jitter (robot "
        "jitter = |interval between consecutive states, robot clock - period|). Wake late = tick start - its "
        "scheduled time. Overruns = commands slower than a period + periods skipped. Robot held = policy steps at "
        "which the robot applied its own hold because the previous command came too late or was lost.",
        "",
        "Telemetry on: the live view (deploy/runtime/live_view.py) serving the run over the Foxglove WebSocket "
        "protocol with one client connected on loopback, subscribed to every channel and reading all of it.",
        "",
        "CPU idle latency: what the runtime asked of the kernel's PM QoS while it ran (LoopConfig.cpu_latency_us, "
        "/dev/cpu_dma_latency; <= 0 us: idle CPUs poll instead of halting, and on this VM a halt is a VM exit).",
        "",
        "| rate | scheduler (runtime/robot) | tick log | state checks | telemetry | CPU idle latency | ticks | "
        "latency p50 ms | "
        "latency p99 ms | "
        "latency p99 of each repeat ms | host steal % of each repeat | latency max ms | jitter p50 ms | "
        "jitter p99 ms | jitter max ms | robot jitter p99 ms | wake late p99 ms | overruns | robot held | "
        "implausible | runtime ru_maxrss MB | VmHWM MB | "
        "tick p99 <= 1 ms | jitter p99 <= 2 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        t = r["timing"]
        lines.append(
            f"| {r['rate_hz']:g} Hz | {r['scheduler']} | {'on' if r['ticklog'] else 'off'} | "
            f"{'on' if r['checks'] else 'off'} | {_telemetry(r)} | {_cpu_latency(r)} | {int(t['latency_s_n'])} | "
            f"{_ms(t['latency_s_p50'])} | {_ms(t['latency_s_p99'])} | "
            f"{' / '.join(_ms(v) for v in r.get('latency_p99_runs_s', [t['latency_s_p99']]))} | "
            f"{' / '.join(f'{v:.1f}' for v in r.get('steal_pct_runs', [r.get('steal_pct', float('nan'))]))} | "
            f"{_ms(t['latency_s_max'])} | "
            f"{_ms(t['jitter_s_p50'])} | {_ms(t['jitter_s_p99'])} | {_ms(t['jitter_s_max'])} | "
            f"{_ms(t['robot_jitter_s_p99'])} | {_ms(t['wake_late_s_p99'])} | {int(t['overruns'])} | "
            f"{r['counts'].get('robot_held', 0)} | "
            f"{sum(v for k, v in r['counts'].items() if k.startswith('implausible_'))} | "
            f"{r['ru_maxrss_mb']:.1f} | {r['vm_hwm_mb']:.1f} | "
            f"{'yes' if t['latency_s_p99'] <= TARGET_TICK_P99_S else 'NO'} | "
            f"{'yes' if t['jitter_s_p99'] <= TARGET_JITTER_P99_S else 'NO'} |"
        )
    heavy = sorted({m for r in results for m in r["heavy_modules_loaded"]}) or "none"
    lines += [
        "",
        "Baseline, none of our code: a bare pty ping-pong (one byte each way, paced at the period) between two "
        "processes, same machine, run right after the loop cases. Its round-trip tail is the floor under the "
        "loop's jitter.",
        "",
        "| period | scheduler | round trips | p50 ms | p99 ms | max ms |",
        "|---|---|---|---|---|---|",
    ]
    for b in meta["pty_baseline"]:
        lines.append(
            f"| {b['period_s'] * 1e3:g} ms | {b['scheduler']} | {b['round_trips']} | {_ms(b['p50_s'])} | "
            f"{_ms(b['p99_s'])} | {_ms(b['max_s'])} |"
        )
    lines += [
        "",
        f"Runtime RSS target < {TARGET_RSS_MB:g} MB: "
        + ("met" if all(r["ru_maxrss_mb"] < TARGET_RSS_MB for r in results) else "NOT met")
        + f". Heavy modules imported by the runtime process: {heavy}.",
        "Orchestrator peak RSS (builds the model and goals, imports torch + MuJoCo): "
        f"{meta['orchestrator_rss_mb']:.1f} MB.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="run time per case (seconds)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs of every case, interleaved (case order repeated): the table shows the median run of each case, "
        "so a burst of load from other jobs during one run does not decide the comparison",
    )
    parser.add_argument(
        "--telemetry-only",
        action="store_true",
        help="only the live view's side by side (default scheduler, tick log and checks on, telemetry off / on); "
        "writes control_loop_telemetry.{json,md}",
    )
    parser.add_argument(
        "--cpu-latency-only",
        action="store_true",
        help="only the CPU idle latency side by side (tick log and checks on; default scheduler and SCHED_FIFO; the "
        "runtime holding cpu_latency_us=0 or not; needs root); writes control_loop_cpu_latency.{json,md}",
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    if args.telemetry_only and args.cpu_latency_only:
        parser.error("--telemetry-only and --cpu-latency-only each pick their own cases: give one of them")
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "seconds": args.seconds,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    # (tick log, SCHED_FIFO, state checks, telemetry, CPU idle latency request): the checks on and off side by side
    # under both schedulers, and the live view off and on
    variants: tuple[tuple[bool, bool, bool, bool, int | None], ...] = (
        (True, False, True, False, None),
        (True, False, True, True, None),
        (True, False, False, False, None),
        (True, True, True, False, None),
        (True, True, False, False, None),
        (False, True, True, False, None),
    )
    if args.telemetry_only:
        variants = ((True, False, True, False, None), (True, False, True, True, None))
    if args.cpu_latency_only:
        variants = tuple((True, fifo, True, False, hold) for fifo in (False, True) for hold in (None, 0))
    cases = [(rate, *variant) for _ in range(args.repeats) for rate in RATES_HZ for variant in variants]
    meta["repeats"] = args.repeats
    runtimes = [start_runtime() for _ in cases]  # before torch / MuJoCo make this process large
    results = []
    busy0, total0, _ = _cpu_times()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        model, meta["policy"] = _model_path(workdir)
        goals, seeds = _goals(N_GOALS)
        for index, (runtime, (rate, with_log, fifo, checks, telemetry, hold)) in enumerate(
            zip(runtimes, cases, strict=True)
        ):
            ticks = int(args.seconds * rate)
            ticklog = str(workdir / f"ticks_{index}.mcap") if with_log else None
            result = run_case(runtime, rate, ticks, model, goals, seeds, ticklog, fifo, checks, telemetry, hold)
            result["repeat"] = index // (len(cases) // args.repeats)
            results.append(result)
            t = result["timing"]
            print(
                f"{rate:g} Hz log={'on' if with_log else 'off'} checks={'on' if checks else 'off'} "
                f"telemetry={_telemetry(result)} cpu latency={_cpu_latency(result)} "
                f"{result['scheduler']}: "
                f"latency p50 {_ms(t['latency_s_p50'])} ms "
                f"p99 {_ms(t['latency_s_p99'])} ms, jitter p99 {_ms(t['jitter_s_p99'])} ms, overruns "
                f"{int(t['overruns'])}, RSS {result['ru_maxrss_mb']:.1f} MB",
                flush=True,
            )
    baseline_trips = int(args.seconds * max(RATES_HZ) / 2)
    meta["pty_baseline"] = [pty_baseline(1.0 / max(RATES_HZ), baseline_trips, fifo) for fifo in (False, True)]
    meta["orchestrator_rss_mb"] = _peak_rss_mb()[0]
    busy1, total1, _ = _cpu_times()
    meta["cpu_busy_pct"] = 100.0 * (busy1 - busy0) / max(total1 - total0, 1.0)
    name = "control_loop"
    if args.telemetry_only:
        name = "control_loop_telemetry"
    elif args.cpu_latency_only:
        name = "control_loop_cpu_latency"
    (RESULTS / f"{name}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2, default=str))
    (RESULTS / f"{name}.md").write_text(markdown(median_runs(results), meta))
    print(markdown(median_runs(results), meta))


if __name__ == "__main__":
    main()
