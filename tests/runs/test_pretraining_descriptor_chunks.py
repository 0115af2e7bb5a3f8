"""The descriptor step of pretraining: computed in chunks stored in the run folder, so a killed run
computes only the missing ones; chunks of another corpus or generator are never reused."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from dgl_graphtx.featurize.descriptors import compute_features, feature_names
from dgl_graphtx.models import get_preset
from dgl_graphtx.runs import PretrainConfig, descriptor_chunks, pretrain
from dgl_graphtx.runs.descriptor_chunks import CHUNK_FOLDER, ChunkKey, chunked_descriptors
from dgl_graphtx.runs.pretraining.corpus import _descriptors
from dgl_graphtx.training import TrainConfig

SMILES = ["CCO", "CCN", "CCC", "c1ccccc1", "CC(=O)O", "CCCl", "OCCN", "c1ccncc1", "CCOC", "CC(C)O", "C1CCCCC1"]
CACHE_KEYS = {"values", "names", "corpus_sha256", "seconds"}
MORGAN = "morgan_counts:radius=0:size=4"


@pytest.fixture(autouse=True)
def chunks_of_3(monkeypatch):
    monkeypatch.setattr(descriptor_chunks, "CHUNK_SIZE", 3)  # 11 molecules: chunks of 3, 3, 3, 2


@pytest.fixture(scope="module")
def reference():
    return compute_features(["rdkit2d"], SMILES)


def _count_chunks(monkeypatch, fail_at=None):
    """Counts the chunks computed (their sizes); the ``fail_at``-th call raises, as a killed run."""
    calls = []

    def compute(specs, molecules, **options):
        calls.append(len(molecules))
        if len(calls) == fail_at:
            raise RuntimeError("killed")
        return compute_features(specs, molecules, **options)

    monkeypatch.setattr(descriptor_chunks, "compute_features", compute)
    return calls


def _kill_after_two_chunks(out):
    """A run of corpus-a's rdkit2d descriptors killed in its third chunk (set up by :func:`_count_chunks`)."""
    with pytest.raises(RuntimeError, match="killed"):
        _descriptors(out, SMILES, "corpus-a", PretrainConfig(), write=True)
    assert len(list((out / CHUNK_FOLDER).glob("rows-*.npz"))) == 2


@pytest.mark.parametrize("workers", [1, 2])
def test_chunked_descriptors_equal_one_computation_and_are_joined_as_before(tmp_path, monkeypatch, reference, caplog, workers):
    calls = _count_chunks(monkeypatch)
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        values, names, _ = _descriptors(tmp_path, SMILES, "corpus-a", PretrainConfig(workers=workers), write=True)
    assert calls == [3, 3, 3, 2] and names == feature_names(["rdkit2d"])
    np.testing.assert_array_equal(values, reference)
    with np.load(tmp_path / "descriptors.npz") as stored:
        assert set(stored.files) == CACHE_KEYS and str(stored["corpus_sha256"]) == "corpus-a"
        np.testing.assert_array_equal(stored["values"], reference)
    assert not (tmp_path / CHUNK_FOLDER).exists()
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("descriptors: ")]
    assert len(progress) == 4 and progress[0].startswith("descriptors: 3 / 11 molecules") and "left)" in progress[0]
    assert progress[-1].startswith("descriptors: 11 / 11 molecules")


def test_a_killed_computation_resumes_with_the_missing_chunks(tmp_path, monkeypatch, reference, caplog):
    _count_chunks(monkeypatch, fail_at=3)
    _kill_after_two_chunks(tmp_path)
    calls = _count_chunks(monkeypatch)
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        values, _, _ = _descriptors(tmp_path, SMILES, "corpus-a", PretrainConfig(), write=True)
    assert calls == [3, 2] and "reusing 2 stored chunk(s), 6 of 11 molecules" in caplog.text
    np.testing.assert_array_equal(values, reference)
    with np.load(tmp_path / "descriptors.npz") as stored:
        np.testing.assert_array_equal(stored["values"], reference)


def test_the_seconds_are_the_sum_of_the_chunks(tmp_path):
    key = ChunkKey.of("corpus-a", feature_names([MORGAN]), len(SMILES))
    _, seconds = chunked_descriptors(tmp_path, SMILES, key, MORGAN, 1, write=True)
    parts = [float(np.load(path)["seconds"]) for path in sorted(tmp_path.glob("rows-*.npz"))]
    assert len(parts) == 4 and seconds == pytest.approx(sum(parts))


@pytest.mark.parametrize("sha,generator", [("corpus-b", "rdkit2d"), ("corpus-a", MORGAN)])
def test_chunks_of_another_corpus_or_generator_are_not_reused(tmp_path, monkeypatch, caplog, sha, generator):
    _count_chunks(monkeypatch, fail_at=3)
    _kill_after_two_chunks(tmp_path)
    calls = _count_chunks(monkeypatch)
    values, _, _ = _descriptors(tmp_path, SMILES, sha, PretrainConfig(generator=generator), write=True)
    assert calls == [3, 3, 3, 2] and "discarding 2 descriptor chunk(s)" in caplog.text
    np.testing.assert_array_equal(values, compute_features([generator], SMILES))


def test_an_existing_descriptor_cache_is_reused_without_computing(tmp_path, monkeypatch, reference):
    names = feature_names(["rdkit2d"])
    np.savez(tmp_path / "descriptors.npz", values=reference, names=np.array(names), corpus_sha256=np.array("corpus-a"),
             seconds=np.array(12.5))
    calls = _count_chunks(monkeypatch, fail_at=1)
    values, _, seconds = _descriptors(tmp_path, SMILES, "corpus-a", PretrainConfig(), write=True)
    assert calls == [] and seconds == 12.5
    np.testing.assert_array_equal(values, reference)


def test_a_process_that_does_not_write_leaves_the_folder_alone(tmp_path, monkeypatch, reference):
    _count_chunks(monkeypatch, fail_at=3)
    _kill_after_two_chunks(tmp_path)
    before = sorted(path.name for path in (tmp_path / CHUNK_FOLDER).iterdir())
    calls = _count_chunks(monkeypatch)
    values, _, _ = _descriptors(tmp_path, SMILES, "corpus-b", PretrainConfig(), write=False)
    assert calls == [3, 3, 3, 2] and sorted(path.name for path in (tmp_path / CHUNK_FOLDER).iterdir()) == before
    assert not (tmp_path / "descriptors.npz").exists()
    np.testing.assert_array_equal(values, reference)


def test_a_pretraining_run_killed_in_the_descriptor_step_resumes_it(tmp_path, monkeypatch, reference):
    (tmp_path / "c.smi").write_text("\n".join(SMILES))
    preset = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)

    def run(**kwargs):
        return pretrain(tmp_path / "c.smi", tmp_path / "run", preset, TrainConfig(epochs=1, batch_size=8, progress=False),
                        PretrainConfig(valid_share=0.25), **kwargs)

    _count_chunks(monkeypatch, fail_at=3)
    with pytest.raises(RuntimeError, match="killed"):
        run()
    calls = _count_chunks(monkeypatch)
    assert run(resume=True).card.corpus.molecules == len(SMILES) and calls == [3, 2]
    with np.load(tmp_path / "run" / "descriptors.npz") as stored:
        np.testing.assert_array_equal(stored["values"], reference)


def test_an_unreadable_molecule_is_named_by_its_row_in_the_corpus(tmp_path):
    from dgl_graphtx.errors import InvalidMoleculeError

    corpus = SMILES[:7] + ["C1CC"] + SMILES[8:]  # row 7, in the third chunk (rows 6-8)
    with pytest.raises(InvalidMoleculeError, match=r"molecule 7 \('C1CC'\)"):
        _descriptors(tmp_path / "run", corpus, "corpus-a", PretrainConfig(), write=True)


def test_another_subset_draw_in_the_same_folder_does_not_reuse_the_descriptors(tmp_path, monkeypatch):
    (tmp_path / "c.smi").write_text("\n".join(SMILES))
    preset = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)

    def run(seed):
        pretrain(tmp_path / "c.smi", tmp_path / "run", preset, TrainConfig(epochs=1, batch_size=8, progress=False, seed=seed),
                 PretrainConfig(valid_share=0.25, subset=8), overwrite=True)
        with np.load(tmp_path / "run" / "descriptors.npz") as stored:
            return stored["values"]

    first = run(seed=0)
    calls = _count_chunks(monkeypatch)
    second = run(seed=1)
    assert calls, "the second draw reused the first draw's descriptors"
    assert not np.array_equal(first, second)


@pytest.mark.parametrize("where", ["key", "values"])
def test_a_damaged_chunk_is_computed_again(tmp_path, monkeypatch, reference, caplog, where):
    """A chunk with one flipped byte stopped 'pretrain --resume' with BadZipFile (the key was read
    guarded, the values not); it is computed again, with a warning naming it."""
    _count_chunks(monkeypatch, fail_at=3)
    _kill_after_two_chunks(tmp_path)
    first = sorted((tmp_path / CHUNK_FOLDER).glob("rows-*.npz"))[0]
    data = bytearray(first.read_bytes())
    with np.load(first) as stored:  # a byte inside the stored values, or inside the stored corpus digest
        target = stored["values"].tobytes()[8:16] if where == "values" else str(stored["corpus_sha256"]).encode("utf-32-le")[:8]
    offset = bytes(data).find(target)
    assert offset > 0
    data[offset] ^= 0x01
    first.write_bytes(bytes(data))
    calls = _count_chunks(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        values, _, _ = _descriptors(tmp_path, SMILES, "corpus-a", PretrainConfig(), write=True)
    assert sorted(calls) == [2, 3, 3]  # the damaged chunk and the two never done
    assert any(first.name in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    np.testing.assert_array_equal(values, reference)


def test_a_damaged_descriptor_cache_is_computed_again(tmp_path, monkeypatch, reference, caplog):
    _descriptors(tmp_path, SMILES, "corpus-a", PretrainConfig(), write=True)
    cache = tmp_path / "descriptors.npz"
    cache.write_bytes(cache.read_bytes()[:-40])
    calls = _count_chunks(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        values, _, _ = _descriptors(tmp_path, SMILES, "corpus-a", PretrainConfig(), write=True)
    assert calls == [3, 3, 3, 2] and any("descriptors.npz is damaged" in r.getMessage() for r in caplog.records)
    np.testing.assert_array_equal(values, reference)
