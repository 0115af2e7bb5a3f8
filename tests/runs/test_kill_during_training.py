"""Faults during long runs: a training run killed with SIGKILL at random
moments always leaves files that load and agree with each other.

A server process imports the library once and forks one training run per iteration (so an
iteration costs the run, not the imports); the test kills the run after a random delay, then
checks the folder. The next iteration reuses it with ``overwrite=True``, which exercises the
stale-lock path too. Bounded: every wait has a timeout.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import torch

from conftest_models import freesolv_rows

from dgl_graphtx.checkpoint import load_checkpoint

ITERATIONS = 20

SERVER = r"""
import os, sys
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch
torch.set_num_threads(1)
from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.models import get_preset
from dgl_graphtx.runs import train_and_evaluate
from dgl_graphtx.training import TrainConfig
data, out = sys.argv[1], sys.argv[2]
p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
ds = MoleculeDataset.from_csv(data, "smiles", ["expt"], featurizer=p.featurizer, relation=p.relation, progress=False)
torch.optim.AdamW([torch.zeros(1, requires_grad=True)])  # its first use imports torch._dynamo (seconds): do it once here
print("ready", flush=True)
for line in sys.stdin:
    seed = int(line)
    pid = os.fork()
    if pid == 0:
        try:
            train_and_evaluate(ds, p, TrainConfig(epochs=60, batch_size=8, seed=seed, progress=False, device="cpu"),
                               out_dir=out, overwrite=True)
        finally:
            os._exit(0)
    print(pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print("done", status, flush=True)
"""


def _readline(proc, timeout=120.0):
    """One line from the server, or fail after ``timeout`` seconds (never hang)."""
    import selectors

    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    if not selector.select(timeout):
        raise AssertionError("kill-test server did not answer in time")
    return proc.stdout.readline().strip()


def _check_consistent(out):
    """Every file present loads, and all of them come from one run."""
    names = {p.name for p in out.iterdir()}
    assert not [n for n in names if n.endswith(".tmp") and not n.startswith(".")], names
    run_ids = {}
    if "run.json" in names:
        run_ids["run.json"] = json.loads((out / "run.json").read_text())["run_id"]
    if "log.csv" in names:
        log = pd.read_csv(out / "log.csv")
        assert log["epoch"].tolist() == list(range(1, len(log) + 1))
    if "best.pt" in names:
        loaded = load_checkpoint(out / "best.pt")
        run_ids["best.pt"] = loaded.meta.extra.run_id
        assert "log.csv" in names and loaded.meta.extra.epoch in set(log["epoch"])
        assert all(torch.isfinite(v).all() for v in loaded.model.state_dict().values() if v.is_floating_point())
    if "metrics.json" in names:
        run_ids["metrics.json"] = json.loads((out / "metrics.json").read_text())["run_id"]
        assert "test_predictions.csv" in names and len(pd.read_csv(out / "test_predictions.csv")) > 0
    assert len(set(run_ids.values())) <= 1, run_ids
    return names


def test_sigkill_at_random_moments_leaves_loadable_consistent_files(tmp_path):
    data = tmp_path / "data.csv"
    freesolv_rows(0, 40)[["smiles", "expt"]].to_csv(data, index=False)
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    errors = open(tmp_path / "server.err", "w")
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(data), str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
    rng = np.random.default_rng(2024)
    outcomes = {"killed": 0, "finished": 0, "with best.pt": 0}
    try:
        assert _readline(server) == "ready"
        for iteration in range(ITERATIONS):
            server.stdin.write(f"{iteration}\n")
            server.stdin.flush()
            pid = int(_readline(server))
            time.sleep(float(rng.uniform(0.0, 2.5)))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            status = int(_readline(server).split()[1])
            outcomes["killed" if os.WIFSIGNALED(status) else "finished"] += 1
            stderr = (tmp_path / "server.err").read_text()
            assert "Traceback" not in stderr, stderr  # a run may be killed, but never fail by itself
            if out.exists():
                names = _check_consistent(out)  # a stale lock left by the kill is taken over by the next run
                outcomes["with best.pt"] += "best.pt" in names
    finally:
        server.stdin.close()
        server.kill()
        server.wait(timeout=30)
        server.stdout.close()
        errors.close()
    print(f"kill test: {outcomes}")
    assert outcomes["killed"] >= ITERATIONS // 2, outcomes  # a run takes seconds (60 epochs): most are cut short
    assert outcomes["with best.pt"] >= ITERATIONS // 2, outcomes  # kills also land mid-training, not only while featurizing
