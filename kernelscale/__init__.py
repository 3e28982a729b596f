"""kernelscale: kernel PCA and kernel clustering for data that cannot be brought to one place."""

__version__ = "0.1.0"
