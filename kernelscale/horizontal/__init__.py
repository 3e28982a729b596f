"""Kernel PCA over horizontal partitions: disKPCA and its baselines (papers 000/001)."""

from kernelscale.horizontal.diskpca import diskpca

__all__ = ["diskpca"]
