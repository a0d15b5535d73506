"""mkdocs hook: the site shows repository files where they live, so the docs link them instead of copying them.

- ``README.md`` is the site's home page (``index.md``): the front page is written once, for GitHub and the site.
- ``benchmarks/results/*`` (the benchmark tables and figures), the wire protocol spec, the shipped model's report
  and the launch and calibration files are added to the site under ``repo/<their path>``, not in the nav.
- Links are written as relative paths between the real files (``../benchmarks/results/learning_easy.png`` from
  ``docs/benchmarks/index.md``), which is what GitHub shows; on the site each such link is rewritten to where the
  file landed. A link to a repository file this hook does not bring in is left alone, so ``mkdocs build --strict``
  names it.

Only ``mkdocs`` and the stdlib are imported (the hook runs inside ``mkdocs build``).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files, InclusionLevel

HOME_PAGE = "index.md"  # where README.md lands on the site
RESULTS_GLOB = "benchmarks/results/*.md"
RESULTS_README = "README.md"  # benchmarks/results/README.md: one line per benchmark, listed first
RESULTS_INDEX = "benchmarks/all-results.md"  # a generated page listing every result table (in the nav)
REPO_PREFIX = "repo"  # site folder of the repository files below
# Repository files the pages may link to (globs relative to the repository root).
REPO_GLOBS = (
    RESULTS_GLOB,
    "benchmarks/results/*.png",
    "deploy/wire/PROTOCOL.md",
    "models/README.md",
    "models/default/report.md",
    "launch/*.yaml",
    "calibration/*.yaml",
)
# A markdown link or image target: ](target) or ](target "title"); the target has no spaces.
LINK = re.compile(r"(\]\()([^)\s]+)((?:\s+\"[^\"]*\")?\))")


def repo_files(root: Path) -> list[str]:
    """The repository files the site carries, as posix paths relative to ``root``."""
    found = {path.relative_to(root).as_posix() for pattern in REPO_GLOBS for path in root.glob(pattern)}
    return sorted(found)


def site_uri(repo_path: str, docs_dir: str, carried: set[str]) -> str | None:
    """Where the repository file ``repo_path`` lands on the site (a docs URI), or None when it does not."""
    if repo_path == "README.md":
        return HOME_PAGE
    prefix = docs_dir.rstrip("/") + "/"
    if repo_path.startswith(prefix):
        return repo_path[len(prefix) :]
    if repo_path in carried:
        return f"{REPO_PREFIX}/{repo_path}"
    return None


def rewrite_links(markdown: str, page_repo_path: str, page_uri: str, docs_dir: str, carried: set[str]) -> str:
    """Rewrite relative links of a page (``page_repo_path`` in the repository, ``page_uri`` on the site).

    A target is resolved against the page's real folder in the repository; if it names a file the site carries,
    the link becomes the relative path between the two site URIs (its ``#anchor`` kept). Absolute URLs, anchors
    alone and targets the site does not carry are returned unchanged.
    """
    page_dir = posixpath.dirname(page_repo_path)
    uri_dir = posixpath.dirname(page_uri)

    def replace(match: re.Match[str]) -> str:
        target = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return match.group(0)
        path, _, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(page_dir, path))
        uri = site_uri(repo_path, docs_dir, carried)
        if uri is None:
            return match.group(0)
        new = posixpath.relpath(uri, uri_dir or ".") + (f"#{anchor}" if anchor else "")
        return f"{match.group(1)}{new}{match.group(3)}"

    return LINK.sub(replace, markdown)


def results_index(root: Path) -> str:
    """The markdown of the page that lists every benchmark table (its title, and its figure when it has one)."""
    index_link = f"../{REPO_PREFIX}/benchmarks/results/{RESULTS_README}"
    lines = [
        "# All result tables",
        "",
        "Every table in `benchmarks/results/`, as the benchmarks wrote it (each names the command that reproduces it).",
        f"[The index]({index_link}) says in one line each what a benchmark measures, its headline and its command.",
        "",
    ]
    for path in sorted(root.glob(RESULTS_GLOB)):
        if path.name == RESULTS_README:
            continue
        first = path.read_text(encoding="utf-8").splitlines()[:1]
        title = first[0].lstrip("# ").strip() if first and first[0].startswith("#") else path.stem
        figure = path.with_suffix(".png")
        extra = f" ([figure](../{REPO_PREFIX}/benchmarks/results/{figure.name}))" if figure.exists() else ""
        lines.append(f"- [{path.stem}](../{REPO_PREFIX}/benchmarks/results/{path.name}): {title}{extra}")
    return "\n".join(lines) + "\n"


def _root(config: Any) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _docs_dir(config: Any) -> str:
    return Path(config["docs_dir"]).resolve().relative_to(_root(config)).as_posix()


def on_files(files: Files, config: Any) -> Files:
    """Add README.md as the home page and the carried repository files under ``repo/``."""
    root = _root(config)
    files.append(File.generated(config, HOME_PAGE, abs_src_path=str(root / "README.md")))
    files.append(File.generated(config, RESULTS_INDEX, content=results_index(root)))
    for path in repo_files(root):
        uri = f"{REPO_PREFIX}/{path}"
        files.append(File.generated(config, uri, abs_src_path=str(root / path), inclusion=InclusionLevel.NOT_IN_NAV))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point the page's links at the site's copies of the files they name."""
    root = _root(config)
    if page.file.abs_src_path is None:  # a page this hook generated with its links already in place
        return markdown
    page_repo_path = Path(page.file.abs_src_path).resolve().relative_to(root).as_posix()
    carried = set(repo_files(root))
    return rewrite_links(markdown, page_repo_path, page.file.src_uri, _docs_dir(config), carried)
