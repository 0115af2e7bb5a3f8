"""Select DGL's PyTorch backend before :mod:`dgl` is imported anywhere in the package."""
import os

os.environ.setdefault("DGLBACKEND", "pytorch")
