"""The checkpoint's ``extra`` record (:class:`CheckpointExtras`): read from and written as the
plain dict checkpoints have always held, unknown keys kept, so a loaded checkpoint saved again
holds the same content (and the same checksum)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from conftest_models import seeded_model, tiny_preset

from dgl_graphtx.checkpoint import CheckpointExtras, CheckpointMeta, content_checksum, load_checkpoint, save_checkpoint
from dgl_graphtx.errors import ConfigError

SAVED = Path(__file__).parent / "data" / "saved_before_registry"

#: An ``extra`` as training writes it, with a key from a newer version.
STORED = {
    "split": "scaffold", "fractions": [0.8, 0.1, 0.1],
    "data": {"molecules": 4, "digest": "ab" * 32, "split": {"train": torch.tensor([0, 1]), "valid": torch.tensor([2]),
                                                              "test": torch.tensor([3])}},
    "domain": {"elements": ["C", "O"], "max_atoms": 9}, "run_id": "20261127-abc",
    "class_labels": [{"target": "y", "negative": "no", "positive": "yes"}],
    "uncertainty": {"method": "mve", "coverage": 0.9, "calibration": {"method": "mve"}},
    "extra_features": {"generators": ["rdkit2d"]}, "pretrained": {"name": "m", "sha256": "cd" * 32},
    "training_fingerprints": torch.zeros(2, 256, dtype=torch.uint8),
    "epoch": 3, "valid_metrics": {"rmse": 0.5}, "train_config": {"epochs": 5},
    "written_by_a_newer_version": {"a": [1, 2]},
}


def test_an_old_extra_reads_into_fields_and_writes_back_unchanged():
    extras = CheckpointExtras.from_dict(STORED)
    assert extras.split == "scaffold" and extras.epoch == 3 and extras.train_config == {"epochs": 5}
    assert extras.other == {"written_by_a_newer_version": {"a": [1, 2]}}
    written = extras.to_dict()
    assert list(written) == list(STORED)
    assert content_checksum(written) == content_checksum(STORED)


def test_absent_keys_stay_absent():
    assert CheckpointExtras.from_dict({}) == CheckpointExtras() and CheckpointExtras().to_dict() == {}
    assert CheckpointExtras.from_dict({"epoch": 2, "data": None}).to_dict() == {"epoch": 2}
    with pytest.raises(TypeError, match="extra must be a dict"):
        CheckpointExtras.from_dict([("epoch", 2)])


def test_a_loaded_checkpoint_saved_again_keeps_its_extra_and_checksum(tmp_path):
    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    path = save_checkpoint(tmp_path / "m.pt", seeded_model(preset), CheckpointMeta(preset.featurizer, preset.relation, ["y"]))
    payload = torch.load(path, weights_only=True)
    payload["extra"] = dict(STORED)
    payload["checksum"] = content_checksum(payload)
    torch.save(payload, path)
    loaded = load_checkpoint(path)
    assert loaded.meta.extra.other == {"written_by_a_newer_version": {"a": [1, 2]}}
    again = torch.load(save_checkpoint(tmp_path / "again.pt", loaded.model, loaded.meta), weights_only=True)
    assert again["checksum"] == payload["checksum"]
    changed = dataclasses.replace(loaded.meta, extra=dataclasses.replace(loaded.meta.extra, epoch=4))
    assert torch.load(save_checkpoint(tmp_path / "changed.pt", loaded.model, changed), weights_only=True)["extra"]["epoch"] == 4


@pytest.mark.parametrize("variant", ["gradformer", "grpe", "moire"])
def test_checkpoints_of_an_earlier_version_load_with_their_extra(variant):
    stored = torch.load(SAVED / f"{variant}.pt", weights_only=True)["extra"]
    assert load_checkpoint(SAVED / f"{variant}.pt").meta.extra.to_dict() == stored


def test_a_plain_dict_as_extra_is_read_into_the_record_as_before(tmp_path):
    """Code written before the record existed builds its meta with a dict; it saves and loads as before."""
    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    meta = CheckpointMeta(preset.featurizer, preset.relation, ["y"], {"epoch": 1, "mine": "kept"})  # type: ignore[arg-type]
    assert meta.extra == CheckpointExtras(epoch=1, other={"mine": "kept"})
    save_checkpoint(tmp_path / "m.pt", seeded_model(preset), meta)
    assert torch.load(tmp_path / "m.pt", weights_only=True)["extra"] == {"epoch": 1, "mine": "kept"}


def test_an_extra_of_another_type_is_one_clear_error(tmp_path):
    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    meta = CheckpointMeta(preset.featurizer, preset.relation, ["y"], [("epoch", 1)])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="CheckpointExtras.from_dict reads a dict"):
        save_checkpoint(tmp_path / "m.pt", seeded_model(preset), meta)
