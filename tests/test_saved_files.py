"""The record a folder keeps of the files written into it (``SHA256SUMS``, checked against
``hashlib`` and the ``sha256sum`` format) and the guarded readers of the files the library writes:
every kind of damage is one :class:`DamagedFileError` naming the file and the fix."""
from __future__ import annotations

import hashlib
import io
import json
import os
import pickle

import numpy as np
import pandas as pd
import pytest
import torch

from dgl_graphtx import atomic_io
from dgl_graphtx.atomic_io import atomic_savez, atomic_to_csv, atomic_torch_save, atomic_write_text, keep_record, remove_file
from dgl_graphtx.errors import DamagedFileError
from dgl_graphtx.saved_files import open_npy, read_csv, read_json, read_npz, read_torch, verified


def _sha256sum_lines(folder):
    """What ``sha256sum`` prints for every file of ``folder`` but the record, computed here."""
    return sorted(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}" for p in folder.iterdir() if p.name != "SHA256SUMS")


def test_a_recorded_folder_lists_each_file_written_as_sha256sum_would(tmp_path):
    keep_record(tmp_path)
    atomic_write_text('{"a": 1}', tmp_path / "a.json")
    atomic_to_csv(pd.DataFrame({"x": [1, 2]}), tmp_path / "t.csv", index=False)
    atomic_write_text('{"a": 2}', tmp_path / "a.json")  # replaced: one line, the new content
    assert sorted((tmp_path / "SHA256SUMS").read_text().splitlines()) == _sha256sum_lines(tmp_path)
    remove_file(tmp_path / "t.csv")
    assert (tmp_path / "SHA256SUMS").read_text().splitlines() == _sha256sum_lines(tmp_path)


def test_a_folder_without_a_record_gets_none(tmp_path):
    atomic_write_text("{}", tmp_path / "a.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_a_write_killed_while_the_name_changes_hands_leaves_a_record_that_agrees(tmp_path, monkeypatch):
    keep_record(tmp_path)
    path = atomic_write_text('{"v": 1}', tmp_path / "a.json")

    rename = os.replace

    def killed(source, target):
        if not str(target).endswith("SHA256SUMS"):
            raise KeyboardInterrupt  # stands for SIGKILL between the record and the rename
        rename(source, target)

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text('{"v": 2}', path)
    monkeypatch.undo()
    assert read_json(path, "rerun") == {"v": 1}  # the old file, still accepted
    assert len((tmp_path / "SHA256SUMS").read_text().splitlines()) == 2  # old and new digests listed


class _InterruptedOnWrite(io.RawIOBase):
    """A file whose ``write`` number ``at`` raises ``KeyboardInterrupt``, as Ctrl-C would there."""

    def __init__(self, handle, at):
        self.handle, self.left = handle, at

    def writable(self):
        return True

    def write(self, data):
        self.left -= 1
        if self.left == 0:
            raise KeyboardInterrupt
        return self.handle.write(data)


def test_ctrl_c_during_torch_save_is_an_interruption_and_keeps_the_previous_file(tmp_path):
    """CI, torch 2.2: Ctrl-C while last.pt was written became torch's zip-writer error ("unexpected
    pos ..."), reported as "cannot write" (exit 2) instead of the interruption (exit 130)."""
    path = atomic_torch_save({"epoch": 1}, tmp_path / "last.pt")
    with pytest.raises(KeyboardInterrupt):
        with atomic_io.atomic_path(path) as tmp, open(tmp, "wb") as handle:
            torch.save({"epoch": 2, "w": torch.zeros(1000)}, _InterruptedOnWrite(handle, at=3))
    assert read_torch(path, "rerun") == {"epoch": 1} and sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def _flip(path, offset=None):
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if offset is None else offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_changed_file_that_still_parses_is_refused_by_its_record(tmp_path):
    keep_record(tmp_path)
    path = atomic_write_text('{"coverage": 0.9}', tmp_path / "c.json")
    path.write_text('{"coverage": 0.8}')
    with pytest.raises(DamagedFileError, match=r"c\.json is damaged: it does not match the SHA-256 recorded.*; rerun"):
        read_json(path, "rerun")


def test_a_deleted_file_its_record_lists_is_refused_even_where_optional(tmp_path):
    keep_record(tmp_path)
    path = atomic_write_text("{}", tmp_path / "c.json")
    path.unlink()
    with pytest.raises(DamagedFileError, match=r"c\.json is missing \(the folder's SHA256SUMS lists it"):
        read_json(path, "rerun", optional=True)
    assert read_json(tmp_path / "other.json", "rerun", optional=True) is None  # never written: absent is fine


def test_a_damaged_record_is_named(tmp_path):
    keep_record(tmp_path)
    path = atomic_write_text("{}", tmp_path / "c.json")
    record = tmp_path / "SHA256SUMS"
    record.write_bytes(record.read_bytes()[:20])
    with pytest.raises(DamagedFileError, match=r"SHA256SUMS is damaged \(line 1 is not"):
        verified(path, "rerun")


#: Every reader and damage; a table cut at half is still a table: only its folder's record tells (tested above).
DAMAGES = [(kind, damage) for kind in ("json", "csv", "npz", "npy", "torch") for damage in ("truncated", "flipped", "empty")
           if (kind, damage) != ("csv", "truncated")]


@pytest.mark.parametrize("kind, damage", DAMAGES)
def test_every_reader_names_a_damaged_file_without_a_record(tmp_path, kind, damage):
    writers = {"json": lambda p: atomic_write_text(json.dumps({"a": list(range(50))}), p),
               "csv": lambda p: atomic_to_csv(pd.DataFrame({"row": range(50), "fold": 1}), p, index=False),
               "npz": lambda p: atomic_savez(p, x=np.arange(50)),
               "npy": lambda p: np.save(p, np.arange(50)),
               "torch": lambda p: atomic_torch_save({"x": torch.arange(50)}, p)}
    readers = {"json": lambda p: read_json(p, "rerun"), "csv": lambda p: read_csv(p, "rerun", ["row", "fold"]),
               "npz": lambda p: read_npz(p, "rerun", ["x"]), "npy": lambda p: np.asarray(open_npy(p, "rerun")),
               "torch": lambda p: read_torch(p, "rerun")}
    path = tmp_path / f"file.{kind}"
    writers[kind](path)
    intact = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(intact[: len(intact) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    else:  # the first byte: a format's magic number, a JSON brace, a column name
        _flip(path, 0)
    with pytest.raises(DamagedFileError, match=rf"{path.name} is damaged.*; rerun$"):
        readers[kind](path)


def test_a_pickle_is_refused_without_advice_to_unpickle_it(tmp_path):
    path = tmp_path / "shard.pt"
    path.write_bytes(pickle.dumps({"graphs": os.getcwd}))  # would call a function when unpickled
    with pytest.raises(DamagedFileError) as caught:
        read_torch(path, "featurize it again")
    assert "could run code" in str(caught.value) and "weights_only=False" not in str(caught.value)


def test_the_record_is_not_recorded_in_itself_and_survives_unreadable_lines(tmp_path):
    keep_record(tmp_path)
    (tmp_path / "SHA256SUMS").write_text("garbage\n")
    atomic_write_text("{}", tmp_path / "a.json")  # a writer drops what it cannot read
    assert (tmp_path / "SHA256SUMS").read_text().splitlines() == _sha256sum_lines(tmp_path)
    assert atomic_io.RECORD == "SHA256SUMS"
