"""`loom secrets reseal` entry point (group `loom.reseal`): loom.assistant_service's sealed
password and key, rewritten together under the current LOOM_JWT_SECRET."""

from __future__ import annotations

from loom_core.settings import Settings
from loom_core.store import Store

from .store.service_row import ServiceRowStore, sealer


async def reseal(store: Store, settings: Settings) -> int:
    return await ServiceRowStore(store, sealer(settings.jwt_secret, settings.jwt_secret_previous)).reseal()
