"""The Philox4x32-10 stream in Triton: the rounds, the counter-block layout of a fill, and the 64-bit
scalars (seed, stream, offset) passed as int32 halves.

The stream is that of ``tinit::philox4x32_10`` and ``tinit::philox_block`` (key = seed, counter =
(block, stream), four words per Philox call). The @triton.jit
functions here are inlined by the kernels of ``trunc_normal`` (``_trunc_normal_kernel``,
``_philox_kernel``) and ``trunc_normal_grouped`` (``_grouped_kernel``). Importing this module never
requires triton; without it the device functions are not defined.
"""

from __future__ import annotations

from ._host import i32_bits, tl, triton

# The counter blocks' device functions and launch helpers, shared by this package's kernels: no API.
__all__: list[str] = []


def split_u64(name: str, value: int) -> dict:
    """A uint64 (or int64 bits of one) as two int32 bit patterns ``{name}_lo``, ``{name}_hi``.

    Passing 64-bit scalars as int32 halves keeps every launch's argument types
    fixed (triton types a Python int by its magnitude) and avoids the
    interpreter's uint32 storage of ints in [2**31, 2**32) typed as i64.
    """
    value &= 2**64 - 1
    return {f"{name}_lo": i32_bits(value & 0xFFFFFFFF), f"{name}_hi": i32_bits(value >> 32)}


def stream_args(seed: int, stream: int, offset: int) -> dict:
    """The kernel arguments seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi (``split_u64``)."""
    return {**split_u64("seed", seed), **split_u64("stream", stream), **split_u64("offset", offset)}


def counter_blocks(numel, offset):
    """Counter blocks (4 stream indices each) that indices [offset, offset + numel) touch; ints or int64 arrays."""
    return ((offset & 3) + numel + 3) >> 2


def grid(numel: int, offset: int, block: int) -> tuple[int]:
    """Programs of ``block`` counter blocks covering the counter blocks of indices [offset, offset + numel)."""
    return (triton.cdiv(counter_blocks(numel, offset), block),)


if triton is not None:

    @triton.jit
    def philox4x32_10(c0, c1, c2, c3, k0, k1):
        """``tinit::philox4x32_10``: ten rounds on uint32 counter words under key (k0, k1).

        The same operations as triton's ``tl.philox`` (whose key/counter
        convention is Random123's, like ``tinit::philox4x32_10``); written out
        so the kernels use no @triton.jit function of triton.language and can be
        re-created in the interpreter after triton was imported without it.
        """
        for _ in tl.static_range(10):
            # 32x32 -> 64-bit products (one IMAD.WIDE.U32 each): both halves at once.
            p0 = c0.to(tl.uint64) * 0xD2511F53
            p2 = c2.to(tl.uint64) * 0xCD9E8D57
            c0 = (p2 >> 32).to(tl.uint32) ^ c1 ^ k0
            c2 = (p0 >> 32).to(tl.uint32) ^ c3 ^ k1
            c1 = p2.to(tl.uint32)
            c3 = p0.to(tl.uint32)
            k0 = tl.add(k0, 0x9E3779B9, sanitize_overflow=False)
            k1 = tl.add(k1, 0xBB67AE85, sanitize_overflow=False)
        return c0, c1, c2, c3

    @triton.jit
    def u32(bits):
        """An int32 bit pattern as uint32."""
        return bits.to(tl.uint32, bitcast=True)

    @triton.jit
    def join_u64(lo, hi):
        """The uint64 whose halves are the int32 bit patterns lo and hi (``split_u64``'s inverse)."""
        return (u32(hi).to(tl.uint64) << 32) | u32(lo).to(tl.uint64)

    @triton.jit
    def stream_words(seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, BLOCK: tl.constexpr):
        """``stream_words_at`` for program ``tl.program_id(0)``."""
        return stream_words_at(
            seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, tl.program_id(0).to(tl.int64), BLOCK
        )

    @triton.jit
    def stream_words_at(seed_lo, seed_hi, stream_lo, stream_hi, offset_lo, offset_hi, program, BLOCK: tl.constexpr):
        """The words of the BLOCK counter blocks of program ``program`` of a fill, as four columns.

        64-bit scalars arrive as two int32 bit patterns (see ``split_u64``).
        Program p (an int64 scalar; the grouped kernel numbers the programs of
        each of its tensors from 0) covers counter blocks first + p*BLOCK +
        [0, BLOCK), first = offset // 4; word k of block b is stream index
        4b + k, which is tensor element 4b + k - offset (``tinit::philox_block``).
        Returns (r0, r1, r2, r3 uint32[BLOCK], start int64): r_k[b] is word k
        of the program's block b and tensor element start + 4b + k. The columns
        keep the layout of the Philox call (block b in one thread), which every
        value computed from them and their stores (``transform.store_block``)
        keep too: no layout conversion between the words and the store.
        """
        off = join_u64(offset_lo, offset_hi).to(tl.int64)  # < 2**63
        blk0 = (off >> 2) + program * BLOCK
        blk = blk0 + tl.arange(0, BLOCK).to(tl.int64)
        zero = tl.full([BLOCK], 0, tl.uint32)
        c0 = blk.to(tl.uint32)
        c1 = (blk >> 32).to(tl.uint32)
        c2 = zero + u32(stream_lo)
        c3 = zero + u32(stream_hi)
        k0 = zero + u32(seed_lo)
        k1 = zero + u32(seed_hi)
        r0, r1, r2, r3 = philox4x32_10(c0, c1, c2, c3, k0, k1)
        start = program * (4 * BLOCK) - (off & 3)
        return r0, r1, r2, r3, start

    @triton.jit
    def in_tensor(local, start, numel, span):
        """Whether tensor element start + local lies in [0, numel), compared in int32: local in
        [0, span), span the program's elements (4 BLOCK)."""
        first = tl.maximum(-start, 0).to(tl.int32)  # 0, or offset % 4 for program 0
        end = tl.minimum(numel.to(tl.int64) - start, span).to(tl.int32)
        return (local >= first) & (local < end)
