"""One async store interface over ClickHouse, with two engines: chDB embedded and a server via asynch."""

from .base import Migration, Store, StoreError, ch_time, open_store, query_as, run_migrations
from .where import Where

__all__ = ["Migration", "Store", "StoreError", "Where", "ch_time", "open_store", "query_as", "run_migrations"]
