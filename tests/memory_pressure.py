"""Stand-ins for a model under memory pressure, shared by the prediction and embedding tests."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from rdkit import Chem

CPU_OUT_OF_MEMORY = "[enforce fail at alloc_cpu.cpp:83] DefaultCPUAllocator: can't allocate memory: you tried to allocate 9 GB"


def out_of_memory_above(real: Callable, max_atoms: int, message: str = CPU_OUT_OF_MEMORY) -> Callable:
    """``real(graph, relation)``, but raising torch's out-of-memory error for batches whose largest
    molecule has more than ``max_atoms`` atoms."""

    def tight_memory(graph, relation):
        if int(graph.batch_num_nodes().max()) > max_atoms:
            raise RuntimeError(message)
        return real(graph, relation)

    return tight_memory


def broken(graph, relation):
    """A model step failing with an error that is not about memory."""
    raise RuntimeError("shape mismatch: a bug, not a memory problem")


def larger_than(smiles: Sequence[str], max_atoms: int) -> np.ndarray:
    """Which molecules have more than ``max_atoms`` heavy atoms (some but not all, or the test proves nothing)."""
    sizes = np.array([Chem.MolFromSmiles(s).GetNumAtoms() for s in smiles])
    culprits = sizes > max_atoms
    assert culprits.any() and not culprits.all()
    return culprits
