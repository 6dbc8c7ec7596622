"""Target-independent part of ember: capture, import to MLIR, fusion passes, pipelines."""
