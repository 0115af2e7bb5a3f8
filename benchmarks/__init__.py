"""Benchmarks of dgl_graphtx (not part of the installed package). Run each from the repository root
as a module, e.g. ``python -m benchmarks.suite --report`` or ``python -m benchmarks.checks.training_steps``:
``suite/`` is the accuracy suite, ``checks/`` the recurring speed, memory and GPU checks, ``common/``
what both share. benchmarks/README.md is the map."""
