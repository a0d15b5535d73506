"""The launch-file schemas of the robot-side jobs: ``run`` (one robot) and ``cell`` (two arms), and the robot and live
view sections they share with ``calibrate``, ``finetune`` and ``campaign`` (yaml + stdlib only; ``launch.jobs`` holds
every job's schema and loads launch files).
"""

from __future__ import annotations

from deploy.cell.scripted import SCRIPTED
from deploy.cell.supervisor import DEFAULT_PORT as SUPERVISOR_PORT
from deploy.cell.supervisor import DEFAULT_STALE_S
from deploy.contract import MAX_DELAY_STEPS
from deploy.runtime.backends import BACKEND_NAMES
from deploy.runtime.cpu_latency import MAX_CPU_LATENCY_US
from deploy.runtime.exploration import DEFAULT_STD_SCALE
from deploy.runtime.retract import CELL_RETRACT_STEPS
from launch.schema import Field, Section

VARIANTS = ("fp32", "fp16", "int8", "engine")
DEFAULT_PACKAGE = "shipped:models/default"  # shipped with robot-grpo: found from any folder (deploy.shipped)

ROBOT = Section(
    {
        "kind": Field("str", "sim", choices=("sim", "serial"), doc="the simulated robot on a pty, or a serial port"),
        "port": Field("str", None, nullable=True, doc="serial port or pyserial URL (kind: serial)"),
        # deploy.wire's DEFAULT_BAUDRATE (a test checks it): launch/jobs must load without pyserial, for training.
        "baudrate": Field("int", 1_000_000, low=1200, high=20_000_000, doc="serial line rate, bit/s (kind: serial)"),
        "delay": Field(
            "int", None, low=0, high=MAX_DELAY_STEPS, nullable=True, doc="simulated robot's delay (null: its spec's)"
        ),
        "obs_noise_std_m": Field(
            "float", None, low=0.0, high=0.1, nullable=True, doc="simulated robot's noise, metres (null: its spec's)"
        ),
        "action_gain": Field("float", 1.0, low=0.1, high=2.0, doc="simulated robot's actuation gain error"),
        "lockstep": Field("bool", False, doc="simulated robot steps once per command (fast tests) vs real time"),
        "byte_error_rate": Field(
            "float", 0.0, low=0.0, high=0.1, doc="simulated robot: share of bytes corrupted on the link, both ways"
        ),
    }
)

LIVE = Section(
    {
        "enabled": Field("bool", False, doc="serve the run live over the Foxglove WebSocket protocol ([live] extra)"),
        "host": Field("str", "127.0.0.1", doc="address to bind; the default is this machine only (0.0.0.0: any)"),
        "port": Field("int", 8765, low=0, high=65535, doc="TCP port (0: any free one, logged)"),
        "scene_hz": Field("float", 30.0, low=1.0, high=1000.0, doc="most 3D scene updates per second"),
        "backlog": Field(
            "int", 1024, low=1, high=1_000_000, doc="messages queued per client; a client that lags loses its oldest"
        ),
    },
    doc="live view: the tick log's channels and a 3D scene, to Foxglove",
)

CPU_LATENCY = Field(
    "int",
    None,
    low=0,
    high=MAX_CPU_LATENCY_US,
    nullable=True,
    doc="while running, no CPU idles in a state slower than this to leave (us; 0: idle CPUs poll; needs root)",
)

RUN_JOB = Section(
    {
        "package": Field("path", DEFAULT_PACKAGE, doc="policy package folder"),
        "backend": Field("str", "ort-cpu", choices=BACKEND_NAMES),
        "variant": Field("str", "fp32", choices=VARIANTS),
        "robot": ROBOT,
        "calibration": Field(
            "path", None, nullable=True, doc="robot spec file (default shipped:calibration/sim_fetch.yaml)"
        ),
        "override_compatibility": Field(
            "bool", False, doc="run although the robot spec and the package disagree (logged in the run report)"
        ),
        "follow_store": Field(
            "path", None, nullable=True, doc="a package store: a promoted package swaps in between ticks"
        ),
        "goals_file": Field("path", None, nullable=True, doc="YAML list of [x, y, z] targets (metres)"),
        "episodes": Field("int", 20, low=1),
        "episode_steps": Field("int", 50, low=1, high=10_000, doc="control steps per target"),
        "attempts_per_target": Field("int", 1, low=1, high=1000, doc="a line repeats each target this often"),
        "period_s": Field(
            "float",
            None,
            low=1e-3,
            high=1.0,
            nullable=True,
            doc="loop period; null = the policy's (lock-step only)",
        ),
        "seed": Field("int", 0, low=0, doc="seed of the goal sequence (sim robot: the env's seeded goals)"),
        "realtime_priority": Field("int", None, low=1, high=99, nullable=True, doc="SCHED_FIFO priority"),
        "cpu": Field("int", None, low=0, nullable=True, doc="pin the loop and its policy thread to this CPU (Linux)"),
        "cpu_latency_us": CPU_LATENCY,
        "explore": Field("bool", False, doc="propose mean + the policy's Gaussian noise (data for fine-tuning)"),
        "explore_std_scale": Field(
            "float",
            DEFAULT_STD_SCALE,
            low=1e-3,
            high=2.0,
            doc="with explore: the noise std as a multiple of the policy's std",
        ),
        "live": LIVE,
        "output": Field("path", "runs"),
    }
)


CELL_JOB = Section(
    {
        "packages": Field(
            "path",
            None,
            nullable=True,
            doc="the folder robot-grpo export wrote for a cell checkpoint (arm_0/, arm_1/); null: 'policy'",
        ),
        "policy": Field(
            "str",
            "goal_seeker",
            choices=SCRIPTED,
            doc="without packages: a scripted cell policy (straight at its goal / at the partner / at its wrist)",
        ),
        "backend": Field("str", "ort-cpu", choices=BACKEND_NAMES),
        "variant": Field("str", "fp32", choices=VARIANTS),
        "calibration": Field(
            "path", None, nullable=True, doc="both arms' robot spec (default shipped:calibration/sim_fetch.yaml)"
        ),
        "episodes": Field("int", 10, low=1, doc="cell episodes: a goal pair, one goal per arm"),
        "episode_steps": Field("int", 50, low=1, high=10_000, doc="control steps per episode"),
        "seed": Field("int", 7000, low=0, doc="seed of the first goal pair (TwoArmCell-v0's draws)"),
        "min_separation_m": Field("float", 0.10, low=0.02, high=0.5, doc="closest allowed grippers, metres"),
        "stale_s": Field(
            "float", DEFAULT_STALE_S, low=0.01, high=5.0, doc="a partner report older than this holds the arm"
        ),
        "barrier": Field("bool", True, doc="the separation barrier cuts commands (false: the ablation)"),
        "start_together": Field(
            "bool", True, doc="an arm homes for its next episode only once its partner has ended its own too"
        ),
        "retract_steps": Field(
            "int",
            CELL_RETRACT_STEPS,
            low=0,
            high=10_000,
            doc="after each episode, control steps an arm may take back toward home under its barrier before its HOME",
        ),
        "supervisor_port": Field("int", SUPERVISOR_PORT, low=1024, high=65535, doc="the supervisor's UDP port"),
        "realtime_priority": Field(
            "int",
            None,
            low=1,
            high=99,
            nullable=True,
            doc="SCHED_FIFO priority of the arms' runtimes and the supervisor (a real cell's; needs CAP_SYS_NICE)",
        ),
        "arm_cpus": Field(
            "list[int]",
            None,
            length=2,
            low=0,
            nullable=True,
            doc="pin arm 0's and arm 1's runtime (loop and policy thread) to these CPUs (Linux)",
        ),
        "cpu_latency_us": CPU_LATENCY,
        "output": Field("path", "runs"),
    }
)
