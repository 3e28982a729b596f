"""Streaming kernel PCA (paper 004): SKPCA, RNCA and streaming Nystrom, in one pass."""

from kernelscale._lazy import lazy_exports
from kernelscale.streaming.baselines import RNCA, StreamingNystrom
from kernelscale.streaming.distributed import streaming_kpca_distributed
from kernelscale.streaming.frequent_directions import FrequentDirections
from kernelscale.streaming.methods import build_method
from kernelscale.streaming.skpca import SKPCA, StreamingMethod

# The estimator (a scikit-learn class) and its model files load on first use, so the
# command line and the protocol modules do not import scikit-learn.
__getattr__, __dir__ = lazy_exports(__name__, {
    name: "kernelscale.streaming.estimator"
    for name in ("MODEL_TYPE", "StreamingKernelPCA", "load_streaming_model",
                 "save_streaming_model")})

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
