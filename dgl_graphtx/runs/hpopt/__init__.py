"""Hyperparameter search with Optuna (``pip install "dgl_graphtx[hpopt]"``): TPE sampling, pruning
on per-epoch validation, resumable journal storage, parallel trials in processes."""
from .search import SearchResult, SearchSettings, hyperparameter_search
from .space import COMMON, Param, as_overrides, search_space

__all__ = ["COMMON", "Param", "SearchResult", "SearchSettings", "as_overrides",
           "hyperparameter_search", "search_space"]
