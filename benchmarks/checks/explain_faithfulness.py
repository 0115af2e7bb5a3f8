"""How faithful are the per-atom explanations? The default model (Gradformer, its preset and recipe)
trains on a property whose true atom contributions are known, Wildman-Crippen logP (RDKit's
``_CalcCrippenContribs``, each hydrogen's contribution added to its atom), and the explanations of
held-out molecules are rank-correlated with the truth, molecule by molecule (Spearman), beside:
attention rollout of the same model (``plot attention``'s atom importance); a random forest on
2048 Morgan bits (radius 2) explained by its bit importances spread over the atoms of each bit's
environments, and by the similarity-map weights of Riniker & Landrum (J. Cheminf. 2013: the
prediction minus the prediction without the bits of the atom's environments); random numbers.

Molecules: a random sample of MOSES (the molsets wheel, fetched when absent), or FreeSolv
(``--source freesolv``), split 80/10/10 at random; the trained run is kept in ``--out`` and reused.
Also measured: the integral's completeness gap (prediction - baseline - sum of contributions) by
step count.

Run:  OMP_NUM_THREADS=1 python -m benchmarks.checks.explain_faithfulness --epochs 30     (MOSES, ~30 min on one thread)
      python -m benchmarks.checks.explain_faithfulness --quick                            (smoke run, FreeSolv, ~1 min)
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd
from rdkit import Chem
from rdkit.Chem import rdFingerprintGenerator

from benchmarks.common import attribution as A
from benchmarks.common import check
from benchmarks.common import molecules as M
from benchmarks.common.report import REPO, markdown_table

from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.datasets.splits import random_split
from dgl_graphtx.inference import Predictor
from dgl_graphtx.insight import atom_importance, draw_molecule_weights
from dgl_graphtx.insight.figures import SIGNED_CMAP
from dgl_graphtx.models import get_preset
from dgl_graphtx.runs import train_and_evaluate
from dgl_graphtx.training import TrainConfig

FINGERPRINT_BITS, FINGERPRINT_RADIUS = 2048, 2
COLUMNS = [("method", "explanation"), ("mean", "mean Spearman"), ("median", "median"), ("share_ge_0.7", "share >= 0.7"),
           ("molecules", "molecules")]


def read_molecules(source: str, count: int, moses_dir: Path) -> List[str]:
    """``count`` molecules (canonical SMILES that RDKit reads) of MOSES or FreeSolv."""
    smiles = M.moses_smiles(moses_dir, count, seed=0) if source == "moses" else M.freesolv_smiles()[0][:count]
    return [Chem.MolToSmiles(mol) for mol in map(Chem.MolFromSmiles, smiles) if mol is not None]


def trained_model(smiles: Sequence[str], logp: np.ndarray, split, out: Path, epochs: int, readout: Optional[str] = None) -> Path:
    """The default model (with ``readout`` instead of its own, when given) trained on the logP
    values (reused from ``out`` when it is there)."""
    run = out / ("run" if readout is None else f"run-{readout}")
    if (run / "best.pt").exists():
        print(f"reusing the trained model in {run}")
        return run / "best.pt"
    preset = get_preset("gradformer", **({} if readout is None else {"readout": readout}))
    data = MoleculeDataset(list(smiles), logp[:, None], target_names=["logP"], featurizer=preset.featurizer,
                           relation=preset.relation, progress=False)
    config = TrainConfig.from_recipe(preset.train, epochs=epochs, patience=epochs, seed=0, progress=False)
    start = time.perf_counter()
    result = train_and_evaluate(data, preset, config, split=split, out_dir=run, overwrite=True)
    print(f"trained {epochs} epochs in {time.perf_counter() - start:.0f} s; test {result.test_metrics}")
    return run / "best.pt"


def morgan(mol: Chem.Mol):
    """Morgan bits of ``mol`` and, per on-bit, the atoms of every environment that sets it."""
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=FINGERPRINT_RADIUS, fpSize=FINGERPRINT_BITS)
    output = rdFingerprintGenerator.AdditionalOutput()
    output.AllocateBitInfoMap()
    bits = generator.GetFingerprintAsNumPy(mol, additionalOutput=output).astype(np.float32)
    environments: Dict[int, List[set]] = {}
    for bit, settings in output.GetBitInfoMap().items():
        for centre, radius in settings:
            bonds = Chem.FindAtomEnvironmentOfRadiusN(mol, radius, centre) if radius else []
            atoms = {centre} | {a for b in bonds for a in (mol.GetBondWithIdx(b).GetBeginAtomIdx(), mol.GetBondWithIdx(b).GetEndAtomIdx())}
            environments.setdefault(bit, []).append(atoms)
    return bits, environments


def fingerprint_explanations(smiles: Sequence[str], logp: np.ndarray, train: Sequence[int], test: Sequence[int]):
    """The random forest's two atom explanations of the test molecules: bit importances spread
    over atoms, and similarity-map weights."""
    from sklearn.ensemble import RandomForestRegressor

    mols = [Chem.MolFromSmiles(s) for s in smiles]
    prints = [morgan(mol) for mol in mols]
    x = np.stack([bits for bits, _ in prints])
    forest = RandomForestRegressor(n_estimators=200, random_state=0, n_jobs=1).fit(x[list(train)], logp[list(train)])
    importance = forest.feature_importances_
    spread, similarity_map = [], []
    for row in test:
        bits, environments = prints[row]
        n = mols[row].GetNumAtoms()
        weights = np.zeros(n)
        removed = np.repeat(bits[None], n, axis=0)
        for bit, sets in environments.items():
            for atoms in sets:
                weights[list(atoms)] += importance[bit] / len(atoms) / len(sets)
                removed[list(atoms), bit] = 0.0  # without every bit an environment of the atom sets
        spread.append(weights)
        predictions = forest.predict(np.concatenate([bits[None], removed]))
        similarity_map.append(predictions[0] - predictions[1:])
    return spread, similarity_map


def completeness_gaps(predictor: Predictor, smiles: Sequence[str], steps_list: Sequence[int]) -> List[Dict[str, float]]:
    """Per step count: median and 95th percentile of |prediction - baseline - sum of contributions|,
    absolute and relative to |prediction - baseline|."""
    rows = []
    for steps in steps_list:
        table = predictor.explain(list(smiles), steps=steps).table
        delta = table["logP_pred"] - table["logP_baseline"]
        gap = (delta - table["logP_contributions"].map(sum)).abs()
        relative = gap / delta.abs()
        rows.append({"steps": steps, "median_gap": float(gap.median()), "p95_gap": float(gap.quantile(0.95)),
                     "median_relative": float(relative.median()), "p95_relative": float(relative.quantile(0.95))})
    return rows


def draw_comparison(smiles: str, explained: Sequence[float], truth: Sequence[float], path: Path) -> None:
    """The molecule twice, atoms coloured by the explanation and by the true contributions (one
    symmetric scale, logP units)."""
    import matplotlib.pyplot as plt

    mol = Chem.MolFromSmiles(smiles)
    vmax = float(max(np.abs(explained).max(), np.abs(truth).max()))
    rho = A.per_molecule_spearman([explained], [truth])[0]
    fig, axes = plt.subplots(1, 2, figsize=(10, 5))
    for ax, values, title in zip(axes, (explained, truth), (f"integrated gradients (Spearman {rho:.2f})", "Crippen contributions (truth)")):
        ax.imshow(draw_molecule_weights(mol, np.asarray(values), size=500, vmax=vmax, signed=True))
        ax.set_title(title, fontsize=10)
        ax.set_axis_off()
    fig.colorbar(plt.cm.ScalarMappable(norm=plt.Normalize(-vmax, vmax), cmap=SIGNED_CMAP), ax=axes, fraction=0.025,
                 label="contribution to logP")
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)


def main(argv: Sequence[str] = None) -> int:
    parser = check.parser(__doc__)
    parser.add_argument("--source", choices=("moses", "freesolv"), default="moses")
    parser.add_argument("--molecules", type=int, default=6000, help="molecules drawn (80/10/10 train/valid/test)")
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--steps", type=int, default=4, help="integration steps of the scored explanations")
    parser.add_argument("--moses-dir", type=Path, default=M.MOSES_DIR, help="folder of the molsets wheel")
    parser.add_argument("--out", type=Path, default=REPO / ".cache" / "explain_faithfulness", help="the trained run, reused when there")
    parser.add_argument("--readout", help="train the default model with this readout instead of its own (e.g. atomwise)")
    parser.add_argument("--figure", type=Path, help="draw the held-out molecule of median Spearman (10+ atoms) beside its truth here (PNG)")
    args = parser.parse_args(argv)
    if args.quick:
        args.source, args.molecules, args.epochs, args.out = "freesolv", 642, 8, args.out / "quick"
    env = check.start(args, "explain_faithfulness")
    smiles = read_molecules(args.source, args.molecules, args.moses_dir)
    truth = [A.crippen_atom_logp(s) for s in smiles]
    logp = np.array([t.sum() for t in truth])
    split = random_split(len(smiles), seed=0)
    test = list(split.test)
    predictor = Predictor(trained_model(smiles, logp, split, args.out, args.epochs, args.readout), device="cpu")
    held_out, held_truth = [smiles[i] for i in test], [truth[i] for i in test]
    start = time.perf_counter()
    ours = predictor.explain(held_out, steps=args.steps).table["logP_contributions"].tolist()
    seconds = time.perf_counter() - start
    spread, similarity_map = fingerprint_explanations(smiles, logp, split.train, test)
    model = "default model" if args.readout is None else f"default model, {args.readout} readout"
    methods = {
        f"integrated gradients ({args.steps} steps), {model}": ours,
        "attention rollout, same model":
            [atom_importance(predictor.attention_maps(s))["importance"].to_numpy() for s in held_out],
        "random forest on Morgan bits: bit importances spread over atoms": spread,
        "random forest on Morgan bits: similarity map (atom's bits removed)": similarity_map,
        "random numbers": A.random_explanations(held_truth),
    }
    per_molecule = {"smiles": held_out, **{name: A.per_molecule_spearman(found, held_truth) for name, found in methods.items()}}
    rows = [{"method": name, **A.summary(per_molecule[name])} for name in methods]
    if args.figure:
        rho = per_molecule[next(iter(methods))]
        typical = min((i for i in range(len(test)) if len(held_truth[i]) >= 10 and np.isfinite(rho[i])),
                      key=lambda i: abs(rho[i] - np.nanmedian(rho)))
        draw_comparison(held_out[typical], ours[typical], held_truth[typical], args.figure)
    print(f"\n{args.source}: {len(smiles)} molecules, {len(test)} held out; explained in {seconds:.1f} s "
          f"({len(test) / seconds:.0f} molecules/s including featurization)\n")
    gaps = completeness_gaps(predictor, held_out, [2, 3, 4, 6, 8, 16])
    print("completeness gap |prediction - baseline - sum of contributions| (logP units; relative to |prediction - baseline|):\n")
    print(markdown_table(gaps, [("steps", "steps"), ("median_gap", "median gap"), ("p95_gap", "95th percentile"),
                                ("median_relative", "median relative"), ("p95_relative", "95th percentile relative")]))
    suffix = "" if args.readout is None else f"-{args.readout}"
    pd.DataFrame(per_molecule).to_csv(args.out / f"spearman_per_molecule{suffix}.csv", index=False)
    (args.out / f"summary{suffix}.json").write_text(json.dumps({"source": args.source, "molecules": len(smiles), "methods": rows,
                                                                "completeness": gaps}, indent=1))
    print(markdown_table(rows, COLUMNS))
    check.finish("explain_faithfulness" + suffix, args, env, rows, COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
