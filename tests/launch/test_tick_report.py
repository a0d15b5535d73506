"""``robot-grpo report``: a small run's tick log becomes PNGs and a markdown summary; a folder of runs gets one
report each; without matplotlib the summary is still written and one line says the plots were skipped."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from launch.cli import main

QUICK_RUN = ["--set", "robot.lockstep=true", "--set", "period_s=0.005", "--set", "episodes=2"]
QUICK_RUN += ["--set", "episode_steps=15"]
PLOTS = ("positions.png", "interventions.png", "timing.png", "transitions.png", "latency.png")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Two short runs on the lock-step simulated robot under one folder (like the demo's stages)."""
    root = tmp_path_factory.mktemp("runs")
    for name in ("first", "second"):
        assert main(["run", "--name", name, "--set", f"output={root}", *QUICK_RUN]) == 0
    return root


def test_a_run_gets_its_plots_and_summary(runs: Path, capsys) -> None:
    assert main(["report", str(runs / "first")]) == 0
    out = runs / "first" / "report"
    assert "report.md (5 plots)" in capsys.readouterr().out
    for name in PLOTS:
        assert (out / name).read_bytes().startswith(b"\x89PNG"), name
    summary = (out / "report.md").read_text()
    assert "# Run report: first" in summary and "| policy_id |" in summary
    assert "2 episodes" in summary and "damaged record(s)" in summary
    assert "## Interventions" in summary and "latency (state in -> command out)" in summary
    assert "run x" in summary  # every episode's start shows as a transition into run
    assert all(f"![{name}]({name})" in summary for name in PLOTS)


def test_a_folder_of_runs_gets_a_report_per_run(runs: Path, capsys, tmp_path: Path) -> None:
    assert main(["report", str(runs), "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("report.md") == 2
    assert (tmp_path / "first" / "report.md").is_file() and (tmp_path / "second" / "positions.png").is_file()


def test_without_matplotlib_the_summary_is_written_and_one_line_says_so(runs: Path, capsys, monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert main(["report", str(runs / "second"), "--out", str(runs / "bare")]) == 0
    line = capsys.readouterr().out.strip()
    assert line.count("\n") == 0 and "(0 plots); matplotlib is not installed: plots skipped" in line
    summary = (runs / "bare" / "report.md").read_text()
    assert "plots skipped" in summary and not list((runs / "bare").glob("*.png"))


@pytest.mark.parametrize("what", ["missing", "empty"])
def test_a_folder_without_a_tick_log_is_one_line_and_exit_2(tmp_path: Path, capsys, what: str) -> None:
    target = tmp_path / "nothing"
    if what == "empty":
        target.mkdir()
    assert main(["report", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("robot-grpo: error:") and err.count("\n") == 1
