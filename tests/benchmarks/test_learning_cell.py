"""benchmarks/learning_cell.py's table: medians over seeds, steps to the target, seeds that never reached it."""

from __future__ import annotations

from benchmarks import learning_cell


def run(variant: str, seed: int, successes: list[float], violations: int = 0, complete: bool = True) -> dict:
    curve = [
        {"steps": 1000 * (i + 1), "success": s, "violations_per_1000": 10.0 * violations, "train_s": 1.0}
        for i, s in enumerate(successes)
    ]
    return {"variant": variant, "seed": seed, "budget": 3000, "curve": curve, "train_s": 3.0, "complete": complete}


def test_steps_to_target_is_the_first_evaluation_at_95_percent() -> None:
    assert learning_cell.steps_to_target(run("heads", 0, [0.5, 0.96, 0.9])["curve"]) == 2000
    assert learning_cell.steps_to_target(run("heads", 0, [0.5, 0.9])["curve"]) is None


def test_table_reports_medians_and_unreached_seeds() -> None:
    runs = [
        run("heads", 1000, [0.5, 0.96]),
        run("heads", 1001, [0.95, 0.97]),
        run("heads", 1002, [0.2, 0.4, 0.6], violations=3, complete=False),
    ]
    table = learning_cell.summarize(runs, "test")
    heads = next(line for line in table.splitlines() if line.startswith("| heads"))
    # Last evaluations 0.96, 0.97, 0.6 -> median 96%; steps 2,000, 1,000 and never -> median 2,000.
    assert "| 96% |" in heads and "2,000 (1000: 2,000, 1001: 1,000, 1002: >3,000)" in heads
    assert "cut short: 1002" in heads
    assert "| solo | not run |" in table
