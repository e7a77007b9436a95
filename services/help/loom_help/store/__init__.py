"""Help's storage: the docs folder on disk. Help keeps nothing in ClickHouse."""
