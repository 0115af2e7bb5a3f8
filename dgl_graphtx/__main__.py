"""``python -m dgl_graphtx``: the ``dgl-graphtx`` command, also as torchrun's module entry point
(``torchrun --nproc-per-node N -m dgl_graphtx train ...``).

The entry point is wrapped in torch's ``record``, so an uncaught exception in one process is
written where the elastic launcher finds it and shown in its summary of the failed job.
"""
import sys

from torch.distributed.elastic.multiprocessing.errors import record

from .cli import main

if __name__ == "__main__":
    sys.exit(record(main)())
