"""dgl_graphtx: graph transformers with structure-aware sparse attention on DGL relation graphs."""
import os

from . import _dgl_env
from ._version import __version__

os.environ.setdefault("DGLBACKEND", "pytorch")  # DGL's PyTorch backend, before dgl is imported
_dgl_env.install()  # also done at start-up by dgl_graphtx-graphbolt.pth where the package is installed

from . import _ogb  # noqa: E402,F401  (imports ogb, which dgl imports too, without its network version check)

__all__ = ["__version__"]
