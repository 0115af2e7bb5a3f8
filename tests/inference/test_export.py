"""One-file export (``dgl-graphtx export``, ``export_model``): the portable featurizer gives the
library's own inputs, the exported file predicts like the checkpoint in a process that cannot
import DGL or this package, ONNX where its packages are installed, old checkpoints export, and
what cannot be exported is refused in one line."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from cli_runner import assert_one_error_line, run_cli
from conftest_models import freesolv_frame, seeded_model, tiny_preset

from dgl_graphtx.checkpoint import CheckpointExtras, CheckpointMeta, save_checkpoint
from dgl_graphtx.datasets import ExtraFeatures
from dgl_graphtx.datasets.extra_features import FittedExtraFeatures
from dgl_graphtx.datasets.featurized import featurize_and_pack
from dgl_graphtx.featurize import FeaturizerConfig, MoleculeFeaturizer
from dgl_graphtx.featurize.descriptors import kernel_fingerprints, kernel_segments
from dgl_graphtx.inference import Predictor
from dgl_graphtx.inference import portable
from dgl_graphtx.inference.export import export_model, plain_inputs
from dgl_graphtx.models.kernel import FingerprintKernel, fit_fingerprint_kernel
from dgl_graphtx.nn.tracing import CAN_EXPORT
from dgl_graphtx.relation_graph import RelationConfig
from dgl_graphtx.runs.config import DEFAULT_KERNEL
from benchmarks.common.molecules import zinc_like_smiles

SMILES = [str(s) for s in freesolv_frame()["smiles"]]
#: Charges, stereo (E/Z, R/S), fragments, one atom, isotopes, radicals, metals, boron, a kekulé ring.
UNUSUAL = ["C", "[Na+].[Cl-]", "CC.O", "F/C=C/F", "C[C@H](N)C(=O)O", "N[C@@H](C)C(=O)O", "c1ccc2[nH]ccc2c1",
           "O=[N+]([O-])c1ccccc1", "[2H]C([2H])O", "[CH2]C", "[Fe+2]", "B(O)O", "C1=CC=CC=C1", "C[S@@](=O)c1ccccc1"]
SAVED = Path(__file__).resolve().parents[1] / "data" / "saved_before_registry"
#: torch.export of these models needs torch.compiler.is_exporting (torch 2.6); older torch is refused in one line.
EXPORTS = pytest.mark.skipif(not CAN_EXPORT, reason="torch.export of these models needs torch 2.6 or newer")
HAS_ONNX = all(importlib.util.find_spec(name) is not None for name in ("onnx", "onnxscript", "onnxruntime"))
#: Run in a fresh interpreter beside the exported files: DGL, dgllife, OGB and this package cannot be imported there.
WITHOUT_THE_LIBRARY = """
import importlib.abc, json, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("dgl", "dgllife", "ogb", "dgl_graphtx"):
            raise ImportError(name + " is not there")
sys.meta_path.insert(0, Refuse())
import graphtx_portable
found = graphtx_portable.load(sys.argv[1]).predict(json.load(open("smiles.json")))
json.dump({k: (v if k == "error" else v.tolist()) for k, v in found.items()}, open("found.json", "w"))
"""


@pytest.mark.parametrize("featurizer, relation", [
    (FeaturizerConfig(rwse_steps=16), RelationConfig()),
    (FeaturizerConfig(rwse_steps=5, explicit_hydrogens=True), RelationConfig("hops", hops=2)),
    (FeaturizerConfig(), RelationConfig("hops", hops=0)),
])
def test_the_portable_featurizer_gives_the_library_inputs(featurizer, relation):
    smiles = SMILES + UNUSUAL
    done = featurize_and_pack(MoleculeFeaturizer(featurizer, relation), smiles)
    assert done.rows == list(range(len(smiles)))
    index = torch.arange(len(smiles))
    expected = plain_inputs(done.graphs.batch(index), done.relations.batch(index))
    settings = portable.Settings(featurizer.explicit_hydrogens, featurizer.rwse_steps, relation.hops)
    found = portable.batch([portable.featurize(s, settings) for s in smiles])
    for name, want, got in zip(portable.INPUTS, expected, found):
        assert got.dtype == want.dtype and torch.equal(got, want), name


def _checkpoint(path, variant="gradformer", preset=None, relation=None, **overrides):
    config = tiny_preset(variant, preset, **overrides)
    if relation is not None or not config.model.virtual_node and config.relation.virtual_node:  # the relation graph follows the model
        config = dataclasses.replace(config, relation=relation or dataclasses.replace(config.relation, virtual_node=False))
    model = seeded_model(config)
    names = ["y", "z"][:config.model.num_tasks]
    if config.model.task == "regression":
        model.set_target_normalization(torch.tensor([-3.0, 1.0][:len(names)]), torch.tensor([2.5, 0.5][:len(names)]))
    return save_checkpoint(path, model, CheckpointMeta(config.featurizer, config.relation, names))


def _predict_without_the_library(exported, smiles, tmp_path):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    for path in (exported, exported.with_name("graphtx_portable.py")):
        shutil.copy(path, folder / path.name)
    (folder / "smiles.json").write_text(json.dumps(smiles))
    (folder / "run.py").write_text(WITHOUT_THE_LIBRARY)
    done = subprocess.run([sys.executable, "run.py", exported.name], cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads((folder / "found.json").read_text())


@EXPORTS
def test_the_exported_file_predicts_like_the_checkpoint_without_dgl_or_this_package(tmp_path):
    checkpoint = _checkpoint(tmp_path / "best.pt", num_tasks=2)
    out = tmp_path / "model.pt2"
    code, stdout, err = run_cli(["export", "--checkpoint", checkpoint, "--out", out])
    assert code == 0, err
    assert f"wrote {out}" in stdout and "graphtx_portable.py" in stdout and "largest difference" in stdout
    smiles = SMILES[:300] + ["C1CC"]
    found = _predict_without_the_library(out, smiles, tmp_path)
    expected = Predictor(checkpoint, device="cpu").predict(smiles)
    for target in ("y", "z"):
        np.testing.assert_allclose(found[target][:300], expected[f"{target}_pred"][:300], rtol=0, atol=1e-5)
    assert np.isnan(found["y"][300]) and found["error"][300] and found["error"][:300] == [None] * 300


@EXPORTS
@pytest.mark.parametrize("variant, preset, overrides, columns", [
    ("gradformer", "molhiv", {}, ["y"]),  # GatedGCN gated by the random-walk encodings
    ("gradformer", "zinc", {}, ["y"]),  # summed readout
    ("moire", "2d", {}, ["y"]),  # a pre-LN transformer without a virtual node
    ("grpe", None, {"virtual_node": False, "readout": "mean"}, ["y"]),  # GRPE's terms, trained without the virtual node
    ("graphormer", None, {"virtual_node": False, "readout": "mean"}, ["y"]),
    ("gradformer", None, {"task": "classification"}, ["y"]),
    ("gradformer", None, {"task": "multiclass", "num_classes": 3}, ["y_prob_0", "y_prob_1", "y_prob_2"]),
    ("gradformer", None, {"atom_reference": True}, ["y"]),
])
def test_models_of_other_kinds_export_and_agree(tmp_path, variant, preset, overrides, columns):
    checkpoint = _checkpoint(tmp_path / "best.pt", variant, preset, **overrides)
    done = export_model(checkpoint, tmp_path / "model.pt2")
    assert done.size == done.path.stat().st_size
    model = portable.load(done.path)
    assert model.columns == columns
    found, expected = model.predict(SMILES[:64]), Predictor(checkpoint, device="cpu").predict(SMILES[:64])
    for column in columns:  # untrained models give large outputs (a summed readout): agreement to 1e-5 relative
        np.testing.assert_allclose(found[column], expected[column if "_prob_" in column else f"{column}_pred"], rtol=1e-5, atol=1e-5)
    one = model.predict(SMILES[3])  # one SMILES as a string: one row (it gave a row per character)
    assert len(one["error"]) == 1 and one[columns[0]][0] == pytest.approx(found[columns[0]][3], rel=1e-5, abs=1e-5)


MORGAN_KERNEL = "morgan_counts:radius=2:size=2048"


@EXPORTS
@pytest.mark.parametrize("task, spec", [("regression", DEFAULT_KERNEL), ("classification", MORGAN_KERNEL)])
def test_a_model_with_a_fingerprint_kernel_exports_and_predicts_without_the_library(tmp_path, task, spec):
    config = tiny_preset("gradformer", None, task=task)
    model = seeded_model(config).eval()
    fps = torch.from_numpy(kernel_fingerprints(spec, SMILES[:60]))
    labels = torch.tensor(freesolv_frame()["expt"][:60].to_numpy())[:, None]
    network = labels[50:] + 1.0
    if task == "classification":  # Platt-scaled kernel scores, exported with the model
        labels, network = (labels < labels.median()).double(), torch.full((10, 1), 0.5)
    model.attach_kernel(FingerprintKernel.from_fit(fit_fingerprint_kernel(fps[:50], labels[:50], fps[50:], labels[50:],
                                                                          network, weights=(0.5,),
                                                                          probabilities=task == "classification",
                                                                          segments=kernel_segments(spec))))
    extras = CheckpointExtras(extra_features=FittedExtraFeatures(ExtraFeatures(kernel=spec)).to_dict())
    checkpoint = save_checkpoint(tmp_path / "best.pt", model, CheckpointMeta(config.featurizer, config.relation, ["y"], extras))
    done = export_model(checkpoint, tmp_path / "model.pt2")
    settings = portable.load(done.path).settings
    assert done.max_difference < 1e-5 and [part[0] for part in settings.kernel] == [p.split(":")[0] for p in spec.split("+")]
    found = _predict_without_the_library(done.path, SMILES[60:160], tmp_path)
    expected = Predictor(checkpoint, device="cpu").predict(SMILES[60:160])
    np.testing.assert_allclose(found["y"], expected["y_pred"], rtol=0, atol=1e-5)
    counts = portable.batch([portable.featurize(s, settings) for s in SMILES[:20]])[portable.INPUTS.index("kernel_counts")]
    assert torch.equal(counts, torch.from_numpy(kernel_fingerprints(spec, SMILES[:20])).float())  # the library's counts
    if spec == MORGAN_KERNEL:  # a file of format 2 named the Morgan counts' [radius, bins] alone
        extra = {portable.METADATA: ""}
        program = torch.export.load(str(done.path), extra_files=extra)
        meta = json.loads(extra[portable.METADATA])
        meta.update(format=2, featurizer={**meta["featurizer"], "kernel": [2, 2048]})
        torch.export.save(program, str(tmp_path / "format2.pt2"), extra_files={portable.METADATA: json.dumps(meta)})
        assert portable.load(tmp_path / "format2.pt2").settings.kernel == (("morgan_counts", 2, 2048),)


@EXPORTS
def test_a_sparse_relation_graph_exports(tmp_path):
    done = export_model(_checkpoint(tmp_path / "best.pt", relation=RelationConfig("hops", hops=2)), tmp_path / "model.pt2")
    assert done.max_difference < 1e-5 and portable.load(done.path).settings.hops == 2


@EXPORTS
@pytest.mark.parametrize("variant", ["gradformer", "moire"])
def test_an_old_checkpoint_exports_and_predicts_as_recorded(tmp_path, variant):
    recorded = json.loads((SAVED / "predictions.json").read_text())
    done = export_model(SAVED / f"{variant}.pt", tmp_path / "model.pt2")
    found = portable.load(done.path).predict(recorded["smiles"])
    np.testing.assert_allclose(found["y"], recorded["predictions"][variant], rtol=1e-5, atol=1e-5)


@EXPORTS
@pytest.mark.skipif(not HAS_ONNX, reason="ONNX export needs the onnx extra (onnx, onnxscript, onnxruntime)")
def test_the_onnx_file_predicts_like_the_checkpoint(tmp_path):
    checkpoint = _checkpoint(tmp_path / "best.pt")
    done = export_model(checkpoint, tmp_path / "model.onnx")
    assert done.max_difference < 1e-5
    smiles = SMILES[:300]
    found = _predict_without_the_library(done.path, smiles, tmp_path)
    np.testing.assert_allclose(found["y"], Predictor(checkpoint, device="cpu").predict(smiles)["y_pred"], rtol=0, atol=1e-5)
    # drug-sized batches, run again and again: ONNX Runtime's threaded ScatterND add races on
    # repeated indices, so the loader runs it on one thread; every run gives the same numbers
    larger = zinc_like_smiles(512, seed=1)
    model = portable.load(done.path)
    runs = [model.predict(larger)["y"] for _ in range(3)]
    assert all(np.array_equal(runs[0], run) for run in runs[1:])


@pytest.mark.skipif(CAN_EXPORT, reason="this torch exports")
def test_a_torch_older_than_2_6_is_refused_in_one_line(tmp_path):
    assert_one_error_line(run_cli(["export", "--checkpoint", _checkpoint(tmp_path / "best.pt"), "--out", tmp_path / "m.pt2"]),
                          "needs torch 2.6", torch.__version__)
    assert not (tmp_path / "m.pt2").exists()


@EXPORTS
@pytest.mark.skipif(HAS_ONNX, reason="the onnx extra is installed here")
def test_onnx_without_its_packages_is_one_line(tmp_path):
    assert_one_error_line(run_cli(["export", "--checkpoint", _checkpoint(tmp_path / "best.pt"), "--out", tmp_path / "m.onnx"]),
                          "dgl_graphtx[onnx]", ".pt2")


@pytest.mark.parametrize("variant, preset, overrides, fragments", [
    ("grpe", None, {}, ["virtual node", "complete+vn"]),
    ("moire", "3d", {}, ["3-D coordinates"]),
    ("gradformer", None, {"atom_features": "canonical"}, ["'canonical' atom features", "atom_features='ogb'"]),
])
def test_a_model_that_cannot_be_exported_is_refused_in_one_line(tmp_path, variant, preset, overrides, fragments):
    checkpoint = _checkpoint(tmp_path / "best.pt", variant, preset, **overrides)
    line = assert_one_error_line(run_cli(["export", "--checkpoint", checkpoint, "--out", tmp_path / "m.pt2"]), "cannot export", *fragments)
    assert str(checkpoint) in line and not (tmp_path / "m.pt2").exists()


def test_bad_outputs_and_checkpoints_are_refused_in_one_line(tmp_path):
    checkpoint = _checkpoint(tmp_path / "best.pt")
    assert_one_error_line(run_cli(["export", "--checkpoint", checkpoint, "--out", tmp_path / "m.zip"]), ".pt2 or .onnx", "m.zip")
    assert_one_error_line(run_cli(["export", "--checkpoint", tmp_path / "missing.pt", "--out", tmp_path / "m.pt2"]), "missing.pt")
