"""Triton kernels of tinit, shipped as ``tinit.triton_kernels``.

Modules:
    philox                the Philox4x32-10 stream: rounds, counter-block layout, 64-bit scalars as int32 halves
    transform             the truncated-normal transform (the KernelParams record, MODE_* constexprs) and the store
    trunc_normal          the single-tensor fill (op ``tinit::trunc_normal_triton_``) and the raw stream words
    trunc_normal_grouped  many tensors, or a shard's row runs, in one launch per dtype
    _host                 host-side helpers both fills share (triton import, argument checks, table upload)
"""

# The API is in the modules: trunc_normal (the one-tensor fill, the stream words, what the dispatcher
# asks) and trunc_normal_grouped (many tensors, a shard's runs); the package adds no name.
__all__: list[str] = []
