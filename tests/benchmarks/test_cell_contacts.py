"""benchmarks/cell_contacts.py: bare wrist hunters make the arms touch and the record names the links; the envelope
puts the wrist and forearm above the gripper; a small end-to-end run writes its tables."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.cell_contacts import main, search


def test_bare_wrist_hunters_touch_and_the_links_are_named() -> None:
    run = search("wrist_hunter", 3, episodes=3, runtimes=False, seed=0, envelope=True)
    assert run["contact_episodes"] >= 2  # 199 of 200 in the stored run: nothing keeps them apart
    assert sum(run["contact_links"].values()) == run["contact_episodes"]
    assert all(" / " in pair and "arm_0/" not in pair and "arm_1/" not in pair for pair in run["contact_links"])
    envelope = run["envelope"]
    assert envelope["wrist"]["low_m"][2] > 0.05 and envelope["forearm"]["low_m"][2] > 0.05  # above the gripper
    assert envelope["gripper"]["low_m"][2] < 0.0 < envelope["gripper"]["high_m"][2]  # the fingers reach below


def test_a_small_run_writes_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "contacts"
    assert main(["--episodes", "1", "--bare-episodes", "1", "--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    assert {r["searcher"] for r in result["runs"]} == {"goal_seeker", "unfiltered", "scissor", "wrist_hunter", "random"}
    assert set(result["envelope"]) == {"gripper", "wrist", "forearm", "elbow"}
    table = out.with_suffix(".md").read_text()
    assert "| wrist_hunter | yes | 1 |" in table and "| forearm |" in table
    assert main(["--episodes", "0", "--out", str(out)]) == 2
