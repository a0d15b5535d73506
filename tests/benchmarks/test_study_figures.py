"""The study pages' run tables and their markers (benchmarks/study_figures.py), on small hand-made runs."""

from pathlib import Path

import pytest

from benchmarks.study_figures import (
    continual_rows,
    continual_table,
    push_rows,
    push_table,
    replace_block,
    second_half_mean,
)
from benchmarks.study_figures import main as study_main


def curve(successes: list[float], step: int = 100) -> list[dict[str, float]]:
    return [{"steps": (i + 1) * step, "success": s, "std": 0.6 - 0.1 * i} for i, s in enumerate(successes)]


def test_second_half_mean_averages_the_evaluations_from_half_the_budget_on():
    # steps 100..400: the second half starts at 200, so 0.2, 0.4 and 0.0 count, 0.9 does not
    assert second_half_mean(curve([0.9, 0.2, 0.4, 0.0])) == pytest.approx(0.2)


def test_push_rows_summarize_each_learner_and_skip_the_controllers():
    sources = {
        "probe_a": {"result": {"runs": [{"variant": "v", "seed": 0, "curve": curve([0.1, 0.3, 0.2])}]}},
        "fixed": {
            "result": {"runs": [{"variant": "scripted", "seed": None, "curve": [{"steps": 0, "success": 0.84}]}]}
        },
        "probe_b": {"result": {"runs": [{"variant": "w", "seed": 1000, "curve": curve([0.0, 0.1], step=500)}]}},
    }
    rows = push_rows(sources)
    assert [(r["source"], r["best"], r["last"]) for r in rows] == [("probe_a", 0.3, 0.2), ("probe_b", 0.1, 0.1)]
    assert rows[0]["std"] == "0.60 / 0.40" and rows[0]["moved"] == "- / -"
    table = push_table(rows).splitlines()
    assert table[2].startswith("| probe_b | w | 1000 | 1,000 |")  # the longest run first


def _round(new: float, original: float, promoted: bool | None = None) -> dict:
    entry = {"new": {"success": new, "interventions_per_episode": 0.5}, "original": {"success": original}}
    return entry if promoted is None else {**entry, "promoted": promoted}


BEFORE = {"new": {"success": 0.7}, "original": {"success": 0.99}}


def test_continual_rows_read_both_the_per_seed_and_the_single_seed_results():
    per_seed = {
        "config": {"delay": 6, "gain": 1.5, "tuned_seeds": [1], "explore_scale": 0.5, "gate": True},
        "seeds": {"1": {"before": BEFORE, "variants": {"ewc": {"rounds": [_round(0.8, 1.0, True)]}}}},
    }
    single = {
        "config": {"delay": 3, "gain": 1.8},
        "before": BEFORE,
        "variants": {"plain": {"rounds": [_round(0.9, 0.95)]}},
    }
    rows = continual_rows({"gated": {"result": per_seed}, "old": {"result": single}})
    assert [(r["source"], r["new"], r["promoted"]) for r in rows] == [
        ("gated", [0.7, 0.8], 1),
        ("old", [0.7, 0.9], None),
    ]
    lines = continual_table(rows).splitlines()
    assert "| 1 (tuned) | ewc | 0.5 | 0 | yes (1 of 1 promoted) | 0.70 -> 0.80 | 0.99 -> 1.00 | 0.50 |" in lines[2]
    assert "| - | plain | 1 | 0 | no | 0.70 -> 0.90 | 0.99 -> 0.95 | 0.50 |" in lines[3]


def test_replace_block_rewrites_only_between_the_markers(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("# t\n<!-- table:runs -->\nold\nrows\n<!-- /table:runs -->\nafter\n", encoding="utf-8")
    replace_block(page, "runs", "| new |")
    assert page.read_text(encoding="utf-8") == "# t\n<!-- table:runs -->\n| new |\n<!-- /table:runs -->\nafter\n"
    replace_block(page, "runs", "| again |")  # idempotent on its own output
    assert "| again |\n<!-- /table:runs -->" in page.read_text(encoding="utf-8")
    with pytest.raises(SystemExit, match="no <!-- table:other -->"):
        replace_block(page, "other", "x")


def test_print_names_the_stored_sources_when_one_is_unknown(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as stop:
        study_main(["--print", "no_such_run"])
    assert stop.value.code == 2
    assert "push_probe_restart_1m" in capsys.readouterr().err
