"""Pure rules of decisions and memory rows: no I/O."""
