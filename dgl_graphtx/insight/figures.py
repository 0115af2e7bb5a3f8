"""Figures of what a model learned and how well it predicts (PNG or SVG; molecules drawn by RDKit):
attention on the molecule and as heat maps, MoireGT focus curves, Gradformer start points, parity and
residual plots. Each is a matplotlib :class:`~matplotlib.figure.Figure` made without ``pyplot``:
drawing needs no display, and importing this module leaves the caller's backend as it is."""
from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import matplotlib
import numpy as np
import pandas as pd
import torch
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.image import imread
from rdkit.Geometry import Point2D

from ..errors import GraphTxError
from ..models import MoleculeModel
from .attention_maps import AttentionMaps
from .learned_structure import decay_parameters, focus_curve, focus_parameters, parameters_at_initial_values

PathLike = Union[str, Path]
CMAP = "viridis"
logger = logging.getLogger("dgl_graphtx")


def save_figure(fig: Figure, path: Optional[PathLike], dpi: int = 100) -> Figure:
    """Write ``fig`` to ``path`` (PNG or SVG by suffix) when given; return it."""
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return fig


def _node_labels(maps: AttentionMaps) -> list:
    return ["VN" if a < 0 else f"{maps.mol.GetAtomWithIdx(int(a)).GetSymbol()}{int(a)}" for a in maps.node_atoms]


def _layers_heads(maps: AttentionMaps, layers: Optional[Sequence[int]], heads: Optional[Sequence[int]]):
    num_layers, num_heads = maps.weights.shape[:2]
    return list(range(num_layers)) if layers is None else list(layers), list(range(num_heads)) if heads is None else list(heads)


def plot_attention_heatmap(maps: AttentionMaps, path: Optional[PathLike] = None, layers: Optional[Sequence[int]] = None,
                           heads: Optional[Sequence[int]] = None) -> Figure:
    """``N x N`` attention matrices (query rows, key columns), one panel per layer and head, with
    atoms labelled ``<symbol><input index>`` and the virtual node ``VN`` (GRPE paper, Fig. 4 style).

    Example:
        >>> from dgl_graphtx.featurize import MoleculeFeaturizer
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> from dgl_graphtx.insight import attention_maps
        >>> p = get_preset("grpe", num_layers=1, hidden_dim=16, num_heads=2)
        >>> maps = attention_maps(build_model(p.model), MoleculeFeaturizer(p.featurizer, p.relation), "CCO")
        >>> len(plot_attention_heatmap(maps).axes)  # 2 panels + 1 colour bar
        3
    """
    layers, heads = _layers_heads(maps, layers, heads)
    labels = _node_labels(maps)
    n = len(labels)
    size = min(max(2.2, 0.22 * n), 4.5)
    fig = Figure(figsize=(size * len(heads) + 0.8, size * len(layers)))
    axes = fig.subplots(len(layers), len(heads), squeeze=False)
    vmax = float(maps.weights[np.ix_(layers, heads)].max())
    image = None
    for r, layer in enumerate(layers):
        for c, head in enumerate(heads):
            ax = axes[r, c]
            image = ax.imshow(maps.weights[layer, head], cmap=CMAP, vmin=0.0, vmax=vmax)
            ax.set_title(f"layer {layer} head {head}", fontsize=8)
            ticks = np.arange(n) if n <= 30 else np.arange(0, n, max(1, n // 15))
            ax.set_xticks(ticks, [labels[t] for t in ticks], rotation=90, fontsize=6)
            ax.set_yticks(ticks, [labels[t] for t in ticks], fontsize=6)
            if c == 0:
                ax.set_ylabel("query", fontsize=7)
            if r == len(layers) - 1:
                ax.set_xlabel("key", fontsize=7)
    assert image is not None  # _layers_heads gives at least one layer and head
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    fig.suptitle(maps.smiles, fontsize=9)
    return save_figure(fig, path)


#: Colours of atom weights on molecule drawings (light to dark red), shared with their colour bars.
ATOM_CMAP = matplotlib.colors.ListedColormap(matplotlib.colormaps["Reds"](np.linspace(0.1, 1.0, 256)))
#: Colours of signed atom weights (contributions): blue below 0, white at 0, red above.
SIGNED_CMAP = matplotlib.colormaps["bwr"]


def _colour(weight: float, vmax: float, signed: bool = False) -> tuple:
    share = weight / vmax if vmax > 0 else 0.0
    rgba = SIGNED_CMAP((share + 1.0) / 2.0) if signed else ATOM_CMAP(share)
    return tuple(float(v) for v in rgba[:3])


def molecule_drawing() -> Any:
    """RDKit's 2-D drawing module (``rdkit.Chem.Draw.rdMolDraw2D``), imported where a molecule is
    drawn, not with the package: it needs system libraries (libXrender, Cairo) that a server may
    lack, and training and prediction never draw. One clear error when it cannot be imported.

    Example:
        >>> molecule_drawing().__name__
        'rdkit.Chem.Draw.rdMolDraw2D'
    """
    try:
        from rdkit.Chem.Draw import rdMolDraw2D
    except ImportError as err:
        reason = " ".join(str(err).split())
        raise GraphTxError(f"drawing a molecule needs RDKit's drawing code, which cannot be imported here ({reason}); "
                           "install the system library it names (e.g. apt install libxrender1 libxext6), or draw on "
                           "another machine") from None
    return rdMolDraw2D


def draw_molecule_weights(mol, weights: Union[Sequence[float], np.ndarray], size: int = 260, marked: Optional[int] = None,
                          vmax: Optional[float] = None, signed: bool = False) -> np.ndarray:
    """RDKit drawing of ``mol`` with each atom highlighted in a colour and size growing with its
    weight (``marked`` atom outlined by a blue circle); an RGB(A) image array. ``signed`` weights
    run from ``-vmax`` (blue) through 0 (white) to ``vmax`` (red), the size growing with ``|w|``.

    Example:
        >>> from rdkit import Chem
        >>> draw_molecule_weights(Chem.MolFromSmiles("CCO"), [0.2, 0.3, 0.5], size=120).shape[:2]
        (120, 120)
    """
    values = np.asarray(weights, dtype=float)
    vmax = float((np.abs(values) if signed else values).max()) if vmax is None else vmax
    draw2d = molecule_drawing()
    drawer = draw2d.MolDraw2DCairo(size, size)
    options = drawer.drawOptions()
    options.addAtomIndices = True
    options.annotationFontScale = 0.6
    atoms = list(range(mol.GetNumAtoms()))
    colours = {a: _colour(values[a], vmax, signed) for a in atoms}
    radii = {a: 0.2 + 0.35 * (abs(values[a]) / vmax if vmax > 0 else 0.0) for a in atoms}
    if marked is not None:
        options.atomHighlightsAreCircles = True
    draw2d.PrepareAndDrawMolecule(drawer, mol, highlightAtoms=atoms, highlightAtomColors=colours,
                                  highlightAtomRadii=radii, highlightBonds=[])
    if marked is not None:
        position = drawer.GetDrawCoords(marked)
        drawer.SetColour((0.1, 0.3, 0.9))
        drawer.SetLineWidth(2)
        drawer.SetFillPolys(False)
        radius = 0.06 * size
        drawer.DrawEllipse(Point2D(position.x - radius, position.y - radius), Point2D(position.x + radius, position.y + radius),
                           rawCoords=True)
    drawer.FinishDrawing()
    return imread(io.BytesIO(drawer.GetDrawingText()), format="png")


def plot_atom_importance(mol, importance: Sequence[float], path: Optional[PathLike] = None, title: str = "",
                         size: int = 700) -> Figure:
    """One large drawing of ``mol`` with every atom coloured by its ``importance`` (e.g.
    :func:`~dgl_graphtx.insight.attribution.atom_importance`), atom indices and a colour bar.

    Example:
        >>> from rdkit import Chem
        >>> fig = plot_atom_importance(Chem.MolFromSmiles("CCO"), [0.2, 0.3, 0.5], size=200)
        >>> fig.axes[1].get_ylabel()
        'importance (share of the prediction)'
    """
    weights = np.asarray(importance, dtype=float)
    vmax = float(weights.max()) if len(weights) and weights.max() > 0 else 1.0
    fig = Figure(figsize=(size / 100 + 1.2, size / 100))
    ax = fig.subplots()
    ax.imshow(draw_molecule_weights(mol, weights, size=size, vmax=vmax))
    ax.set_axis_off()
    ax.set_title(title, fontsize=10)
    bar = fig.colorbar(ScalarMappable(norm=Normalize(0.0, vmax), cmap=ATOM_CMAP), ax=ax, fraction=0.04, pad=0.02)
    bar.set_label("importance (share of the prediction)")
    return save_figure(fig, path)


def plot_atom_contributions(mol, contributions: Sequence[float], path: Optional[PathLike] = None, title: str = "",
                            unit: str = "", size: int = 700) -> Figure:
    """One large drawing of ``mol`` with every atom coloured by its signed contribution to a
    prediction (e.g. :meth:`~dgl_graphtx.inference.Predictor.explain`): red raises it, blue lowers
    it, on a scale symmetric about 0; atom indices and a colour bar.

    Example:
        >>> from rdkit import Chem
        >>> fig = plot_atom_contributions(Chem.MolFromSmiles("CCO"), [0.2, 0.3, -0.5], size=200)
        >>> [float(v) for v in fig.axes[1].get_ylim()]  # the colour bar: symmetric about 0
        [-0.5, 0.5]
    """
    values = np.asarray(contributions, dtype=float)
    vmax = float(np.abs(values).max()) if len(values) and np.abs(values).max() > 0 else 1.0
    fig = Figure(figsize=(size / 100 + 1.2, size / 100))
    ax = fig.subplots()
    ax.imshow(draw_molecule_weights(mol, values, size=size, vmax=vmax, signed=True))
    ax.set_axis_off()
    ax.set_title(title, fontsize=10)
    bar = fig.colorbar(ScalarMappable(norm=Normalize(-vmax, vmax), cmap=SIGNED_CMAP), ax=ax, fraction=0.04, pad=0.02)
    bar.set_label(f"contribution to the prediction{f' ({unit})' if unit else ''}")
    return save_figure(fig, path)


def _initial_values_note(model: MoleculeModel, fig: Figure, names: Sequence[str]) -> None:
    """Say on ``fig`` when the plotted parameters never moved from their initial values."""
    unchanged = [n for n in parameters_at_initial_values(model) if n.split(".")[-1] in names]
    if unchanged:
        logger.warning("%s never moved from their initial values: the figure shows the initialisation", ", ".join(unchanged))
        fig.text(0.5, -0.04, f"{', '.join(unchanged)} at their initial values: not learned (untrained model, "
                 "frozen parameters or no gradient)", ha="center", va="top", fontsize=8, color="firebrick")


def plot_attention_on_molecule(maps: AttentionMaps, query: Union[int, str], path: Optional[PathLike] = None,
                               layers: Optional[Sequence[int]] = None, heads: Optional[Sequence[int]] = None,
                               mean_over_heads: bool = True, size: int = 220) -> Figure:
    """The attention of ``query`` (an input atom index, or ``"virtual"``) on every atom, drawn on
    the molecule: one row per layer, one panel per head (and one for the mean over heads).

    Example:
        >>> from dgl_graphtx.featurize import MoleculeFeaturizer
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> from dgl_graphtx.insight import attention_maps
        >>> p = get_preset("grpe", num_layers=1, hidden_dim=16, num_heads=2)
        >>> maps = attention_maps(build_model(p.model), MoleculeFeaturizer(p.featurizer, p.relation), "CCO")
        >>> len(plot_attention_on_molecule(maps, "virtual").axes)
        3
    """
    layers, heads = _layers_heads(maps, layers, heads)
    columns = [*heads, None] if mean_over_heads else heads
    marked = None if query == "virtual" else int(query)
    panels = [[maps.atom_weights(query, layer, head) for head in columns] for layer in layers]
    vmax = max(float(w.max()) for row in panels for w in row)
    inch = size / 100
    fig = Figure(figsize=(inch * len(columns), inch * len(layers) + 0.4))
    axes = fig.subplots(len(layers), len(columns), squeeze=False)
    for r, layer in enumerate(layers):
        for c, head in enumerate(columns):
            ax = axes[r, c]
            ax.imshow(draw_molecule_weights(maps.mol, panels[r][c], size, marked, vmax))
            ax.set_title(f"layer {layer} " + ("mean" if head is None else f"head {head}"), fontsize=8)
            ax.axis("off")
    who = "virtual node" if marked is None else f"atom {marked}"
    fig.suptitle(f"attention of the {who}: {maps.smiles}", fontsize=9)
    return save_figure(fig, path)


def plot_focus_functions(model: MoleculeModel, path: Optional[PathLike] = None, max_distance: Optional[float] = None) -> Figure:
    """MoireGT's learned focus functions ``f(d)`` per layer, one curve per head, ``mu`` marked.

    Example:
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> fig = plot_focus_functions(build_model(get_preset("moire", num_layers=2, hidden_dim=16, num_heads=2).model))
        >>> len(fig.axes), len(fig.axes[0].lines)  # per layer: 2 heads, each a curve and its mu line
        (2, 4)
    """
    table = focus_parameters(model)
    layers = sorted(table["layer"].unique())
    unit = "Angstrom" if table["distance"].iloc[0] == "dist" else "hops"
    top = max_distance or float(max(8.0, (table["mu"] + 2 * table["sigma"]).max()))
    d = torch.linspace(0.0, top, 400)
    fig = Figure(figsize=(3.2 * len(layers), 2.8))
    axes = fig.subplots(1, len(layers), squeeze=False, sharey=True)
    for ax, layer in zip(axes[0], layers):
        for _, row in table[table["layer"] == layer].iterrows():
            line, = ax.plot(d.numpy(), focus_curve(row["focus"], d, row["mu"], row["sigma"]).numpy(), linewidth=1.2,
                            label=f"h{row['head']}: mu {row['mu']:.2f}, sigma {row['sigma']:.2f}")
            ax.axvline(row["mu"], color=line.get_color(), linestyle=":", linewidth=0.8)
        ax.set(title=f"layer {layer}", xlabel=f"distance ({unit})")
        ax.legend(fontsize=5, loc="upper right")
    axes[0, 0].set_ylabel(f"f(d), {table['focus'].iloc[0]}")
    _initial_values_note(model, fig, ("shift", "width"))
    return save_figure(fig, path)


def plot_start_points(model: MoleculeModel, path: Optional[PathLike] = None) -> Figure:
    """Gradformer's learned start points ``sp`` per head (bars) and layer (groups); ``lambda`` in
    the title (marked as learned when it is).

    Example:
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> fig = plot_start_points(build_model(get_preset("gradformer", num_layers=2, hidden_dim=16, num_heads=2).model))
        >>> [round(float(b.get_height()), 1) for b in fig.axes[0].patches]
        [2.0, 2.0, 2.0, 2.0]
    """
    table = decay_parameters(model)
    heads = sorted(table["head"].unique())
    layers = sorted(table["layer"].unique())
    width = 0.8 / len(layers)
    fig = Figure(figsize=(max(3.5, 0.6 * len(heads) * len(layers)), 2.8))
    ax = fig.subplots()
    for i, layer in enumerate(layers):
        rows = table[table["layer"] == layer].sort_values("head")
        ax.bar(np.asarray(heads) + (i - (len(layers) - 1) / 2) * width, rows["start"], width=width, label=f"layer {layer}")
    lam = table["decay"].iloc[0]
    learned = " (learned)" if table["learned_decay"].iloc[0] else ""
    ax.set(xlabel="head", ylabel="start point sp (hops)", xticks=heads,
           title=f"Gradformer decay: lambda^ReLU(spd - sp), lambda = {lam:.3f}{learned}")
    ax.legend(fontsize=7)
    _initial_values_note(model, fig, ("start", "decay_logit"))
    return save_figure(fig, path)


def plot_parity_residuals(y_true: Sequence[float], y_pred: Sequence[float], path: Optional[PathLike] = None,
                          std: Optional[Sequence[float]] = None, unit: str = "", title: str = "") -> Figure:
    """Parity plot (predicted vs measured, identity line, RMSE) and residuals vs measured; with
    ``std`` (ensemble spread) as error bars.

    Example:
        >>> fig = plot_parity_residuals([1.0, 2.0, 3.0], [1.5, 2.0, 2.0])
        >>> fig.axes[1].collections[0].get_offsets()[:, 1].tolist()  # residuals: predicted - measured
        [0.5, 0.0, -1.0]
    """
    y, p = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    keep = np.isfinite(y) & np.isfinite(p)
    if not keep.any():
        raise GraphTxError(f"nothing to plot: none of the {len(keep)} molecules has both a finite measured value and a prediction")
    y, p = y[keep], p[keep]
    s = None if std is None else np.asarray(std, dtype=float)[keep]
    rmse = float(np.sqrt(np.mean((p - y) ** 2)))
    label = f" ({unit})" if unit else ""
    fig = Figure(figsize=(8, 3.8))
    axes = fig.subplots(1, 2)
    lo, hi = float(min(y.min(), p.min())), float(max(y.max(), p.max()))
    axes[0].plot([lo, hi], [lo, hi], color="grey", linewidth=1)
    if s is not None:
        axes[0].errorbar(y, p, yerr=s, fmt="none", ecolor="tab:blue", alpha=0.3, linewidth=0.8)
    axes[0].scatter(y, p, s=10, alpha=0.7, label=f"RMSE {rmse:.3f}{' ' + unit if unit else ''} (n={len(y)})")
    axes[0].set(xlabel=f"measured{label}", ylabel=f"predicted{label}", title=title or "parity")
    axes[0].legend(loc="upper left", fontsize=8)
    axes[1].axhline(0.0, color="grey", linewidth=1)
    axes[1].scatter(y, p - y, s=10, alpha=0.7)
    axes[1].set(xlabel=f"measured{label}", ylabel=f"predicted - measured{label}", title="residuals")
    fig.tight_layout()
    return save_figure(fig, path)


def error_table(smiles: Sequence[str], y_true: Sequence[float], y_pred: Sequence[float],
                std: Optional[Sequence[float]] = None, reasons: Optional[Sequence[Any]] = None) -> pd.DataFrame:
    """Per-molecule errors, largest absolute error first (``std`` column when given; ``reason``,
    why a molecule has no error, when ``reasons`` are given: the prediction's error, else
    ``no measured value`` for an unlabelled molecule, blank for the others).

    Example:
        >>> error_table(["A", "B"], [1.0, 2.0], [1.5, 0.0])[["smiles", "abs_error"]].values.tolist()
        [['B', 2.0], ['A', 0.5]]
        >>> error_table(["A", "B", "C"], [1.0, 2.0, float("nan")], [1.5, float("nan"), 3.0],
        ...             reasons=[None, "no parse", None])["reason"].tolist()
        ['', 'no parse', 'no measured value']
    """
    table = pd.DataFrame({"smiles": list(smiles), "measured": np.asarray(y_true, float), "predicted": np.asarray(y_pred, float)})
    table["error"] = table["predicted"] - table["measured"]
    table["abs_error"] = table["error"].abs()
    if std is not None:
        table["std"] = np.asarray(std, float)
    if reasons is not None:
        table["reason"] = [r if isinstance(r, str) else "no measured value" if np.isnan(m) else ""
                           for r, m in zip(reasons, table["measured"])]
    return table.sort_values("abs_error", ascending=False, kind="stable").reset_index(drop=True)
