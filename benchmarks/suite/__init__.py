"""The accuracy suite (``python -m benchmarks.suite``): data sets, split files, tool drivers, the
resumable runner with its ledger, and the report. Each module has one job; ``config`` holds every setting."""
