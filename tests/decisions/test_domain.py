"""Pure rules: the statement, its limits and cuts, the derived key, calibration."""

from __future__ import annotations

import pytest
from loom_decisions.domain.calibration import Scored, calibrate
from loom_decisions.domain.keys import MissingIdentity, decision_key
from loom_decisions.domain.ranking import UnifiedHit, merge, score_candidates
from loom_decisions.domain.statement import (
    ALTERNATIVE_MAX,
    DecisionText,
    LimitExceeded,
    cut_alternative,
    decision_tags,
    stage_of,
)


def text(**kw: object) -> DecisionText:
    base: dict[str, object] = {
        "scenario": "retention for raw transcripts",
        "outcome": "keep transcripts 30 days",
        "reasoning": "Replay needs 30 days.",
    }
    base.update(kw)
    return DecisionText.checked(**base)  # type: ignore[arg-type]


def test_statement_reads_scenario_decided_because_rejected() -> None:
    t = text(alternatives=["keep forever", "7 days"])
    assert (
        t.statement()
        == "retention for raw transcripts. Decided keep transcripts 30 days because Replay needs 30 days. Rejected: keep forever; 7 days."
    )


def test_statement_without_alternatives_has_no_rejected_part() -> None:
    assert text().statement() == "retention for raw transcripts. Decided keep transcripts 30 days because Replay needs 30 days."


def test_realized_outcome_is_appended() -> None:
    t = text(realized="no replay gaps in the quarter")
    assert t.statement().endswith("Replay needs 30 days. Realized: no replay gaps in the quarter.")


@pytest.mark.parametrize("reasoning", ["keep transcripts 30 days", "Keep   transcripts 30 DAYS.", " keep transcripts 30 days! "])
def test_reasoning_that_restates_the_outcome_reads_decided_outcome_only(reasoning: str) -> None:
    assert text(reasoning=reasoning).statement() == "retention for raw transcripts. Decided keep transcripts 30 days."


def test_a_proposal_reads_proposed() -> None:
    assert text(stage="proposed").statement().startswith("retention for raw transcripts. Proposed keep transcripts 30 days because")
    assert (
        text(stage="proposed", reasoning="keep transcripts 30 days").statement()
        == "retention for raw transcripts. Proposed keep transcripts 30 days."
    )


@pytest.mark.parametrize(
    ("field", "limit"),
    [("scenario", 2000), ("outcome", 1000), ("reasoning", 4000), ("realized", 2000)],
)
def test_each_part_is_kept_whole_up_to_its_limit_and_refused_past_it(field: str, limit: int) -> None:
    assert text(**{field: "a" * limit})
    with pytest.raises(LimitExceeded):
        text(**{field: "a" * (limit + 1)})


def test_ten_alternatives_are_kept_and_eleven_refused() -> None:
    assert len(text(alternatives=[f"option {i}" for i in range(10)]).alternatives) == 10
    with pytest.raises(LimitExceeded):
        text(alternatives=[f"option {i}" for i in range(11)])


def test_a_long_alternative_is_cut_at_a_space_and_ends_in_an_ellipsis() -> None:
    alt = "use " + " ".join(f"src/storage/module_{i}.py" for i in range(40))
    cut = cut_alternative(alt)
    assert len(cut) <= ALTERNATIVE_MAX
    assert cut.endswith("…")
    body = cut[:-1]
    assert alt.startswith(body) and alt[len(body)] == " "  # cut before a space: no half file name


def test_a_long_cjk_alternative_is_cut_between_two_cjk_characters() -> None:
    alt = "保存期間を九十日にする案" * 40
    cut = cut_alternative(alt)
    assert len(cut) == ALTERNATIVE_MAX and cut.endswith("…")
    assert alt.startswith(cut[:-1])


def test_an_alternative_within_the_limit_is_kept_whole() -> None:
    assert cut_alternative("x" * ALTERNATIVE_MAX) == "x" * ALTERNATIVE_MAX


def test_tags_carry_the_category_and_the_proposal_and_drop_the_callers_own_stage_tag() -> None:
    assert decision_tags(["team:core", "decision:proposed"], "storage", "decided") == ["team:core", "decision:category:storage"]
    assert decision_tags([], "storage", "proposed") == ["decision:category:storage", "decision:proposed"]
    assert stage_of(["decision:proposed"]) == "proposed"
    assert stage_of(["decision:proposed"], realized="done") == "decided"


def test_the_key_is_derived_from_category_and_scenario_in_any_script() -> None:
    assert decision_key("Storage", "Retention for raw transcripts!") == "decision/storage/retention-for-raw-transcripts"
    assert decision_key("storage", "retention  for raw, transcripts") == decision_key("STORAGE", "Retention for raw transcripts")
    assert decision_key("保存", "生ログの保存期間") == "decision/保存/生ログの保存期間"
    assert decision_key("хранение", "срок хранения логов") == "decision/хранение/срок-хранения-логов"
    assert decision_key("भंडारण", "लॉग कितने दिन रखें").startswith("decision/भंडारण/")


@pytest.mark.parametrize(
    ("category", "scenario", "field"),
    [("!!!", "a scenario", "category"), ("storage", "— … ?!", "scenario"), ("storage", "\u0301\u0301", "scenario")],
)
def test_a_part_with_no_letter_or_digit_has_no_identity(category: str, scenario: str, field: str) -> None:
    with pytest.raises(MissingIdentity) as exc:
        decision_key(category, scenario)
    assert exc.value.field == field


def test_a_long_scenario_keeps_a_distinct_key() -> None:
    a = decision_key("c", "x " * 200 + "one")
    b = decision_key("c", "x " * 200 + "two")
    assert a != b and len(a) < 220


def test_calibration_counts_and_brier_score() -> None:
    rows = [
        Scored("a", "storage", 0.9, True),
        Scored("a", "storage", 0.9, False),
        Scored("a", "storage", 0.5, True),
        Scored("b", "storage", 0.6, True),
    ]
    out = {(c.agent, c.category): c for c in calibrate(rows)}
    a = out[("a", "storage")]
    assert (a.count, a.successes) == (3, 2)
    assert a.brier == pytest.approx(((0.1) ** 2 + 0.9**2 + 0.5**2) / 3)
    assert a.mean_confidence == pytest.approx(2.3 / 3)
    assert a.overconfidence == pytest.approx(2.3 / 3 - 2 / 3)
    assert out[("b", "storage")].brier == pytest.approx(0.16)
    assert sum(b.count for b in a.bins) == 3


# --- files, blocks and the extraction's pure parts


def test_files_detected_from_text_and_matched_by_path_tail() -> None:
    from loom_decisions.domain.files import detect_files, file_matches

    found = detect_files(["see src/Storages/MergeTreeData.cpp, rows.py and loom_core.chain.ledger; not https://x.io/a.py, e.g. or v1.2"])
    assert found == ["src/Storages/MergeTreeData.cpp", "rows.py", "loom_core/chain/ledger.py"]
    assert file_matches("loom_core/chain/ledger.py", "core/loom_core/chain/ledger.py")
    assert not file_matches("ledger.py", "core/loom_core/chain/xledger.py")


def test_pack_block_keeps_what_fits_the_budget_and_words_proposals() -> None:
    from loom_decisions.domain.blocks import PackRow, pack_block, tokens

    rows = [
        PackRow("k/1", "retention", "keep 30 days", "replay needs it", "decided"),
        PackRow("k/2", "runners", "self-hosted", "", "proposed"),
        PackRow("k/3", "bans", "never log tokens", "Never log tokens.", "decided"),
    ]
    block, packed, omitted = pack_block(rows, 1000)
    assert block.split("\n") == [
        "Decisions (3 of 3):",
        "- retention: keep 30 days — because replay needs it (#k/1)",
        "- runners → proposed: self-hosted (#k/2)",
        "- bans: never log tokens (#k/3)",
    ]
    assert omitted == 0 and tokens(block) <= 1000
    block, packed, omitted = pack_block(rows, 20)
    assert tokens(block) <= 20 and omitted == 3 - len(packed)


def test_extract_sections_windows_images_and_grounding() -> None:
    from loom_decisions.domain.decision_extract import Window, find_span, is_test_path, sections, skip_reason, windows

    doc = "intro text\n# T\n![d](a.png)\n## A\nWe   chose NATS\nfor the bus.\n```\n# not a heading\n```\n## Recap\nwe chose NATS for the bus\n"
    secs = sections(doc)
    assert [s.breadcrumb for s in secs] == ["(untitled)", "T", "T > A", "T > Recap"]
    assert skip_reason(secs[1]) == "image-only, rationale not extracted" and skip_reason(secs[2]) == ""
    win = Window(tuple(secs))
    found = find_span("we chose nats for the bus", win)
    assert found is not None and found.breadcrumb == "T > A"
    assert find_span("short", win) is None
    assert len(windows(secs, 40)) > 1 and len(windows(secs, 10000)) == 1
    assert is_test_path("tests/decisions/test_x.py") and is_test_path("src/foo.test.ts") and not is_test_path("src/storage/cold.py")


def test_model_configuration_problems_and_output_caps() -> None:
    from loom_decisions.service.llm import max_tokens, model_problem
    from loom_decisions.settings import DecisionsSettings

    assert "no model is configured" in model_problem(DecisionsSettings(llm_provider="", llm_url=""))
    assert model_problem(DecisionsSettings(llm_url="http://127.0.0.1:9/v1")) == ""
    keyless = model_problem(DecisionsSettings(llm_provider="openai", llm_url="", llm_api_key=""))
    assert "no LOOM_LLM_API_KEY" in keyless
    assert model_problem(DecisionsSettings(llm_provider="openai", llm_url="", llm_api_key="sk-x")) == ""
    assert "not served by this build" in model_problem(DecisionsSettings(llm_provider="anthropic"))
    caps = max_tokens(DecisionsSettings(llm_max_tokens_overrides='{"decision_extract": 16000}'))
    assert caps == {"decision_extract": 16000, "decision_support": 8000}


# --- search.unified's ranking


def test_a_task_scores_on_memory_searchs_scale_and_an_unrelated_one_is_no_hit() -> None:
    query = "purge raw transcripts"
    scores = score_candidates(query, ["Purge raw transcripts nightly", "Rotate the webhook key", "Rotate the webhook key"], [0.6, 0.1, 0.3])
    assert scores[0] == pytest.approx(0.5 * 1.0 + 0.5 * 0.6)
    assert scores[1] is None  # no query word, far in meaning
    assert scores[2] == pytest.approx(0.5 * 0.3)  # close in meaning alone


def test_merge_puts_a_named_identifier_first_then_the_score_then_a_stable_order() -> None:
    hits = [
        UnifiedHit("memory", "b", "notes/x", "plain words", 0.9),
        UnifiedHit("task", "a", "t1", "set LOOM_POLICY_MODE to enforce", 0.2),
        UnifiedHit("decision", "a", "decision/k", "plain words", 0.9),
        UnifiedHit("memory", "a", "notes/y", "plain words", 0.5),
    ]
    merged = merge("what does LOOM_POLICY_MODE do", hits, 3)
    assert [(h.kind, h.key) for h in merged] == [("task", "t1"), ("decision", "decision/k"), ("memory", "notes/x")]
