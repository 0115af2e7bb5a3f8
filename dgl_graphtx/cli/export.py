"""``dgl-graphtx export``: a trained model as one file that runs without DGL and without this package."""
from __future__ import annotations

import argparse

from ..inference.export import CHECK_MOLECULES, export_model
from .common import add_logging_options
from .molecule_io import add_checkpoint_option


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``export`` sub-command to ``sub``."""
    export = sub.add_parser(
        "export", help="write a trained model to one file (.pt2 torch.export, or .onnx) that runs without DGL",
        description="Export the model of a checkpoint as one file: .pt2 (torch.export of the plain-tensor compute path) "
                    "or .onnx (needs dgl_graphtx[onnx]); graphtx_portable.py, the featurizer and loader that need only "
                    "PyTorch (or ONNX Runtime), RDKit and NumPy, is written beside it. The file is loaded back and checked "
                    f"against the checkpoint on {CHECK_MOLECULES} FreeSolv molecules (docs/export.md).",
    )
    add_checkpoint_option(export, ensembles=False)
    export.add_argument("--out", required=True, help="the exported file: model.pt2 or model.onnx")
    add_logging_options(export)
    export.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``export`` with parsed ``args``."""
    done = export_model(args.checkpoint, args.out)
    print(f"wrote {done.path} ({done.size / 1e6:.2f} MB) and {done.featurizer}; largest difference from the checkpoint's "
          f"predictions on {CHECK_MOLECULES} FreeSolv molecules: {done.max_difference:.2g}")
    return 0
