"""Triton kernels of tinit, shipped as ``tinit.triton_kernels``."""
