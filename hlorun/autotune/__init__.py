"""The autotuner's model of GEMM backends: problems, candidates, costs,
selection, caches and XLA log/dump readers."""
