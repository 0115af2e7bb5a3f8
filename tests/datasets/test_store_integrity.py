"""Damaged stores are caught, never used: a byte flipped in, or a cut of, a finished shard of an
interrupted store is featurized again when the store resumes; a byte flipped in a finished store's
arrays is refused when the store is opened, naming the file and how to rebuild it; and a feature
value beyond the model's embeddings is one clear error, not an IndexError."""
from __future__ import annotations

import json
import logging
import os
import pickle

import numpy as np
import pytest
import torch

from conftest_models import freesolv_rows
from cli_runner import assert_one_error_line, run_cli
from test_sharded_store import assert_same_dataset

import dgl_graphtx.datasets.sharded_store as store_module
from dgl_graphtx.datasets import MoleculeDataset, featurize_file, load_store
from dgl_graphtx.errors import ConfigError, DamagedFileError
from dgl_graphtx.models.encoders import FeatureEncoder


@pytest.fixture()
def csv(tmp_path):
    path = tmp_path / "fs.csv"
    freesolv_rows(0, 100)[["smiles", "expt"]].to_csv(path, index=False)
    return path


def _interrupted_store(csv, root, monkeypatch, shards=3):
    """A store stopped (as by Ctrl-C) after ``shards`` finished shards of 20 molecules."""
    real = store_module._featurize_shard
    done = []

    def stop_after(*job):
        if len(done) == shards:
            raise KeyboardInterrupt
        done.append(job[5])
        return real(*job)

    with monkeypatch.context() as patch:
        patch.setattr(store_module, "_featurize_shard", stop_after)
        with pytest.raises(KeyboardInterrupt):
            featurize_file(csv, root, target_cols=["expt"], shard_size=20, progress=False)
    finished = sorted((root / "shards").glob("shard-*.pt"))
    assert len(finished) == shards
    return finished


def _flip(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _resume_and_count(csv, root, monkeypatch):
    calls = []
    real = store_module._featurize_shard
    monkeypatch.setattr(store_module, "_featurize_shard", lambda *job: calls.append(job[5]) or real(*job))
    featurize_file(csv, root, target_cols=["expt"], shard_size=20, progress=False)
    return calls


def test_flipped_byte_in_a_finished_shard_is_featurized_again(csv, tmp_path, monkeypatch, caplog):
    root = tmp_path / "store"
    finished = _interrupted_store(csv, root, monkeypatch)
    labels = torch.load(finished[1], weights_only=True)["labels"]
    start = finished[1].read_bytes().find(labels.numpy().tobytes())  # inside the label tensor: torch.load reads it fine
    assert start > 0
    _flip(finished[1], start + 2)
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        calls = _resume_and_count(csv, root, monkeypatch)
    assert sorted(calls) == [20, 60, 80]  # the damaged shard (rows 20-39) and the two never done
    assert any(finished[1].name in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    assert_same_dataset(load_store(root), MoleculeDataset.from_csv(csv, target_cols=["expt"], progress=False))


def test_truncated_shard_is_featurized_again(csv, tmp_path, monkeypatch):
    root = tmp_path / "store"
    finished = _interrupted_store(csv, root, monkeypatch)
    finished[0].write_bytes(finished[0].read_bytes()[: finished[0].stat().st_size // 2])
    calls = _resume_and_count(csv, root, monkeypatch)
    assert sorted(calls) == [0, 60, 80]
    assert_same_dataset(load_store(root), MoleculeDataset.from_csv(csv, target_cols=["expt"], progress=False))


def _finished_store(csv, root):
    run_cli(["featurize", csv, "--out", root, "--targets", "expt", "--model", "vanilla", "--preset", "tiny",
             "--shard-size", "40", "--no-progress"])
    return root / "arrays" / "graphs.ndata.feat.npy"


def test_flipped_byte_in_a_store_array_is_refused_on_open(csv, tmp_path):
    root = tmp_path / "store"
    feat = _finished_store(csv, root)
    array = np.load(feat, mmap_mode="r")
    offset = feat.stat().st_size - array.nbytes + array.itemsize * 7 + array.itemsize - 1  # the high byte of one value
    _flip(feat, offset)
    with pytest.raises(ConfigError, match="graphs.ndata.feat.npy") as caught:
        load_store(root)
    assert "damaged" in str(caught.value) and "featurize" in str(caught.value)
    line = assert_one_error_line(run_cli(["train", root, "--targets", "expt", "--out", tmp_path / "run", "--epochs", "1",
                                          "--device", "cpu", "--no-progress"]), str(feat), "featurize")
    assert "IndexError" not in line and not (tmp_path / "run" / "best.pt").exists()


def test_feature_value_beyond_the_embeddings_is_one_clear_error():
    encoder = FeatureEncoder((5, 3), 8, categorical=True, kind="atom")
    encoder(torch.tensor([[4, 2], [0, 0]]))
    with pytest.raises(ConfigError, match=r"atom feature 1 holds 7, outside the 3 values") as caught:
        encoder(torch.tensor([[4, 2], [0, 7]]))
    assert "featurize" in str(caught.value)
    with pytest.raises(ConfigError, match="atom feature 0 holds -1"):
        encoder(torch.tensor([[-1, 0]]))


def test_a_store_without_checksums_is_read_with_a_warning(csv, tmp_path, caplog):
    """Stores of format 1 (written before checksums) still open, saying they cannot be verified."""
    root = tmp_path / "store"
    _finished_store(csv, root)
    manifest = json.loads((root / "manifest.json").read_text())
    del manifest["checksums"]
    (root / "manifest.json").write_text(json.dumps(dict(manifest, store_format=1)))
    (root / "SHA256SUMS").unlink(missing_ok=True)  # nor had such a store a record of its files
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        assert len(load_store(root)) == 100
    assert any("cannot be verified" in r.getMessage() for r in caplog.records)


def test_a_shard_copied_under_another_index_is_featurized_again(csv, tmp_path, monkeypatch, caplog):
    """A valid shard's file copied in place of another shard's (its name holding its own SHA-256,
    as the name of a shard did before its index was part of it) gave 20 molecules another shard's
    graphs and labels."""
    root = tmp_path / "store"
    finished = _interrupted_store(csv, root, monkeypatch)
    digest = finished[1].name.split(".")[1]
    finished[0].unlink()
    impostor = finished[0].with_name(f"shard-000000.{digest}.pt")
    impostor.write_bytes(finished[1].read_bytes())  # shard 1's rows under index 0
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        calls = _resume_and_count(csv, root, monkeypatch)
    assert sorted(calls) == [0, 60, 80]
    assert any(impostor.name in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    assert_same_dataset(load_store(root), MoleculeDataset.from_csv(csv, target_cols=["expt"], progress=False))


def test_a_shard_that_is_a_pickle_is_one_line_that_never_advises_unpickling(csv, tmp_path, monkeypatch):
    """A file named as a valid shard (its digest computed for it) that holds a pickle: nothing runs,
    and the error is one line that does not repeat torch's advice to load with weights_only=False."""
    root = tmp_path / "store"
    finished = _interrupted_store(csv, root, monkeypatch, shards=4)
    data = pickle.dumps({"graphs": os.getcwd})  # would call a function if unpickled
    finished[2].unlink()
    (root / "shards" / f"shard-000002.{store_module._shard_digest(2, [data])}.pt").write_bytes(data)
    with pytest.raises(DamagedFileError, match=r"shard-000002\..* is damaged") as caught:
        featurize_file(csv, root, target_cols=["expt"], shard_size=20, progress=False)
    assert "\n" not in str(caught.value) and "weights_only=False" not in str(caught.value)


def test_featurizing_a_complete_store_again_builds_a_damaged_one_again(csv, tmp_path, caplog):
    """The store said 'complete and up to date' whatever its files held; now a damaged array is
    found and the store built again, equal to an undamaged one."""
    root = tmp_path / "store"
    feat = _finished_store(csv, root)
    _flip(feat, feat.stat().st_size - 3)
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        _finished_store(csv, root)
    assert any("graphs.ndata.feat.npy" in r.getMessage() and "featurizing it again" in r.getMessage() for r in caplog.records)
    _finished_store(csv, tmp_path / "reference")
    assert_same_dataset(load_store(root), load_store(tmp_path / "reference"))
