"""``robot-grpo report <run folder>``: a run's tick log as PNGs and a markdown summary.

Reads the MCAP tick log of a run folder (``runs/<name>/ticks.mcap`` and its segments; a folder without a log but
with run folders under it, like the demo's, gets one report per run) and writes, under ``<run>/report/``:

- ``positions.png``: the gripper's reported position per axis over time against the workspace box, the goal and
  the checker's position bound (when the log has it);
- ``interventions.png``: when the safety filter and the runtime intervened, by reason;
- ``timing.png``: tick latency (state in -> command out) and wake-up jitter over time, and the latency histogram;
- ``transitions.png``: the state machine's state over time;
- ``report.md``: the run's metadata, ticks and episodes, interventions by reason, timing percentiles,
  transitions, and what the reader had to skip.

The plots need matplotlib (the [sim] extra); without it the summary is still written and one line says the
plots were skipped.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import numpy as np

from launch.report import markdown_table
from launch.schema import LaunchError

REPORT_DIR = "report"
DEFAULT_POSITION_SLICE = (0, 3)  # a log without run metadata (converted from the old container)
MS = 1e3


def run_folders(path: Path) -> list[Path]:
    """The run folders under ``path``: itself if it holds a tick log, else its subfolders that do."""
    from deploy.runtime.ticklog import TICKLOG_SUFFIX

    if path.is_file():
        return [path]
    if not path.is_dir():
        raise LaunchError(f"{path} does not exist; give a run folder (runs/<name>/) or its ticks.mcap")
    if any(path.glob(f"*{TICKLOG_SUFFIX}")):
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_dir() and any(p.glob(f"*{TICKLOG_SUFFIX}")))
    if not found:
        raise LaunchError(f"{path}: no tick log (*{TICKLOG_SUFFIX}) in it or in its subfolders")
    return found


class RunLog:
    """A run's tick log in arrays: times (seconds from the first tick), positions, goals, bounds, timing."""

    def __init__(self, path: Path) -> None:
        from deploy.runtime.ticklog import scan_ticklog

        try:
            self.scan = scan_ticklog(path)
        except ValueError as err:
            raise LaunchError(str(err)) from None
        records = self.scan.records
        if not records:
            raise LaunchError(f"{path}: the tick log holds no ticks")
        run = self.scan.metadata.get("run", {})
        self.run = run
        start, stop = json.loads(run["position_slice"]) if "position_slice" in run else DEFAULT_POSITION_SLICE
        self.dims = stop - start
        self.t0 = records[0].t_s
        self.t = np.array([r.t_s - self.t0 for r in records])
        self.tick = np.array([r.tick for r in records])
        self.position = self._stack([r.state[start:stop] for r in records])
        self.goal = self._stack([r.goal[: self.dims] for r in records])
        self.bound_low = self._stack([r.bound_low for r in records])
        self.bound_high = self._stack([r.bound_high for r in records])
        self.latency_s = np.array([r.latency_s for r in records])
        self.jitter_s = np.array([r.jitter_s for r in records])
        self.reasons = [r.reasons for r in records]
        self.episodes = len({r.episode_id for r in records if r.episode_id >= 0})
        self.stops = sum(r.stop for r in records)
        box = ("workspace_low_m", "workspace_high_m")
        self.box = tuple(np.asarray(json.loads(run[k])) for k in box) if all(k in run for k in box) else None

    def _stack(self, rows: list[np.ndarray]) -> np.ndarray:
        """Rows of length ``dims`` stacked; a tick without one (held, outside an episode) is NaN."""
        out = np.full((len(rows), self.dims), np.nan)
        for i, row in enumerate(rows):
            if row.size == self.dims:
                out[i] = row
        return out

    def intervention_counts(self) -> Counter[str]:
        return Counter(reason for reasons in self.reasons for reason in reasons)

    def transition_times(self) -> list[tuple[float, str, str, str]]:
        return [(t.t_s - self.t0, t.source, t.target, t.reason) for t in self.scan.transitions]


def _percentiles_ms(values_s: np.ndarray) -> tuple[str, str, str]:
    finite = values_s[np.isfinite(values_s)]
    if not finite.size:
        return ("-", "-", "-")
    return tuple(f"{v * MS:.3f}" for v in (np.percentile(finite, 50), np.percentile(finite, 99), finite.max()))


def summary_markdown(log: RunLog, name: str, plots: list[str], note: str) -> str:
    scan = log.scan
    lines = [f"# Run report: {name}", ""]
    if log.run:
        lines += [markdown_table(["run", "value"], sorted(log.run.items())), ""]
    converted = scan.metadata.get("converted_from")
    if converted:
        lines += [f"Converted from an old log: {converted.get('files', '?')}.", ""]
    lines += [
        f"{len(scan.records)} ticks over {log.t[-1]:.1f} s in {len(scan.files)} file(s); {log.episodes} episodes; "
        f"{log.stops} safe stop(s). Skipped while reading: {scan.corrupt_records} damaged record(s), "
        f"{scan.torn_tails} torn tail(s).",
        "",
        "## Interventions",
        "",
    ]
    counts = log.intervention_counts()
    lines += [markdown_table(["reason", "ticks"], counts.most_common()) if counts else "None.", ""]
    lines += ["## Timing", ""]
    rows = [("latency (state in -> command out)", *_percentiles_ms(log.latency_s))]
    rows.append(("wake-up jitter", *_percentiles_ms(np.abs(log.jitter_s))))
    lines += [markdown_table(["", "p50 ms", "p99 ms", "max ms"], rows), "", "## Transitions", ""]
    transitions = log.transition_times()
    if transitions:
        per_target = Counter(target for _, _, target, _ in transitions)
        lines.append(", ".join(f"{target} x{n}" for target, n in per_target.most_common()) + ".")
        lines += [
            "",
            markdown_table(["t s", "from", "to", "reason"], [(f"{t:.2f}", *rest) for t, *rest in transitions[-20:]]),
        ]
        if len(transitions) > 20:
            lines.append(f"(the last 20 of {len(transitions)})")
    else:
        lines.append("None logged.")
    lines += ["", "## Plots", ""]
    lines += [f"![{p}]({p})" for p in plots] if plots else [note]
    return "\n".join(lines) + "\n"


def write_report(path: Path, out: Path | None = None) -> tuple[Path, list[str], str]:
    """The report of the run at ``path`` (a run folder or a tick log); returns (report.md, plots, note)."""
    log = RunLog(path)
    folder = path if path.is_dir() else path.parent
    out = out or folder / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    plots: list[str] = []
    note = ""
    if importlib.util.find_spec("matplotlib") is None:
        note = "matplotlib is not installed: plots skipped (pip install matplotlib, or the [sim] extra)"
    else:
        from launch.tick_plots import plot_all

        plots = plot_all(log, out)
    report = out / "report.md"
    report.write_text(summary_markdown(log, folder.name, plots, note))
    return report, plots, note


def main(run: str, out: str | None = None) -> int:
    """``robot-grpo report``: one report per run folder found at ``run``."""
    folders = run_folders(Path(run))
    for folder in folders:
        target = Path(out) / folder.name if out and len(folders) > 1 else (Path(out) if out else None)
        report, plots, note = write_report(folder, target)
        print(f"{report} ({len(plots)} plots)" + (f"; {note}" if note else ""))
    return 0
