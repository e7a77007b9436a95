"""`loom decisions extract`: read one document, record the decisions it states (spec 003,
Extract decisions from a document), as the operator: rows are written through decision.record
as agent loom-decisions (user and session -), actor process:cli:decisions.

What this build does of the spec's section: the document from a local Markdown file (path or
file:// URL) or a memory row of type `document`; windows of whole sections; a read (again once
when empty), grounding of every quote, a support check; stages kept; duplicates and
--max-per-section; paths cited quotes write out as files; reconcile against the extractor's own
rows citing the document (unchanged, re-recorded in stored words, re-recorded as the text now
reads, frozen rows tagged source-changed, restatements skipped, a pinned or attested peer under
another key skipped), a row every window finds gone read once more without candidates, and the
retire step; repositories (`--repo`, `--into`: where names are looked up, where rows go, the
repo:<id> tag, the refusals over rows an earlier run left elsewhere; extract_repo.py) and the Files
step's code.symbol lookups in the code index. Not here: label lines read across by the grounding;
the org's model-calls switch (the assistant plane's); the access checks of a run with an auth
context bound (the command runs with none, as the operator).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from google.protobuf import json_format
from loom_api.decisions.v1 import decisions_pb2 as dpb
from loom_core.chain import CallContext
from loom_core.errors import LoomError

from ..domain.decision_extract import (
    CONSTRAINT_TAG,
    DESIGN_DOC_TAG,
    SOURCE_CHANGED_TAG,
    SUPPORT_SYSTEM,
    SYSTEM,
    Candidate,
    SupportVerdict,
    Unreadable,
    apply_support,
    caption_chars,
    files_from_quotes,
    fits,
    ground,
    parse_read,
    parse_support,
    read_prompt,
    record_body,
    sections,
    skip_reason,
    support_prompt,
    title_of,
    windows,
)
from ..domain.statement import DecisionText, excerpt, stage_of
from ..store.decisions import DecisionRecordRow
from ..store.memory import Ident, MemoryRow
from .blocks import REPO_TAG_PREFIX
from .code_index import CodeIndex
from .decisions import DecisionOps
from .extract_repo import Placement, cited_rows, earlier_run_refusal, resolve_names
from .llm import ChatModel, ModelError
from .memory import MemoryOps
from .rows import Rows

MAX_PER_SECTION = 3
STORED_FETCH = 500

Audit = Callable[[CallContext, str, dict[str, str], str], None]


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    exit_code: int = 0
    written: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    tagged: list[str] = field(default_factory=list)

    def say(self, line: str) -> None:
        self.lines.append(line)

    def failed(self, line: str) -> None:
        self.lines.append(line)
        self.exit_code = max(self.exit_code, 2)

    def stop(self, line: str) -> Report:
        self.lines.append(line)
        self.exit_code = 1
        return self


@dataclass
class _Stored:
    row: MemoryRow
    rec: DecisionRecordRow

    @property
    def frozen(self) -> bool:
        return self.row.pinned or self.row.attestation == "current"

    @property
    def acted_on(self) -> bool:
        return bool(self.rec["realized_outcome"])


@dataclass(eq=False, slots=True)
class Extractor:
    r: Rows
    decisions: DecisionOps
    memory: MemoryOps
    model: ChatModel
    audit: Audit
    code: CodeIndex
    place: Placement = field(default_factory=lambda: Placement("", "", ""), init=False)
    _touched: set[str] = field(default_factory=set, init=False)  # keys this run wrote, tagged or retired (or would)

    async def run(
        self,
        ctx: CallContext,
        *,
        source_uri: str,
        document: str | None,
        apply: bool,
        window_chars: int = 0,
        max_per_section: int = MAX_PER_SECTION,
        placement: Placement | None = None,
    ) -> Report:
        """`ctx.namespace` is where the rows go; `placement` says where the document is and where
        its code names are looked up (by default the rows' namespace for both)."""
        rep = Report()
        self.place = placement or Placement(ctx.namespace, ctx.namespace, ctx.namespace)
        self._touched = set()
        s = self.r.d.settings
        window_chars = window_chars or s.memory_decision_extract_window_chars
        if window_chars < 500:
            return rep.stop("--window-chars must be at least 500")
        if max_per_section < 1:
            return rep.stop("--max-per-section must be at least 1")
        org, ns, doc_ns = ctx.org, ctx.namespace, self.place.doc_ns
        if document is None:
            document = await self._document_row(org, doc_ns, source_uri)
        if document is None or not document.strip():
            return rep.stop(f"no live document at {source_uri} in {doc_ns}: nothing written")
        prefix = f"knowledge:{doc_ns}/{source_uri}#"
        try:
            here = cited_rows(await self._decision_rows(org, ns), prefix)
            elsewhere = {o: len(cited_rows(await self._decision_rows(org, o), prefix)) for o in self.place.other_namespaces}
            refusal = await earlier_run_refusal(self.code, org, self.place, here, elsewhere)
            stored = await self._stored(org, ns, here)
        except LoomError as exc:
            return rep.stop(f"the extractor's rows could not be read ({exc.code}): nothing written")
        if refusal:
            return rep.stop(refusal)
        known = [(st.rec["category"], st.rec["scenario"]) for st in stored.values()][: s.memory_decision_extract_known_max]

        title = title_of(document)
        secs = []
        for sec in sections(document):
            why = skip_reason(sec)
            if why:
                if why != "no words":
                    rep.say(f"section {sec.breadcrumb}: {why}")
                continue
            secs.append(sec)
        wins = windows(secs, window_chars)
        rep.say(f"{source_uri}: {len(secs)} sections in {len(wins)} window(s), {len(stored)} stored decision(s) of this document")

        cands: list[Candidate] = []
        seen_keys: set[str] = set()
        seen_outcomes: set[str] = set()
        per_section: dict[str, int] = {}
        stated: dict[str, bool] = {}
        said_gone: dict[str, int] = {}
        restates: dict[str, str] = {}  # candidate key -> stored key it restates
        read_ok = 0
        read_texts: list[str] = []
        lost = 0
        stored_list = [(k, st.row.value) for k, st in list(stored.items())[: s.memory_decision_extract_known_max]]
        for wi, win in enumerate(wins, start=1):
            text = win.text(title)
            try:
                found = parse_read(await self.model.chat("decision_extract", SYSTEM, read_prompt(text, known)))
                if not found and caption_chars(text) > 80:
                    rep.say(f"window {wi}: read again (no decision in the first reply)")
                    found = parse_read(await self.model.chat("decision_extract", SYSTEM, read_prompt(text, known)))
            except (ModelError, Unreadable) as exc:
                lost += 1
                advice = (
                    " (lower --window-chars or raise decision_extract in LOOM_LLM_MAX_TOKENS_OVERRIDES)"
                    if isinstance(exc, ModelError) and exc.cut_at
                    else ""
                )
                rep.say(f"window {wi}: dropped, {exc}{advice}")
                continue
            kept: list[Candidate] = []
            for c in found:
                why = fits(c)
                if why:
                    rep.say(f"window {wi}: dropped '{c.scenario or c.outcome}': does not fit decision.record ({why})")
                    continue
                g = ground(c, win)
                for note in c.notes:
                    rep.say(f"window {wi}: {c.key}: {note}")
                c.notes.clear()
                if g is not None:
                    kept.append(g)
            try:
                verdict = parse_support(await self.model.chat("decision_support", SUPPORT_SYSTEM, support_prompt(text, kept, stored_list)))
            except (ModelError, Unreadable) as exc:
                lost += 1
                rep.say(f"window {wi}: support check lost ({exc}); its candidates are lost too")
                continue
            read_ok += 1
            read_texts.append(text)
            supported = apply_support(kept, verdict)
            for c in kept:
                for note in c.notes:
                    rep.say(f"window {wi}: {c.key}: {note}")
            self._fold_stored(verdict, kept, stated, said_gone, restates)
            for c in supported:
                norm_outcome = " ".join(c.outcome.split()).casefold()
                if c.key in seen_keys or norm_outcome in seen_outcomes:
                    rep.say(f"window {wi}: {c.key}: dropped, a duplicate of an earlier candidate")
                    continue
                if per_section.get(c.section, 0) >= max_per_section:
                    rep.say(f"window {wi}: {c.key}: dropped, past --max-per-section for {c.section}")
                    continue
                per_section[c.section] = per_section.get(c.section, 0) + 1
                seen_keys.add(c.key)
                seen_outcomes.add(norm_outcome)
                cands.append(c)
        if read_ok == 0:
            return rep.stop("no window was read: nothing written, nothing retired")
        if lost:
            rep.failed(f"{lost} window(s) could not be read; the run went on with the others")
        gone = {k for k, n in said_gone.items() if n == read_ok and not stated.get(k)}
        if gone:
            gone = await self._confirm_gone(rep, gone, stored, read_texts)

        for c in cands:
            await self._candidate(ctx, rep, c, stored, gone, restates, apply, doc_ns, source_uri)
        await self._retire(ctx, rep, stored, gone, {c.key for c in cands}, apply)
        await self._link_kept(ctx, rep, stored, apply)
        return rep

    # --- reads

    async def _document_row(self, org: str, ns: str, key: str) -> str | None:
        heads = await self.r.mem.heads(org, ns, key)
        live = [h for h in heads if h.status == "active" and h.memory_type == "document"]
        return live[0].value if live else None

    async def _decision_rows(self, org: str, ns: str) -> list[MemoryRow]:
        return await self.r.mem.live_heads(org, ns, memory_type="decision", tag=DESIGN_DOC_TAG, limit=STORED_FETCH)

    async def _stored(self, org: str, ns: str, rows: list[MemoryRow]) -> dict[str, _Stored]:
        """The extractor's own live decision rows citing the document (`rows`), by key, whose key's active record is theirs."""
        recs = await self.r.dec.current_many(org, ns, [r.key for r in rows])
        out: dict[str, _Stored] = {}
        for r in rows:
            rec = recs.get(r.key)
            if rec is not None and rec["status"] == "active" and Ident(rec["agent"], rec["user"], rec["session"]) == r.ident:
                out[r.key] = _Stored(r, rec)
        return out

    @staticmethod
    def _fold_stored(
        v: SupportVerdict, kept: list[Candidate], stated: dict[str, bool], said_gone: dict[str, int], restates: dict[str, str]
    ) -> None:
        """A stored decision is stated when any window's check states it, gone only when every
        window read says it is not; a check that leaves it out gives no verdict."""
        for key, is_stated in v.stored.items():
            if is_stated:
                stated[key] = True
            else:
                said_gone[key] = said_gone.get(key, 0) + 1
        for key, idx in v.restated_by.items():
            if 0 <= idx < len(kept):
                restates[kept[idx].key] = key

    async def _confirm_gone(self, rep: Report, gone: set[str], stored: dict[str, _Stored], texts: list[str]) -> set[str]:
        """A stored decision every window found no longer stated is read once more, without
        candidates, in every window; it counts as gone only when every second check agrees (a
        check that fails gives no verdict)."""
        rep.say(f"{len(gone)} stored decision(s) look gone: read once more without candidates")
        listed = [(k, stored[k].row.value) for k in sorted(gone) if k in stored]
        agree = dict.fromkeys(gone, 0)
        for text in texts:
            try:
                v = parse_support(await self.model.chat("decision_support", SUPPORT_SYSTEM, support_prompt(text, [], listed)))
            except (ModelError, Unreadable) as exc:
                rep.failed(f"a second check was lost ({exc}): no verdict for the rows it read")
                return set()
            for k in gone:
                if v.stored.get(k) is False:
                    agree[k] += 1
        return {k for k, n in agree.items() if n == len(texts)}

    # --- writes

    async def _candidate(
        self,
        ctx: CallContext,
        rep: Report,
        c: Candidate,
        stored: dict[str, _Stored],
        gone: set[str],
        restates: dict[str, str],
        apply: bool,
        doc_ns: str,
        source_uri: str,
    ) -> None:
        st = stored.get(c.key)
        self._touched.add(c.key)
        found = await resolve_names(self.code, ctx.org, self.place, c.quotes())
        # When the code index could not be read, the row keeps its files.
        files = list(st.row.files) if found.index_failed and st is not None else list(dict.fromkeys([*files_from_quotes(c), *found.files]))
        if found.index_failed:
            rep.failed(
                f"{c.key}: the code index could not be read for a name; "
                + ("its row keeps its files" if st else "written with the files that resolved")
            )
        if found.unresolved:
            rep.say(f"{c.key}: unresolved: {', '.join(found.unresolved)}")
        body = record_body(c, doc_ns, source_uri, files, [self.place.repo_tag] if self.place.repo_tag else [])
        if st is None:
            other = await self.r.dec.current(ctx.org, ctx.namespace, c.key)
            if other is not None and other["status"] == "active":
                rep.say(f"{c.key}: another writer's decision ({other['agent']}): not revised; body: {_json(body)}")
                return
            restated = restates.get(c.key)
            if restated is not None and restated not in gone:
                rep.say(f"{c.key}: not written (restates {restated}, not found gone)")
                return
            peer = await self._frozen_peer(ctx, c)
            if peer is not None:
                rep.say(f"{c.key}: skipped: already recorded by {peer[0]} under {peer[1]}")
                return
            await self._record(ctx, rep, body, apply, f"{c.key}: new ({c.stage})")
            return
        if st.frozen or st.acted_on:
            why = "pinned" if st.row.pinned else ("attested" if st.frozen else "its outcome is recorded")
            if c.key in gone:
                await self._tag(ctx, rep, st, add=True, apply=apply, why=f"no longer stated, {why}")
                rep.say(f"{c.key}: body for a maintainer: {_json(body)}")
            elif SOURCE_CHANGED_TAG in st.row.tags:
                await self._tag(ctx, rep, st, add=False, apply=apply, why="stated again")
            else:
                rep.say(f"{c.key}: kept as it is ({why})")
                await self._link(ctx, rep, st, apply)
            return
        if c.key in gone:
            await self._record(ctx, rep, body, apply, f"{c.key}: re-recorded as the text now reads (no longer stated as stored)")
            return
        # Still stated (or no verdict): the stored words stand; only row fields may change.
        stored_body = self._stored_body(st, body)
        if (
            sorted(st.row.files) == sorted(stored_body.files)
            and st.row.source_resource_id == stored_body.source_resource_id
            and (CONSTRAINT_TAG in st.row.tags) == (CONSTRAINT_TAG in stored_body.tags)
            and _repo_tags(st.row.tags) == _repo_tags(list(stored_body.tags))
        ):
            note = "" if stage_of(st.row.tags) == c.stage else f" (the document reads as {c.stage})"
            rep.say(f"{c.key}: unchanged{note}")
            if SOURCE_CHANGED_TAG in st.row.tags:
                await self._tag(ctx, rep, st, add=False, apply=apply, why="stated again")
            return
        await self._record(ctx, rep, stored_body, apply, f"{c.key}: re-recorded in its stored words (row fields changed)")

    @staticmethod
    def _stored_body(st: _Stored, body: dpb.RecordDecisionRequest) -> dpb.RecordDecisionRequest:
        """The document's body in the stored words (files, source, tags and confidence stay the document's)."""
        rec = st.rec
        stored = dpb.RecordDecisionRequest()
        stored.CopyFrom(body)
        stored.category, stored.scenario, stored.outcome = rec["category"], rec["scenario"], rec["outcome"]
        stored.reasoning, stored.stage = rec["reasoning"], stage_of(st.row.tags, rec["realized_outcome"])
        stored.ClearField("alternatives")
        stored.alternatives.extend(rec["alternatives"])
        return stored

    async def _frozen_peer(self, ctx: CallContext, c: Candidate) -> tuple[str, str] | None:
        """A pinned or attested decision under another key that reads the same as the candidate."""
        s = self.r.d.settings
        statement = DecisionText.checked(
            scenario=c.scenario, outcome=c.outcome, reasoning=c.reasoning(), alternatives=c.alternatives(), stage=c.stage
        ).statement()
        vec = await self.r.d.embedder.embed_one(excerpt(statement))
        hits = await self.r.vectors.nearest(
            ctx.org, ctx.namespace, vec, memory_type="decision", limit=s.memory_decision_extract_restatement_top_k
        )
        for row, score in hits:
            if row.key != c.key and score >= s.decision_conflict_threshold and (row.pinned or row.attestation == "current"):
                return row.agent, row.key
        return None

    async def _record(self, ctx: CallContext, rep: Report, body: dpb.RecordDecisionRequest, apply: bool, what: str) -> None:
        if not apply:
            rep.say(f"{what}: would record {_json(body)}")
            return
        try:
            out = await self.decisions.record(ctx, body)
        except LoomError as exc:
            self.audit(ctx, "decision.record", _audited(body), str(exc.code))
            rep.failed(f"{what}: refused ({exc.code}: {exc.message})")
            return
        self.audit(ctx, "decision.record", _audited(body), "")
        rep.written.append(out.memory_key)
        rep.say(f"{what}: recorded v{out.version}")

    async def _tag(self, ctx: CallContext, rep: Report, st: _Stored, *, add: bool, apply: bool, why: str) -> None:
        """Add or drop source-changed (and, under --into source, add the run's repo:<id> tag with it)."""
        key = st.row.key
        has = SOURCE_CHANGED_TAG in st.row.tags
        if add == has:
            rep.say(f"{key}: {why}; already {'tagged' if has else 'untagged'} {SOURCE_CHANGED_TAG}")
            await self._link(ctx, rep, st, apply)
            return
        tags = [*st.row.tags, SOURCE_CHANGED_TAG] if add else [t for t in st.row.tags if t != SOURCE_CHANGED_TAG]
        tags = self._with_repo_tag(tags)
        verb = "tag" if add else "drop the tag"
        self._touched.add(key)
        if not apply:
            rep.say(f"{key}: {why}: would {verb} {SOURCE_CHANGED_TAG}")
            return
        if await self._write_tags(ctx, rep, st, tags, why):
            rep.tagged.append(key)
            rep.say(f"{key}: {why}: {'tagged' if add else 'dropped'} {SOURCE_CHANGED_TAG}")

    def _with_repo_tag(self, tags: list[str]) -> list[str]:
        t = self.place.repo_tag
        return [*tags, t] if t and t not in tags else tags

    async def _link(self, ctx: CallContext, rep: Report, st: _Stored, apply: bool) -> None:
        """A row the run keeps as it is gains the run's repo:<id> tag by a tags-only write."""
        key = st.row.key
        tags = self._with_repo_tag(list(st.row.tags))
        self._touched.add(key)
        if tags == list(st.row.tags):
            return
        if not apply:
            rep.say(f"{key}: would tag {self.place.repo_tag}")
            return
        if await self._write_tags(ctx, rep, st, tags, f"tag {self.place.repo_tag}"):
            rep.tagged.append(key)
            rep.say(f"{key}: tagged {self.place.repo_tag}")

    async def _link_kept(self, ctx: CallContext, rep: Report, stored: dict[str, _Stored], apply: bool) -> None:
        """The rows no step wrote (still stated and not emitted again, or with no verdict) gain the repo tag too."""
        for key in sorted(stored.keys() - self._touched):
            await self._link(ctx, rep, stored[key], apply)

    async def _write_tags(self, ctx: CallContext, rep: Report, st: _Stored, tags: list[str], why: str) -> bool:
        key = st.row.key
        try:
            await self.memory.update_by_id(ctx, st.row.memory_id, None, tags, st.row.value_hash)
        except LoomError as exc:
            if exc.code == "PRECONDITION_FAILED":
                rep.say(f"{key}: {why}: its value changed since it was read (a race the next run settles)")
            else:
                rep.failed(f"{key}: {why}: the tag write was refused ({exc.code})")
            return False
        return True

    async def _retire(
        self, ctx: CallContext, rep: Report, stored: dict[str, _Stored], gone: set[str], emitted: set[str], apply: bool
    ) -> None:
        """A row of the extractor's found gone and not emitted again: deleted with
        memory.delete_version (which retires its record), or tagged when frozen or acted on."""
        for key in sorted(gone - emitted):
            st = stored.get(key)
            if st is None:
                continue
            if st.frozen or st.acted_on:
                await self._tag(ctx, rep, st, add=True, apply=apply, why="no longer stated")
                continue
            self._touched.add(key)
            if not apply:
                rep.say(f"{key}: no longer stated: would delete it (memory.delete_version v{st.row.version})")
                continue
            args = {"memory_key": key, "version": str(st.row.version)}
            try:
                out = await self.memory.delete_version(ctx, key, st.row.version, st.row.ident)
            except LoomError as exc:
                self.audit(ctx, "memory.delete_version", args, str(exc.code))
                rep.failed(f"{key}: no longer stated: the delete was refused ({exc.code})")
                continue
            self.audit(ctx, "memory.delete_version", args, "")
            rep.retired.append(key)
            rep.say(f"{key}: no longer stated: deleted{' (record retired)' if out.retired_record else ''}")


def _json(body: dpb.RecordDecisionRequest) -> str:
    """The request as the op's JSON body (the spec's argument names), for a report line."""
    return json.dumps(json_format.MessageToDict(body, preserving_proto_field_name=True), ensure_ascii=False)


def _audited(body: dpb.RecordDecisionRequest) -> dict[str, str]:
    """What the audit row keeps of a decision.record the run makes."""
    return {"category": body.category, "stage": body.stage, "source_resource_id": body.source_resource_id}


def _repo_tags(tags: Iterable[str]) -> set[str]:
    return {t for t in tags if t.startswith(REPO_TAG_PREFIX)}
