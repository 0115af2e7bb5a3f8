"""``dgl-graphtx evaluate``: metrics of a checkpoint on a labelled CSV."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd

from ..datasets import read_molecule_csv, smiles_column
from ..errors import GraphTxError
from ..predict import Predictor
from ..training import compute_metrics, json_safe, metric_notes
from .common import device_option


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` sub-command to ``sub``."""
    evaluate = sub.add_parser("evaluate", help="metrics of a checkpoint on a labelled CSV")
    evaluate.add_argument("data", help="CSV with the SMILES column and the checkpoint's target columns")
    evaluate.add_argument("--checkpoint", required=True)
    evaluate.add_argument("--smiles-col", default="smiles")
    evaluate.add_argument("--device", type=device_option, default="auto")
    evaluate.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``evaluate`` with parsed ``args``."""
    predictor = Predictor(args.checkpoint, device=args.device)
    frame = read_molecule_csv(args.data, args.smiles_col)
    missing = [t for t in predictor.target_names if t not in frame.columns]
    if missing:
        raise GraphTxError(f"target column(s) {missing} of the checkpoint not in {args.data}")
    table = predictor.predict(smiles_column(frame, args.smiles_col))
    valid = table["error"].isna().to_numpy()
    y_true = frame.loc[valid, predictor.target_names].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    y_pred = table.loc[valid, predictor.target_names].to_numpy(dtype=float)
    metrics = compute_metrics(predictor.model.config.task, y_true, y_pred)
    labelled = int(np.isfinite(y_true).any(axis=1).sum())
    report = {"molecules": int(valid.sum()), "labelled": labelled, "invalid": int((~valid).sum()), **json_safe(metrics),
              "notes": metric_notes(predictor.model.config.task, y_true, predictor.target_names)}
    print(json.dumps(report, indent=2, allow_nan=False))
    return 0
