"""Sharded featurization: equality with the in-memory MoleculeDataset (graphs, labels, rows,
report, cache key), worker processes, resumption after a real kill, input formats (CSV, SDF,
.smi, gzipped), the memory-mapped dataset, and the ``featurize`` / ``train STORE`` commands."""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils.data import DataLoader

from conftest_models import freesolv_rows

import dgl_graphtx.datasets.sharded_store as store_module
from dgl_graphtx.cli import main
from dgl_graphtx.datasets import (MoleculeDataset, collate_molecules, example_sdf_path, featurize_file, featurize_to_store,
                                  load_store, read_molecules)
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.relation_graph import RelationConfig

REPO = Path(__file__).resolve().parents[2]
BAD_ROWS = {3: "C1CC", 17: "", 40: "not a smiles", 71: "CN(C)(C)(C)C"}


@pytest.fixture(scope="module")
def messy_csv(tmp_path_factory) -> Path:
    """90 FreeSolv rows with 4 invalid SMILES and one unusable label (row 5)."""
    frame = freesolv_rows(0, 90)[["smiles", "expt"]].astype({"expt": object})
    for row, smiles in BAD_ROWS.items():
        frame.loc[row, "smiles"] = smiles
    frame.loc[5, "expt"] = "n/a?"
    path = tmp_path_factory.mktemp("messy") / "messy.csv"
    frame.to_csv(path, index=False)
    return path


def assert_same_dataset(a: MoleculeDataset, b: MoleculeDataset) -> None:
    """Same molecules, graphs, labels, rows, identifiers and report."""
    assert len(a) == len(b)
    assert a.rows.tolist() == b.rows.tolist()
    assert a.identifiers == b.identifiers
    assert a.target_names == b.target_names
    assert torch.equal(torch.nan_to_num(a.raw_labels, 99.0), torch.nan_to_num(b.raw_labels, 99.0))
    assert a.report.state_dict() == b.report.state_dict()
    everything = list(range(len(a)))
    for part in ("graphs", "relations"):
        ga, gb = getattr(a, part).batch(everything), getattr(b, part).batch(everything)
        assert [t.tolist() for t in ga.edges()] == [t.tolist() for t in gb.edges()]
        assert ga.batch_num_nodes().tolist() == gb.batch_num_nodes().tolist()
        for key in ga.ndata:
            assert torch.equal(ga.ndata[key], gb.ndata[key]), (part, key)
        for key in ga.edata:
            assert torch.equal(ga.edata[key], gb.edata[key]), (part, key)
        assert set(ga.ndata) == set(gb.ndata) and set(ga.edata) == set(gb.edata)


def test_two_workers_give_the_in_memory_dataset_with_the_same_cache_key(messy_csv, tmp_path):
    relation = RelationConfig(virtual_node=True)
    reference = MoleculeDataset.from_csv(messy_csv, target_cols=["expt"], relation=relation, progress=False, cache_dir=tmp_path / "cache")
    root = featurize_file(messy_csv, tmp_path / "store", target_cols=["expt"], relation=relation, workers=2, shard_size=20)
    stored = load_store(root)
    assert_same_dataset(stored, reference)
    assert [i.row for i in stored.report.skipped] == sorted(BAD_ROWS)  # merged across shards, input order
    assert json.loads((root / "manifest.json").read_text())["key"] == reference.cache_file.stem.split("-")[1]
    assert pd.read_csv(root / "input_report.csv")["row"].tolist() == [3, 5, 17, 40, 71]
    assert not (root / "shards").exists()
    # the memory-mapped dataset batches through the DataLoader like the in-memory one
    for x, y in zip(DataLoader(stored, batch_size=16, collate_fn=collate_molecules),
                    DataLoader(reference, batch_size=16, collate_fn=collate_molecules)):
        assert torch.equal(x.labels, y.labels) and torch.equal(x.graph.ndata["feat"], y.graph.ndata["feat"])
    assert isinstance(np.load(root / "arrays" / "graphs.ndata.feat.npy", mmap_mode="r"), np.memmap)


def test_killed_run_resumes_from_finished_shards(tmp_path, monkeypatch):
    csv = tmp_path / "fs.csv"
    freesolv_rows(0, 600)[["smiles", "expt"]].to_csv(csv, index=False)
    root = tmp_path / "store"
    code = (f"from dgl_graphtx.datasets import featurize_file; "
            f"featurize_file({str(csv)!r}, {str(root)!r}, target_cols=['expt'], shard_size=20, progress=False)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "OUTDATED_IGNORE": "1"}
    job = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(list((root / "shards").glob("shard-*.pt"))) < 3 and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.02)
    job.send_signal(signal.SIGKILL)
    job.communicate(timeout=60)
    assert job.returncode == -9, "featurization finished before it could be killed"
    finished = sorted(p.name for p in (root / "shards").glob("shard-*.pt"))
    assert 3 <= len(finished) < 30 and not (root / "manifest.json").exists()
    calls = []
    original = store_module._featurize_shard
    monkeypatch.setattr(store_module, "_featurize_shard", lambda *job: calls.append(job[5]) or original(*job))
    featurize_file(csv, root, target_cols=["expt"], shard_size=20, progress=False)
    assert len(calls) == 30 - len(finished)
    assert sorted(set(range(0, 600, 20)) - set(calls)) == [int(name[6:12]) * 20 for name in finished]
    assert_same_dataset(load_store(root), MoleculeDataset.from_csv(csv, target_cols=["expt"], progress=False))
    calls.clear()
    featurize_file(csv, root, target_cols=["expt"], shard_size=20, progress=False)  # complete: nothing to do
    assert calls == []


def test_a_store_folder_never_mixes_inputs_or_settings(messy_csv, tmp_path):
    root = featurize_file(messy_csv, tmp_path / "s", target_cols=["expt"], shard_size=50)
    with pytest.raises(ConfigError, match="holds a store of other molecules or settings"):
        featurize_file(messy_csv, root, target_cols=["expt"], relation=RelationConfig("hops", hops=2))
    partial = tmp_path / "partial"
    (partial / "shards").mkdir(parents=True)
    (partial / "plan.json").write_text(json.dumps({"store_format": 1, "key": "other", "rows": 1, "shard_size": 1}))
    with pytest.raises(ConfigError, match="unfinished store of other molecules"):
        featurize_to_store(["CCO"], partial)
    with pytest.raises(ConfigError, match="not a complete featurized store"):
        load_store(partial)


def test_gzipped_csv_smi_and_sdf_inputs(messy_csv, tmp_path):
    gz = tmp_path / "messy.csv.gz"
    gz.write_bytes(gzip.compress(messy_csv.read_bytes()))
    plain, zipped = read_molecules(messy_csv), read_molecules(gz)
    assert plain.molecules == zipped.molecules and plain.targets(["expt"]).equals(zipped.targets(["expt"]))
    smiles = freesolv_rows(0, 12)["smiles"].tolist()
    smi = tmp_path / "m.smi.gz"
    smi.write_bytes(gzip.compress("".join(f"{s} mol{i}\n" for i, s in enumerate(smiles)).encode()))
    stored = load_store(featurize_file(smi, tmp_path / "smi", shard_size=5))
    assert_same_dataset(stored, MoleculeDataset(smiles, progress=False))
    sdf = tmp_path / "cdk2.sdf.gz"
    sdf.write_bytes(gzip.compress(example_sdf_path().read_bytes()))
    conformer = FeaturizerConfig(coordinates="conformer")
    stored = load_store(featurize_file(sdf, tmp_path / "sdf", featurizer=conformer, shard_size=3, workers=1))
    reference = MoleculeDataset.from_sdf(example_sdf_path(), featurizer=conformer, progress=False)
    assert_same_dataset(stored, reference)


def test_featurize_command_then_train_on_the_store(tmp_path):
    csv = tmp_path / "fs.csv"
    freesolv_rows(0, 60)[["smiles", "expt"]].to_csv(csv, index=False)
    store, run = tmp_path / "store", tmp_path / "run"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["featurize", str(csv), "--out", str(store), "--targets", "expt", "--model", "vanilla",
                     "--preset", "tiny", "--workers", "1", "--shard-size", "25", "--no-progress"]) == 0
        assert main(["train", str(store), "--targets", "expt", "--model", "vanilla", "--preset", "tiny", "--epochs", "1",
                     "--batch-size", "16", "--out", str(run), "--no-progress", "--device", "cpu"]) == 0
    assert "60 molecules" in out.getvalue()
    assert (run / "best.pt").is_file() and (run / "last.pt").is_file()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["train", str(store), "--targets", "logS", "--out", str(run) + "-2", "--model", "vanilla", "--preset", "tiny"]) == 2
    assert "holds targets ['expt']" in err.getvalue()


def test_killed_featurize_takes_its_workers_with_it(tmp_path):
    """SIGKILL of ``featurize --workers 2`` leaves no process behind: the workers, the fork server
    and the resource tracker end too, and no shard is written after the kill."""
    psutil = pytest.importorskip("psutil")
    csv = tmp_path / "fs.csv"
    freesolv_rows(0, 600)[["smiles", "expt"]].to_csv(csv, index=False)
    root = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "OUTDATED_IGNORE": "1"}
    job = subprocess.Popen([sys.executable, "-m", "dgl_graphtx", "featurize", str(csv), "--out", str(root), "--targets", "expt",
                            "--workers", "2", "--shard-size", "10", "--no-progress"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    helpers = []
    try:
        while time.monotonic() < deadline and job.poll() is None:
            helpers = psutil.Process(job.pid).children(recursive=True)
            if len(list((root / "shards").glob("shard-*.pt"))) >= 2 and len(helpers) >= 3:
                break
            time.sleep(0.05)
        job.send_signal(signal.SIGKILL)
        assert job.wait(timeout=60) == -9, "featurization finished before it could be killed"
        assert len(helpers) >= 3, helpers  # two workers and the fork server (and the resource tracker)
        _, alive = psutil.wait_procs(helpers, timeout=30)
        assert not alive, [(p.pid, p.cmdline()[-3:]) for p in alive]
        shards = sorted(p.name for p in (root / "shards").glob("shard-*.pt"))
        time.sleep(2)  # nothing is left to write another shard
        assert sorted(p.name for p in (root / "shards").glob("shard-*.pt")) == shards
    finally:
        for process in helpers:  # a failing run must not leave them behind either
            with contextlib.suppress(psutil.Error):
                process.kill()
