"""Triton backend of tinit: the single-tensor fill and the raw stream words.

Its other backends, callers, tests and benchmarks: CONTRIBUTING.md, "Where each op lives".

The kernel computes exactly what the CPU op computes: the stream of ``tinit::philox4x32_10``
(``philox``: key = seed, counter = (block, stream), four words per Philox call) and the float path
of ``tinit::trunc_normal_value`` (``transform``, stream version 2), from IEEE basic operations only.
Launches pass ``enable_fp_fusion=False`` so that no multiply-add is contracted beyond the explicit
ones, as the C++ build does with ``-ffp-contract=off``. On a GPU the values are therefore
bit-identical to the CPU kernel's for fp32, bf16 and fp16 tensors (all computed in fp32, rounded
once on store); under ``TRITON_INTERPRET=1`` they are too (the interpreter's ``tl.fma`` is a true
fused multiply-add). fp64 tensors are not supported by this backend (the C++ ``double`` path, AS 241 with fdlibm's
``log`` and a Newton refinement, is not ported to Triton).

The fill is registered as the op ``torch.ops.tinit.trunc_normal_triton_``
(``torch.library.triton_op`` + ``wrap_triton``), so it can be traced by
``make_fx``/``torch.export`` and checked with ``torch.library.opcheck``.
Importing this module never requires triton; calling it without triton
raises ImportError.
"""

from __future__ import annotations

import torch

from tinit.ops import as_int64

from ._host import (
    DEFAULT_BLOCK,
    IMPORT_ERROR,
    INSTALL_HINT,
    INTERPRETER_BLOCK as _INTERPRETER_BLOCK,
    LAUNCH_OPTIONS,
    NUM_WARPS,
    SUPPORTED_DTYPES,
    check_block,
    check_stream_range,
    dtype_refusal,
    is_interpreted,
    ndtri_table_made_on,
    ndtri_table_on,
    on_device,
    require_triton,
    schema_int,
    tl,
    triton,
    triton_available,
)
from .philox import grid, stream_args
from .transform import kernel_constants

# The API: the launchers and what the dispatcher asks. DEFAULT_BLOCK, WORDS_BLOCK, LAUNCH_OPTIONS,
# FLOAT_FIELDS and OP_NAME stay module attributes for the SASS budget and the tests.
__all__ = [
    "philox_words_triton",
    "trunc_normal_triton_",
]

OP_NAME = "tinit::trunc_normal_triton_"
# The words kernel has no transform to keep in registers: larger programs
# spread its set-up over more words.
WORDS_BLOCK = 1024


def interpreted() -> bool:
    """Whether the kernels of this module run in the Triton interpreter.

    That is decided when the module is imported: ``TRITON_INTERPRET=1`` must
    be set before then.

    Returns:
        True for interpreted kernels, False for compiled ones or without triton.
    """
    return is_interpreted(_trunc_normal_kernel) if triton_available() else False


def why_not(tensor: torch.Tensor) -> str | None:
    """None when this backend can fill ``tensor``, otherwise the reason.

    Args:
        tensor: the tensor to be filled.

    Returns:
        None, or a one-line reason (triton missing, dtype, device).
    """
    if not triton_available():
        return f"{IMPORT_ERROR}; {INSTALL_HINT}"
    if tensor.dtype not in SUPPORTED_DTYPES:
        why = "the fp64 transform (the C++ double path) is not ported to Triton"
        return f"{dtype_refusal(tensor.dtype)} ({why})"
    if tensor.device.type == "cpu" and not interpreted():
        return "runs on GPU tensors (CPU tensors only under TRITON_INTERPRET=1, set before import)"
    return None


def _check_target(tensor: torch.Tensor, offset: int, what: str) -> None:
    """ValueError for a non-contiguous tensor, a negative offset or stream indices past 2**63."""
    if not tensor.is_contiguous():
        raise ValueError(f"{what}: expected a contiguous tensor (tinit.ops copies views)")
    if offset < 0:
        raise ValueError(f"{what}: offset must be >= 0, got {offset}")
    check_stream_range(offset, tensor.numel(), what)


if triton is not None:
    from .philox import in_tensor, join_u64, philox4x32_10, stream_words, u32
    from .transform import KernelParams, store_block, trunc_normal_value, vector_base

    # --------------------------------------------------------------- kernels

    # out_ptr is not specialised on its alignment: vector_base finds the vector path at run time,
    # so a view at any address takes the same code (no variant with element stores only).
    @triton.jit(
        do_not_specialize_on_alignment=["out_ptr"],
        do_not_specialize=[
            "numel",
            "seed_lo",
            "seed_hi",
            "stream_lo",
            "stream_hi",
            "offset_lo",
            "offset_hi",
            "flip",
            "split",
        ],
    )
    def _trunc_normal_kernel(
        out_ptr,
        table_ptr,
        numel,
        seed_lo,
        seed_hi,
        stream_lo,
        stream_hi,
        offset_lo,
        offset_hi,
        flip,
        split,
        a_cdf,
        b_sf,
        a_half,
        b_half,
        step,
        mean,
        sd_hi,
        sd_lo,
        scale,
        lo,
        hi,
        edge,
        width,
        slope,
        b0,
        ratio,
        l1,
        l2,
        l3,
        l4,
        l5,
        MODE: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        """Fill out[0:numel] with the values of stream indices offset + [0, numel).

        Args (device): out_ptr: fp32/bf16/fp16 tensor. table_ptr: fp32
        ndtri_table rows. numel: int. seed, stream, offset: uint64 as two
        int32 bit patterns each. flip, split, a_cdf, ..., l5: the fields of
        ``KernelParams`` (tinit::TruncNormalParams<float>) of the same names,
        flip and split as int32 bits. MODE: tinit::TransformMode. BLOCK:
        counter blocks per program (4 BLOCK elements).
        """
        # The record's fields arrive as scalars and travel as one KernelParams from here on. A
        # tuple kernel argument would be specialised as a whole (do_not_specialize names
        # parameters, not tuple elements: flip and split must not be) and would change the
        # launch's keyword arguments, which kernel_constants and the SASS budget give by name.
        P = KernelParams(
            flip,
            split,
            a_cdf,
            b_sf,
            a_half,
            b_half,
            step,
            mean,
            sd_hi,
            sd_lo,
            scale,
            lo,
            hi,
            edge,
            width,
            slope,
            b0,
            ratio,
            l1,
            l2,
            l3,
            l4,
            l5,
        )
        r0, r1, r2, r3, start = stream_words(seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, BLOCK)
        x0 = trunc_normal_value(r0, table_ptr, P, MODE)
        x1 = trunc_normal_value(r1, table_ptr, P, MODE)
        x2 = trunc_normal_value(r2, table_ptr, P, MODE)
        x3 = trunc_normal_value(r3, table_ptr, P, MODE)
        vec_ptr, aligned = vector_base(out_ptr, offset_lo)
        base = tl.program_id(0).to(tl.int64) * (4 * BLOCK)
        store_block(out_ptr, vec_ptr, base, aligned, start, numel, x0, x1, x2, x3, BLOCK)

    @triton.jit(do_not_specialize=["numel", "seed_lo", "seed_hi", "stream_lo", "stream_hi", "offset_lo", "offset_hi"])
    def _philox_kernel(
        out_ptr, numel, seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, BLOCK: tl.constexpr
    ):
        """Raw stream words of indices offset + [0, numel) into an int32 tensor (uint32 bits).

        Word k of every block is stored by its own strided store (out[4 b + k]): the four
        words stay in the layout of the Philox call, so there is no layout conversion, at four
        4-byte stores a block (the fills' misaligned path, ``transform.store_block``).
        """
        pid = tl.program_id(0).to(tl.int64)
        off = join_u64(offset_lo, offset_hi).to(tl.int64)  # < 2**63
        blk = (off >> 2) + pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
        zero = tl.full([BLOCK], 0, tl.uint32)
        r0, r1, r2, r3 = philox4x32_10(
            blk.to(tl.uint32),
            (blk >> 32).to(tl.uint32),
            zero + u32(stream_lo),
            zero + u32(stream_hi),
            u32(seed_lo),
            u32(seed_hi),
        )
        start = pid * (4 * BLOCK) - (off & 3)  # tensor element of the program's first word
        local = tl.arange(0, BLOCK) * 4
        if (start >= 0) & (start + 4 * BLOCK <= numel):
            _store_word(out_ptr + start, local, r0, None)
            _store_word(out_ptr + start, local + 1, r1, None)
            _store_word(out_ptr + start, local + 2, r2, None)
            _store_word(out_ptr + start, local + 3, r3, None)
        else:
            _store_word(out_ptr + start, local, r0, in_tensor(local, start, numel, 4 * BLOCK))
            _store_word(out_ptr + start, local + 1, r1, in_tensor(local + 1, start, numel, 4 * BLOCK))
            _store_word(out_ptr + start, local + 2, r2, in_tensor(local + 2, start, numel, 4 * BLOCK))
            _store_word(out_ptr + start, local + 3, r3, in_tensor(local + 3, start, numel, 4 * BLOCK))

    @triton.jit
    def _store_word(ptr, local, word, mask):
        """Store uint32 words at ptr + local (where mask) as int32 bits."""
        tl.store(ptr + local, word.to(tl.int32, bitcast=True), mask=mask)

    # ---------------------------------------------------------------- the op

    def _launch(
        tensor: torch.Tensor,
        seed: int,
        stream: int,
        offset: int,
        constants,
        block: int,
        wrap,
        table: torch.Tensor | None = None,
    ) -> None:
        """One launch of ``_trunc_normal_kernel`` over ``tensor`` (non-empty, checked by ``_fill``);
        malformed constants raise before it."""
        args = kernel_constants(constants)
        kernel = wrap(_trunc_normal_kernel)
        if table is None:
            table = ndtri_table_on(tensor.device)
        with on_device(tensor.device):
            kernel[grid(tensor.numel(), offset, block)](
                tensor,
                table,
                tensor.numel(),
                **stream_args(seed, stream, offset),
                **args,
                BLOCK=block,
                **LAUNCH_OPTIONS,
            )

    def _is_fake(tensor: torch.Tensor) -> bool:
        from torch._subclasses.fake_tensor import is_fake

        return tensor.device.type == "meta" or is_fake(tensor)

    def _fill(tensor: torch.Tensor, seed: int, stream: int, offset: int, constants, block, wrap) -> None:
        """The checks, then the launch: the one body of the op and of a launch with a given ``block``.

        seed and stream are int64 bits of the uint64 values; ``wrap`` is ``torch.library.wrap_triton``
        inside the op, the identity outside it.
        """
        if tensor.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{OP_NAME}: {why_not(tensor) or tensor.dtype}")
        _check_target(tensor, offset, OP_NAME)
        # The interpreter runs the kernel in Python on the tensor's storage,
        # which fake and meta tensors do not have; a compiled kernel goes
        # through wrap_triton's higher-order op, whose fake kernel does
        # nothing. A mutation-only op has no output shape to compute.
        fake = _is_fake(tensor)
        if tensor.numel() == 0 or (interpreted() and fake):
            kernel_constants(constants)  # refused as a launch refuses them (_launch's first step)
            return
        # Traced (fake tensors): the table is made in the trace, where the
        # cached real tensor would be foreign to its fake mode.
        table = ndtri_table_made_on(tensor.device) if fake else ndtri_table_on(tensor.device)
        if block is None:
            block = _INTERPRETER_BLOCK if interpreted() else DEFAULT_BLOCK
        _launch(tensor, seed, stream, offset, constants, block, wrap, table)

    @torch.library.triton_op(OP_NAME, mutates_args={"tensor"})
    def _trunc_normal_triton_op(
        tensor: torch.Tensor, seed: int, stream: int, offset: int, constants: list[float]
    ) -> None:
        """Registered body of ``torch.ops.tinit.trunc_normal_triton_``: every check, then the launch.

        seed and stream arrive as int64 bits of the uint64 values (the schema's
        int), like ``tinit::trunc_normal_``.
        """
        _fill(tensor, seed, stream, offset, constants, None, torch.library.wrap_triton)


def trunc_normal_triton_(
    tensor: torch.Tensor, seed: int, stream: int, offset: int, constants: tuple[float, ...], *, block: int | None = None
) -> None:
    """Fill contiguous ``tensor`` in place with tinit's truncated normal, in Triton.

    Element j (row-major) takes stream index offset + j of (seed, stream)
    (``tinit::philox_block``); its value is ``tinit::trunc_normal_value``
    (stream version 2, fp32 arithmetic) with the constants of
    ``tinit.params.transform_constants``, bit-identical to
    ``tinit.ops.trunc_normal_native``. Bounds are absolute (tensor units).

    Args:
        tensor: contiguous fp32, bf16 or fp16 tensor on a GPU (or on the CPU
            under ``TRITON_INTERPRET=1``), written in place.
        seed: unsigned 64-bit Philox key, 0 <= seed < 2**64.
        stream: unsigned 64-bit stream id (upper counter words).
        offset: stream index of element 0, 0 <= offset and offset + numel <= 2**63.
        constants: the PARAM_COUNT floats of ``transform_constants(mean, std, a, b, tensor.dtype)``
            (or ``uniform_constants``), a ``tinit.params.TruncNormalParams``.
        block: counter blocks per program (a power of two; 4*block elements);
            None for the default through the registered op. The values do not
            depend on it.

    Returns:
        None.

    Raises:
        ImportError: triton is not installed (or torch lacks triton_op).
        TypeError: fp64 or another dtype this backend does not fill.
        ValueError: a non-contiguous tensor, a bad offset, seed or stream, or
            malformed constants.
    """
    require_triton()
    # Only what the op's schema cannot carry is handled here (uint64 ids as int64 bits, an offset
    # that fits its int); the op's body checks the rest, once, on either path.
    seed64, stream64 = as_int64(seed), as_int64(stream)
    offset = schema_int("offset", offset)
    if block is None:
        torch.ops.tinit.trunc_normal_triton_(tensor, seed64, stream64, offset, list(constants))
    else:
        check_block(block)
        _fill(tensor, seed64, stream64, offset, constants, block, lambda k: k)


def philox_words_triton(
    numel: int,
    seed: int,
    stream: int,
    offset: int = 0,
    device: torch.device | str = "cuda",
    *,
    block: int = WORDS_BLOCK,
) -> torch.Tensor:
    """The uint32 stream words for indices [offset, offset + numel), computed in Triton.

    Args:
        numel: number of words (>= 0).
        seed, stream: unsigned 64-bit Philox key and stream id.
        offset: index of the first word (>= 0).
        device: where the kernel runs (a GPU, or "cpu" under TRITON_INTERPRET=1).
        block: counter blocks per program (a power of two); the words do not depend on it.

    Returns:
        int64 tensor of shape (numel,) with values in [0, 2**32), equal to
        ``tinit.ops.philox_words(numel, seed, stream, offset)``.

    Raises:
        ImportError: triton is not installed (or torch lacks triton_op).
        ValueError: negative numel or offset, or seed/stream outside [0, 2**64).
    """
    require_triton()
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    check_block(block)
    out = torch.empty(numel, dtype=torch.int32, device=device)
    _check_target(out, offset, "philox_words_triton")
    seed64, stream64 = as_int64(seed), as_int64(stream)
    if numel:
        _philox_kernel[grid(numel, offset, block)](
            out, numel, **stream_args(seed64, stream64, offset), BLOCK=block, num_warps=NUM_WARPS
        )
    return out.to(torch.int64) & 0xFFFFFFFF
