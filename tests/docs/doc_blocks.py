"""The fenced code blocks of the docs, the commands in their shell blocks, and the markers that say what a block needs.

A block that cannot run on a plain checkout says why on the line before its fence::

    <!-- needs: hardware (a robot arm on a serial port) -->

The kinds are ``NEEDS_KINDS``; docs/about-these-docs.md explains them to the docs' writers. Placeholders are
written ``<like-this>`` and optional parts ``[--set like=this]``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NEEDS_KINDS = {
    "hardware": "a robot arm on a serial port",
    "gpu": "an NVIDIA GPU, CUDA or TensorRT",
    "cluster": "several machines (a Ray cluster)",
    "time": "minutes to hours of compute",
    "install": "to change the Python environment",
    "your-code": "code the reader writes",
}
SHELL_LANGS = ("bash", "sh", "shell")
FENCE = re.compile(r"^(```+|~~~+)\s*([A-Za-z0-9_+-]*)")
MARKER = re.compile(r"^<!--\s*needs:\s*([a-z-]+)\s*(?:\((.*)\))?\s*-->$")
PLACEHOLDER = re.compile(r"<[A-Za-z][A-Za-z0-9_-]*>")


@dataclass(frozen=True)
class Block:
    """One fenced code block: its file, the line of its opening fence (1-based), language, text, marker."""

    path: Path
    line: int
    lang: str
    text: str
    needs: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Command:
    """One shell command of a block (continuation lines joined), as tokens; ``line`` is where it starts."""

    block: Block
    line: int
    tokens: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.block.path.relative_to(ROOT)}:{self.line}"

    @property
    def text(self) -> str:
        return " ".join(self.tokens)

    def required(self) -> list[str]:
        """The tokens without the optional ``[...]`` parts (what the command is when run as written)."""
        return split_optional(list(self.tokens))[0]

    def everything(self) -> list[str]:
        """Every token, the optional parts' brackets removed (what must be valid when a reader adds them)."""
        return split_optional(list(self.tokens))[1]

    def has_placeholder(self) -> bool:
        return any(PLACEHOLDER.search(token) for token in self.required())


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def read_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a markdown file, each with the ``needs`` marker on the line before it (if any)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, lang, start = match.group(1), match.group(2).lower(), index
        end = start + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        blocks.append(Block(path, start + 1, lang, "\n".join(lines[start + 1 : end]), _marker(lines, start, path)))
        index = end + 1
    return blocks


def _marker(lines: list[str], fence_index: int, path: Path) -> str | None:
    previous = fence_index - 1
    while previous >= 0 and not lines[previous].strip():
        previous -= 1
    if previous < 0 or not lines[previous].lstrip().startswith("<!-- needs"):
        return None
    match = MARKER.match(lines[previous].strip())
    if not match or match.group(1) not in NEEDS_KINDS:
        raise ValueError(
            f"{path.relative_to(ROOT)}:{previous + 1}: bad marker {lines[previous].strip()!r}; write "
            f"<!-- needs: KIND (why) --> with KIND one of {', '.join(NEEDS_KINDS)}"
        )
    return match.group(1)


def commands(block: Block) -> list[Command]:
    """The commands of a shell block: comments dropped, backslash continuations joined, ``&&`` chains split."""
    found: list[Command] = []
    pending, first_line = "", 0
    for offset, raw in enumerate(block.text.splitlines()):
        if not pending:
            first_line = block.line + 1 + offset
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        tokens = shlex.split(pending + raw, comments=True)
        pending = ""
        chain: list[str] = []
        for token in [*tokens, "&&"]:
            if token == "&&":
                if chain:
                    found.append(Command(block, first_line, tuple(chain)))
                chain = []
            else:
                chain.append(token)
    return found


def split_optional(tokens: list[str]) -> tuple[list[str], list[str]]:
    """(the tokens outside ``[...]`` groups, every token with the groups' brackets removed).

    A group opens at a token that starts with ``[-`` (an optional option: ``[--set members=16]``) and closes at the
    first token that ends with ``]``; ``--set env.delay_range=[1,3]`` is a value, not a group.
    """
    required: list[str] = []
    everything: list[str] = []
    in_group = False
    for token in tokens:
        if token.startswith("[-") and not in_group:
            in_group, token = True, token[1:]
        closes = in_group and token.endswith("]") and token.count("]") > token.count("[")
        if closes:
            token = token[:-1]
        everything.append(token)
        if not in_group:
            required.append(token)
        if closes:
            in_group = False
    return required, everything


def all_blocks(root: Path = ROOT) -> list[Block]:
    """Every fenced block of every doc file, in file order."""
    return [block for path in doc_files(root) for block in read_blocks(path)]


def shell_blocks(root: Path = ROOT) -> list[Block]:
    return [block for block in all_blocks(root) if block.lang in SHELL_LANGS]
