"""The assistant's pure rules: support (one test per row of the spec's table), citation
parsing and each kind's check from its input, steps, unknown names, step-1 rules, pricing,
the history sent to LibreChat, and the agent definition's digest pinned to its version."""

from __future__ import annotations

import pytest
from loom_assistant.domain import caller, checks, citations, definition, history, names, opsets, pricing, steps
from loom_assistant.domain.citations import Checked, Citation
from loom_assistant.domain.ledger import LedgerCall
from loom_assistant.domain.support import ABSTENTION, RUN_ROWS_CUT, Call, Calls, Support, cut_run, decide
from loom_assistant.domain.token_path import HOLD_S, MISSES, TokenPath
from loom_assistant.plane import load_definition
from loom_core.catalog import load_catalog
from loom_gateway.mcp import tool_name

KINDS = opsets.kinds()


def calls(*items: tuple[str, bool, bool], cut: bool = False) -> Calls:
    return Calls([Call(op, ok, found) for op, ok, found in items], cut=cut, kinds=KINDS)


def verified(ok: bool = True) -> Checked:
    return Checked(Citation("memory", "k", "[memory:k@v1]"), ok, "" if ok else citations.REASON_MEMORY_NOT_RETURNED)


def undecided() -> Checked:
    return Checked(Citation("memory", "k", "[memory:k@v1]"), False, citations.REASON_COULD_NOT_RUN, undecided=True)


# -- support: one test per row of the table ------------------------------------------------------


def test_support_none_when_the_answer_has_no_text() -> None:
    assert decide("  ", [verified()], [], None) == Support.NONE


@pytest.mark.parametrize(
    "text", [ABSTENTION, "**nothing stored in loom answers this.**", "I looked. _Nothing stored in Loom answers this._"]
)
def test_support_none_for_the_abstention_sentence_in_any_case_or_emphasis(text: str) -> None:
    assert decide(text, [], [], calls(("memory.search", True, True))) == Support.NONE


def test_support_none_when_uncited_with_no_citable_call_and_nothing_found_or_failed() -> None:
    assert decide("Hello!", [], [], calls()) == Support.NONE
    assert decide("Loom works like so.", [], [], calls(("help.search", True, True), ("help.get", True, True))) == Support.NONE


def test_support_supported_when_a_citation_verified() -> None:
    assert decide("x [memory:k@v1]", [verified(), verified(False)], [], None) == Support.SUPPORTED


def test_support_unsupported_when_it_names_an_unknown_op_or_setting_whatever_it_cites() -> None:
    assert decide("use `memory.teleport` [memory:k@v1]", [verified()], ["memory.teleport"], None) == Support.UNSUPPORTED


def test_support_unsupported_when_a_citation_failed_for_a_reason_of_its_own() -> None:
    assert decide("x", [verified(False), undecided()], [], None) == Support.UNSUPPORTED


def test_support_unsupported_when_uncited_after_a_citable_op_found_data() -> None:
    assert decide("There are three tasks.", [], [], calls(("task.list", True, True))) == Support.UNSUPPORTED


def test_support_unsupported_when_a_citable_op_found_nothing_and_nothing_else_found_or_failed() -> None:
    assert decide("There are none.", [], [], calls(("task.list", True, False), ("help.search", True, True))) == Support.UNSUPPORTED


def test_support_unchecked_when_the_checks_could_not_say() -> None:
    assert decide("x", [undecided()], [], None) == Support.UNCHECKED


def test_support_unchecked_when_uncited_and_only_uncitable_ops_found_data() -> None:
    assert decide("There are 4 tasks.", [], [], calls(("task.counts", True, True))) == Support.UNCHECKED


def test_support_unchecked_when_uncited_and_a_call_failed() -> None:
    assert decide("Hmm.", [], [], calls(("task.list", False, False))) == Support.UNCHECKED


def test_support_unchecked_when_the_calls_could_not_be_read() -> None:
    assert decide("Hmm.", [], [], Calls(readable=False)) == Support.UNCHECKED
    assert decide("Hmm.", [], [], None) == Support.UNCHECKED


def test_support_of_a_cut_run_keeps_only_what_its_first_rows_decide() -> None:
    assert decide("x", [], [], calls(("task.list", True, True), cut=True)) == Support.UNSUPPORTED
    # Never none: what lies past the cut is not seen.
    assert decide("x", [], [], calls(("help.search", True, True), cut=True)) == Support.UNCHECKED
    assert RUN_ROWS_CUT == 200


def test_a_run_of_more_than_200_rows_is_cut_to_its_first_200() -> None:
    rows = [{"op": "help.search", "ok": True, "n": i} for i in range(RUN_ROWS_CUT + 1)]
    kept, cut = cut_run(rows)
    assert cut and len(kept) == RUN_ROWS_CUT and kept[0]["n"] == 0 and kept[-1]["n"] == RUN_ROWS_CUT - 1
    assert cut_run(rows[:RUN_ROWS_CUT]) == (rows[:RUN_ROWS_CUT], False)
    assert cut_run([]) == ([], False)


def test_a_cut_run_does_not_see_citable_data_past_its_first_200_rows() -> None:
    rows = [("help.search", True, True)] * RUN_ROWS_CUT + [("task.list", True, True)]
    whole = calls(*rows)
    assert decide("The docs say so.", [], [], whole) == Support.UNSUPPORTED  # uncut, the task data counts
    kept, cut = cut_run(rows)
    assert decide("The docs say so.", [], [], calls(*kept, cut=cut)) == Support.UNCHECKED  # cut: unseen, never none
    first = [("task.list", True, True)] + [("help.search", True, True)] * RUN_ROWS_CUT
    kept, cut = cut_run(first)
    assert decide("The docs say so.", [], [], calls(*kept, cut=cut)) == Support.UNSUPPORTED  # decided within the first 200


def test_steps_of_a_cut_run_are_its_first_200_rows() -> None:
    rows = [LedgerCall("auth.whoami", True)] * RUN_ROWS_CUT + [LedgerCall("help.search", True)]
    kept, cut = cut_run(rows)
    got = steps.steps_of(kept)
    assert cut and len(got) == RUN_ROWS_CUT and {s.op for s in got} == {"auth.whoami"}


def test_support_abstention_that_also_states_a_fact_is_none() -> None:
    assert decide("There are 3 tasks. Nothing stored in Loom answers this.", [], [], calls(("task.list", True, True))) == Support.NONE


# -- citations -------------------------------------------------------------------------------


def test_citations_parse_every_kind_in_order_each_once() -> None:
    text = (
        "See [memory:notes/a@v3] and [help:assistant § Assistant > Citations].\n"
        "```sql\nSELECT count() FROM tasks;\n```\n[task:t-1] [doc:s3://x § Intro] [code:src/a.py:12] [memory:notes/a@v3] [help:overview]"
    )
    parsed = citations.parse(text)
    assert [(c.kind, c.ref) for c in parsed][:3] == [("memory", "notes/a"), ("help", "assistant"), ("sql", parsed[2].ref)]
    assert parsed[0].version == 3 and parsed[1].section == "Assistant > Citations"
    assert [c.kind for c in parsed] == ["memory", "help", "sql", "task", "doc", "code", "help"]
    assert parsed[5].ref == "src/a.py" and parsed[6].section == ""


def test_code_citations_parse_their_path_and_line() -> None:
    a, b, c = citations.parse("[code:core/loom_core/errors.py:12] [code:services/x.py:3-7] [code:core/a.py]")
    assert (a.ref, a.section, b.ref, b.section, c.ref, c.section) == (
        "core/loom_core/errors.py",
        "12",
        "services/x.py",
        "3-7",
        "core/a.py",
        "",
    )


def test_doc_citation_is_checked_in_its_help_form_and_words_its_own_reasons() -> None:
    c, bare = citations.parse("[doc:docs/assistant.md § The assistant > Citations] [doc:./operations/assistant]")
    assert checks.doc_as_help(c) == "[help:assistant.md § The assistant > Citations]"
    assert checks.doc_as_help(bare) == "[help:operations/assistant.md]"
    assert checks.doc(c, {"verified": True, "anchor": "citations"}) == Checked(c, True, anchor="citations")
    for code, reason in (
        ("page_not_indexed", citations.REASON_DOC_NOT_A_DOCUMENT),
        ("no_such_section", citations.REASON_DOC_NO_SUCH_SECTION),
        ("ambiguous_section", citations.REASON_DOC_AMBIGUOUS_SECTION),
    ):
        bad = checks.doc(c, {"verified": False, "reason": code})
        assert not bad.verified and not bad.undecided and bad.reason == reason
    for failed in (None, {"verified": False, "reason": "help_unavailable"}):
        assert checks.doc(c, failed) == Checked(c, False, citations.REASON_COULD_NOT_RUN, undecided=True)


def test_only_the_first_fifty_citations_are_checked() -> None:
    many = citations.parse(" ".join(f"[task:t{i}]" for i in range(60)))
    checked, past = citations.split_checked(many)
    assert len(checked) == 50 and len(past) == 10


def test_memory_citation_verifies_against_the_answers_exposure_rows() -> None:
    c = citations.parse("[memory:notes/a@v9]")[0]
    assert checks.memory(c, {"notes/a", "notes/b"}).verified
    bad = checks.memory(c, {"notes/b"})
    assert not bad.verified and not bad.undecided and "memory.search" in bad.reason


def test_sql_citation_verifies_by_digest_against_the_answers_insights_query_rows() -> None:
    from loom_core.chain.ledger import digest

    c = citations.parse("```sql\nSELECT 1;\n```")[0]
    ran = [LedgerCall.of({"op": "insights.query", "ok": 1, "args": f'{{"sql": "{digest("SELECT 1")}"}}'})]
    assert checks.sql(c, ran).verified
    assert (
        checks.sql(c, [LedgerCall.of({"op": "insights.query", "ok": 1, "args": '{"sql_digest": "sha256:nope"}'})]).reason
        == citations.REASON_SQL_NOT_RUN
    )
    assert not checks.sql(c, [LedgerCall("insights.query", False, args={"sql": digest("SELECT 1")})]).verified


def test_task_citation_verifies_when_a_task_call_of_the_answer_named_it() -> None:
    c = citations.parse("[task:t-42]")[0]
    assert checks.task(c, [LedgerCall("task.get", True, args={"task_id": "t-42"})]).verified
    assert not checks.task(c, [LedgerCall("task.get", False, args={"task_id": "t-42"})]).verified
    assert not checks.task(c, [LedgerCall("grants.list", True, args={"x": "t-42"})]).verified


def test_help_citation_takes_help_verify_s_answer() -> None:
    c = citations.parse("[help:assistant § Assistant > Citations]")[0]
    ok = checks.help_(c, {"ref": "assistant", "verified": True, "anchor": "citations"})
    assert ok.verified and ok.anchor == "citations" and ok.wire()["anchor"] == "citations"
    no = checks.help_(c, {"ref": "assistant", "verified": False, "reason": "no such section"})
    assert not no.verified and no.reason == "no such section" and not no.undecided
    assert checks.help_(c, None).undecided


# -- steps, names ------------------------------------------------------------------------------


def test_steps_use_fixed_words_per_op_and_skip_other_ops() -> None:
    rows = [LedgerCall("memory.search", False), LedgerCall("task.create", True), LedgerCall("namespace.audit", True)]
    assert [s.wire() for s in steps.steps_of(rows)] == [
        {"op": "memory.search", "text": "Couldn't search memories", "ok": False},
        {"op": "namespace.audit", "text": "Read the audit", "ok": True},
    ]


def test_unknown_names_are_backticked_op_group_names_and_loom_settings_nothing_knows() -> None:
    text = (
        "Call `task.list`, `task.teleport`, `foo.bar`, set LOOM_ASSISTANT_MODEL and LOOM_MADE_UP, see LOOM_DOCUMENTED and LOOM_ASSISTANT_"
    )
    out = names.unknown(text, ops=["task.list", "task.get"], settings=["LOOM_ASSISTANT_MODEL"], docs_text="LOOM_DOCUMENTED is a thing")
    assert out == ["task.teleport", "LOOM_MADE_UP"]
    assert names.unknown(text, ops=["task.list"], settings=[], docs_text=None) == []


# -- step 1 rules, pricing, history ------------------------------------------------------------


def tok(**kw: object) -> caller.CallerToken:
    base: dict[str, object] = {
        "jti": "t1",
        "consumer": "",
        "parents": (),
        "roles": {"ns": "viewer"},
        "read_scope": (),
        "exp": 10_000,
        "sid": "",
    }
    base.update(kw)
    return caller.CallerToken(**base)  # type: ignore[arg-type]


def test_step_one_refusals_in_order() -> None:
    r = caller.first_refusal
    assert r(tok(parents=("p", "assistant-answer-1")), namespace="ns", now=0, answer_ttl_s=600).code == "ASSISTANT_SELF_CALL"  # type: ignore[union-attr]
    assert r(tok(consumer="loom-assistant"), namespace="ns", now=0, answer_ttl_s=600).code == "ASSISTANT_SELF_CALL"  # type: ignore[union-attr]
    wide = r(tok(roles={"*": "viewer"}), namespace="ns", now=0, answer_ttl_s=600)
    assert wide is not None and wide.detail is not None and wide.detail["reason"] == "org_wide"
    assert "namespace token" in wide.message and "token.mint" in wide.message
    assert r(tok(read_scope=("ns",)), namespace="ns", now=0, answer_ttl_s=600).detail["reason"] == "narrowed"  # type: ignore[union-attr,index]
    soon = r(tok(exp=500), namespace="ns", now=0, answer_ttl_s=600)
    assert soon is not None and soon.detail == {"reason": "token_expires_soon", "left_s": 500, "needed_s": 600}
    assert r(tok(exp=500, sid="s1"), namespace="ns", now=0, answer_ttl_s=600) is None
    assert r(tok(), namespace="ns", now=0, answer_ttl_s=600) is None


def test_context_line_names_credential_and_role_but_no_subject_or_namespace() -> None:
    line = caller.context_line(tok(sid="s", roles={"secret-ns": "viewer"}), "writer")
    assert line == "Loom, for how-to answers only: this question comes with a sign-in session, whose role in this namespace is writer."


def test_pricing_charges_usage_at_the_models_rate_else_the_ceiling() -> None:
    u = pricing.Usage(1_000_000, 100_000)
    assert pricing.answer_cost("claude-haiku-4-5", u, ceiling_usd=0.1) == pytest.approx(1.5)
    assert pricing.answer_cost("claude-haiku-4-5", None, ceiling_usd=0.1) == 0.1
    assert pricing.answer_cost("unpriced-model", u, ceiling_usd=0.1) == 0.1
    assert pricing.over_share(0.5, 1.0, 0.5) and not pricing.over_share(0.49, 1.0, 0.5)


def test_history_keeps_user_and_assistant_text_and_ends_with_the_question() -> None:
    out = history.clean_messages(
        [
            {"role": "system", "content": "x"},
            {"role": "user", "content": [{"type": "text", "text": "q"}]},
            {"role": "tool", "content": "t"},
        ],
        "CTX",
    )
    assert out == [{"role": "user", "content": "q\n\nCTX"}]
    with pytest.raises(history.HistoryError):
        history.clean_messages([{"role": "assistant", "content": "a"}], None)


# -- the agent definition ----------------------------------------------------------------------

# Change agent.yaml's name, provider, parameters, instructions or tools, and bump its version.
PINNED = {
    1: "7d319024b560781f283ec0444828f46892840b7c1a00a0d894b15b159edcce96",
    2: "9c059db4c2a523e6be0c460680c3acbf30c53b7316ed221b2facedc4dc8a415a",
    3: "29729333804424d70f518d4dcdc678d95e09ba895fc4b4d7099e2a6de44a50e8",
}


def test_agent_definition_digest_is_pinned_to_its_version() -> None:
    d = load_definition()
    assert PINNED.get(d.version) == d.digest(), "agent.yaml changed: bump its version and pin the new digest"


def test_agent_definition_is_written_only_when_newer_or_same_version_other_model() -> None:
    d = load_definition()
    assert definition.should_write(0, "", d)
    assert not definition.should_write(d.version, d.model, d)
    assert definition.should_write(d.version, "other-model", d)
    assert not definition.should_write(d.version + 1, "other-model", d)  # a build N-1 never overwrites N
    assert d.with_model("claude-sonnet-4-5").model == "claude-sonnet-4-5"


def test_agent_tools_are_reads_of_the_assistant_toolset_and_never_the_assistant() -> None:
    d = load_definition()
    by_tool = {tool_name(op): op for op in load_catalog().ops}
    ops = [by_tool[t] for t in d.mcp_tools()]
    assert "assistant.ask" not in ops
    assert all(op in opsets.kinds() for op in ops)
    assert all(t.endswith("_mcp_loom") for t in d.tools) and d.agent_body()["tools"] == list(d.tools)
    assert "Nothing stored in Loom answers this." in d.instructions


def test_a_tool_not_named_as_librechat_names_an_mcp_tool_is_refused() -> None:
    with pytest.raises(ValueError, match="_mcp_loom"):
        definition.parse({"version": 1, "name": "n", "provider": "p", "model": "m", "instructions": "i", "tools": ["task.get"]})


# -- LibreChat's deployed configuration ---------------------------------------------------------


def test_librechat_configuration_sends_the_answer_token_and_run_id_and_turns_everything_else_off() -> None:
    from pathlib import Path

    import yaml

    cfg = yaml.safe_load((Path(__file__).resolve().parents[2] / "deploy/librechat/assistant.librechat.yaml").read_text())
    loom = cfg["mcpServers"]["loom"]
    assert loom["type"] == "streamable-http" and loom["url"].endswith("/mcp?toolset=assistant")
    assert loom["headers"] == {
        "Authorization": "Bearer {{LIBRECHAT_BODY_PARENTMESSAGEID}}",
        "X-Loom-Run-Id": "{{LIBRECHAT_BODY_MESSAGEID}}",
    }
    assert "requestHeaders" not in loom and loom["serverInstructions"] is False
    assert cfg["endpoints"]["agents"]["capabilities"] == ["tools"]
    assert cfg["memory"] == {"disabled": True}
    assert {k: cfg["interface"][k] for k in ("memories", "webSearch", "fileSearch", "runCode")} == dict.fromkeys(
        ("memories", "webSearch", "fileSearch", "runCode"), False
    )
    assert cfg["interface"]["remoteAgents"] == {"use": True, "create": True}


# -- the answer token's path through LibreChat (auth_off) ---------------------------------------


def test_token_path_goes_off_after_answers_whose_calls_never_came_with_their_token() -> None:
    p = TokenPath()
    p.observe(tool_calls=0, rows_under_token=0, now=0)  # no tool call: says nothing
    for i in range(MISSES - 1):
        p.observe(tool_calls=2, rows_under_token=0, now=i)
        assert not p.off(i)
    p.observe(tool_calls=1, rows_under_token=0, now=10)
    assert p.off(10) and p.off(10 + HOLD_S - 0.1) and not p.off(10 + HOLD_S)


def test_token_path_after_its_hold_goes_off_again_on_one_miss_and_clears_on_one_hit() -> None:
    p = TokenPath()
    for _ in range(MISSES):
        p.observe(tool_calls=1, rows_under_token=0, now=0)
    later = HOLD_S + 1
    assert not p.off(later)  # the probe answer is let through
    p.observe(tool_calls=1, rows_under_token=0, now=later)
    assert p.off(later)
    p.observe(tool_calls=1, rows_under_token=3, now=later)
    assert not p.off(later) and p.misses == 0 and not p.tripped


def test_one_answer_whose_calls_carried_its_token_resets_the_misses() -> None:
    p = TokenPath()
    p.observe(tool_calls=1, rows_under_token=0, now=0)
    p.observe(tool_calls=1, rows_under_token=1, now=0)
    p.observe(tool_calls=1, rows_under_token=0, now=0)
    assert MISSES > 1 and not p.off(0) and p.misses == 1


def test_a_ledgered_call_parses_its_json_arguments_once() -> None:
    call = LedgerCall.of({"op": "task.get", "ok": 1, "out_hits": "2", "args": '{"task_id": "t-42", "limit": 5}', "namespace": "main"})
    assert (call.op, call.ok, call.out_hits, call.namespace) == ("task.get", True, 2, "main")
    assert call.args == {"task_id": "t-42", "limit": "5"}
    assert LedgerCall.of({"op": "task.get", "ok": 0, "args": "not json"}).args == {}
    assert LedgerCall.of({"op": "task.get", "ok": 0, "args": '["a list"]'}).args == {}
