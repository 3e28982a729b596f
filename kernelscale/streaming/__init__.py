"""Streaming kernel PCA (paper 004): SKPCA, RNCA and streaming Nystrom, in one pass."""

from kernelscale.streaming.baselines import RNCA, StreamingNystrom
from kernelscale.streaming.distributed import streaming_kpca_distributed
from kernelscale.streaming.estimator import (
    MODEL_TYPE,
    StreamingKernelPCA,
    build_method,
    load_streaming_model,
    save_streaming_model,
)
from kernelscale.streaming.frequent_directions import FrequentDirections
from kernelscale.streaming.skpca import SKPCA, StreamingMethod

__all__ = [
    "MODEL_TYPE",
    "RNCA",
    "SKPCA",
    "FrequentDirections",
    "StreamingKernelPCA",
    "StreamingMethod",
    "StreamingNystrom",
    "build_method",
    "load_streaming_model",
    "save_streaming_model",
    "streaming_kpca_distributed",
]
