"""``dgl-graphtx plot``: figures of a trained model (attention, explanations, focus, decay) and of its errors."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import List, Optional, Union

from ..errors import GraphTxError
from ..inference.evaluation import evaluate_table
from ..featurize.molecule import to_mol
from ..inference.explain import MAX_STEPS, baseline_column
from ..inference.predictor import Predictor
from ..training import prediction_column
from ..insight import (
    VIRTUAL,
    atom_importance,
    DEFAULT_STEPS,
    error_table,
    plot_atom_contributions,
    plot_attention_heatmap,
    plot_atom_importance,
    plot_attention_on_molecule,
    plot_focus_functions,
    plot_parity_residuals,
    plot_start_points,
)
from .common import add_device_option, add_input_options, add_logging_options, bounded, verbosity
from .molecule_io import add_checkpoint_option, load_predictors, read_input

KINDS = ("attention", "explain", "focus", "decay", "parity")


def query_option(text: str) -> Union[int, str]:
    """An argparse ``type`` for ``--query``: ``virtual`` or an input atom index.

    Example:
        >>> query_option("virtual"), query_option("3")
        ('virtual', 3)
    """
    if text.strip().lower() == VIRTUAL:
        return VIRTUAL
    try:
        return int(bounded(int, 0)(text))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be 'virtual' or an atom index >= 0, got {text!r}") from None


def _indices(text: Optional[str], count: int, option: str) -> Optional[List[int]]:
    """The comma-separated indices of ``option`` (``None``: all), each in ``0 .. count - 1``."""
    if text is None:
        return None
    try:
        found = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise GraphTxError(f"{option} takes comma-separated numbers, got {text!r}") from None
    wrong = [i for i in found if not 0 <= i < count]
    if wrong or not found:
        raise GraphTxError(f"{option} {text}: the model has {count} ({option.strip('-')} 0..{count - 1})")
    return found


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``plot`` sub-command to ``sub``."""
    plot = sub.add_parser(
        "plot", help="figures: attention on a molecule / heat maps, per-atom contributions, MoireGT focus, Gradformer start points, parity",
        description="attention: one drawing of the molecule coloured by each atom's importance to the prediction "
                    "(attention rollout over every layer and head), with the per-atom table <out>_atoms.csv; with "
                    "--per-head, the attention of --query (an atom index or 'virtual') per layer and head, plus the "
                    "N x N heat maps; explain: the molecule coloured by each atom's contribution to the prediction "
                    "(integrated gradients; red raises it, blue lowers it), with the table <out>_atoms.csv; focus: "
                    "MoireGT's learned f(d) per head and layer; decay: "
                    "Gradformer's learned start points (and lambda); parity: parity and residual plots of a labelled file "
                    "with a per-molecule error table (<out>_errors.csv). PNG or SVG by the --out suffix.",
    )
    plot.add_argument("kind", choices=KINDS)
    add_checkpoint_option(plot, ensembles=True)
    plot.add_argument("--out", required=True, help="output figure (.png or .svg); attention --per-head also writes <out>_heatmap.<ext>")
    plot.add_argument("--smiles", help="attention, explain: the molecule")
    plot.add_argument("--per-head", action="store_true", help="attention: per-layer, per-head panels and heat maps instead")
    plot.add_argument("--query", type=query_option, default=None,
                      help="attention --per-head: the query node, an input atom index or 'virtual' (default: the virtual "
                           "node; a model without one needs an atom index)")
    plot.add_argument("--layers", help="attention --per-head: comma-separated layers (default: all)")
    plot.add_argument("--heads", help="attention --per-head: comma-separated heads (default: all)")
    plot.add_argument("--data", help="parity: labelled molecule file (CSV/TSV, SDF, .smi, .xyz)")
    plot.add_argument("--target", help="parity, explain: which target (default: the first)")
    plot.add_argument("--steps", type=bounded(int, 2, MAX_STEPS), default=DEFAULT_STEPS,
                      help=f"explain: integration steps (default: {DEFAULT_STEPS})")
    add_input_options(plot)
    add_device_option(plot)
    add_logging_options(plot)
    plot.set_defaults(func=run)


def _importance_figure(maps, out: Path) -> Path:
    """The per-atom importance drawing at ``out`` and its table ``<out>_atoms.csv`` (printed, most important first)."""
    table = atom_importance(maps)
    plot_atom_importance(maps.mol, table["importance"], out, title=f"{maps.smiles}: atom importance (attention rollout)")
    path = out.with_name(f"{out.stem}_atoms.csv")
    table.to_csv(path, index=False)
    top = table.sort_values("importance", ascending=False).head(5)
    print("most important atoms: " + ", ".join(f"{r.element}{r.atom} {r.importance:.3f}" for r in top.itertuples()))
    return path


def _explanation_figure(predictor: Predictor, smiles: str, target: Optional[str], steps: int, out: Path) -> Path:
    """The contribution drawing at ``out`` and its table ``<out>_atoms.csv`` (printed: the atoms
    that move the prediction most, and the sum the contributions complete)."""
    found = predictor.explain([smiles], target, steps)
    row = found.table.iloc[0]
    if row["error"] is not None:
        raise GraphTxError(f"cannot explain {smiles!r}: {row['error']}")
    name = target or predictor.target_names[0]
    contributions = found.atoms["contribution"].to_numpy()
    plot_atom_contributions(to_mol(smiles), contributions, out, title=f"{smiles}: atom contributions to {name} (integrated gradients)")
    path = out.with_name(f"{out.stem}_atoms.csv")
    found.atoms[["atom", "element", "contribution"]].to_csv(path, index=False)
    top = found.atoms.reindex(found.atoms["contribution"].abs().sort_values(ascending=False).index).head(5)
    print("largest contributions: " + ", ".join(f"{r.element}{r.atom} {r.contribution:+.3f}" for r in top.itertuples()))
    baseline = row[baseline_column(name)]
    print(f"baseline {baseline:.4f} + contributions {contributions.sum():.4f} = {baseline + contributions.sum():.4f} "
          f"(the model's output; {prediction_column(name)} {row[prediction_column(name)]:.4f})")
    return path


def run(args: argparse.Namespace) -> int:
    """Run ``plot`` with parsed ``args``."""
    out = Path(args.out)
    if out.suffix.lower() not in (".png", ".svg"):
        raise GraphTxError(f"--out must end in .png or .svg, got {out.name}")
    parity = args.kind == "parity"
    predictors = load_predictors(args, None if parity else f"plot {args.kind}")
    predictor = predictors[0]
    written = [out]
    if args.kind == "attention":
        if not args.smiles:
            raise GraphTxError("plot attention needs --smiles")
        if args.query is not None and not args.per_head:
            raise GraphTxError("--query chooses the query of the --per-head panels; the drawing without --per-head shows "
                               "each atom's importance to the prediction, which has no query: add --per-head or drop --query")
        maps = predictor.attention_maps(args.smiles)
        if args.per_head:
            layers, heads = _indices(args.layers, maps.weights.shape[0], "--layers"), _indices(args.heads, maps.weights.shape[1], "--heads")
            query = VIRTUAL if args.query is None else args.query
            maps.query_node(query)  # a query the model lacks is refused before drawing
            print("query: " + ("the virtual node" if query == VIRTUAL else f"atom {query}"))
            plot_attention_on_molecule(maps, query, out, layers, heads)
            heatmap = out.with_name(f"{out.stem}_heatmap{out.suffix}")
            plot_attention_heatmap(maps, heatmap, layers, heads)
            written.append(heatmap)
        else:
            written.append(_importance_figure(maps, out))
    elif args.kind == "explain":
        if not args.smiles:
            raise GraphTxError("plot explain needs --smiles")
        written.append(_explanation_figure(predictor, args.smiles, args.target, args.steps, out))
    elif args.kind == "focus":
        plot_focus_functions(predictor.model, out)
    elif args.kind == "decay":
        plot_start_points(predictor.model, out)
    else:
        if not args.data:
            raise GraphTxError("plot parity needs --data (a labelled molecule file)")
        target = args.target or predictor.target_names[0]
        if target not in predictor.target_names:
            raise GraphTxError(f"target {target!r} is not predicted by this checkpoint; it predicts {predictor.target_names}")
        data = read_input(args, args.data, predictor)
        rows = evaluate_table(predictors, data, progress=verbosity(args) >= 0).rows
        measured, predicted = rows[target], rows[prediction_column(target)]
        if not (measured.notna() & predicted.notna()).any():
            why = next((f": {r.smiles}: {r.error}" for r in rows.itertuples() if isinstance(r.error, str)), "")
            raise GraphTxError(f"plot parity: none of the {len(rows)} rows of {args.data} has both a label in column {target!r} and a "
                               f"prediction{why}; give labelled molecules that featurize")
        plot_parity_residuals(measured, predicted, out, title=f"{target}: {Path(args.data).name}")
        table = error_table(rows["smiles"], measured, predicted, reasons=rows["error"])
        errors = out.with_name(f"{out.stem}_errors.csv")
        table.to_csv(errors, index=False)
        written.append(errors)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0
