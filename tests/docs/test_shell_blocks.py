"""Every shell block of the docs against the code: options, launch keys, targets, extras (fast: nothing is run).

The blocks are also run (``test_run_blocks.py``, slow); how to mark a block that cannot run here:
docs/about-these-docs.md.
"""

from __future__ import annotations

import re

import pytest
from command_checks import problems, run_problem
from doc_blocks import ROOT, Block, Command, all_blocks, commands, shell_blocks

SHELL = shell_blocks()
COMMANDS = [command for block in SHELL for command in commands(block)]
README_MAX_LINES = 150  # the README is a front page; the rest lives under docs/
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _command(text: str, needs: str | None = None) -> Command:
    block = Block(ROOT / "README.md", 1, "bash", text, needs)
    (command,) = commands(block)
    return command


def test_the_docs_hold_the_tour_and_the_commands_are_found() -> None:
    programs = {command.tokens[0] for command in COMMANDS}
    jobs = {command.tokens[1] for command in COMMANDS if command.tokens[0].endswith("robot-grpo")}
    assert {".venv/bin/robot-grpo", "make"} <= programs
    assert {"train", "export", "eval", "calibrate", "run", "finetune"} <= jobs


@pytest.mark.parametrize("command", COMMANDS, ids=[command.where for command in COMMANDS])
def test_command_matches_the_code(command: Command) -> None:
    found = problems(command)
    assert not found, f"{command.where}: {command.text}\n  " + "\n  ".join(found)


def test_unmarked_blocks_are_runnable() -> None:
    failures = [
        f"{command.where}: {command.text}: {why}; make it runnable or mark its block <!-- needs: KIND (why) -->"
        for block in SHELL
        if block.needs is None
        for command in commands(block)
        if (why := run_problem(command))
    ]
    assert not failures, "\n".join(failures)


def test_every_code_block_names_its_language() -> None:
    """A fence without a language would hide its commands from these tests; ``console`` is not used (no prompts)."""
    bad = [block.where for block in all_blocks() if not block.lang or block.lang == "console"]
    assert not bad, f"give these fences a language (bash, python, yaml, text, markdown): {bad}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("robot-grpo train --no-such-option", "refuses the options"),
        ("robot-grpo train --set train.gamma=0.9", "no key 'train.gamma'"),
        ("robot-grpo run --set robot.baud=9600", "no key 'robot.baud'"),
        ("robot-grpo run --set episodes=0", "does not validate"),
        ("robot-grpo run --config launch/no_such.yaml", "does not exist"),
        ("robot-grpo population [--set no_such=1]", "no key 'no_such'"),
        (".venv/bin/python benchmarks/learning.py --task easy --no-such-flag", "has no option --no-such-flag"),
        ("python -m deploy.no_such_module", "no such module"),
        ("make no-such-target", "no target"),
        ("make demo NO_SUCH_VARIABLE=1", "does not use the variable"),
        ("pip install .[no-such-extra]", "no extra"),
        ("frobnicate --now", "do not know the command"),
    ],
)
def test_a_stale_command_is_caught(text: str, expected: str) -> None:
    assert any(expected in problem for problem in problems(_command(text))), problems(_command(text))


def test_the_tour_commands_pass() -> None:
    assert (
        problems(_command("robot-grpo train --set env.delay_range=[1,3] --set train.hyperparameters.ent_coef=0.01"))
        == []
    )
    assert problems(_command("robot-grpo population [--set scale.address=<head-ip>:6379] [--set members=16]")) == []


def test_what_the_run_test_refuses_to_run() -> None:
    assert run_problem(_command("ray start --address=<head-ip>:6379", "cluster")) == "it has a placeholder"
    assert "no test budget" in (run_problem(_command("robot-grpo demo --quick")) or "")
    assert "does not run make" in (run_problem(_command("make demo")) or "")
    assert run_problem(_command("robot-grpo train [--set scale.workers=N]")) is None


def test_readme_is_a_front_page_whose_links_work_on_github() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES, "the README is a front page: move sections to docs/"
    missing = [
        target
        for target in LINK.findall(text)
        if not re.match(r"^[a-z]+:|^#", target) and not (ROOT / target.split("#")[0]).exists()
    ]
    assert not missing, f"README links to files that do not exist: {missing}"
