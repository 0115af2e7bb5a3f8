"""benchmarks/checks/gpu_checks.py must keep running where no GPU is: its agreement check (float32 and
float64 against the float64 DGL reference) and its pretraining check, on the CPU."""
from __future__ import annotations

import torch

from benchmarks.checks import gpu_checks
from benchmarks.common.molecules import freesolv_smiles


def test_agreement_separates_float32_rounding_from_the_path():
    row = gpu_checks.agreement("gradformer", "default", freesolv_smiles()[0][:6], torch.device("cpu"))
    assert row["config"] == "gradformer-default" and row["molecules"] == 6
    assert 0 < row["out_rel"] < 1e-5 and 0 < row["grad_rel"] < 1e-5   # float32: rounding, not zero
    assert row["f64_rel"] < 1e-12                                      # float64: the same function
    assert row["rerun_out_max"] == 0 and row["rerun_grad_max"] == 0     # the CPU adds in a fixed order


def test_pretraining_check_pretrains_fine_tunes_and_predicts(tmp_path):
    smiles = tmp_path / "corpus.smi"
    smiles.write_text("\n".join(freesolv_smiles()[0][:40]) + "\n")
    result = gpu_checks.pretrain_on_device("cpu", smiles, 40, 1, tmp_path)
    assert result["check"].startswith("train --from-pretrained") and "5 epochs on cpu" in result["check"]
    assert result["result"] == "max |cpu - cpu| = 0.00e+00"


def test_prediction_rates_compare_replaying_and_eager_predictors():
    rows = gpu_checks.prediction_rates(torch.device("cpu"), freesolv_smiles()[0][:24])
    assert [row["preset"] for row in rows] == ["grpe/tiny", "gradformer/default", "vanilla/tiny"]
    for row in rows:  # on the CPU nothing is recorded: both predictors run the same eager passes
        assert row["max |replayed - eager|"] == "0.0e+00"
        assert min(row[k] for k in ("model molecules/s", "replayed molecules/s", "Predictor molecules/s")) > 0
