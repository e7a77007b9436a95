"""The admin controls on model spend: the org's model-calls switch (org.set_model_calls,
org.model_calls) and the namespace's daily model cost cap (budget.set, budget.get)."""

from __future__ import annotations

from dataclasses import dataclass

from loom_core.errors import ErrorCode, Forbidden
from loom_core.identity import Authenticator, Principal
from loom_core.roles import Role
from loom_core.store import Store

from ..store import controls
from ..store import ledger as ledger_store


@dataclass(frozen=True, slots=True)
class Budget:
    namespace: str
    cap_usd: float
    is_default: bool
    share: float
    spent_usd: float


class Controls:
    def __init__(self, *, store: Store, auth: Authenticator, default_cap_usd: float, share: float) -> None:
        self.store = store
        self.auth = auth
        self.default_cap_usd = default_cap_usd
        self.share = share

    @staticmethod
    def _own_org(caller: Principal, org: str) -> str:
        """The org a call names must be the caller's own (empty: the caller's)."""
        if org and org != caller.org:
            raise Forbidden(ErrorCode.AUTH_INSUFFICIENT, "a token acts on its own org only", {"reason": "org", "org": caller.org})
        return caller.org

    async def set_model_calls(self, caller: Principal, *, org: str, enabled: bool) -> tuple[str, bool]:
        org = self._own_org(caller, org)
        # The chain lets a namespace admin through an org-level op; the switch is the org's, so
        # it needs the org-wide admin role.
        if await self.auth.org_role(caller) < Role.ADMIN:
            raise Forbidden(
                ErrorCode.AUTH_INSUFFICIENT,
                "org.set_model_calls needs the org-wide admin role",
                {"reason": "role", "needed": "admin", "scope": "org"},
            )
        await controls.set_model_calls(self.store, org=org, enabled=enabled)
        return org, enabled

    async def model_calls(self, caller: Principal, *, org: str) -> tuple[str, bool]:
        org = self._own_org(caller, org)
        return org, await controls.model_calls_enabled(self.store, org=org)

    async def set_budget(self, caller: Principal, namespace: str, cap_usd: float | None) -> Budget:
        await controls.set_cost_cap(self.store, org=caller.org, namespace=namespace, cap_usd=cap_usd)
        return await self.budget(caller, namespace)

    async def budget(self, caller: Principal, namespace: str) -> Budget:
        own = await controls.cost_cap(self.store, org=caller.org, namespace=namespace)
        spent = await ledger_store.spent_today(self.store, org=caller.org, namespace=namespace)
        cap = self.default_cap_usd if own is None else own
        return Budget(namespace, cap, own is None, self.share, spent)
