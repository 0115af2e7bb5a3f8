"""Progress lines: seconds per epoch when an epoch takes longer than a second, resumed runs
counted from where they were (epoch 2/3, not 1/2), and the preset actually used by name."""
from __future__ import annotations

import logging

import pytest

from conftest_models import freesolv_rows, tiny_preset
from cli_runner import run_cli

from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.logs import LogProgress
from dgl_graphtx.checkpoint import CheckpointMeta
from dgl_graphtx.models import build_model
from dgl_graphtx.training import Trainer, TrainConfig


def test_rate_reads_seconds_per_item_when_items_are_slow():
    bar = LogProgress([], "training", "epoch")
    assert bar.rate(4, 10.0) == "2.5 s/epoch"
    assert bar.rate(10, 2.0) == "5.0 epoch/s"


def test_counts_start_after_the_items_done_before(caplog):
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        list(LogProgress(range(4, 6), "training", "epoch", interval=0, total=5, initial=3))
    counts = [r.getMessage().split()[1] for r in caplog.records if r.getMessage().startswith("training:")]
    assert counts == ["4/5", "5/5"]


class Stop(Exception):
    pass


def test_a_resumed_run_counts_its_epochs_from_the_checkpoint(tmp_path, caplog, monkeypatch):
    preset = tiny_preset("vanilla")
    data = MoleculeDataset.from_dataframe(freesolv_rows(0, 12), target_cols=["expt"], featurizer=preset.featurizer,
                                          relation=preset.relation, progress=False)
    meta = CheckpointMeta(preset.featurizer, preset.relation, ["expt"])
    config = TrainConfig(epochs=3, batch_size=4, device="cpu", progress=True)
    original = Trainer._check_weights

    def stop_at_second_epoch(self, epoch):
        if epoch == 2:
            raise Stop
        original(self, epoch)

    monkeypatch.setattr(Trainer, "_check_weights", stop_at_second_epoch)
    with pytest.raises(Stop):
        Trainer(build_model(preset.model), config, out_dir=tmp_path, meta=meta).fit(data, data)
    monkeypatch.setattr(Trainer, "_check_weights", original)
    caplog.clear()  # only the resumed run's lines
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        Trainer(build_model(preset.model), config, out_dir=tmp_path, meta=meta).fit(data, data, resume=True)
    counts = [r.getMessage().split()[1] for r in caplog.records if r.getMessage().startswith("training:")]
    assert counts == ["2/3", "3/3"]


def test_train_names_the_preset_it_uses(tmp_path):
    data = tmp_path / "d.csv"
    freesolv_rows(0, 20)[["smiles", "expt"]].to_csv(data, index=False)
    code, _, err = run_cli(["train", data, "--targets", "expt", "--out", tmp_path / "o", "--model", "vanilla", "--epochs", "1",
                            "--no-progress", "--device", "cpu", "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"])
    assert code == 0, err
    log = (tmp_path / "o" / "train.log").read_text()
    assert "training vanilla (preset default)" not in log and "(preset tiny)" in log
