"""An answer's checks when it ends (spec 000 "Citations", "Support", "Steps"): each citation its
own task of one gather, ten seconds in all; the run's calls read for support and steps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loom_core.chain.context import MD_AUTHORIZATION
from loom_core.op_caller import OpCaller
from loom_core.store import Store

from ..domain import checks, opsets
from ..domain import citations as cit
from ..domain import names as names_mod
from ..domain.ledger import LedgerCall
from ..domain.steps import Step, steps_of
from ..domain.support import RUN_ROWS_CUT, Call, Calls, OpKind, Support, cut_run, decide
from ..store import ledger

CHECKS_BOUND_S = 10.0
ROWS_WAIT_S = 5.0
CALLS_BOUND_S = 3.0


@dataclass(slots=True)
class AnswerScope:
    org: str
    namespace: str
    subject: str
    token: str
    started: float


@dataclass(slots=True)
class Verdict:
    checked: list[cit.Checked]
    support: Support
    unknown_names: list[str]
    steps: list[Step] | None = None
    steps_cut: bool = False
    # The run's calls were read after waiting for the rows LibreChat reported (or the bound).
    calls_waited: bool = False

    def wire_citations(self) -> list[dict[str, object]]:
        return [c.wire() for c in self.checked]


class Checker:
    def __init__(
        self,
        store: Store,
        *,
        flush: Callable[[], Awaitable[None]],
        ledger_wait_s: float,
        op_names: Sequence[str],
        setting_names: Sequence[str],
        docs_text: str | None,
        ops: OpCaller | None = None,
        memory_reads_recorded: bool = True,
    ) -> None:
        self.store = store
        self.flush = flush
        self.ledger_wait_s = ledger_wait_s
        self.op_names = list(op_names)
        self.setting_names = list(setting_names)
        self.docs_text = docs_text
        self.ops = ops
        # LOOM_MEMORY_EXPOSURE_LEDGER_ENABLED: off, no memory read leaves the rows a memory
        # citation is checked against, so none can be (spec 000 "Citations").
        self.memory_reads_recorded = memory_reads_recorded

    async def verdict(self, scope: AnswerScope, run_id: str, text: str, *, streamed: bool, tool_calls: int = 0) -> Verdict:
        cites = cit.parse(text)
        checked_list, past = cit.split_checked(cites)
        unknown = names_mod.unknown(text, ops=self.op_names, settings=self.setting_names, docs_text=self.docs_text)
        calls_task: asyncio.Task[tuple[Calls, list[LedgerCall]] | None] | None = None
        if run_id and (streamed or not cites):
            calls_task = asyncio.create_task(self._calls(scope, run_id, stop_early=not streamed, expected=tool_calls))
        try:
            checked = await asyncio.wait_for(self._check_all(scope, run_id, checked_list, tool_calls), CHECKS_BOUND_S)
        except TimeoutError:
            checked = [cit.Checked(c, False, cit.REASON_COULD_NOT_RUN, undecided=True) for c in checked_list]
        checked += [cit.Checked(c, False, cit.REASON_PAST_LIMIT, undecided=True) for c in past]
        calls: Calls | None = None
        rows: list[LedgerCall] | None = None
        if calls_task is not None:
            got = await calls_task
            if got is not None:
                calls, rows = got
            else:
                calls = Calls(readable=False)
        elif not cites:
            calls = Calls(readable=False)  # no run id: nothing to read
        support = decide(text, checked, unknown, calls if not cites else None)
        v = Verdict(checked, support, unknown, calls_waited=calls_task is not None)
        if streamed and rows is not None:
            v.steps = steps_of(rows)
            v.steps_cut = calls is not None and calls.cut
        return v

    async def _calls(self, scope: AnswerScope, run_id: str, *, stop_early: bool, expected: int) -> tuple[Calls, list[LedgerCall]] | None:
        """Read once, and again after the ledger's wait until the rows of the tool calls
        LibreChat reported have landed (a whole answer stops at a citable op's data), within
        three seconds together; a late row is not seen."""
        kinds = opsets.kinds()

        async def read() -> tuple[Calls, list[LedgerCall]]:
            await self.flush()
            rows = await ledger.run_rows(self.store, org=scope.org, run_id=run_id, subject=scope.subject, limit=RUN_ROWS_CUT + 1)
            kept, cut = cut_run(rows)
            calls = [Call(r.op, r.ok, opsets.found(r.out_hits)) for r in kept]
            return Calls(calls, cut=cut, kinds=kinds), kept

        def citable_found(got: tuple[Calls, list[LedgerCall]]) -> bool:
            return any(c.ok and c.found and kinds.get(c.op) == OpKind.CITABLE for c in got[0].calls)

        async def until_landed() -> tuple[Calls, list[LedgerCall]]:
            got = await read()
            if stop_early and citable_found(got):
                return got
            waited = False
            while not waited or (len(got[1]) < min(expected, RUN_ROWS_CUT) and not got[0].cut):
                await asyncio.sleep(self.ledger_wait_s if not waited else min(self.ledger_wait_s, 0.1))
                waited = True
                got = await read()
                if stop_early and citable_found(got):
                    return got
            return got

        try:
            return await asyncio.wait_for(until_landed(), CALLS_BOUND_S)
        except Exception:  # noqa: BLE001 - a failed or late read leaves the answer unchecked
            return None

    async def _check_all(self, scope: AnswerScope, run_id: str, cites: list[cit.Citation], expected: int) -> list[cit.Checked]:
        if not cites:
            return []
        # Help and document citations are checked against the docs index in one help.verify call.
        indexed = [c for c in cites if c.kind in ("help", "doc")]
        index_task = asyncio.create_task(self._indexed(scope, indexed)) if indexed else None
        reads = _SharedReads(self, scope, run_id, expected)
        plain = [c for c in cites if c.kind not in ("help", "doc")]
        tasks = [asyncio.create_task(self._one(scope, run_id, c, reads)) for c in plain]
        others = await asyncio.gather(*tasks, return_exceptions=True)
        by_cite: dict[int, cit.Checked] = {}
        for c, result in zip(plain, others, strict=True):
            by_cite[id(c)] = result if isinstance(result, cit.Checked) else cit.Checked(c, False, cit.REASON_COULD_NOT_RUN, undecided=True)
        if index_task is not None:
            for c, result in zip(indexed, await index_task, strict=True):
                by_cite[id(c)] = result
        return [by_cite[id(c)] for c in cites]

    async def _one(self, scope: AnswerScope, run_id: str, c: cit.Citation, reads: _SharedReads) -> cit.Checked:
        if c.kind == "code":
            return cit.Checked(c, False, cit.REASON_CODE_NOT_CHECKED, undecided=True)
        if not run_id:
            return cit.Checked(c, False, cit.REASON_COULD_NOT_RUN, undecided=True)
        if c.kind == "memory":
            if not self.memory_reads_recorded:
                return cit.Checked(c, False, cit.REASON_MEMORY_NOT_RECORDED, undecided=True)
            return await self._until(reads, reads.exposed, lambda keys: checks.memory(c, keys))
        if c.kind == "sql":
            return await self._until(reads, reads.rows, lambda rows: checks.sql(c, rows))
        if c.kind == "task":
            return await self._until(reads, reads.rows, lambda rows: checks.task(c, rows))
        return checks.could_not_run(c)

    async def _until(
        self, reads: _SharedReads, read: Callable[[int], Awaitable[_Read]], judge: Callable[[Any], cit.Checked]
    ) -> cit.Checked:
        """The rows land in the background: judge again until verified, for up to five seconds,
        or until no row of the run is still on its way: every call LibreChat reported has its
        ledger row, in a read begun at least one ledger wait after the first (as the run's calls
        are read, `_calls`). A call's exposure rows are inserted before its ledger row is
        recorded, so a read that counts the row after them sees them."""
        deadline = time.monotonic() + ROWS_WAIT_S
        attempt = 0
        while True:
            got = await read(attempt)
            verdict = judge(got.data)
            if verdict.verified or time.monotonic() >= deadline or reads.all_landed(got):
                return verdict
            attempt += 1
            await asyncio.sleep(min(0.1, max(self.ledger_wait_s / 2, 0.02)))

    async def _indexed(self, scope: AnswerScope, cites: list[cit.Citation]) -> list[cit.Checked]:
        """help.verify with the answer's token, through Loom's own routes: the docs are the same
        for every caller. A document citation is checked in its help form (Loom's documents are
        its shipped docs)."""
        if self.ops is None:
            return [cit.Checked(c, False, cit.REASON_COULD_NOT_RUN, undecided=True) for c in cites]
        forms = [c.text if c.kind == "help" else checks.doc_as_help(c) for c in cites]
        try:
            out = await self.ops("help.verify", {"citations": forms}, {MD_AUTHORIZATION: f"Bearer {scope.token}"}, "rest")
            results = list(out.get("results") or [])
        except Exception:  # noqa: BLE001 - a refused or failed check leaves the citation unverified
            return [cit.Checked(c, False, cit.REASON_COULD_NOT_RUN, undecided=True) for c in cites]
        judged: list[cit.Checked] = []
        for i, c in enumerate(cites):
            result = results[i] if i < len(results) else None
            judged.append(checks.help_(c, result) if c.kind == "help" else checks.doc(c, result))
        return judged


@dataclass(frozen=True, slots=True)
class _Read:
    """One read of the run's rows (or exposed keys): what was read, when the read began, and
    how many of the run's ledger rows had landed by then (counted before `data` was read)."""

    data: Any
    began: float
    landed: int


class _SharedReads:
    """One answer's reads, shared by its checks: every check waiting at the same attempt reads
    the rows once (fifty citations cost two reads, not fifty)."""

    def __init__(self, checker: Checker, scope: AnswerScope, run_id: str, expected: int) -> None:
        self._checker = checker
        self._scope = scope
        self._run_id = run_id
        # The tool calls LibreChat reported for the answer: each leaves one ledger row.
        self._expected = min(expected, RUN_ROWS_CUT)
        self._started = time.monotonic()
        self._reads: dict[tuple[str, int], asyncio.Future[_Read]] = {}

    def all_landed(self, got: _Read) -> bool:
        """Every reported call's row had landed when `got` was read, a ledger wait or more
        after the checks began (a row written in the background has had its time)."""
        return got.began - self._started >= self._checker.ledger_wait_s and got.landed >= self._expected

    def _once(self, kind: str, attempt: int, make: Callable[[], Awaitable[_Read]]) -> asyncio.Future[_Read]:
        fut = self._reads.get((kind, attempt))
        if fut is None:
            fut = self._reads[(kind, attempt)] = asyncio.ensure_future(make())
        return fut

    async def _run_rows(self) -> list[LedgerCall]:
        s = self._scope
        return await ledger.run_rows(self._checker.store, org=s.org, run_id=self._run_id, subject=s.subject, limit=RUN_ROWS_CUT)

    async def _exposed(self) -> _Read:
        began = time.monotonic()
        await self._checker.flush()
        landed = len(await self._run_rows())
        keys = await ledger.exposed_keys(self._checker.store, org=self._scope.org, run_id=self._run_id)
        return _Read(keys, began, landed)

    async def _rows(self) -> _Read:
        began = time.monotonic()
        await self._checker.flush()
        rows = await self._run_rows()
        return _Read(rows, began, len(rows))

    def exposed(self, attempt: int) -> Awaitable[_Read]:
        return self._once("exposed", attempt, self._exposed)

    def rows(self, attempt: int) -> Awaitable[_Read]:
        return self._once("rows", attempt, self._rows)
