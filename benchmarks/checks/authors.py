"""The authors' own networks (GRPE, Gradformer, MoiréGT), imported at run time from checkouts that
the user makes with git, and fed the same molecules as ours in their own batch formats.

Nothing of the authors' code is copied here: each adapter imports their modules from
``<authors-dir>/<repo>`` and builds their network with the arguments of their training scripts,
then turns our featurized molecules (OGB atom and bond features, random-walk encodings, conformer
coordinates) into the tensors their forward pass reads. Make the checkouts with::

    mkdir -p .cache/authors && cd .cache/authors
    git clone https://github.com/lenscloth/GRPE && git -C GRPE checkout 05f31e990f99f98ff848d8971c2ea2a323d96e89
    git clone https://github.com/LiuChuang0059/Gradformer && git -C Gradformer checkout 733739005dc24190c88f01a56530d29e42107c5f
    git clone https://github.com/saankim/RadialFocus && git -C RadialFocus checkout 4a5124c2840b0ee0a499fdd2cfa668858186e914

What each needs besides torch: GRPE nothing; Gradformer ``torch_geometric`` and ``ogb`` (its
``torch_scatter`` import is served by ``torch_geometric.utils.scatter`` when ``torch_scatter`` is
missing); MoiréGT ``lightning`` and ``torchmetrics`` for its ``LightningModule`` base class (when
they are missing, a plain ``torch.nn.Module`` stands in: the timed steps call ``forward`` only).

Not part of the package; imported by ``benchmarks/checks/gpu_speed.py``.
"""
from __future__ import annotations

import contextlib
import importlib
import random
import sys
import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

import dgl_graphtx  # noqa: F401  (before dgl)
import dgl

from dgl_graphtx.models import ModelConfig


@dataclass(frozen=True)
class AuthorsRepo:
    """A repository of an author's code: its folder name under ``--authors-dir``, URL and the
    commit the adapters were written against."""

    folder: str
    url: str
    commit: str

    def clone_command(self) -> str:
        return f"git clone {self.url} && git -C {self.folder} checkout {self.commit}"


REPOS: Dict[str, AuthorsRepo] = {
    "grpe": AuthorsRepo("GRPE", "https://github.com/lenscloth/GRPE", "05f31e990f99f98ff848d8971c2ea2a323d96e89"),
    "gradformer": AuthorsRepo("Gradformer", "https://github.com/LiuChuang0059/Gradformer",
                              "733739005dc24190c88f01a56530d29e42107c5f"),
    "moire": AuthorsRepo("RadialFocus", "https://github.com/saankim/RadialFocus", "4a5124c2840b0ee0a499fdd2cfa668858186e914"),
}

#: The presets whose configuration the authors' code reproduces, per variant (``None``: all).
PAIRED_PRESETS: Dict[str, Optional[Sequence[str]]] = {"grpe": None, "moire": None, "gradformer": ("molhiv",)}


class AuthorsUnavailable(Exception):
    """The authors' network cannot run here; the message says why and what to install or clone."""


@dataclass
class AuthorsNetwork:
    """An author's network ready to time: ``forward(model, batch)`` gives ``[B, 1]`` outputs for
    every batch of ``batches`` (already on the device)."""

    label: str
    config: str
    model: torch.nn.Module
    batches: List[Any]
    forward: Callable[[torch.nn.Module, Any], torch.Tensor]
    note: str = ""


def is_paired(variant: str, preset: str) -> bool:
    """Whether the authors' code of ``variant`` has the configuration of ``preset``."""
    if variant not in PAIRED_PRESETS:
        return False
    presets = PAIRED_PRESETS[variant]
    return presets is None or preset in presets


@contextlib.contextmanager
def _importable(folder: Path) -> Iterator[None]:
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))


def _checkout(authors_dir: Path, variant: str) -> Path:
    repo = REPOS[variant]
    folder = Path(authors_dir) / repo.folder
    if not folder.is_dir():
        raise AuthorsUnavailable(f"no checkout at {folder}; in {authors_dir}: {repo.clone_command()}")
    return folder


def _import(folder: Path, module: str, repo: str) -> Any:
    with _importable(folder):
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as err:
            raise AuthorsUnavailable(f"{repo} needs the package {err.name!r}, which is not installed here") from err


# -- our molecules in plain arrays -------------------------------------------------------------

@dataclass
class Molecule:
    """One featurized molecule as the authors' batches need it."""

    atoms: torch.Tensor  # [n, 9] OGB atom features
    edges: torch.Tensor  # [2, E] directed bonds
    bonds: torch.Tensor  # [E, 3] OGB bond features
    hops: np.ndarray  # [n, n] shortest-path lengths, inf where unreachable
    rwse: Optional[torch.Tensor]  # [n, k] random-walk encodings
    pos: Optional[torch.Tensor]  # [n, 3] conformer coordinates

    @property
    def size(self) -> int:
        return int(self.atoms.shape[0])


def molecule_arrays(graph: dgl.DGLGraph) -> Molecule:
    """The arrays of one of our molecular graphs (featurized with OGB features)."""
    src, dst = graph.edges()
    n = graph.num_nodes()
    adjacency = csr_matrix((np.ones(len(src)), (src.numpy(), dst.numpy())), shape=(n, n))
    return Molecule(graph.ndata["feat"], torch.stack([src, dst]), graph.edata["feat"],
                    shortest_path(adjacency, unweighted=True, directed=False),
                    graph.ndata.get("rwse"), graph.ndata.get("pos"))


def _hops(molecule: Molecule, unreachable: int) -> torch.Tensor:
    hops = molecule.hops.copy()
    hops[~np.isfinite(hops)] = unreachable
    return torch.from_numpy(hops).long()


# -- GRPE (lenscloth/GRPE, plain torch) ---------------------------------------------------------

#: ``gpp.py`` defaults: one embedding table of 512 rows per OGB atom feature, 30 bond classes
#: (``OneHotEdgeAttr``: type + 4 stereo + 16 conjugation), hops clipped at 5.
GRPE_NODE_TYPES, GRPE_EDGE_TYPES, GRPE_MAX_HOP = 512 * 9 + 1, 30, 5


def grpe_batch(molecules: Sequence[Molecule]) -> SimpleNamespace:
    """The padded batch of GRPE's ``MoleculeCollator`` (``x``, ``mask``, ``distance``, ``edge_attr``)."""
    size = max(m.size for m in molecules)
    x = -torch.ones(len(molecules), size, 9, dtype=torch.long)
    mask = torch.zeros(len(molecules), size, dtype=torch.bool)
    distance = -torch.ones(len(molecules), size, size, dtype=torch.long)
    edge_attr = -torch.ones(len(molecules), size, size, dtype=torch.long)
    offsets = 1 + 512 * torch.arange(9)
    for i, m in enumerate(molecules):
        x[i, : m.size] = m.atoms + offsets
        mask[i, m.size:] = True
        distance[i, : m.size, : m.size] = _hops(m, -1)
        classes = m.bonds[:, 0] + 4 * m.bonds[:, 1] + 16 * m.bonds[:, 2]
        edge_attr[i, m.edges[0], m.edges[1]] = classes.clamp(max=GRPE_EDGE_TYPES - 1)
    return SimpleNamespace(x=x, mask=mask, distance=distance, edge_attr=edge_attr)


def build_grpe(folder: Path, config: ModelConfig, batches: Sequence[Sequence[Molecule]], device: torch.device) -> AuthorsNetwork:
    module = _import(folder, "grpe.model", "GRPE")
    # gpp.py's call (dropout 0.1 as in its PCQM4Mv2 scripts; attention dropout GRPENetwork's default)
    model = module.GRPENetwork(
        num_task=1, num_layer=config.num_layers, d_model=config.hidden_dim, nhead=config.num_heads,
        dim_feedforward=config.ffn_dim or config.hidden_dim, dropout=0.1, max_hop=GRPE_MAX_HOP,
        num_node_type=GRPE_NODE_TYPES, num_edge_type=GRPE_EDGE_TYPES,
    )
    on_device = [SimpleNamespace(**{k: v.to(device) for k, v in vars(grpe_batch(b)).items()}) for b in batches]
    return AuthorsNetwork("GRPE (lenscloth/GRPE)", f"{config.num_layers}/{config.hidden_dim}/{config.num_heads}, max hop 5",
                          model.to(device), on_device, lambda net, batch: net(batch))


# -- Gradformer (LiuChuang0059/Gradformer, PyG) -------------------------------------------------

#: ``scripts/run_hiv.sh`` with ``config.py``'s defaults and ``set_config`` for ``ogbg-molhiv``.
GRADFORMER_MOLHIV = dict(
    dataset="ogbg-molhiv", gamma=0.7, n_hop=5, slope=0.2, channels=64, nhead=4, dropout=0.05, attn_dropout=0.5,
    drop_prob=0.0, num_layers=10, pe_norm=True, pe_origin_dim=16, pe_dim=16, node_method="ogb", edge_method="ogb",
    mpnn="GCN", pool="mean", projection="mlp",
)


def _serve_torch_scatter() -> None:
    """Register ``torch_scatter.scatter`` (its positional signature) on top of PyG's ``scatter``."""
    from torch_geometric.utils import scatter as pyg_scatter

    def scatter(src, index, dim=-1, out=None, dim_size=None, reduce="sum"):
        return pyg_scatter(src, index, dim, dim_size=dim_size, reduce=reduce)

    module = types.ModuleType("torch_scatter")
    module.scatter = scatter
    sys.modules["torch_scatter"] = module


def gradformer_batch(molecules: Sequence[Molecule], data_cls: Any, batch_cls: Any) -> Any:
    """The PyG batch of Gradformer's loader: ``fn`` in ``data_utils/load_data.py`` pads each
    ``sph`` to the batch's largest molecule with 510, then ``main.py`` reshapes it to ``[B, N, N]``."""
    size = max(m.size for m in molecules)
    data = []
    for m in molecules:
        pad = size - m.size
        sph = torch.nn.functional.pad(_hops(m, 510).float(), (0, pad, 0, pad), value=510)
        data.append(data_cls(x=m.atoms, edge_index=m.edges, edge_attr=m.bonds, pe=m.rwse, sph=sph))
    batch = batch_cls.from_data_list(data)
    batch.sph = batch.sph.reshape(-1, size, size)
    return batch


def build_gradformer(folder: Path, config: ModelConfig, batches: Sequence[Sequence[Molecule]], device: torch.device) -> AuthorsNetwork:
    try:
        import torch_geometric.data as pyg_data
    except ModuleNotFoundError as err:
        raise AuthorsUnavailable("Gradformer needs torch_geometric, which is not installed here "
                                 "(pip install torch_geometric)") from err
    note = ""
    try:
        importlib.import_module("torch_scatter")
    except ModuleNotFoundError:
        _serve_torch_scatter()
        note = "torch_scatter served by torch_geometric.utils.scatter"
    with warnings.catch_warnings():  # torch_geometric.graphgym asks for yacs and lightning, unused here
        warnings.simplefilter("ignore", UserWarning)
        module = _import(folder, "model.Gradformer", "Gradformer")
    args = SimpleNamespace(**GRADFORMER_MOLHIV)
    model = module.Gradformer(args, node_dim=9, edge_dim=3, num_tasks=1, mpnn=args.mpnn, pool=args.pool)
    # Their ogb atom encoder is channels - pe_dim - 1 wide, one short of the layers' width once the
    # random-walk encoding is concatenated; widen it so that the network runs.
    if model.atom_enc.atom_embedding_list[0].embedding_dim + args.pe_dim != args.channels:
        model.atom_enc = type(model.atom_enc)(args.channels - args.pe_dim)
        note = "; ".join(filter(None, [note, "atom encoder widened by 1 to match the layers"]))
    if any(m.rwse is None or m.rwse.shape[1] != args.pe_origin_dim for b in batches for m in b):
        raise AuthorsUnavailable(f"Gradformer reads {args.pe_origin_dim} random-walk steps; featurize with rwse_steps=16")
    on_device = [gradformer_batch(b, pyg_data.Data, pyg_data.Batch).to(device) for b in batches]

    def forward(net: torch.nn.Module, b: Any) -> torch.Tensor:
        return net(b.x, b.pe, b.edge_index, b.edge_attr, b.batch, b.sph)

    return AuthorsNetwork("Gradformer (LiuChuang0059/Gradformer)", "10/64/4, GatedGCN, run_hiv.sh", model.to(device),
                          on_device, forward, note)


# -- MoiréGT (saankim/RadialFocus) ---------------------------------------------------------------

def _serve_lightning() -> None:
    """A plain ``torch.nn.Module`` as ``lightning.LightningModule`` and metric classes of
    ``torchmetrics``, for a process without them (the timed steps never reach Lightning)."""

    class Metric(torch.nn.Module):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__()

    lightning = types.ModuleType("lightning")
    lightning.LightningModule = torch.nn.Module
    metrics = types.ModuleType("torchmetrics")
    metrics.__getattr__ = lambda name: Metric
    sys.modules["lightning"], sys.modules["torchmetrics"] = lightning, metrics


def moire_batch(molecules: Sequence[Molecule], distance: str) -> SimpleNamespace:
    """Padded ``x`` (float atom features), ``adj`` (3-D distances or hop counts) and ``mask``
    (``True`` on atoms), as the ``training_step`` of RadialFocus's ``BaseModel`` unpacks them."""
    size = max(m.size for m in molecules)
    x = torch.zeros(len(molecules), size, 9)
    adj = torch.zeros(len(molecules), size, size)
    mask = torch.zeros(len(molecules), size, dtype=torch.bool)
    for i, m in enumerate(molecules):
        x[i, : m.size] = m.atoms.float()
        if distance == "dist":
            adj[i, : m.size, : m.size] = torch.cdist(m.pos, m.pos)
        else:
            adj[i, : m.size, : m.size] = _hops(m, 510).float()
        mask[i, : m.size] = True
    return SimpleNamespace(x=x, adj=adj, mask=mask)


def build_moire(folder: Path, config: ModelConfig, batches: Sequence[Sequence[Molecule]], device: torch.device) -> AuthorsNetwork:
    note = ""
    try:
        importlib.import_module("lightning")
        importlib.import_module("torchmetrics")
    except ModuleNotFoundError:
        _serve_lightning()
        note = "lightning not installed: a torch.nn.Module stands in for LightningModule"
    module = _import(folder, "src.graph_regression", "RadialFocus")
    layers, rng = config.num_layers, random.Random(0)
    # src/utils.py generate_hyperparams with train.py's defaults (shifts and widths in [0.5, 3])
    hyperparams = {
        "in_dims": [config.hidden_dim] * layers, "out_dims": [config.hidden_dim] * layers,
        "heads": [config.num_heads] * layers, "shifts": [rng.uniform(0.5, 3) for _ in range(layers)],
        "widths": [rng.uniform(0.5, 3) for _ in range(layers)], "x_dims": 9, "y_dims": 1,
    }
    model = module.GraphRegression(hyperparams)
    distance = config.moire.distance
    on_device = [SimpleNamespace(**{k: v.to(device) for k, v in vars(moire_batch(b, distance)).items()}) for b in batches]
    kind = "3-D distances" if distance == "dist" else "hop distances"
    return AuthorsNetwork("MoiréGT (saankim/RadialFocus)", f"{layers}/{config.hidden_dim}/{config.num_heads}, {kind}",
                          model.to(device), on_device, lambda net, b: net(b.x, b.adj, b.mask).view(len(b.x), -1), note)


BUILDERS = {"grpe": build_grpe, "gradformer": build_gradformer, "moire": build_moire}


def build_authors_network(variant: str, config: ModelConfig, graphs: Sequence[Sequence[dgl.DGLGraph]], authors_dir: Path,
                          device: torch.device) -> AuthorsNetwork:
    """The authors' network of ``variant`` at the configuration of ``config``, with ``graphs``
    (batches of our molecular graphs) in their batch format on ``device``.

    Raises :class:`AuthorsUnavailable` saying why it cannot run here.
    """
    folder = _checkout(authors_dir, variant)
    molecules = [[molecule_arrays(g) for g in batch] for batch in graphs]
    return BUILDERS[variant](folder, config, molecules, device)
