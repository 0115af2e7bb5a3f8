"""The transfer benchmark suite (``benchmarks/suite.py``): data sets, split files, tool drivers,
the cached runner and the report. Each module has one job; ``config`` holds every setting."""
