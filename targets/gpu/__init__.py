"""Shared GPU lowering (CUDA and ROCm): kernels from ember's fusion groups, a host launch
plan in Python, and a host executor that runs the NVVM-lowered kernels on the CPU for
tests."""
