"""cusync-gen: generate tile-synchronized CUDA/CUTLASS GEMM chains (cuSync) from a YAML spec."""

__version__ = "0.1.0"
