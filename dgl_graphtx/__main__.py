"""``python -m dgl_graphtx``: the ``dgl-graphtx`` command, also as torchrun's module entry point
(``torchrun --nproc-per-node N -m dgl_graphtx train ...``); see :func:`dgl_graphtx.console.module_main`."""
import sys

from .console import module_main

if __name__ == "__main__":
    sys.exit(module_main())
