"""``python -m dgl_graphtx``: the ``dgl-graphtx`` command, also as torchrun's module entry point
(``torchrun --nproc-per-node N -m dgl_graphtx train ...``).

The entry point is wrapped in torch's ``record``, so an uncaught exception in one process is
written where the elastic launcher finds it and shown in its summary of the failed job; a process
of a torchrun job that finished ends without the interpreter's shutdown
(:func:`~dgl_graphtx.runs.distributed.end_process`).
"""
import sys

from torch.distributed.elastic.multiprocessing.errors import record

from .cli import console_main
from .runs.distributed import end_process, launched_by_torchrun

if __name__ == "__main__":
    code = record(console_main)()
    if launched_by_torchrun():
        end_process(code or 0)
    sys.exit(code)
