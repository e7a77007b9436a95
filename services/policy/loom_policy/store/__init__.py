"""SQL only: the rules table, the decision ledger, the audit rows, and reads of the ledger and
exposures that fill a history window or a replay."""
