"""Run the docs' runnable blocks (slow): page by page, in order, in a fresh folder that is not the checkout.

Every shell and python block without a ``needs`` marker runs as a newcomer would run it, with the test budgets of
``command_checks.BUDGETS`` appended to each ``robot-grpo`` job (docs/about-these-docs.md shows them). The folder
holds links to the checkout's ``launch/``, ``calibration/`` and ``models/`` (launch files name them relative to the
working folder) and receives ``runs/``. A command that exits non-zero fails the test with its page and line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from command_checks import PYTHON, ROBOT_GRPO, budget_overrides, job_of, parse_robot_grpo, strip_nice
from doc_blocks import ROOT, SHELL_LANGS, Block, Command, commands, doc_files, read_blocks

LINKED_FOLDERS = ("launch", "calibration", "models")
COMMAND_TIMEOUT_S = 600  # the export's full checks take about 40 s on an idle core; Ray's start tens of seconds
OUTPUT_TAIL_CHARS = 3000


def runnable_blocks(path: Path) -> list[Block]:
    return [block for block in read_blocks(path) if block.needs is None and block.lang in (*SHELL_LANGS, "python")]


PAGES = [path for path in doc_files() if runnable_blocks(path)]


def argv_of(command: Command) -> list[str]:
    """The command as this test runs it: this interpreter and checkout, the budgets appended."""
    tokens = strip_nice(command.required())
    if tokens[0] in ROBOT_GRPO:
        args, complaint = parse_robot_grpo(tokens)
        assert args is not None, f"{command.where}: {complaint}"
        if not hasattr(args, "set"):  # a tool (report, convert-logs): paths, no launch keys, no budget
            return [sys.executable, "-m", "launch.cli", *tokens[1:]]
        extra = budget_overrides(job_of(args), list(args.set))
        return [sys.executable, "-m", "launch.cli", *tokens[1:], *(arg for text in extra for arg in ("--set", text))]
    assert tokens[0] in PYTHON, f"{command.where}: not runnable here: {command.text}"
    return [sys.executable, *tokens[1:]]


def _run(argv: list[str], where: str, text: str, folder: Path, env: dict[str, str]) -> None:
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    output = (done.stdout + done.stderr)[-OUTPUT_TAIL_CHARS:]
    assert done.returncode == 0, f"{where}: `{text}` exited {done.returncode}:\n{output}"


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[str(path.relative_to(ROOT)) for path in PAGES])
def test_page_blocks_run(page: Path, tmp_path: Path) -> None:
    for name in LINKED_FOLDERS:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env["MPLBACKEND"] = "Agg"
    for index, block in enumerate(runnable_blocks(page)):
        if block.lang == "python":
            script = tmp_path / f"block_{index}.py"
            script.write_text(block.text)
            _run([sys.executable, str(script)], block.where, "python block", tmp_path, env)
            continue
        for command in commands(block):
            _run(argv_of(command), command.where, command.text, tmp_path, env)


def test_every_runnable_page_is_found() -> None:
    names = {str(path.relative_to(ROOT)) for path in PAGES}
    assert {"README.md", "docs/tour.md", "docs/finetuning.md"} <= names
