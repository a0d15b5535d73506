"""The mkdocs hook that shows repository files on the site (docs/hooks/repo_files.py): where links land."""

from __future__ import annotations

import importlib.util

from doc_blocks import ROOT

SPEC = importlib.util.spec_from_file_location("repo_files", ROOT / "docs" / "hooks" / "repo_files.py")
hook = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(hook)
CARRIED = {"benchmarks/results/learning_easy.png", "benchmarks/results/learning_easy.md", "deploy/wire/PROTOCOL.md"}


def rewrite(markdown: str, page: str, uri: str) -> str:
    return hook.rewrite_links(markdown, page, uri, "docs", CARRIED)


def test_a_page_link_to_a_result_figure_lands_on_the_site_copy() -> None:
    text = "![curve](../../benchmarks/results/learning_easy.png)"
    assert rewrite(text, "docs/benchmarks/index.md", "benchmarks/index.md") == (
        "![curve](../repo/benchmarks/results/learning_easy.png)"
    )


def test_readme_links_to_pages_become_site_links_and_keep_their_anchor() -> None:
    text = "[tour](docs/tour.md#where-to-go-next) and [spec](deploy/wire/PROTOCOL.md)"
    assert (
        rewrite(text, "README.md", "index.md")
        == "[tour](tour.md#where-to-go-next) and [spec](repo/deploy/wire/PROTOCOL.md)"
    )


def test_links_between_pages_urls_and_uncarried_files_are_left_alone() -> None:
    text = '[a](runtime.md#the-loop) [b](https://example.org/x.md) [c](#top) [d](../launch/jobs.py "code")'
    assert rewrite(text, "docs/tour.md", "tour.md") == text


def test_a_page_to_the_readme_is_the_home_page() -> None:
    assert rewrite("[home](../README.md)", "docs/tour.md", "tour.md") == "[home](index.md)"


def test_the_site_carries_every_result_table_and_lists_it() -> None:
    carried = hook.repo_files(ROOT)
    tables = sorted(path.name for path in (ROOT / "benchmarks" / "results").glob("*.md"))
    assert {f"benchmarks/results/{name}" for name in tables} <= set(carried)
    index = hook.results_index(ROOT)
    assert all(f"/benchmarks/results/{name})" in index for name in tables)
    assert "[figure](../repo/benchmarks/results/learning_easy.png)" in index
