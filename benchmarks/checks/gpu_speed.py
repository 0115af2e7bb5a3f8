"""Training and inference graphs/s and peak GPU memory of every variant at the papers' sizes, on
MolHIV-sized and QM9-sized molecules, next to the authors' own networks (GRPE, Gradformer,
MoiréGT) in the same process and on the same device.

Ours runs on the tensor compute path (``compute="tensors"``: what a GPU without a CUDA build of DGL
uses), the authors' networks in their own batch formats (``benchmarks/checks/authors.py``), all at the
configurations of the papers' presets (``dgl-graphtx presets``) and at each preset's recipe batch
size (``--batch-size`` overrides). Per network: ``--batches`` distinct batches are built and moved
to the device first; training steps (forward, MSE loss, backward, AdamW step) and inference passes
(``eval()``, ``no_grad``) cycle through them, ``--warmup`` untimed then ``--repeats`` timed, with
``torch.cuda.synchronize`` inside every timed call; graphs/s is the batch size over the median
time. Peak memory is ``torch.cuda.max_memory_allocated`` over the network's phase (weights,
optimizer state, batches, activations; networks run one after the other); ``-`` on the CPU.

Molecules: MolHIV-sized (24-27 heavy atoms, ~24.5 on average; ogbg-molhiv's mean is 25.5, and
MOSES stops at 27) from the MOSES training set (``--smiles FILE`` or the molsets wheel in
``--moses-dir``; without either, ZINC-like molecules joined from FreeSolv, said in the table);
QM9-sized (8-9 heavy atoms) from FreeSolv.

``--epoch`` also times one training epoch of the Gradformer ``molhiv`` preset (``--epoch-config``)
over ``--epoch-molecules`` MolHIV-sized molecules (default 33,000: ogbg-molhiv's training split;
the ``--pool`` distinct ones repeated), through a shuffled DataLoader with the tensor
``collate_fn`` in ``--workers`` processes, against the target of under 10 s.

The authors' code (see ``authors.py`` for what each needs) is imported from ``--authors-dir``
(default ``.cache/authors``), made with::

    mkdir -p .cache/authors && cd .cache/authors
    git clone https://github.com/lenscloth/GRPE && git -C GRPE checkout 05f31e990f99f98ff848d8971c2ea2a323d96e89
    git clone https://github.com/LiuChuang0059/Gradformer && git -C Gradformer checkout 733739005dc24190c88f01a56530d29e42107c5f
    git clone https://github.com/saankim/RadialFocus && git -C RadialFocus checkout 4a5124c2840b0ee0a499fdd2cfa668858186e914

A network that cannot run here (no checkout, a missing package) is reported with the reason and
skipped. Run:

    python -m benchmarks.checks.gpu_speed --device cuda [--epoch] [--write-docs]
    python -m benchmarks.checks.gpu_speed --device cpu --quick          # smoke check anywhere
"""
from __future__ import annotations

import argparse
import gc
import itertools
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

import dgl_graphtx  # noqa: E402,F401  (before dgl)
from benchmarks.checks.authors import AuthorsNetwork, AuthorsUnavailable, build_authors_network, is_paired  # noqa: E402
from benchmarks.common import molecules as M  # noqa: E402
from benchmarks.common.report import default_csv, environment, format_table, markdown_table, print_environment, publish  # noqa: E402
from benchmarks.common.timing import median, time_repeats  # noqa: E402

from dgl_graphtx.datasets import MoleculeDataset, collate_molecule_tensors  # noqa: E402
from dgl_graphtx.devices import resolve_device  # noqa: E402
from dgl_graphtx.errors import ConfigError  # noqa: E402
from dgl_graphtx.models import PRESETS, Preset, build_model, get_preset  # noqa: E402
from dgl_graphtx.training.trainer import masked_loss  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
#: The presets timed by default: every variant at its papers' sizes (``--configs`` takes any ``variant-preset``).
DEFAULT_CONFIGS = ["grpe-tiny", "grpe-standard", "moire-2d", "moire-qm9", "gradformer-default", "gradformer-molhiv",
                   "vanilla-tiny", "graphormer-tiny"]
#: Heavy-atom ranges of the two molecule sizes.
SIZES = {"MolHIV-sized": (24, 27), "QM9-sized": (8, 9)}
COLUMNS = [("model", "model"), ("config", "preset / config"), ("molecules", "molecules"), ("batch", "batch"),
           ("params", "params"), ("train", "train graphs/s"), ("infer", "inference graphs/s"), ("peak_mib", "peak MiB"),
           ("train_ratio", "train ours/authors"), ("infer_ratio", "inference ours/authors")]
EPOCH_TARGET_S = 10.0


# -- molecules -----------------------------------------------------------------------------------

def _read_smiles(path: Path) -> List[str]:
    lines = [line.split(",")[0].strip() for line in Path(path).read_text().splitlines()]
    return [s for s in lines if s and s.upper() != "SMILES"]


class MoleculePools:
    """The distinct molecules of each size class (``--pool`` of them, read once per run) and
    the name of their source."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.pools: Dict[str, Tuple[List[str], str]] = {}

    def pool(self, size: str) -> Tuple[List[str], str]:
        if size not in self.pools:
            self.pools[size] = self._read(size)
        return self.pools[size]

    def _read(self, size: str) -> Tuple[List[str], str]:
        args, (low, high) = self.args, SIZES[size]
        if size == "QM9-sized":
            smiles, source = M.freesolv_smiles()[0], "FreeSolv"
        elif args.smiles is not None:
            smiles, source = _read_smiles(args.smiles), f"SMILES of {Path(args.smiles).name}"
        elif sorted(Path(args.moses_dir).glob("molsets-*.whl")):
            smiles, source = M.moses_smiles(Path(args.moses_dir), 10 * args.pool, seed=args.seed), "MOSES"
        else:
            print(f"no molsets wheel in {args.moses_dir} and no --smiles: MolHIV-sized molecules are joined from "
                  f"FreeSolv (pip download --no-deps molsets -d {args.moses_dir} for real ones)", flush=True)
            return M.zinc_like_smiles(args.pool, seed=args.seed, min_atoms=low, max_atoms=high), "FreeSolv joined"
        chosen = [s for s in smiles if "." not in s and low <= M.heavy_atoms(s) <= high]
        if not chosen:
            raise SystemExit(f"no molecule of {low}-{high} heavy atoms in {source}")
        random.Random(args.seed).shuffle(chosen)
        return chosen[: args.pool], source

    def draw(self, size: str, count: int) -> Tuple[List[str], str]:
        """``count`` molecules of ``size`` (the pool repeated when it is smaller) and their source."""
        smiles, source = self.pool(size)
        return M.repeat_to(smiles, count)[:count], source


def featurized_samples(preset: Preset, smiles: Sequence[str]) -> List[Any]:
    """Our ``(graph, relation_graph, labels, mask)`` samples with random regression targets."""
    data = MoleculeDataset(list(smiles), torch.randn(len(smiles), 1), featurizer=preset.featurizer,
                           relation=preset.relation, progress=False)
    return [data[i] for i in range(len(data))]


def mean_atoms(samples: Sequence[Any]) -> float:
    return sum(s[0].num_nodes() for s in samples) / len(samples)


# -- timing ----------------------------------------------------------------------------------------

@dataclass
class Measured:
    train: float
    infer: float
    peak_mib: float
    params: int


class Device:
    """The device with its synchronization and memory statistics (no-ops on the CPU)."""

    def __init__(self, name: str) -> None:
        self.device = resolve_device(name)
        self.cuda = self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def reset_peak(self) -> None:
        if self.cuda:
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)

    def peak_mib(self) -> float:
        return torch.cuda.max_memory_allocated(self.device) / 2**20 if self.cuda else float("nan")


def measure(model: torch.nn.Module, batches: Sequence[Any], forward: Callable[[torch.nn.Module, Any], torch.Tensor],
            loss_fn: Callable[[torch.Tensor, Any], torch.Tensor], batch_size: int, device: Device,
            args: argparse.Namespace) -> Measured:
    """Training and inference graphs/s of ``model`` over ``batches`` (cycled), and its peak memory."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    cycle = itertools.cycle(batches)

    def train_step() -> None:
        batch = next(cycle)
        loss = loss_fn(forward(model, batch), batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        device.sync()

    def infer_step() -> None:
        with torch.no_grad():
            forward(model, next(cycle))
        device.sync()

    model.train()
    train = median(time_repeats(train_step, args.repeats, args.warmup))
    model.eval()
    infer = median(time_repeats(infer_step, args.repeats, args.warmup))
    params = sum(p.numel() for p in model.parameters())
    return Measured(batch_size / train, batch_size / infer, device.peak_mib(), params)


def measure_ours(preset: Preset, chunks: Sequence[Sequence[Any]], device: Device, args: argparse.Namespace) -> Measured:
    device.reset_peak()
    torch.manual_seed(args.seed)
    model = build_model(preset.model).to(device.device)
    batches = [collate_molecule_tensors(list(c)).to(device.device) for c in chunks]
    task = preset.model.task
    return measure(model, batches, lambda net, b: net(b.graph, b.relation_graph),
                   lambda out, b: masked_loss(task, out, b.labels, b.mask), len(chunks[0]), device, args)


def measure_authors(variant: str, preset: Preset, chunks: Sequence[Sequence[Any]], device: Device,
                    args: argparse.Namespace) -> Tuple[AuthorsNetwork, Measured]:
    device.reset_peak()
    torch.manual_seed(args.seed)
    network = build_authors_network(variant, preset.model, [[s[0] for s in c] for c in chunks], args.authors_dir, device.device)
    targets = [torch.stack([s[2] for s in c]).to(device.device) for c in chunks]
    measured = measure(network.model, list(zip(network.batches, targets)), lambda net, pair: network.forward(net, pair[0]),
                       lambda out, pair: torch.nn.functional.mse_loss(out.view_as(pair[1]), pair[1]),
                       len(chunks[0]), device, args)
    return network, measured


# -- the table ---------------------------------------------------------------------------------------

def parse_config(name: str) -> Tuple[str, str]:
    variant, _, preset = name.partition("-")
    if variant not in PRESETS or preset not in PRESETS[variant]:
        choices = ", ".join(f"{v}-{p}" for v in PRESETS for p in PRESETS[v])
        raise SystemExit(f"unknown --configs entry {name!r}; choose from {choices}")
    return variant, preset


def run_config(name: str, size: str, pools: MoleculePools, device: Device, args: argparse.Namespace) -> List[Dict[str, object]]:
    """The rows of one preset on one molecule size: ours, then the authors' network if paired."""
    variant, preset_name = parse_config(name)
    preset = get_preset(variant, preset_name)
    batch_size = args.batch_size or preset.train.batch_size
    smiles, source = pools.draw(size, batch_size * args.batches)
    samples = featurized_samples(preset, smiles)
    chunks = [samples[i: i + batch_size] for i in range(0, len(samples), batch_size)]
    molecules = f"{size} ({source}, {mean_atoms(samples):.1f} atoms)"
    m = preset.model
    base = {"model": variant, "molecules": molecules, "batch": batch_size, "device": str(device.device)}
    ours = measure_ours(preset, chunks, device, args)
    rows: List[Dict[str, object]] = [{**base, "config": f"ours {preset_name} ({m.num_layers}/{m.hidden_dim}/{m.num_heads})",
                                      "params": ours.params, "train": ours.train, "infer": ours.infer,
                                      "peak_mib": ours.peak_mib}]
    if args.no_authors or not is_paired(variant, preset_name):
        return rows
    try:
        network, theirs = measure_authors(variant, preset, chunks, device, args)
    except AuthorsUnavailable as why:
        print(f"  skipped the authors' {variant} network: {why}", flush=True)
        return rows
    if network.note:
        print(f"  {network.label}: {network.note}")
    rows.append({**base, "model": network.label, "config": f"authors ({network.config})", "params": theirs.params, "train": theirs.train,
                 "infer": theirs.infer, "peak_mib": theirs.peak_mib, "train_ratio": ours.train / theirs.train,
                 "infer_ratio": ours.infer / theirs.infer})
    return rows


# -- one epoch -----------------------------------------------------------------------------------------

def time_epoch(pools: MoleculePools, device: Device, args: argparse.Namespace) -> Dict[str, object]:
    """One shuffled training epoch over ``--epoch-molecules`` molecules: seconds and graphs/s."""
    variant, preset_name = parse_config(args.epoch_config)
    preset = get_preset(variant, preset_name)
    smiles, source = pools.pool("MolHIV-sized")
    print(f"featurizing {len(smiles)} {source} molecules for the epoch ...", flush=True)
    pool = featurized_samples(preset, smiles)
    epoch = M.repeat_to(pool, args.epoch_molecules)[: args.epoch_molecules]
    loader = torch.utils.data.DataLoader(epoch, batch_size=preset.train.batch_size, shuffle=True,
                                         collate_fn=collate_molecule_tensors, num_workers=args.workers,
                                         pin_memory=device.cuda, generator=torch.Generator().manual_seed(args.seed))
    torch.manual_seed(args.seed)
    model = build_model(preset.model).to(device.device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=preset.train.lr, weight_decay=preset.train.weight_decay)
    task = preset.model.task

    def step(batch: Any) -> None:
        batch = batch.to(device.device, non_blocking=True)
        loss = masked_loss(task, model(batch.graph, batch.relation_graph), batch.labels, batch.mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for batch in itertools.islice(loader, args.warmup):
        step(batch)
    device.sync()
    start = time.perf_counter()
    for batch in loader:
        step(batch)
    device.sync()
    seconds = time.perf_counter() - start
    return {"config": args.epoch_config, "molecules": f"{len(epoch):,} MolHIV-sized ({source}, {mean_atoms(pool):.1f} atoms)",
            "batch": preset.train.batch_size, "workers": args.workers, "epoch_s": seconds,
            "graphs_s": len(epoch) / seconds, "target": f"< {EPOCH_TARGET_S:.0f} s: {'met' if seconds < EPOCH_TARGET_S else 'not met'}"}


EPOCH_COLUMNS = [("config", "preset"), ("molecules", "molecules"), ("batch", "batch"), ("workers", "loader workers"),
                 ("epoch_s", "epoch s"), ("graphs_s", "graphs/s"), ("target", "target")]


def device_name(device: Device) -> str:
    if device.cuda:
        return torch.cuda.get_device_name(device.device)
    return f"CPU ({torch.get_num_threads()} torch thread(s))"


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:1, cpu ... (default: cuda)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke check: batch 4, 2 batches, 1 warm-up, 2 repeats, 16 molecules per size, "
                             "the default presets but grpe-standard and moire-qm9 (unless --configs)")
    parser.add_argument("--configs", nargs="+", default=None, metavar="VARIANT-PRESET",
                        help=f"presets to time (default: {' '.join(DEFAULT_CONFIGS)})")
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES), help="molecule sizes")
    parser.add_argument("--batch-size", type=int, default=None, help="molecules per batch (default: each preset's recipe)")
    parser.add_argument("--batches", type=int, default=8, help="distinct batches per network (cycled)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps")
    parser.add_argument("--repeats", type=int, default=20, help="timed steps (median reported)")
    parser.add_argument("--authors-dir", type=Path, default=REPO / ".cache" / "authors",
                        help="folder of the authors' checkouts GRPE/, Gradformer/, RadialFocus/ (see the docstring)")
    parser.add_argument("--no-authors", action="store_true", help="time our networks only")
    parser.add_argument("--pool", type=int, default=2_000, help="distinct molecules per size (default 2,000)")
    parser.add_argument("--smiles", type=Path, default=None,
                        help="SMILES to draw MolHIV-sized molecules from (one per line or first CSV column)")
    parser.add_argument("--moses-dir", type=Path, default=REPO / ".cache" / "moses",
                        help="folder of the molsets wheel (MOSES SMILES) when no --smiles is given")
    parser.add_argument("--epoch", action="store_true", help="also time one training epoch (see --epoch-*)")
    parser.add_argument("--epoch-config", default="gradformer-molhiv", help="preset of the epoch (default gradformer-molhiv)")
    parser.add_argument("--epoch-molecules", type=int, default=33_000, help="molecules in the epoch (default 33,000)")
    parser.add_argument("--workers", type=int, default=4, help="DataLoader workers of the epoch")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, default=None, help="CSV output; default benchmarks/results/gpu_speed.csv")
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md (not with --quick)")
    parser.add_argument("--step-modes", action="store_true",
                        help="also rows of our step modes (eager / no-sync / captured / compiled, step_modes.py)")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch_size, args.batches, args.warmup, args.repeats = args.batch_size or 4, 2, 1, 2
        args.epoch_molecules, args.pool, args.workers = min(args.epoch_molecules, 16), min(args.pool, 16), 0
    configs = args.configs or ([c for c in DEFAULT_CONFIGS if c != "grpe-standard" and c != "moire-qm9"] if args.quick
                               else DEFAULT_CONFIGS)
    for name in configs + [args.epoch_config]:
        parse_config(name)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        device = Device(args.device)
    except ConfigError as err:
        raise SystemExit(f"--device: {err}") from None
    env = {**environment(), "device": device_name(device)}
    print_environment(env, "GPU speed (ours on the tensor path, the authors' networks beside)")
    pools = MoleculePools(args)
    rows: List[Dict[str, object]] = []
    for name in configs:
        for size in args.sizes:
            print(f"-- {name}, {size}", flush=True)
            new = run_config(name, size, pools, device, args)
            print(format_table(new, COLUMNS), flush=True)
            rows += new
    print()
    print(format_table(rows, COLUMNS))
    intro = [
        "#### GPU speed (`benchmarks/checks/gpu_speed.py`)", "",
        f"Device: **{env['device']}**; torch {env['torch']}, dgl {env['dgl']}, {env['date'][:10]}. Ours on the tensor "
        "compute path; the authors' networks imported from their repositories at the pinned commits, fed the same "
        f"molecules in their own batch formats. Median of {args.repeats} steps after {args.warmup} warm-up step(s) over "
        f"{args.batches} distinct batches of {f'{args.batch_size} molecules' if args.batch_size else 'each preset recipe size'}; "
        "a training step is forward, MSE loss, backward and AdamW; peak memory is `torch.cuda.max_memory_allocated` "
        "over each network's run. Targets: train ours/authors >= 2 on an H100; an epoch over 33k MolHIV-sized "
        f"molecules in under {EPOCH_TARGET_S:.0f} s.",
    ]
    epoch_rows: List[Dict[str, object]] = []
    if args.epoch:
        epoch_rows = [time_epoch(pools, device, args)]
        print(format_table(epoch_rows, EPOCH_COLUMNS))
        intro_epoch = ["", "One shuffled training epoch (DataLoader with the tensor `collate_fn`, host-to-device copies "
                       "included; molecules of the pool repeated):", "", markdown_table(epoch_rows, EPOCH_COLUMNS), "",
                       "Per network:"]
    else:
        intro_epoch = []
    publish("gpu_speed", rows, COLUMNS, env, args.csv or default_csv("gpu_speed", args.quick), intro + intro_epoch,
            update_docs=args.write_docs and not args.quick)
    if args.step_modes:
        from benchmarks.checks import step_modes  # the step modes' own rows, on the same device

        step_modes.main(["--device", args.device, *(["--smiles", str(args.smiles)] if args.smiles else []),
                         *(["--batches", "2", "--repeats", "2", "--modes", "eager", "no-sync"] if args.quick else [])])
    return rows + epoch_rows


if __name__ == "__main__":
    main()
