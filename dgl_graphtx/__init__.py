"""dgl_graphtx: graph transformers with structure-aware sparse attention on DGL relation graphs."""
from . import _ogb  # noqa: F401  (imports ogb, which dgl imports too, without its network version check)
from . import _dgl_env  # noqa: F401  (selects DGL's PyTorch backend before dgl is imported)
from ._version import __version__

__all__ = ["__version__"]
