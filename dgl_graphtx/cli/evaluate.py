"""``dgl-graphtx evaluate``: metrics of a checkpoint on a labelled molecule file."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd

from ..datasets import read_molecules
from ..predict import Predictor
from ..training import compute_metrics, json_safe, metric_notes
from .common import add_input_options, add_logging_options, device_option, verbosity


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` sub-command to ``sub``."""
    evaluate = sub.add_parser("evaluate", help="metrics of a checkpoint on a labelled file (CSV/TSV, SDF, .smi)")
    evaluate.add_argument("data", help="CSV/TSV with the SMILES column and the checkpoint's target columns, or SDF with them as SD properties")
    evaluate.add_argument("--checkpoint", required=True)
    add_input_options(evaluate)
    evaluate.add_argument("--device", type=device_option, default="auto")
    add_logging_options(evaluate)
    evaluate.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``evaluate`` with parsed ``args``."""
    predictor = Predictor(args.checkpoint, device=args.device)
    data = read_molecules(args.data, args.smiles_col or "smiles", args.delimiter,
                          explicit_hydrogens=predictor.meta.featurizer.explicit_hydrogens)
    labels = data.targets(predictor.target_names)
    table = predictor.predict(data.molecules, progress=verbosity(args) >= 0, identifiers=data.identifiers, features=data.columns)
    valid = table["error"].isna().to_numpy()
    y_true = labels.loc[valid].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    y_pred = table.loc[valid, predictor.target_names].to_numpy(dtype=float)
    metrics = compute_metrics(predictor.model.config.task, y_true, y_pred)
    labelled = int(np.isfinite(y_true).any(axis=1).sum())
    report = {"molecules": int(valid.sum()), "labelled": labelled, "invalid": int((~valid).sum()), **json_safe(metrics),
              "notes": metric_notes(predictor.model.config.task, y_true, predictor.target_names)}
    print(json.dumps(report, indent=2, allow_nan=False))
    return 0
