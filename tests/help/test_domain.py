"""The pure rules of help: sections, breadcrumbs, anchors, terms, scoring, reads and citations."""

from __future__ import annotations

import pytest
from loom_help.domain.citations import verify
from loom_help.domain.index import OPERATOR_WEIGHT, HelpIndex
from loom_help.domain.reading import MAX_READ, cut
from loom_help.domain.sections import indexed, slug, split_page
from loom_help.domain.text import fold, terms

PAGE = """\
Intro line before any heading.

# Task inbox

What the page is about.

## Claim a task

Call `task.claim` with the fence. A stale fence answers `TASK_FENCE_STALE`.

```sh
# not a heading: inside a fence
```

### Examples

First examples.

## Errors

### Examples

Second examples.

## Errors

Repeated at level two.

## `X-Loom-Namespace` and [links](other.md)

Set the header X-Loom-Namespace; LOOM_POLICY_MODE turns the gate on.
"""


def page() -> HelpIndex:
    return HelpIndex([split_page("tasks.md", PAGE)])


def test_sections_split_at_headings_and_breadcrumbs_start_with_the_title() -> None:
    p = split_page("tasks.md", PAGE)
    crumbs = [s.breadcrumb for s in p.sections]
    assert p.title == "Task inbox"
    assert crumbs == [
        ("Task inbox",),  # the text before the first heading
        ("Task inbox",),
        ("Task inbox", "Claim a task"),
        ("Task inbox", "Claim a task", "Examples"),
        ("Task inbox", "Errors"),
        ("Task inbox", "Errors", "Examples"),
        ("Task inbox", "Errors"),
        ("Task inbox", "X-Loom-Namespace and links"),
    ]
    assert p.section_text(p.sections[2]).startswith("## Claim a task\n")
    assert "# not a heading" in p.section_text(p.sections[2])


def test_anchors_are_github_slugs_suffixed_where_a_heading_repeats() -> None:
    p = split_page("tasks.md", PAGE)
    assert [s.anchor for s in p.sections] == [
        "",
        "task-inbox",
        "claim-a-task",
        "examples",
        "errors",
        "examples-1",
        "errors-1",
        "x-loom-namespace-and-links",
    ]
    assert len({s.anchor for s in p.sections[1:]}) == len(p.sections) - 1
    assert slug("What's new in v1.2?") == "whats-new-in-v12"
    assert slug("LOOM_POLICY_MODE") == "loom_policy_mode"


def test_a_page_without_a_level_one_heading_takes_its_file_name_as_title() -> None:
    p = split_page("operations/backups.md", "## Copy the data dir\n\ntext\n")
    assert p.title == "backups"
    assert p.sections[0].breadcrumb == ("backups", "Copy the data dir")
    assert p.audience == "operator"


def test_words_fold_plurals_and_simple_suffixes() -> None:
    assert fold("claims") == fold("claimed") == fold("claiming") == fold("claim")
    assert fold("retries") == fold("retry")
    assert fold("creates") == fold("created") == fold("create")


def test_identifiers_are_terms_whole_beside_their_words() -> None:
    got = terms("Call task.claim; set LOOM_POLICY_MODE and X-Loom-Namespace.")
    assert {"#task.claim", "#loom_policy_mode", "#x-loom-namespace", "task", "claim", "loom", fold("namespace")} <= set(got)


@pytest.mark.parametrize(
    ("query", "anchor"),
    [
        ("task.claim", "claim-a-task"),
        ("TASK_FENCE_STALE", "claim-a-task"),
        ("LOOM_POLICY_MODE", "x-loom-namespace-and-links"),
        ("X-Loom-Namespace", "x-loom-namespace-and-links"),
    ],
)
def test_an_exact_name_ranks_the_section_that_names_it_first(query: str, anchor: str) -> None:
    assert page().search(query, 3)[0].section.anchor == anchor


@pytest.mark.parametrize("query", ["task.cl", "task.clam", "task.cliam", "TASK_FENCE_STAL", "TASK_FENCE_STAEL"])
def test_a_prefix_or_a_one_letter_typo_of_a_name_still_ranks_it_first(query: str) -> None:
    assert page().search(query, 3)[0].section.anchor == "claim-a-task"


def test_a_query_reads_only_the_postings_of_its_terms() -> None:
    index = page()
    assert [t for t, _ in index.query_terms("claim zebra")] == ["claim"]


def test_operator_sections_score_three_quarters_and_say_operator() -> None:
    body = "# Backups\n\nCopy the data directory with rsync.\n"
    index = HelpIndex([split_page("backups.md", body), split_page("operations/backups.md", body)])
    hits = index.search("rsync data directory", 5)
    by_page = {h.section.page: h for h in hits}
    assert hits[0].section.page == "backups.md"
    assert by_page["operations/backups.md"].audience == "operator" and by_page["backups.md"].audience == "user"
    assert by_page["operations/backups.md"].score == pytest.approx(by_page["backups.md"].score * OPERATOR_WEIGHT, rel=1e-3)
    assert [h.section.page for h in index.search("rsync", 5, audience="operator")] == ["operations/backups.md"]


def test_operator_pages_are_operations_architecture_and_benchmarks() -> None:
    for path, audience in [
        ("operations/cluster.md", "operator"),
        ("architecture/planes.md", "operator"),
        ("architecture.md", "operator"),
        ("benchmarks.md", "operator"),
        ("tasks.md", "user"),
        ("reference/ops.md", "user"),
    ]:
        assert split_page(path, "# T\n").audience == audience


def test_contributor_pages_are_not_indexed() -> None:
    assert not indexed("development/release.md")
    assert indexed("operations/cluster.md") and indexed("tasks.md")
    assert not indexed("tasks.txt")


def test_a_hit_carries_its_citation_and_a_snippet_naming_the_query() -> None:
    hit = page().search("TASK_FENCE_STALE", 1)[0]
    assert hit.citation == "[help:tasks.md § Task inbox > Claim a task]"
    assert "TASK_FENCE_STALE" in hit.snippet


def test_a_read_is_cut_at_the_limit_and_names_the_offset_of_its_rest() -> None:
    text = "".join(f"line {i:05d} " + "x" * 80 + "\n" for i in range(500))
    first = cut(text, 0)
    assert len(first.text) <= MAX_READ and first.text.endswith("\n")
    assert first.next_offset == len(first.text)
    rest, parts = first, [first.text]
    while rest.next_offset is not None:
        rest = cut(text, rest.next_offset)
        parts.append(rest.text)
    assert "".join(parts) == text
    assert cut("short", 0).next_offset is None


def test_a_citation_verifies_by_breadcrumb_without_title_or_unique_tail() -> None:
    pages = page().pages
    for ref, anchor in [
        ("[help:tasks.md § Task inbox > Claim a task]", "claim-a-task"),
        ("[help:tasks.md § Claim a task]", "claim-a-task"),
        ("[help:tasks.md § Claim a task > Examples]", "examples"),
        ("[help:tasks.md § Task inbox > Errors > Examples]", "examples-1"),
        ("[help:tasks.md § X-Loom-Namespace and links]", "x-loom-namespace-and-links"),
        ("[help:tasks.md]", ""),
    ]:
        v = verify(pages, ref)
        assert (v.verified, v.anchor, v.reason) == (True, anchor, ""), ref


def test_a_citation_fails_for_a_shared_tail_a_missing_section_or_page() -> None:
    pages = page().pages
    cases = [
        ("[help:tasks.md § Examples]", "ambiguous_section"),
        ("[help:tasks.md § Task inbox > Nothing]", "no_such_section"),
        ("[help:nope.md § Task inbox]", "page_not_indexed"),
        ("[doc:tasks.md]", "not_a_help_citation"),
    ]
    for ref, reason in cases:
        v = verify(pages, ref)
        assert (v.verified, v.reason) == (False, reason), ref
    assert verify(None, "[help:tasks.md]").reason == "help_unavailable"


def test_camel_case_names_are_searchable_by_their_parts() -> None:
    index = HelpIndex([split_page("c.md", "# Consumers\n\n## AckPolicy\n\nHow acks work.\n\n## Other\n\nNothing here.\n")])
    assert index.search("ack policy", 1)[0].section.anchor == "ackpolicy"
    assert index.search("AckPolicy", 1)[0].section.anchor == "ackpolicy"
