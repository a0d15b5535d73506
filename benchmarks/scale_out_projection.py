"""The scale-out projection again, with another learner: ``benchmarks/scale_out.py``'s rollout figures
(``results/scale_out.json``) and the learner seconds per 1k env steps of a ``benchmarks/learner_speed.py`` run (e.g.
on a GPU, at the update size of 64 workers). Writes ``results/scale_out_projection_<device>.md``.

    .venv/bin/python benchmarks/learner_speed.py --device cuda --groups 128 --minibatches 11 --updates 2 --repeats 1
    .venv/bin/python benchmarks/scale_out_projection.py benchmarks/results/learner_speed_cuda_128_groups.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scale_out beside this file

from scale_out import PROJECTION_MODEL, RESULTS, project


def reproject(learner_json: Path) -> None:
    """The projection with the learner seconds per 1k env steps of a ``learner_speed.py`` run."""
    learner = json.loads(learner_json.read_text())["paths"]["this"]
    results = json.loads((RESULTS / "scale_out.json").read_text())
    rows = project(
        results["rollouts_by_name"]["ray_1"],
        results["call_costs"],
        results["payload_bytes"]["weights"],
        results["payload_bytes"]["group"],
        learner["per_kilo_s"],
    )
    lines = [
        f"# Scale-out projection with the learner of `{learner_json.name}` ({learner['device']}, "
        f"{learner['per_kilo_s']:.4f} learner s per 1k env steps, measured at {learner['steps_per_update']} env steps "
        "per update)",
        "",
        f"Rollout figures: benchmarks/results/scale_out.json. Model: {PROJECTION_MODEL} Here the learner time is "
        "the measured seconds per 1k env steps times the update's env steps.",
        "",
        "| workers | batch per update | rollout s | update s | env steps/s | learner share |",
        "|---|---|---|---|---|---|",
    ]
    for p in rows:
        lines.append(
            f"| {p['workers']} | {p['batch']} ({p['groups']}) | {p['rollout_s']:.3f} | {p['update_s']:.3f} | "
            f"{p['update_steps_per_s']:.0f} | {100 * p['learner_share']:.0f}% |"
        )
    device = learner["device"].split(":")[0]
    (RESULTS / f"scale_out_projection_{device}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("learner_json", type=Path, help="a benchmarks/learner_speed.py result (JSON)")
    reproject(parser.parse_args().learner_json)
