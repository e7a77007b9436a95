"""Loom's analysis plane: insights.query and insights.catalog behind a ClickHouse-enforced boundary."""
