"""Screen: should the kernel weigh its three fingerprints per target, by the leave-one-out error (issue 40, after version 6)?

Version 6's kernel is the equal mean of three MinMax kernels (Morgan, atom-pair and Avalon counts).
Which fingerprint sees what matters depends on the data: on the solubility test sets version 6 was
worse than Morgan alone, on the activity sets better. Kernel ridge regression already chooses its
ridge per target by the closed-form (grouped) leave-one-out error; the same error can choose the
weights of the three kernels, ``K = b1 K_morgan + b2 K_atompairs + b3 K_avalon`` with ``b`` on a
simplex grid (a weighted mean of kernels is a kernel), each grid point one more eigendecomposition.
Post hoc on the default's stored networks (``.cache/screen``, trained by the suite's command on its
split files), each candidate is fitted exactly as version 6 fits its kernel (grouped leave-out by
the fingerprints of nonzero weight, ridge of least left-out error, Platt scaling and the log-odds
blend for classification, the network's weight chosen on validation):

  A   version 6: b = (1/3, 1/3, 1/3).
  S   the subset of the three (equal weights within it) and the ridge of least left-out error: 7 points.
  W3  the grid of step 1/3 (10 points, A's among them).
  W6  the grid of step 1/6 (28 points; S's and W3's among them).

RULE, fixed before any result (development halves: FreeSolv, Lipophilicity, BACE, BBBP seeds 0-2 and
MoleculeACE's 15 development sets at seed 42, 27 pairs; relative error = error / A's on the same pair,
error = RMSE or 1 - ROC-AUC): among S, W3, W6, take the cheapest (fewest points) whose mean relative
error is within 0.005 of the lowest; it replaces A if its mean relative error is below 0.99, its
MoleculeACE development mean RMSE is not above A's, and its mean log-loss over the 6 classification
pairs is not above A's. The test halves are scored only after the choice.

  python -m benchmarks.screens.kernel_weights --half dev|test [--part i/n]  (-> .cache/screen/kernel_weights_<half>.jsonl)
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from benchmarks.suite.config import SETS  # noqa: E402

SPLITS = REPO / ".cache/suite/splits"
WORK = REPO / ".cache/screen"
SUITE_2D = ("FreeSolv", "Lipophilicity", "BACE", "BBBP", "Solubility", "ClinTox", "AqSolDB", "HIV")
KINDS = ("morgan_counts", "atom_pair_counts", "avalon_counts")
GRID = np.arange(21) / 20
ALPHAS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
CLAMP = 1e-6


def simplex(step):
    """Weight triples on the simplex with denominators ``step`` (as integers of ``step``)."""
    return [p for p in itertools.product(range(step + 1), repeat=3) if sum(p) == step]


def as_sixths(point, step):
    return tuple(v * (6 // step) for v in point)


#: Each candidate's grid, in sixths (the W6 grid holds them all).
CANDIDATES = {
    "A": [(2, 2, 2)],
    "S": [tuple(6 // sum(m) * v for v in m) for m in itertools.product((0, 1), repeat=3) if any(m)],
    "W3": [as_sixths(p, 3) for p in simplex(3)],
    "W6": simplex(6),
}


def plan(half):
    runs = []
    for s in SETS:
        if s.half != half or (s.family != "moleculeace" and s.name not in SUITE_2D):
            continue
        seeds = (0, 1, 2) if s.family != "moleculeace" else ((42,) if half == "dev" else (42, 117, 709))
        runs += [(s, k) for k in seeds]
    return sorted(runs, key=lambda r: (r[0].task != "classification", r[0].family == "moleculeace", r[0].name, r[1]))


def logit(p):
    p = np.clip(p, CLAMP, 1 - CLAMP)
    return np.log(p / (1 - p))


def log_loss(y, p):
    p = np.clip(p, CLAMP, 1 - CLAMP)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def left_out_fits(kernel, y, groups):
    """Per ridge: (grouped left-out MSE, alpha, dual coefficients, left-out values), as version 6."""
    mean = y.mean()
    values, vectors = np.linalg.eigh(kernel)
    projected = vectors.T @ (y - mean)
    ids, counts = np.unique(groups, return_counts=True)
    shared = [np.flatnonzero(groups == g) for g in ids[counts > 1]]
    out = []
    for alpha in ALPHAS:
        inverse = 1.0 / (np.clip(values, 0, None) + alpha)
        dual = vectors @ (inverse * projected)
        left_out = y - dual / ((vectors ** 2) @ inverse)
        for rows in shared:
            left_out[rows] = y[rows] - np.linalg.solve((vectors[rows] * inverse) @ vectors[rows].T, dual[rows])
        out.append((float(((y - left_out) ** 2).mean()), alpha, dual, left_out))
    return out


def score_one(s, seed):
    from sklearn.metrics import roc_auc_score

    from dgl_graphtx.featurize.descriptors import kernel_fingerprints
    from dgl_graphtx.models.kernel import fit_platt, minmax_kernel

    table = pd.read_csv(SPLITS / s.name / f"seed{seed}" / "data.csv")
    smiles = list(table["smiles"])
    y = table["target"].to_numpy(float)
    part = table["split"].to_numpy()
    fit_rows = np.flatnonzero((part != "test") & ~np.isnan(y))
    valid_in_fit = part[fit_rows] == "val"
    test = np.flatnonzero(part == "test")
    net = np.load(WORK / s.name / f"seed{seed}" / "network_predictions.npy")
    y_fit, y_valid, y_test = y[fit_rows], y[fit_rows][valid_in_fit], y[test]
    net_valid, net_test = net[fit_rows][valid_in_fit], net[test]
    classification = s.task == "classification"
    fps, k_fit, k_test = [], [], []
    for kind in KINDS:
        f = kernel_fingerprints(kind, smiles).astype(np.float32)
        a, b = torch.from_numpy(f[fit_rows]), torch.from_numpy(f[test])
        fps.append(f[fit_rows])
        k_fit.append(minmax_kernel(a, a).double().numpy())
        k_test.append(minmax_kernel(b, a).double().numpy())

    started = time.time()
    points = {}
    for point in CANDIDATES["W6"]:
        used = [k for k in range(3) if point[k]]
        kernel = sum(point[k] * k_fit[k] for k in used) / 6
        groups = np.unique(np.concatenate([fps[k] for k in used], axis=1), axis=0, return_inverse=True)[1].ravel()
        points[point] = min(left_out_fits(kernel, y_fit, groups), key=lambda item: item[0])
    seconds_per_point = (time.time() - started) / len(points)

    def candidate(grid):
        point = min(grid, key=lambda p: (points[p][0], p != (2, 2, 2)))
        _, alpha, dual, left_out = points[point]
        test_values = sum(point[k] * k_test[k] for k in range(3)) / 6 @ dual + y_fit.mean()
        kernel_valid = left_out[valid_in_fit]
        if classification:
            a, b = fit_platt(torch.from_numpy(left_out), torch.from_numpy(y_fit))
            if a == 0.0:
                return net_test, 1.0, alpha, point
            to_p = lambda v: 1 / (1 + np.exp(-(a * v + b)))  # noqa: E731
            mix = lambda w, n, k: 1 / (1 + np.exp(-(w * logit(n) + (1 - w) * logit(k))))  # noqa: E731
            kernel_valid, test_values = to_p(kernel_valid), to_p(test_values)
            w = min(GRID, key=lambda w: (log_loss(y_valid, mix(w, net_valid, kernel_valid)), w))
            return np.clip(mix(w, net_test, test_values), CLAMP, 1 - CLAMP), float(w), alpha, point
        mix = lambda w, n, k: w * n + (1 - w) * k  # noqa: E731
        w = min(GRID, key=lambda w: (float(((y_valid - mix(w, net_valid, kernel_valid)) ** 2).mean()), w))
        return mix(w, net_test, test_values), float(w), alpha, point

    results = {name: candidate(grid) for name, grid in CANDIDATES.items()}
    cliff = table["cliff"].to_numpy()[test].astype(bool) if "cliff" in table else None

    def err(p, rows=slice(None)):
        if not classification:
            return float(np.sqrt(((y_test[rows] - p[rows]) ** 2).mean()))
        return 1.0 - float(roc_auc_score(y_test, p))

    out = {"set": s.name, "family": s.family, "seed": seed, "task": s.task, "molecules": len(fit_rows),
           "network_err": err(net_test), "err": {k: err(r[0]) for k, r in results.items()},
           "weight": {k: r[1] for k, r in results.items()}, "alpha": {k: r[2] for k, r in results.items()},
           "point": {k: r[3] for k, r in results.items()}, "seconds_per_point": seconds_per_point}
    if classification:
        out["log_loss"] = {k: log_loss(y_test, r[0]) for k, r in results.items()}
    if cliff is not None and cliff.any():
        out["cliff_rmse"] = {k: err(r[0], cliff) for k, r in results.items()}
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--half", choices=("dev", "test"), required=True)
    parser.add_argument("--part", default="0/1", help="i/n: score every n-th pair from the i-th (parallel processes)")
    args = parser.parse_args()
    index, parts = map(int, args.part.split("/"))
    path = WORK / f"kernel_weights_{args.half}.jsonl"
    for s, seed in plan(args.half)[index::parts]:
        done = {(r["set"], r["seed"]) for r in map(json.loads, path.read_text().splitlines())} if path.exists() else set()
        if (s.name, seed) in done or not (WORK / s.name / f"seed{seed}" / "network_predictions.npy").exists():
            continue
        row = score_one(s, seed)
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(s.name, seed, {k: round(v, 4) for k, v in row["err"].items()}, row["point"], flush=True)


if __name__ == "__main__":
    main()
