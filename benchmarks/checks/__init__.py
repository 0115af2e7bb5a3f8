"""The recurring speed, memory and GPU checks that back the numbers in docs/benchmarks.md and
docs/scaling.md; each prints its table and target (nothing is asserted) and can rewrite its section."""
