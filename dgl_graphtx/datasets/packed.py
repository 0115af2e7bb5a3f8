"""Many small graphs stored as flat tensors, batched without building one DGLGraph per graph.

:class:`PackedGraphs` keeps the edges and features of all graphs concatenated (CSR-style
offsets), which makes a cache a handful of tensors (fast to save and load with
``torch.load(weights_only=True)``) and turns batching into a few vectorised gathers followed by
one ``dgl.graph`` call: the result is identical to ``dgl.batch`` of the individual graphs.
"""
from __future__ import annotations

from typing import Dict, Sequence, Union

import torch
import dgl

Indices = Union[Sequence[int], torch.Tensor]


def _exclusive_cumsum(counts: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(counts, 0) - counts


def _segment_gather_index(starts: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Concatenation of ``arange(s, s + c)`` for each (start, count) pair."""
    total = int(counts.sum())
    seg_offsets = torch.repeat_interleave(_exclusive_cumsum(counts), counts, output_size=total)
    seg_starts = torch.repeat_interleave(starts, counts, output_size=total)
    return seg_starts + torch.arange(total, dtype=torch.int64) - seg_offsets


class PackedGraphs:
    """A list of homogeneous DGLGraphs with identical feature schemes, stored flat.

    Args:
        num_nodes: ``[M]`` node count of each graph.
        num_edges: ``[M]`` edge count of each graph.
        src, dst: ``[sum E]`` local (per-graph) endpoint ids.
        ndata, edata: feature tensors with ``sum N`` / ``sum E`` rows.

    Example:
        >>> import dgl, torch
        >>> gs = [dgl.graph(([0], [1]), num_nodes=2), dgl.graph(([0, 1], [1, 2]), num_nodes=3)]
        >>> packed = PackedGraphs.from_graphs(gs)
        >>> b = packed.batch([1, 0])
        >>> b.batch_size, b.batch_num_nodes().tolist(), b.edges()[1].tolist()
        (2, [3, 2], [1, 2, 4])
    """

    def __init__(
        self,
        num_nodes: torch.Tensor,
        num_edges: torch.Tensor,
        src: torch.Tensor,
        dst: torch.Tensor,
        ndata: Dict[str, torch.Tensor],
        edata: Dict[str, torch.Tensor],
    ) -> None:
        self.num_nodes = num_nodes.to(torch.int64)
        self.num_edges = num_edges.to(torch.int64)
        self.src = src.to(torch.int32)
        self.dst = dst.to(torch.int32)
        self.ndata = dict(ndata)
        self.edata = dict(edata)
        #: Per-graph rows (``[num_graphs, ...]``, e.g. molecule-level extra features), copied to
        #: every node of their graph as ``ndata`` when graphs are taken out; not part of the state.
        self.graph_data: Dict[str, torch.Tensor] = {}
        self.node_offsets = _exclusive_cumsum(self.num_nodes)
        self.edge_offsets = _exclusive_cumsum(self.num_edges)
        total_n, total_e = int(self.num_nodes.sum()), int(self.num_edges.sum())
        if len(self.src) != total_e or len(self.dst) != total_e:
            raise ValueError("src/dst length does not match num_edges")
        for key, value in self.ndata.items():
            if value.shape[0] != total_n:
                raise ValueError(f"ndata[{key!r}] has {value.shape[0]} rows, expected {total_n}")
        for key, value in self.edata.items():
            if value.shape[0] != total_e:
                raise ValueError(f"edata[{key!r}] has {value.shape[0]} rows, expected {total_e}")

    @classmethod
    def from_graphs(cls, graphs: Sequence[dgl.DGLGraph]) -> "PackedGraphs":
        """Pack unbatched graphs; all must share node and edge feature keys, shapes and dtypes."""
        if not graphs:
            raise ValueError("cannot pack an empty list of graphs")
        nkeys, ekeys = set(graphs[0].ndata.keys()), set(graphs[0].edata.keys())
        for i, g in enumerate(graphs):
            if set(g.ndata.keys()) != nkeys or set(g.edata.keys()) != ekeys:
                raise ValueError(f"graph {i} has feature keys different from graph 0")
        edges = [g.edges() for g in graphs]
        return cls(
            num_nodes=torch.tensor([g.num_nodes() for g in graphs], dtype=torch.int64),
            num_edges=torch.tensor([g.num_edges() for g in graphs], dtype=torch.int64),
            src=torch.cat([s.to(torch.int32) for s, _ in edges]),
            dst=torch.cat([d.to(torch.int32) for _, d in edges]),
            ndata={k: torch.cat([g.ndata[k] for g in graphs]) for k in nkeys},
            edata={k: torch.cat([g.edata[k] for g in graphs]) for k in ekeys},
        )

    @classmethod
    def joined(cls, parts: Sequence["PackedGraphs"]) -> "PackedGraphs":
        """The graphs of ``parts``, one after the other (all must share feature keys and dtypes).

        Example:
            >>> import dgl
            >>> gs = [dgl.graph(([0], [1]), num_nodes=2), dgl.graph(([0, 1], [1, 2]), num_nodes=3)]
            >>> PackedGraphs.joined([PackedGraphs.from_graphs(gs[:1]), PackedGraphs.from_graphs(gs[1:])]).num_nodes.tolist()
            [2, 3]
        """
        if not parts:
            raise ValueError("cannot join zero packed graphs")
        first = parts[0]
        for i, part in enumerate(parts):
            if part.ndata.keys() != first.ndata.keys() or part.edata.keys() != first.edata.keys():
                raise ValueError(f"packed graphs {i} have feature keys different from packed graphs 0")
        return cls(
            num_nodes=torch.cat([p.num_nodes for p in parts]),
            num_edges=torch.cat([p.num_edges for p in parts]),
            src=torch.cat([p.src for p in parts]),
            dst=torch.cat([p.dst for p in parts]),
            ndata={k: torch.cat([p.ndata[k] for p in parts]) for k in first.ndata},
            edata={k: torch.cat([p.edata[k] for p in parts]) for k in first.edata},
        )

    def __len__(self) -> int:
        return len(self.num_nodes)

    def __getitem__(self, index: int) -> dgl.DGLGraph:
        index = int(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"graph index {index} out of range for {len(self)} graphs")
        index %= len(self)
        n0, n = int(self.node_offsets[index]), int(self.num_nodes[index])
        e0, e = int(self.edge_offsets[index]), int(self.num_edges[index])
        g = dgl.graph(
            (self.src[e0 : e0 + e].long(), self.dst[e0 : e0 + e].long()), num_nodes=n, idtype=torch.int64
        )
        for key, value in self.ndata.items():
            g.ndata[key] = value[n0 : n0 + n]
        for key, value in self.graph_data.items():
            g.ndata[key] = value[index].expand(n, *value.shape[1:]).contiguous()
        for key, value in self.edata.items():
            g.edata[key] = value[e0 : e0 + e]
        return g

    def batch(self, indices: Indices) -> dgl.DGLGraph:
        """One batched graph of the selected graphs, equal to ``dgl.batch([self[i] for i in indices])``."""
        idx = torch.as_tensor(indices, dtype=torch.int64).reshape(-1)
        if idx.numel() == 0:
            raise ValueError("cannot batch zero graphs")
        if (idx < 0).any() or (idx >= len(self)).any():
            raise IndexError(f"graph indices out of range for {len(self)} graphs")
        n_sel, e_sel = self.num_nodes[idx], self.num_edges[idx]
        node_idx = _segment_gather_index(self.node_offsets[idx], n_sel)
        edge_idx = _segment_gather_index(self.edge_offsets[idx], e_sel)
        shift = torch.repeat_interleave(_exclusive_cumsum(n_sel), e_sel, output_size=edge_idx.numel())
        g = dgl.graph(
            (self.src[edge_idx].long() + shift, self.dst[edge_idx].long() + shift),
            num_nodes=int(n_sel.sum()),
            idtype=torch.int64,
        )
        for key, value in self.ndata.items():
            g.ndata[key] = value[node_idx]
        for key, value in self.graph_data.items():
            g.ndata[key] = torch.repeat_interleave(value[idx], n_sel, dim=0, output_size=node_idx.numel())
        for key, value in self.edata.items():
            g.edata[key] = value[edge_idx]
        g.set_batch_num_nodes(n_sel)
        g.set_batch_num_edges(e_sel)
        return g

    def state_dict(self) -> Dict[str, object]:
        """Plain tensors and dicts, loadable with ``torch.load(..., weights_only=True)``."""
        return {
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "src": self.src,
            "dst": self.dst,
            "ndata": self.ndata,
            "edata": self.edata,
        }

    @classmethod
    def from_state_dict(cls, state: Dict[str, object]) -> "PackedGraphs":
        """Inverse of :meth:`state_dict`."""
        return cls(**state)  # type: ignore[arg-type]  # state_dict's values, typed object there, are this class's fields
