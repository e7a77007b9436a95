"""Help's use cases: the index built once per process, searches, reads and citation checks."""
