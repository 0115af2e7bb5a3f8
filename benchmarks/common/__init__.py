"""What the suite and the checks share: molecules (FreeSolv, ZINC-like, MOSES), reporting (environment,
tables, CSV, docs sections) and timing (warm-up, repeats, medians)."""
