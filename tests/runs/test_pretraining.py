"""Descriptor pretraining, pretrained backbones (by name and path, hash-checked), fine-tuning
from them and their embeddings."""
from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import torch

from cli_runner import assert_one_error_line, must_not_be_called, run_cli
from pretraining_helpers import assert_same_backbone, interrupted_at_epoch
from dgl_graphtx.checkpoint import load_checkpoint
from dgl_graphtx.datasets import MoleculeDataset, freesolv
from dgl_graphtx.errors import CheckpointError, ConfigError
from dgl_graphtx.featurize.descriptors import compute_features, feature_names
from dgl_graphtx.inference import get_pretrained, list_pretrained
from dgl_graphtx.models import build_model, get_preset
from dgl_graphtx.runs import train_and_evaluate
from dgl_graphtx.runs import pretrained_preset
from dgl_graphtx.runs import PretrainConfig, pretrain
from dgl_graphtx.runs.pretraining import MaskedDescriptorTrainer, descriptor_targets
from dgl_graphtx.training import TrainConfig, Trainer, masked_loss

TINY = dict(num_layers=1, hidden_dim=16, num_heads=2)
CARD_FIELDS = ("name", "variant", "corpus", "targets", "recipe", "epochs", "wall_time_s", "hardware", "heldout_r2",
               "library_version", "sha256")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.smi"
    path.write_text("\n".join(freesolv()["smiles"][:40]))
    return path


def _pretrain(corpus, out, epochs=3, **kwargs):
    preset = get_preset("gradformer", **TINY)
    config = TrainConfig(epochs=epochs, batch_size=8, lr=1e-3, progress=False)
    return pretrain(corpus, out, preset, config, PretrainConfig(valid_share=0.2, mask_share=0.3), name="tiny", **kwargs)


@pytest.fixture(scope="module")
def backbone(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("pretrained") / "tiny"
    _pretrain(corpus, out)
    return out


def test_card_describes_the_run_and_hash_matches(backbone, corpus):
    card = json.loads((backbone / "card.json").read_text())
    assert all(field in card for field in CARD_FIELDS)
    assert card["corpus"]["molecules"] == 40 and card["corpus"]["heldout"] == 8 and card["epochs"] == 3
    assert card["recipe"]["pretrain"]["mask_share"] == 0.3
    assert set(card["targets"]["names"]) <= set(feature_names(["rdkit2d"]))
    loaded = get_pretrained(backbone)
    assert loaded.checkpoint.meta.target_names == card["targets"]["names"]
    assert loaded.card.sha256 == card["sha256"] and loaded.card.to_dict() == card


def test_descriptor_targets_are_robust_scaled_descriptors(corpus):
    smiles = corpus.read_text().split()
    raw = compute_features(["rdkit2d"], smiles)
    values, kept, scaler = descriptor_targets(raw, feature_names(["rdkit2d"]), list(range(30)))
    column = feature_names(["rdkit2d"]).index("MolWt")
    weights = raw[:30, column]
    q1, median, q3 = np.percentile(weights, [25, 50, 75])
    expected = np.clip((raw[:, column] - median) / ((q3 - q1) / 1.349), -10, 10)
    np.testing.assert_allclose(values[:, kept.index("MolWt")], expected, rtol=1e-5)
    constant = [n for i, n in enumerate(feature_names(["rdkit2d"])) if np.nanmax(raw[:30, i]) == np.nanmin(raw[:30, i])]
    assert constant and not set(constant) & set(kept)


def test_masked_loss_leaves_out_the_drawn_share():
    preset = get_preset("vanilla", **TINY)
    trainer = MaskedDescriptorTrainer(build_model(preset.model), TrainConfig(progress=False), mask_share=0.5)
    output, labels = torch.randn(6, 4), torch.randn(6, 4)
    mask = torch.ones(6, 4, dtype=torch.bool)
    mask[0, 0] = False
    batch = type("B", (), {"labels": labels, "mask": mask})()
    torch.manual_seed(3)
    got = trainer.batch_loss(output, batch)
    torch.manual_seed(3)
    keep = torch.rand(6, 4) >= 0.5
    used = keep & mask
    assert 0 < int(used.sum()) < 24
    assert float(got) == pytest.approx(float(((output - labels)[used] ** 2).mean()), rel=1e-6)
    assert float(MaskedDescriptorTrainer(trainer.model, TrainConfig(progress=False), mask_share=0.0).batch_loss(output, batch)) == \
        pytest.approx(float(masked_loss("regression", output, labels, mask)))


def test_interrupted_pretraining_resumes_to_the_same_weights(backbone, corpus, tmp_path, monkeypatch):
    with interrupted_at_epoch(monkeypatch, 3):
        _pretrain(corpus, tmp_path / "run")
    assert load_checkpoint(tmp_path / "run" / "last.pt").training_state["epoch"] == 2
    _pretrain(corpus, tmp_path / "run", resume=True)
    assert_same_backbone(tmp_path / "run", backbone)


def test_resume_on_another_corpus_or_with_other_pretraining_settings_is_refused(backbone, corpus, tmp_path, monkeypatch):
    # resumed silently before: the card then named the other corpus (or mask share) for a backbone trained on the first
    other = tmp_path / "other.smi"
    other.write_text(corpus.read_text().replace("\n", "C\n", 1))  # one molecule changed: the same descriptors keep a spread
    run = tmp_path / "run"
    shutil.copytree(backbone, run)
    card = (run / "card.json").read_text()
    with pytest.raises(ConfigError, match=r"was pretrained on another corpus \(corpus.smi, .*\) than other.smi"):
        _pretrain(other, run, resume=True)
    preset = get_preset("gradformer", **TINY)
    config = TrainConfig(epochs=3, batch_size=8, lr=1e-3, progress=False)
    with pytest.raises(ConfigError, match=r"pretrained with mask_share=0.3; resume with the same settings \(now mask_share=0.5\)"):
        pretrain(corpus, run, preset, config, PretrainConfig(valid_share=0.2, mask_share=0.5), name="tiny", resume=True)
    assert (run / "card.json").read_text() == card
    # the command line refuses before the corpus is featurized or its descriptors computed
    monkeypatch.setattr(MoleculeDataset, "__init__", must_not_be_called("featurizing"))
    flags = ["--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2", "--epochs", "3", "--batch-size", "8",
             "--lr", "1e-3", "--valid-share", "0.2", "--mask-share", "0.3", "--resume", "-q"]
    assert_one_error_line(run_cli(["pretrain", other, "--out", run, *flags]), "another corpus", "other.smi")
    assert_one_error_line(run_cli(["pretrain", corpus, "--out", run, *flags, "--objective", "both"]),
                          "pretrained with objective='descriptors'", "(now objective='both')")
    assert (run / "card.json").read_text() == card


def test_fine_tune_50_molecules_from_a_pretrained_backbone(backbone, tmp_path, monkeypatch):
    pretrained = get_pretrained(backbone)
    preset = pretrained_preset(pretrained, get_preset("grpe"))
    assert preset.model.variant == "gradformer" and preset.relation == pretrained.checkpoint.meta.relation
    ds = MoleculeDataset.from_dataframe(freesolv()[100:150], target_cols=["expt"], featurizer=preset.featurizer,
                                        relation=preset.relation, progress=False)
    frozen = TrainConfig(epochs=2, batch_size=8, progress=False, from_pretrained=str(backbone), freeze_backbone_epochs=1)
    original = Trainer._check_weights

    def stop_in_epoch_2(self, epoch):
        if epoch == 2:
            raise RuntimeError("stopped after the frozen epoch")
        original(self, epoch)

    with monkeypatch.context() as patch, pytest.raises(RuntimeError, match="frozen epoch"):
        patch.setattr(Trainer, "_check_weights", stop_in_epoch_2)
        train_and_evaluate(ds, preset, frozen, out_dir=tmp_path / "frozen")
    after_frozen_epoch = load_checkpoint(tmp_path / "frozen" / "last.pt")
    assert after_frozen_epoch.training_state["epoch"] == 1
    tuned = after_frozen_epoch.model.state_dict()
    source = pretrained.checkpoint.model.state_dict()
    parameters = {name for name, _ in after_frozen_epoch.model.named_parameters()}  # BatchNorm statistics still move
    backbone_keys = [k for k in source if k in parameters and not k.startswith("head.")]
    assert backbone_keys and all(torch.equal(tuned[k], source[k]) for k in backbone_keys)  # loaded, then frozen
    head = [k for k in tuned if k.startswith("head.")]
    assert head and all(k not in source or tuned[k].shape != source[k].shape or not torch.equal(tuned[k], source[k])
                        for k in head)  # a new head
    assert after_frozen_epoch.meta.extra.pretrained["sha256"] == pretrained.card.sha256
    scaled = TrainConfig(epochs=2, batch_size=8, progress=False, from_pretrained=str(backbone), backbone_lr_scale=0.1)
    result = train_and_evaluate(ds, preset, scaled, out_dir=tmp_path / "scaled")
    assert not all(torch.equal(result.model.state_dict()[k], source[k]) for k in backbone_keys)
    # the model is the backbone's, and the data must be featurized as the backbone was pretrained
    grpe = get_preset("grpe", **TINY)
    other = MoleculeDataset.from_dataframe(freesolv()[100:150], target_cols=["expt"], featurizer=grpe.featurizer,
                                           relation=grpe.relation, progress=False)
    with pytest.raises(ConfigError, match="is a gradformer backbone, which fixes the model; this run asks for grpe"):
        train_and_evaluate(other, grpe, scaled, out_dir=tmp_path / "bad")
    with pytest.raises(ConfigError, match="was featurized with other settings than the gradformer model reads"):
        train_and_evaluate(other, preset, scaled, out_dir=tmp_path / "bad")


def test_the_fine_tuning_run_chooses_its_head_kind(backbone):
    """Task, classes and uncertainty head are the run's, not the backbone's (a descriptor regressor)."""
    pretrained = get_pretrained(backbone)
    base = get_preset("grpe", task="multiclass", num_classes=3)
    preset = pretrained_preset(pretrained, base)
    assert (preset.model.task, preset.model.num_classes, preset.model.output_width) == ("multiclass", 3, 3)
    mve = pretrained_preset(pretrained, get_preset("grpe", uncertainty_head="mve"))
    assert mve.model.uncertainty_head == "mve" and mve.model.output_width == 2


def test_cli_fine_tune_records_the_choice_and_enforces_settings(backbone, tmp_path):
    csv = tmp_path / "d.csv"
    freesolv()[:50][["smiles", "expt"]].to_csv(csv, index=False)
    out = tmp_path / "run"
    code, _, err = run_cli(["train", csv, "--targets", "expt", "--out", out, "--from-pretrained", backbone,
                            "--freeze-backbone-epochs", "1", "--backbone-lr-scale", "0.5", "--epochs", "2", "-q"])
    assert code == 0, err
    import yaml
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["train"]["from_pretrained"] == str(backbone.resolve()) and saved["preset"]["model"] == "gradformer"
    assert saved["train"]["freeze_backbone_epochs"] == 1 and saved["model"]["num_layers"] == 1
    assert_one_error_line(run_cli(["train", csv, "--targets", "expt", "--out", tmp_path / "r2", "--from-pretrained", backbone,
                                   "--atom-features", "canonical"]), "was pretrained with featurizer")


def test_damaged_backbone_fails_the_hash_check(backbone, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(backbone, copy)
    data = bytearray((copy / "backbone.pt").read_bytes())
    data[-10] ^= 0xFF
    (copy / "backbone.pt").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="SHA-256 .* its card says"):
        get_pretrained(copy)
    assert_one_error_line(run_cli(["embed", "--checkpoint", copy, "CCO", "--output", tmp_path / "e.csv"]), "damaged or replaced")
    with pytest.raises(ConfigError, match="no pretrained model 'nothing-here'"):
        get_pretrained("nothing-here")


def test_another_file_of_a_pretraining_folder_is_named_as_not_its_backbone(backbone, tmp_path):
    # best.pt and last.pt were called damaged, with the advice to reinstall the library
    csv = tmp_path / "d.csv"
    freesolv()[:20][["smiles", "expt"]].to_csv(csv, index=False)
    for name in ("best.pt", "last.pt"):
        line = assert_one_error_line(run_cli(["train", csv, "--targets", "expt", "--out", tmp_path / "r",
                                              "--from-pretrained", backbone / name]),
                                     f"{backbone / name} is not the backbone its card", f"give the folder {backbone} or its backbone.pt")
        assert "damaged" not in line and "reinstall" not in line


def test_embed_by_pretrained_path(backbone, tmp_path):
    code, out, err = run_cli(["embed", "--checkpoint", backbone, "CCO", "c1ccccc1", "--output", tmp_path / "e.npy", "-q"])
    assert code == 0, err
    vectors = np.load(tmp_path / "e.npy")
    model = get_pretrained(backbone).checkpoint
    assert vectors.shape == (2, model.model.config.hidden_dim) and np.isfinite(vectors).all()


@pytest.mark.parametrize("card", list_pretrained(), ids=lambda card: card.name)
def test_shipped_backbones_load_offline_with_a_correct_card(card, tmp_path):
    loaded = get_pretrained(card.name)  # checks the SHA-256 against the card
    assert all(field in card.to_dict() for field in CARD_FIELDS)
    assert loaded.checkpoint.model.config.variant == card.variant
    assert loaded.checkpoint.meta.target_names == card.targets.names
    code, stdout, _ = run_cli(["pretrained"])
    assert code == 0 and card.name in stdout
    code, _, err = run_cli(["embed", "--checkpoint", card.name, "CCO", "--output", tmp_path / "e.npy", "-q"])
    assert code == 0, err


def test_pretraining_reads_a_featurized_store(corpus, tmp_path):
    from dgl_graphtx.datasets import featurize_to_store

    preset = get_preset("gradformer", **TINY)
    smiles = corpus.read_text().split()[:20] + ["C1CC"]  # one invalid molecule: left out of the store
    store = featurize_to_store(smiles, tmp_path / "store", featurizer=preset.featurizer, relation=preset.relation,
                               shard_size=8, progress=False)
    result = pretrain(store, tmp_path / "run", preset, TrainConfig(epochs=1, batch_size=8, progress=False),
                      PretrainConfig(valid_share=0.25))
    assert result.card.corpus.molecules == 20
    # the targets are the descriptors of the store's molecules, in store order
    stored = np.load(tmp_path / "run" / "descriptors.npz")["values"]
    np.testing.assert_array_equal(stored, compute_features(["rdkit2d"], smiles[:20]))
    with pytest.raises(ConfigError, match="featurized with other settings"):
        pretrain(store, tmp_path / "other", get_preset("grpe", **TINY), TrainConfig(epochs=1, progress=False))


def test_cli_pretrain_writes_backbone_and_card(corpus, tmp_path):
    out = tmp_path / "pt"
    code, stdout, err = run_cli(["pretrain", corpus, "--out", out, "--model", "vanilla", "--set", "model.num_layers=1",
                                 "model.hidden_dim=16", "model.num_heads=2", "--epochs", "1", "--valid-share", "0.25",
                                 "--corpus-licence", "CC0", "--notes", "cli test", "-q"])
    assert code == 0, err
    card = json.loads((out / "card.json").read_text())
    assert card["corpus"]["licence"] == "CC0" and card["notes"] == "cli test" and card["variant"] == "vanilla"
    assert "held-out descriptor R2" in stdout and get_pretrained(out).card.to_dict() == card
    assert_one_error_line(run_cli(["pretrain", "moses", "--moses-dir", tmp_path / "none", "--out", tmp_path / "m"]),
                          "no molsets wheel", "pip download --no-deps molsets")
    assert_one_error_line(run_cli(["pretrain", tmp_path / "missing.smi", "--out", tmp_path / "m"]), "not found")


def test_pretraining_in_two_processes_matches_one_process(corpus, tmp_path):
    # without masking, 2 DDP processes see the same global batches as 1 process: the held-out
    # descriptor fit per epoch agrees up to float32 summation order and per-rank loss means (a
    # molecule's descriptors can be partly missing), which Adam magnifies; the fit itself moves 4x the tolerance
    common = ["--model", "vanilla", "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2",
              "model.dropout=0", "train.warmup_epochs=0", "--epochs", "2", "--batch-size", "8", "--lr", "0.01",
              "--valid-share", "0.25", "--mask-share", "0", "--device", "cpu", "-q"]
    logs = {}
    for nproc in (1, 2):
        out = tmp_path / f"pt{nproc}"
        code, _, err = run_cli(["pretrain", corpus, "--out", out, "--nproc", nproc, *common])
        assert code == 0, err
        logs[nproc] = np.loadtxt(out / "log.csv", delimiter=",", skiprows=1, usecols=4)
    assert abs(logs[1][1] - logs[1][0]) > 0.02 * logs[1][0]
    card = get_pretrained(tmp_path / "pt2").card
    assert card.hardware.endswith("x 2 processes") and len(logs[2]) == 2
    np.testing.assert_allclose(logs[2], logs[1], rtol=5e-3)


@pytest.mark.parametrize("card_text,message", [
    ("{not json", "is not valid JSON (line 1"),
    ("[1, 2]", "is not a JSON object"),
])
def test_a_model_card_that_is_not_json_is_one_error(backbone, tmp_path, card_text, message):
    copy = tmp_path / "copy"
    shutil.copytree(backbone, copy)
    (copy / "card.json").write_text(card_text)
    (copy / "SHA256SUMS").unlink(missing_ok=True)  # else the folder's record refuses the edited card first (tests/test_damaged_files.py)
    with pytest.raises(ConfigError, match=re.escape(message)):
        get_pretrained(copy)
    csv = tmp_path / "d.csv"
    freesolv()[:30].to_csv(csv, index=False)
    assert_one_error_line(run_cli(["train", csv, "--targets", "expt", "--out", tmp_path / "r", "--from-pretrained", copy]),
                          f"its model card {copy / 'card.json'} {message}")


def test_a_fine_tuning_run_says_what_it_loaded_and_computed_and_records_it(tmp_path, caplog):
    """A fine-tuning run with rdkit2d features said nothing about its backbone or its 217
    descriptors, and config.yaml recorded molecule_features: 0."""
    import logging

    import yaml

    from cli_runner import run_cli_without_runtime_warnings
    from dgl_graphtx.featurize.descriptors import feature_names as names_of
    csv = tmp_path / "d.csv"
    freesolv()[:40].to_csv(csv, index=False)
    out = tmp_path / "tuned"
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        code, _, err = run_cli_without_runtime_warnings([
            "train", csv, "--targets", "expt", "--out", out, "--from-pretrained", "gradformer-tiny-moses3k",
            "--features-generators", "rdkit2d", "--features-cols", "calc", "--epochs", "1", "--no-cache", "--device", "cpu"])
    assert code == 0, err
    card = next(c for c in list_pretrained() if c.name == "gradformer-tiny-moses3k")
    log = (out / "train.log").read_text()
    assert f"pretrained backbone gradformer-tiny-moses3k (SHA-256 {card.sha256[:12]}" in log
    assert f"{card.parameters:,} parameters, pretrained on {card.corpus.molecules:,} molecules" in log
    descriptors = len(names_of(["rdkit2d"]))
    assert f"extra features of 40 molecules: {descriptors} molecule-level from rdkit2d, 1 molecule-level from the column calc" in log
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["model"]["molecule_features"] == descriptors + 1 and saved["model"]["atom_extra_features"] == 0
    assert load_checkpoint(out / "best.pt").model.config.molecule_features == descriptors + 1


def test_a_run_locates_hashes_and_loads_its_backbone_once(tmp_path, monkeypatch):
    """The backbone of --from-pretrained was located, hashed and loaded twice per run (once more
    per ensemble member)."""
    from dgl_graphtx.inference import backbones
    from dgl_graphtx.runs import resolve_run_config, train_from_config
    loads = []
    load = backbones.load_checkpoint
    monkeypatch.setattr(backbones, "load_checkpoint", lambda path, *a, **k: loads.append(path) or load(path, *a, **k))
    csv = tmp_path / "d.csv"
    freesolv()[:40].to_csv(csv, index=False)
    config = resolve_run_config(overrides=[f"data.path={csv}", "data.targets=expt", "train.from_pretrained=gradformer-tiny-moses3k",
                                           "train.epochs=1", "train.progress=false", "data.cache=false", "ensemble.size=2"])
    train_from_config(config, tmp_path / "run")
    assert len(loads) == 1
