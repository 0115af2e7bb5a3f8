"""Attention layers over relation graphs: one skeleton, variant terms plugged in."""
from .attention import RelationAttention, ScoreTerms, StructureTerm
from .focus import FOCUS_FUNCTIONS
from .gradformer import DecayParameters, DecayTerm, GradformerAttention
from .graph_tensors import GraphTensors
from .graphormer import GraphormerAttention, GraphormerBias
from .grpe import GRPEAttention, GRPEEncodings, GRPETerm
from .moire import MoireAttention, MoireTerm
from .pair_classes import SpatialClasses, authors_diagonal

__all__ = [
    "DecayParameters",
    "DecayTerm",
    "FOCUS_FUNCTIONS",
    "GRPEAttention",
    "GRPEEncodings",
    "GRPETerm",
    "GradformerAttention",
    "GraphTensors",
    "GraphormerAttention",
    "GraphormerBias",
    "MoireAttention",
    "MoireTerm",
    "RelationAttention",
    "SpatialClasses",
    "ScoreTerms",
    "StructureTerm",
    "authors_diagonal",
]
