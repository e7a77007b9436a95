"""SQL and schema: memory rows, decision records, edges, feedback."""
