"""``robot-grpo demo``: the whole pipeline on the simulated robot, with a report.

    1 train GRPO + hindsight on delayed FetchReach (k=2) until 95% success or budget   (--quick: models/default)
    2 export and verify the policy package                                             (--quick: models/default)
    3 calibrate the simulated robot through the link (delay, gain, noise, workspace): its robot spec
    4 run the safe controller on the robot (real time, 25 Hz) with that spec
    5 the robot drifts (delay 2 -> 6 steps, actuators x1.5); recalibrate it: the startup check refuses the k=2
      package (one line naming both delays); run with the explicit, logged override to see the damage
    6 the production line repeats targets with exploration on -> tick logs
    7 fine-tune with EWC from those logs -> gate -> atomic promotion (or the running policy stays)
    8 run the current policy on the drifted robot (its spec now fits the fine-tuned package): before and after

Writes ``runs/<name>/report.md`` (learning curve, success per stage, latency histogram, interventions,
calibration before and after the drift, the gate) and each stage's outputs in its own folder.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from deploy.shipped import INSTALL_ROOT, resolve_path
from launch.jobs import DEFAULT_CHECKPOINT, validate_launch, write_resolved
from launch.report import plot_latency_histogram, plot_learning_curve
from launch.robot_jobs import DEFAULT_PACKAGE

SHIPPED_CURVE = INSTALL_ROOT / "models" / "default_learning_curve.json"
LINE_PERIOD_S = 0.005  # the line's data collection runs the lock-step robot, so it need not wait 40 ms a tick


class Stages:
    """Prints numbered progress lines and records each stage's wall time (seconds)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.index = 0
        self.times: dict[str, float] = {}
        self._name = ""
        self._start = 0.0

    def start(self, name: str) -> None:
        self.index += 1
        self._name, self._start = name, time.perf_counter()
        print(f"[{self.index}/{self.total}] {name} ...", flush=True)

    def done(self, summary: str) -> None:
        elapsed = time.perf_counter() - self._start
        self.times[self._name] = elapsed
        print(f"[{self.index}/{self.total}] {self._name}: {summary} ({elapsed:.0f} s)", flush=True)


def _sub(job: str, name: str, output: Path, **sections: Any) -> dict[str, Any]:
    return validate_launch({"job": job, "name": name, "output": str(output), **sections}, source=f"demo/{name}")


def _run_stage(config: dict[str, Any], out: Path, name: str, package: str, robot: dict, **extra: Any):
    from launch.job_run import run

    episodes = config["quick_episodes"] if config["quick"] else config["episodes"]
    sub = _sub("run", name, out, **{"package": package, "robot": robot, "episodes": episodes, **extra})
    run_dir = out / name
    write_resolved(sub, run_dir)
    return run(sub, run_dir)


def _calibrate_stage(run_dir: Path, name: str, robot: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    from launch.job_calibrate import calibrate

    cal_config = _sub("calibrate", name, run_dir, robot={**robot, "lockstep": True}, out=str(run_dir / f"{name}.yaml"))
    return calibrate(cal_config, run_dir)


def _refusal(spec_path: Path, package: str) -> str:
    """The startup check's one line for this spec and package ("" when they fit)."""
    from deploy.robot_spec import load_robot_spec
    from deploy.runtime.compatibility import CompatibilityError, check_compatibility
    from deploy.runtime.package import load_package

    loaded = load_package(package)
    try:
        check_compatibility(load_robot_spec(spec_path), loaded.contract, loaded.action_delay_steps, package)
    except CompatibilityError as err:
        return str(err)
    return ""


def _spec_summary(result: dict[str, Any]) -> str:
    cal = result["calibration"]
    gain = cal["actuator_gain"]
    return f"delay {cal['action_delay']['steps']} steps, gain {gain['per_axis']} (bound {gain['upper_bound']})"


def demo(config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    from launch.job_export import export
    from launch.job_finetune import finetune
    from launch.job_run import tick_latencies
    from launch.job_train import train

    quick = config["quick"]
    stages = Stages(8)
    robot = dict(config["robot"])
    env = {"id": "DelayedFetchReach-v0"}  # the delay and noise: calibration/sim_fetch.yaml, the robot's spec
    results: dict[str, Any] = {"quick": quick}

    stages.start("train" if not quick else "load the shipped default model")
    if quick:
        package, checkpoint = str(resolve_path(DEFAULT_PACKAGE)), str(resolve_path(DEFAULT_CHECKPOINT))
        if not (Path(package) / "manifest.json").is_file():
            raise FileNotFoundError(f"{package} holds no policy package; run `make model` or the demo without --quick")
        curve = json.loads(SHIPPED_CURVE.read_text()) if SHIPPED_CURVE.is_file() else []
        stages.done(f"{package}")
    else:
        sub = _sub("train", "train", run_dir, env=env, train=config["train"])
        summary = train(sub, run_dir / "train", progress_bar=False)
        checkpoint = summary["model"]
        curve = json.loads((run_dir / "train" / "learning_curve.json").read_text())
        stages.done(f"{summary['env_steps']} env steps, success {100 * summary['final_success']:.0f}%")
    results["learning_curve"] = curve
    if curve:
        plot_learning_curve(
            [p["steps"] for p in curve], [p["success"] for p in curve], run_dir / "learning_curve.png", "GRPO training"
        )

    stages.start("export and verify the package" if not quick else "verify the shipped package")
    if not quick:
        package = str(run_dir / "package")
        export(_sub("export", "export", run_dir, env=env, checkpoint=checkpoint, out_dir=package))
    from deploy.runtime.package import load_package

    verified = load_package(package)
    results["package_report"] = (Path(package) / "report.md").read_text()
    stages.done(f"{package}: checks {'passed' if verified.manifest['checks']['passed'] else 'FAILED'}")

    stages.start("calibrate the robot")
    cal_path, cal_result = _calibrate_stage(run_dir, "calibration", robot)
    results["calibration"] = cal_result["calibration"]
    stages.done(f"{_spec_summary(cal_result)} -> {cal_path}")

    stages.start("run on the robot")
    base = _run_stage(config, run_dir, "run_base", package, robot, calibration=str(cal_path))
    results["run_base"] = base
    stages.done(f"success {100 * base['success_rate']:.0f}% over {base['episodes']} episodes")

    drifted = {**robot, "delay": config["shift_delay"], "action_gain": config["shift_action_gain"]}
    results["drift"] = {"delay_steps": config["shift_delay"], "action_gain": config["shift_action_gain"]}
    stages.start(
        f"the robot drifts (delay {config['shift_delay']} steps, actuators x{config['shift_action_gain']}): "
        "recalibrate, run the k=2 package with the explicit override"
    )
    drift_path, drift_result = _calibrate_stage(run_dir, "calibration_drifted", drifted)
    results["calibration_drifted"] = drift_result["calibration"]
    results["refusal"] = _refusal(drift_path, package)
    shifted = _run_stage(
        config, run_dir, "run_drifted", package, drifted, calibration=str(drift_path), override_compatibility=True
    )
    results["run_drifted"] = shifted
    stages.done(f"{_spec_summary(drift_result)}; success {100 * shifted['success_rate']:.0f}%")

    stages.start("production line with exploration (tick logs)")
    line = _sub(
        "run",
        "line",
        run_dir,
        package=package,
        robot={**drifted, "lockstep": True},
        calibration=str(drift_path),
        override_compatibility=True,
        episodes=config["line_targets"] * config["line_attempts"],
        attempts_per_target=config["line_attempts"],
        explore=True,
        period_s=LINE_PERIOD_S,
        seed=100,
    )
    from launch.job_run import run

    write_resolved(line, run_dir / "line")
    line_summary = run(line, run_dir / "line")
    results["line"] = {k: line_summary[k] for k in ("episodes", "success_rate", "interventions", "ticklog")}
    stages.done(f"{line_summary['episodes']} logged episodes")

    stages.start("fine-tune with EWC, gate, promote")
    store = run_dir / "store"
    if store.exists():
        shutil.rmtree(store)
    ft = _sub(
        "finetune",
        "finetune",
        run_dir,
        store=str(store),
        package=package,
        checkpoint=str(checkpoint),
        logs=line_summary["ticklog"],
        env=env,
        robot={**robot, "action_gain": config["shift_action_gain"]},  # the rest (delay 6) from the drifted spec
        calibration=str(drift_path),
        gate_episodes=config["gate_episodes"],
        group_size=config["line_attempts"],
        ewc_lambda=config["finetune_ewc_lambda"],
        n_updates=config["finetune_updates"],
    )
    write_resolved(ft, run_dir / "finetune")
    ft_result = finetune(ft, run_dir / "finetune")
    results["finetune"] = ft_result
    stages.done("promoted" if ft_result["promoted"] else "not promoted: " + "; ".join(ft_result["gate"]["reasons"]))

    stages.start("run the current policy on the drifted robot")
    from deploy.finetune.promote import PackageStore

    current = str(PackageStore(store).resolve_current())
    results["refusal_after"] = _refusal(drift_path, current)
    after = _run_stage(
        config,
        run_dir,
        "run_finetuned",
        current,
        drifted,
        calibration=str(drift_path),
        override_compatibility=bool(results["refusal_after"]),
    )
    results["run_finetuned"] = after
    stages.done(f"success {100 * after['success_rate']:.0f}%")

    latencies = tick_latencies(Path(base["ticklog"]))
    plot_latency_histogram(latencies, run_dir / "latency.png", "control tick latency (real time, 25 Hz)")
    results["stage_seconds"] = stages.times
    return results


def _interventions(summary: dict[str, Any]) -> str:
    counts = {k: v for k, v in summary["interventions"].items() if k != "ticks"}
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def write_report(results: dict[str, Any], run_dir: Path, total_s: float) -> Path:
    """``report.md``: the learning curve, success per stage, latency, interventions, calibration, gate."""
    from launch.report import markdown_table

    lines = [f"# robot-grpo demo ({'quick: shipped model' if results['quick'] else 'full'})", ""]
    lines.append(f"Total {total_s:.0f} s on this machine. Every stage's outputs are in its folder next to this file.")
    curve = results["learning_curve"]
    lines += ["", "## Training", ""]
    if curve:
        last = curve[-1]
        lines.append(
            f"GRPO + hindsight on DelayedFetchReach (k=2): {100 * last['success']:.0f}% deterministic success after "
            f"{last['steps']} env steps ({last['wall_s']:.0f} s)."
        )
        lines += ["", "![learning curve](learning_curve.png)"]
    else:
        lines.append("No learning curve recorded for the shipped model.")
    lines += ["", "## Policy package checks", "", results["package_report"].split("\n", 1)[1].strip()]

    lines += ["", "## Calibration (measured through the link): the robot spec before and after the drift", ""]
    rows = []
    for key, label in (("calibration", "as delivered"), ("calibration_drifted", "after the drift")):
        cal = results[key]
        gain, box = cal["actuator_gain"], cal["workspace"]
        rows.append(
            [
                label,
                f"{cal['action_delay']['steps']} ({cal['action_delay']['ms']:.0f} ms)",
                ", ".join(f"{v:.3f}" for v in gain["per_axis"]),
                f"{gain['upper_bound']:.3f}",
                ", ".join(f"{1e3 * v:.2f}" for v in cal["observation_noise_std_m"]),
                f"{[round(v, 3) for v in box['low']]} .. {[round(v, 3) for v in box['high']]}",
            ]
        )
    lines.append(
        markdown_table(
            ["robot", "delay, steps", "gain per axis (m/m)", "gain bound", "noise (mm)", "workspace (m)"], rows
        )
    )
    lines += [
        "",
        "Startup check of the k=2 package against the drifted robot's spec (`robot-grpo run` refuses it unless "
        "`override_compatibility: true`, which the drifted runs below set and log):",
        "",
        f"> {results['refusal'] or 'no mismatch'}",
    ]

    rows = []
    finetuned = (
        "fine-tuned policy (promoted)" if results["finetune"]["promoted"] else "running policy (kept by the gate)"
    )
    for key, label in (
        ("run_base", "robot as calibrated, sim-trained policy"),
        ("run_drifted", "drifted robot, recalibrated, sim-trained policy (override)"),
        ("run_finetuned", f"drifted robot, recalibrated, {finetuned}"),
    ):
        s = results[key]
        t = s["timing"]
        rows.append(
            [
                label,
                s["episodes"],
                f"{100 * s['success_rate']:.0f}%",
                f"{1e3 * t['latency_s_p50']:.2f}",
                f"{1e3 * t['latency_s_p99']:.2f}",
                f"{1e3 * t['jitter_s_p99']:.2f}",
                int(t["overruns"]),
                s["counts"].get("safe_stops", 0),
                _interventions(s),
            ]
        )
    drift = results["drift"]
    lines += [
        "",
        "## Success on the simulated robot (real time, 25 Hz, over a pty)",
        "",
        f"Drift: the robot's delay goes from {results['calibration']['action_delay']['steps']} to "
        f"{drift['delay_steps']} control steps and its actuators move x{drift['action_gain']} the commanded "
        "displacement. Targets are the task's seeded goals inside the calibrated workspace.",
        "",
        markdown_table(
            [
                "stage",
                "episodes",
                "success",
                "tick p50 ms",
                "tick p99 ms",
                "jitter p99 ms",
                "overruns",
                "safe stops",
                "safety interventions (ticks)",
            ],
            rows,
        ),
        "",
        "Interventions are the filter's, per tick: `workspace_barrier` shortened a command toward a face; "
        "`outside_workspace` means the worst case of where the gripper may be (the noisy position's bound plus the "
        "commands in flight at the spec's gain bound) is past a face, so motion further out was refused. Both are "
        "planning margins, not the arm leaving the box.",
        "",
        "![tick latency](latency.png)",
    ]

    ft = results["finetune"]
    gate = ft["gate"]
    gate_rows = [
        [
            who,
            f"{100 * gate[who]['original']['success_rate']:.0f}%",
            f"{100 * gate[who]['current']['success_rate']:.0f}%",
            f"{sum(gate[who][task]['interventions_per_episode'] for task in ('original', 'current')):.2f}",
        ]
        for who in ("running", "candidate")
    ]
    line = results["line"]
    lines += [
        "",
        "## Online fine-tuning (EWC) and the gate",
        "",
        f"Data: {line['episodes']} logged episodes on the drifted robot (exploration on, lock-step), "
        f"EWC lambda {ft['ewc_lambda']}, {ft['n_updates']} GRPO updates on the {ft['trained_action']} actions. "
        f"Verdict: **{'promoted' if ft['promoted'] else 'not promoted'}**"
        + (f" ({'; '.join(gate['reasons'])})" if gate["reasons"] else "")
        + ".",
        "",
        markdown_table(["policy", "original task", "drifted robot", "interventions / episode"], gate_rows),
        "",
        "## Stage times",
        "",
        markdown_table(["stage", "seconds"], [[k, f"{v:.0f}"] for k, v in results["stage_seconds"].items()]),
    ]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main(config: dict[str, Any]) -> int:
    run_dir = Path(config["output"]) / config["name"]
    if run_dir.exists():
        shutil.rmtree(run_dir)
    write_resolved(config, run_dir)
    start = time.perf_counter()
    results = demo(config, run_dir)
    total = time.perf_counter() - start
    (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    report = write_report(results, run_dir, total)
    print(f"demo finished in {total:.0f} s -> {report}")
    return 0
