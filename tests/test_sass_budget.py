"""bench/sass_budget.py: the SASS parser and hot-path rules on kernels of known shape, then on tinit's own.

- A hand-written SASS listing of the shape of a grouped kernel (a storeless
  search loop, then a loop whose vector stores are if-converted beside a
  masked block of scalar stores): every count is known by construction
  (interior, edge, prologue, epilogue, search step, table and shared-memory
  instructions); the old rule "the most store bits" counted the masked
  block into the aligned path. No tool is needed for it.
- A loop left by a predicated CALL to a local label (ptxas for sm_80) is a
  loop with an exit, not a subroutine call.
- A hand-written walk over a table's entries (a search loop, then a loop
  over entries around the loop of stores): the crossing from one entry's
  loop to the next entry's, counted by construction.
- A Triton oracle of that shape compiled for sm_90 (skipped without
  triton's NVIDIA backend): the interior path holds the two vector stores
  and none of the masked ones; the edge path holds the masked ones.
- Oracle kernels compiled here (grid-stride loops with a float4 store): the
  store-only loop costs a few instructions per element, stores 128 bits,
  4 elements per trip and no FP64; a double multiply shows as FP64; a rare
  branch is a slow path off the fast one; an unrolled loop is measured on its
  main loop (16 elements a trip), not its remainder; a loop of interior
  vector stores is hot, not the loop of edge units beside it.
- The enum of transform modes is read from the header, new modes included,
  and the CUDA-only modes set past it (kTwoSidedUnclamped).
- The steady-state model on figures of known value (set-up amortised over
  a thread's elements, search steps per tensor count, resident blocks; for
  the grouped CUDA kernel the warps of one wave, their ranges of chunks and
  the entries they cross, against a brute-force split of small tables).
- trunc_normal_kernel<float, first mode> (and, where triton can compile for
  sm_90, _trunc_normal_kernel fp32) gives positive, finite figures in every
  column; the CLI writes its JSON and markdown (for sm_80: sm_90 is the
  other tests'), and the grouped words kernel has its search loop and steady
  state.

The compiled tests need nvcc and an nvdisasm (on PATH or bundled with
triton); they are skipped, saying so, without them. No GPU is used.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import _sass
import pytest
import sass_budget as sb

ROOT = Path(__file__).resolve().parent.parent

needs_nvcc = [
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on PATH: the SASS budget compiles with nvcc"),
    pytest.mark.skipif(sb.tool("nvdisasm") is None, reason="no nvdisasm on PATH or bundled with triton"),
]

# A grouped kernel's shape, by hand: entry (5 instructions; @P3 skips the search), a storeless
# search loop (4 a trip, one LDG of the table), set-up (2), then a loop whose header holds an LDG,
# two if-converted vector stores and the branch over the masked block (6), the masked block (a
# layout conversion and 8 scalar stores: 11), the latch (3), and EXIT (1).
SYNTHETIC = (
    """
\t.section\t.text.synth,"ax",@progbits
.text.synth:
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   ISETP.GE.AND P0, PT, R0, 0x10, PT ;
        /*0020*/               @P0 EXIT ;
        /*0030*/                   ISETP.GE.AND P3, PT, R0, 0x1, PT ;
        /*0040*/               @P3 BRA `(.L_setup) ;
.L_search:
        /*0050*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0060*/                   IADD3 R1, R1, 0x1, RZ ;
        /*0070*/                   ISETP.LT.AND P1, PT, R1, R3, PT ;
        /*0080*/               @P1 BRA `(.L_search) ;
.L_setup:
        /*0090*/                   IMAD R5, R0, 0x4, RZ ;
        /*00a0*/                   MOV R6, RZ ;
.L_loop:
        /*00b0*/                   LDG.E R7, desc[UR4][R10.64] ;
        /*00c0*/                   FMUL R7, R7, R5 ;
        /*00d0*/                   ISETP.NE.AND P1, PT, R6, RZ, PT ;
        /*00e0*/              @!P1 STG.E.128 desc[UR4][R8.64], R12 ;
        /*00f0*/              @!P1 STG.E.128 desc[UR4][R8.64+0x800], R16 ;
        /*0100*/              @!P1 BRA `(.L_join) ;
        /*0110*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0120*/                   STS.128 [R9], R12 ;
        /*0130*/                   LDS.128 R12, [R9] ;
"""
    + "".join(
        f"        /*{0x140 + 16 * k:04x}*/               @P2 STG.E desc[UR4][R8.64+{hex(0x200 * k)}], R12 ;\n"
        for k in range(8)
    )
    + """.L_join:
        /*01c0*/                   IADD3 R6, R6, 0x1, RZ ;
        /*01d0*/                   ISETP.LT.AND P0, PT, R6, 0x8, PT ;
        /*01e0*/               @P0 BRA `(.L_loop) ;
        /*01f0*/                   EXIT ;
.L_trap:
        /*0200*/                   BRA `(.L_trap);
"""
)


def test_synthetic_masked_block_beside_aligned_stores():
    fn = _sass.parse(SYNTHETIC)["synth"]
    an = _sass.Analyzer(fn)
    (path,) = _sass.paths_of(an, per_mode=False)
    # The interior trip: header (6) and latch (3), the two vector stores only. The old rule, the
    # most store bits, took the masked block too: 20 instructions and 512 bits.
    assert len(path.insts) == 9, [i.op for i in path.insts]
    assert [i.op for i in path.stores()] == ["STG.E.128", "STG.E.128"], path.stores()
    m = _sass.metrics(an, path, 8)  # 8 fp32 elements: 256 bits
    assert m["sass_per_elem"] == 9 / 8 and m["table_loads_per_elem"] == 1 / 8 and m["shared_per_elem"] == 0, m
    rel = an.related(path)
    edge = rel["edge"]  # the masked trip: every block of the loop, the if-converted stores issue too
    assert len(edge.insts) == 20 and sum(i.op == "STG.E" for i in edge.insts) == 8, [i.op for i in edge.insts]
    assert sum(map(_sass.is_shared, edge.insts)) == 3
    assert rel["prologue"] == 7 and rel["epilogue"] == 1, rel  # entry + set-up; EXIT
    assert rel["search"] == [(fn.labels[".L_search"], 4)] and rel["shifted"] == [], rel


# A loop left, as ptxas does for sm_80, by a predicated CALL to a label of the kernel's own code.
CALL_EXIT = """
\t.section\t.text.callexit,"ax",@progbits
.text.callexit:
        /*0000*/                   MOV R0, RZ ;
.L_loop:
        /*0010*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0020*/                   STG.E.128 desc[UR4][R2.64], R4 ;
        /*0030*/                   ISETP.GE.AND P0, PT, R0, 0x8, PT ;
        /*0040*/               @P0 CALL.REL.NOINC `(.L_exit) ;
        /*0050*/                   BRA `(.L_loop) ;
.L_exit:
        /*0060*/                   EXIT ;
"""


def test_local_call_is_a_loop_exit():
    an = _sass.Analyzer(_sass.parse(CALL_EXIT)["callexit"])
    (path,) = _sass.paths_of(an, per_mode=False)
    assert len(path.insts) == 5, [i.op for i in path.insts]  # not the EXIT as a callee's path
    rel = an.related(path)
    assert (rel["prologue"], rel["epilogue"], rel["edge"]) == (1, 1, None), rel


# The grouped shape with its walk over entries, by hand: entry (5; @P3 skips the search), the
# search loop (4 a trip), the loop over entries, whose header loads the entry and sets up (3), the
# loop of stores (4 a trip), the walk's latch (3), then EXIT (1).
WALK = """
\t.section\t.text.walk,"ax",@progbits
.text.walk:
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   ISETP.GE.AND P0, PT, R0, 0x10, PT ;
        /*0020*/               @P0 EXIT ;
        /*0030*/                   ISETP.GE.AND P3, PT, R0, 0x1, PT ;
        /*0040*/               @P3 BRA `(.L_entry) ;
.L_search:
        /*0050*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0060*/                   IADD3 R1, R1, 0x1, RZ ;
        /*0070*/                   ISETP.LT.AND P1, PT, R1, R3, PT ;
        /*0080*/               @P1 BRA `(.L_search) ;
.L_entry:
        /*0090*/                   LDG.E R5, desc[UR4][R10.64] ;
        /*00a0*/                   IMAD R5, R0, 0x4, R5 ;
        /*00b0*/                   MOV R6, RZ ;
.L_loop:
        /*00c0*/                   STG.E.128 desc[UR4][R8.64], R12 ;
        /*00d0*/                   IADD3 R6, R6, 0x1, RZ ;
        /*00e0*/                   ISETP.LT.AND P0, PT, R6, R5, PT ;
        /*00f0*/               @P0 BRA `(.L_loop) ;
.L_next:
        /*0100*/                   IADD3 R1, R1, 0x1, RZ ;
        /*0110*/                   ISETP.LT.AND P2, PT, R1, R7, PT ;
        /*0120*/               @P2 BRA `(.L_entry) ;
        /*0130*/                   EXIT ;
"""


def test_synthetic_walk_over_entries():
    fn = _sass.parse(WALK)["walk"]
    an = _sass.Analyzer(fn)
    (path,) = _sass.paths_of(an, per_mode=False)
    assert len(path.insts) == 4 and path.header == fn.labels[".L_loop"], [i.op for i in path.insts]
    assert an.enclosing(path.header) == fn.labels[".L_entry"]
    rel = an.related(path)
    # prologue: entry and the entry's set-up; epilogue: the walk's latch and EXIT; the next entry:
    # the latch, then the entry's set-up (3 + 3)
    assert (rel["prologue"], rel["epilogue"], rel["entry"]) == (8, 4, 6), rel
    assert rel["search"] == [(fn.labels[".L_search"], 4)], rel
    # without a loop around it (the SYNTHETIC shape) there is no crossing
    synth = _sass.Analyzer(_sass.parse(SYNTHETIC)["synth"])
    assert synth.related(_sass.paths_of(synth, per_mode=False)[0])["entry"] is None


def _split(chunks_per_tensor: int, tensors: int, warps: int) -> tuple[int, int]:
    """The oracle of sb.warp_ranges: deal the chunks out in contiguous runs, the first
    chunks % warps warps one more, and list each run's entries."""
    owners = [c // chunks_per_tensor for c in range(chunks_per_tensor * tensors)]
    sizes = [len(owners) // warps + (w < len(owners) % warps) for w in range(warps)]
    runs, at = [], 0
    for size in sizes:
        if size:
            runs.append(owners[at : at + size])
        at += size
    return min(map(len, runs)), max(len(set(run)) - 1 for run in runs)


@pytest.mark.parametrize(
    ("per_tensor", "tensors", "warps"), [(3, 4, 5), (2, 2, 10), (1, 7, 3), (64, 16, 21), (5, 1, 4), (4, 9, 9)]
)
def test_warp_ranges_against_split(per_tensor, tensors, warps):
    assert sb.warp_ranges(per_tensor, tensors, warps) == _split(per_tensor, tensors, warps)


def test_steady_state_model():
    # Grouped CUDA, sm_90: 128 registers, 2 blocks of 8 warps an SM, 132 x 2 x 8 = 2112 warps over
    # 2^28 / 1024 = 262144 chunks: 124 or 125 each, the fewest 124 x 8 x 4 = 3968 elements a lane.
    # 256 tensors of 1024 chunks: a warp crosses at most 1 entry; 4096 of 64: at most 2.
    assert sb.grouped_warps(1 << 18, 128, "sm_90", 32) == 2112 and sb.grouped_warps(100, 128, "sm_90", 32) == 104
    case = {"backend": "cuda", "kernel": "grouped_kernel", "sass_per_elem": 41.75, "regs": 128}
    case.update(setup_insts=240, search_step_insts=22, entry_insts=136)
    sb.steady_state(case, "sm_90", (32, 256))
    assert case["grouped_warps"] == {1: 2112, 256: 2112, 4096: 2112}, case
    assert case["entries_crossed"] == {1: 0, 256: 1, 4096: 2}, case
    assert case["setup_per"] == {1: 240, 256: 240 + 8 * 22 + 136, 4096: 240 + 12 * 22 + 2 * 136}, case
    assert case["elems_per_setup"] == {1: 3968, 256: 3968, 4096: 3968}, case
    assert case["steady_per_elem"] == pytest.approx(
        {1: 41.75 + 240 / 3968, 256: 41.75 + 552 / 3968, 4096: 41.75 + 776 / 3968}
    )
    # sm_80: 108 x 2 x 8 = 1728 warps, 151 or 152 chunks each; 4096 tensors of 64: 3 crossings.
    sb.steady_state(case, "sm_80", (32, 256))
    assert case["entries_crossed"] == {1: 0, 256: 1, 4096: 3} and case["elems_per_setup"][1] == 151 * 32, case
    # Single CUDA: 64 registers, 4 blocks an SM; 2^26 units over 132 x 4 x 256 threads.
    assert sb.resident_blocks(59, "sm_90") == 132 * 4 and sb.resident_blocks(32, "sm_80") == 108 * 8
    single = {"backend": "cuda", "kernel": "trunc_normal_kernel", "sass_per_elem": 46.25, "setup_insts": 100}
    single["regs"] = 59
    sb.steady_state(single, "sm_90", None)
    elems = 4 * -(-(1 << 26) // (132 * 4 * 256))
    assert single["elems_per_setup"] == {1: elems} and single["steady_per_elem"][1] == 46.25 + 100 / elems
    # Triton grouped: set-up per program over REPS x elements a trip.
    tg = {"backend": "triton", "kernel": "_grouped_kernel", "sass_per_elem": 50.875, "elems": 8.0, "reps": 8}
    tg["setup_by_tensors"] = {1: 280, 256: 311, 4096: 330}
    sb.steady_state(tg, "sm_90", None)
    assert tg["steady_per_elem"][256] == pytest.approx(50.875 + 311 / 64), tg
    assert [sb.search_steps(n) for n in (1, 2, 255, 256, 257, 4096)] == [0, 1, 8, 8, 9, 12]


TRITON_ORACLE = """
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["start"])
def masked_beside_aligned(out_ptr, numel, start, aligned, x, REPS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for r in range(REPS):
        base = (pid * REPS + r) * (4 * BLOCK)
        b = (base + tl.arange(0, BLOCK)).to(tl.float32) * x
        v = tl.reshape(tl.join(tl.join(b, b + 1.0), tl.join(b + 2.0, b + 3.0)), [BLOCK, 4])
        local = tl.arange(0, BLOCK)[:, None] * 4 + tl.arange(0, 4)[None, :]
        if aligned & (base + 4 * BLOCK <= numel):
            tl.store(out_ptr + base + local, v)
        else:
            tl.store(out_ptr + start + base + local, v, mask=start + base + local < numel)
"""


@pytest.mark.skipif(sb.tool("nvdisasm") is None, reason="no nvdisasm on PATH or bundled with triton")
def test_triton_masked_block_beside_aligned_store(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    from triton.backends import backends

    if "nvidia" not in backends:
        pytest.skip("triton has no NVIDIA backend to compile for sm_90 with")
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    (tmp_path / "sass_oracle_tt.py").write_text(TRITON_ORACLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    # triton.compile takes no interpreted kernel: @triton.jit reads TRITON_INTERPRET when it runs.
    with monkeypatch.context() as env:
        env.setenv("TRITON_INTERPRET", "0")
        fn = importlib.import_module("sass_oracle_tt").masked_beside_aligned
    sig = {"out_ptr": "*fp32", "numel": "i32", "start": "i32", "aligned": "i1", "x": "fp32"}
    kernel = triton.compile(
        ASTSource(
            fn,
            {**sig, "REPS": "constexpr", "BLOCK": "constexpr"},
            constexprs={"REPS": 4, "BLOCK": 256},
            attrs={(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]},
        ),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": 4, "enable_fp_fusion": False},
    )
    cubin = tmp_path / "oracle.cubin"
    cubin.write_bytes(kernel.asm["cubin"])
    an = _sass.Analyzer(sb.disassemble(cubin, None)[0][kernel.metadata.name])
    (path,) = _sass.paths_of(an, per_mode=False)
    widths = [_sass.store_bits(i) for i in path.stores()]
    # 4 x 256 fp32 over 128 threads: 8 elements a trip, two 16-byte vectors, no masked store.
    assert widths == [128, 128], [i.op for i in path.stores()]
    edge = an.related(path)["edge"]
    assert edge is not None and sorted(_sass.store_bits(i) for i in edge.stores())[:8] == [32] * 8, edge.stores()
    masked = set(edge.blocks) - set(path.blocks)  # the block the old rule added to the aligned path
    assert masked and len(edge.insts) == len(path.insts) + sum(len(an.fn.blocks[b].insts) for b in masked)
    if any(i.guard for i in path.stores()):  # the vector stores if-converted beside the masked block
        assert all(b in edge.blocks for b in path.blocks), (path.blocks, edge.blocks)


ORACLE = r"""
#include <cstdint>
#define LOOP for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; \
                  i += (int64_t)gridDim.x * blockDim.x)
extern "C" __global__ void store_only(float4* __restrict__ out, int64_t n4) {
#pragma unroll 1
  LOOP out[i] = make_float4(1.f, 2.f, 3.f, 4.f);
}
extern "C" __global__ void with_double(float4* __restrict__ out, int64_t n4, double s) {
#pragma unroll 1
  LOOP {
    const float f = static_cast<float>(static_cast<double>(i) * s);
    out[i] = make_float4(f, f + 1.f, f + 2.f, f + 3.f);
  }
}
extern "C" __global__ void rare_branch(float4* __restrict__ out, int64_t n4, float x) {
#pragma unroll 1
  LOOP {
    float f = static_cast<float>(i) * x;
    if (f > 1e30f) f = sqrtf(f) / (f + x) + __expf(-f) * logf(f);
    out[i] = make_float4(f, f, f, f);
  }
}
extern "C" __global__ void unrolled(float4* __restrict__ out, int64_t n4) {
  LOOP out[i] = make_float4(1.f, 2.f, 3.f, 4.f);
}
// An interior loop of vector stores, then a loop of edge units that stores a
// vector or, past the end, element by element (the shape of fill_blocks).
extern "C" __global__ void interior_then_edges(float* __restrict__ out, int64_t n4, int64_t n,
                                               float x) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
#pragma unroll 1
  for (; i < n4 - 1; i += step)
    reinterpret_cast<float4*>(out)[i] = make_float4(x * i, x + i, x - i, x / i);
#pragma unroll 1
  for (; i < n4; i += step) {
    if (4 * i + 4 <= n) {
      reinterpret_cast<float4*>(out)[i] = make_float4(x * i, x + i, x - i, x / i);
    } else {
      for (int k = 0; k < 4; ++k)
        if (4 * i + k < n) out[4 * i + k] = x * k;
    }
  }
}
"""


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> dict:
    for mark in needs_nvcc:
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])
    """Per oracle kernel: _sass.metrics() of its fast path."""
    work = tmp_path_factory.mktemp("oracle")
    source = work / "oracle.cu"
    source.write_text(ORACLE)
    cubin, _ = sb.compile_cu(source, work, sb.nvcc_flags(ROOT))
    functions, _ = sb.disassemble(cubin, None)
    found = {}
    for name, fn in functions.items():
        if name.startswith("$"):
            continue
        an = _sass.Analyzer(fn)
        path = _sass.paths_of(an, per_mode=False)[0]
        found[name] = _sass.metrics(an, path, path.stored_bits() / 32)
    return found


def test_store_only_loop(oracle):
    m = oracle["store_only"]
    assert (m["store"], m["store_bits"], m["elems"]) == ("STG.E.128", 128, 4.0), m
    # a 64-bit index add, compare, branch and address arithmetic around one STG.E.128: 8-24 a trip
    assert 2.0 <= m["sass_per_elem"] <= 6.0, m
    assert m["fp64_per_elem"] == 0 and m["mufu_per_elem"] == 0 and m["slow_per_elem"] == 0, m


def test_double_multiply_counts_fp64(oracle):
    m = oracle["with_double"]
    assert m["fp64_per_elem"] > 0, m
    assert m["cvt_per_elem"] > 0, m  # I2F.F64 and F2F.F32.F64
    assert m["sass_per_elem"] > oracle["store_only"]["sass_per_elem"], (m, oracle["store_only"])


def test_rare_branch_is_slow_path(oracle):
    m, plain = oracle["rare_branch"], oracle["store_only"]
    assert m["slow_per_elem"] > 0, m
    # the fast path skips the branch: it costs the multiply and compare, not the logf/sqrt/div
    assert m["sass_per_elem"] < plain["sass_per_elem"] + 4, (m, plain)
    assert m["mufu_per_elem"] == 0, m


def test_unrolled_loop_is_measured_on_its_main_loop(oracle):
    m = oracle["unrolled"]
    assert m["stored_bits"] % 128 == 0 and m["elems"] >= 8, m
    assert m["sass_per_elem"] <= oracle["store_only"]["sass_per_elem"], (m, oracle["store_only"])


def test_interior_loop_is_hot_not_edge_loop(oracle):
    m = oracle["interior_then_edges"]
    assert m["store"] == "STG.E.128" and m["stored_bits"] == 128 and m["elems"] == 4, m
    assert m["histogram"].get("STG", 0) == 1, m  # the edge loop's scalar stores are not on it


def test_modes_read_from_header(tmp_path):
    header = tmp_path / "transform.h"
    header.write_text(
        "enum TransformMode : int {\n  kTwoSided = 0,  // a comment, kNot = 9\n"
        "  kTail = 1,\n  kCentral = 3,\n  kUniform,\n};\n"
    )
    assert sb.read_modes(header) == {0: "two_sided", 1: "tail", 3: "central", 4: "uniform"}
    real = sb.read_modes(ROOT / "csrc" / "include" / "tinit" / "transform.h")
    assert real and all(isinstance(v, int) and name for v, name in real.items()), real
    # CUDA-only modes: the constants set past the enum, not the other constants; the count given
    header.write_text(
        header.read_text() + "constexpr int kModeCount = 5;\nconstexpr int kParamCount = 12;\n"
        "// constexpr int kOld = kModeCount + 3;\nconstexpr int kTwoSidedFast = kModeCount;\n"
        "constexpr int kTailFast = kModeCount + 1;\n"
    )
    assert sb.read_cuda_modes(header, sb.read_modes(header)) == {5: "two_sided_fast", 6: "tail_fast"}
    extra = sb.read_cuda_modes(ROOT / "csrc" / "include" / "tinit" / "transform.h", real)
    assert extra == {len(real): "two_sided_unclamped"}, extra


def test_describe_demangled_names():
    modes = {0: "two_sided", 3: "central"}
    assert sb.describe(
        "void tinit::cuda::(anonymous namespace)::trunc_normal_kernel<__nv_bfloat16, 3>(__nv_bfloat16*, long, bool)",
        modes,
    ) == ("trunc_normal_kernel", "bf16", 3)
    assert sb.describe("void tinit::cuda::grouped_kernel<float>(tinit::cuda::GroupView, unsigned long)", modes) == (
        "grouped_kernel",
        "fp32",
        None,
    )
    assert sb.describe("tinit::cuda::(anonymous namespace)::philox_kernel(unsigned int*, long, bool)", modes) == (
        "philox_kernel",
        "words",
        None,
    )
    assert sb.describe("void k<float, (tinit::TransformMode)0>(float*)", modes) == ("k", "fp32", 0)


def _assert_case(case: dict, backend: str) -> None:
    assert case["backend"] == backend and "error" not in case, case
    for key in (
        "sass_per_elem",
        "slow_per_elem",
        "fp64_per_elem",
        "mufu_per_elem",
        "cvt_per_elem",
        "elems",
        "est_gelem_s",
        "regs",
        "store_bits",
        "stack",
        "spill_stores",
        "spill_loads",
    ):
        assert key in case and case[key] is not None and math.isfinite(case[key]) and case[key] >= 0, (key, case)
    for key in ("sass_per_elem", "elems", "est_gelem_s", "regs", "store_bits"):
        assert case[key] > 0, (key, case)
    assert case["bound"] in ("issue", "hbm") and case["store"].startswith(("STG", "ST")), case


@needs_nvcc[0]
@needs_nvcc[1]
def test_real_cuda_kernel_first_mode(tmp_path):
    modes = sb.read_modes(ROOT / "csrc" / "include" / "tinit" / "transform.h")
    first = min(modes)
    cases = sb.cuda_cases(
        ROOT / sb.CU_FILES[0],
        modes,
        tmp_path,
        None,
        {},
        select=lambda kernel, dtype, mode: kernel == "trunc_normal_kernel" and dtype == "fp32" and mode == first,
    )
    assert len(cases) == 1, cases
    case = cases[0]
    case.update(sb.throughput(case["sass_per_elem"], case["dtype"]))
    _assert_case(case, "cuda")
    assert case["mode"] == first and case["elems"] == 4, case  # one Philox block of four fp32 values a trip
    assert case["store"] == "STG.E.128" and case["histogram"].get("STG") == 1, case  # the interior loop
    # Misaligned tensors: runs of fill_runs_shifted, several vectors a trip, about as cheap.
    assert case["shifted_per_elem"] is not None, case
    assert case["shifted_per_elem"] <= case["sass_per_elem"] + 4, case


@needs_nvcc[1]
def test_real_triton_kernel_first_mode(tmp_path):
    pytest.importorskip("triton")
    from triton.backends import backends

    if "nvidia" not in backends:
        pytest.skip("triton has no NVIDIA backend to compile for sm_90 with")
    modes = sb.read_modes(ROOT / "csrc" / "include" / "tinit" / "transform.h")
    first = min(modes)
    cases = sb.triton_cases(
        ROOT,
        modes,
        tmp_path,
        None,
        {},
        select=lambda kernel, dtype, mode: kernel == "_trunc_normal_kernel" and dtype == "fp32" and mode == first,
    )
    assert len(cases) == 1, cases
    case = cases[0]
    case.update(sb.throughput(case["sass_per_elem"], case["dtype"]))
    _assert_case(case, "triton")


@needs_nvcc[0]
@needs_nvcc[1]
def test_cli_writes_json_and_markdown(tmp_path, capsys):
    out_json, out_md = tmp_path / "budget.json", tmp_path / "budget.md"
    # sm_80 here (sm_90 is test_real_cuda_kernel_first_mode's): one nvcc run a file, not two.
    argv = [
        "--no-triton",
        "--arch",
        "sm_80",
        "--filter",
        "^cuda/(philox|grouped)_kernel/words/",
        "--json",
        str(out_json),
    ]
    assert sb.main([*argv, "--md", str(out_md), "--p-diverge", "two_sided=0.01"]) == 0
    report = json.loads(out_json.read_text())
    assert report["versions"]["nvcc"] and report["model"] and report["nvcc_flags"], report
    assert report["archs"] == ["sm_80"] and report["steady_model"] and sb.ARCHS == ("sm_90", "sm_80"), report
    cases = {(c["arch"], c["kernel"]): c for c in report["cases"]}
    assert sorted(cases) == [("sm_80", "grouped_kernel"), ("sm_80", "philox_kernel")], sorted(cases)
    for (_arch, kernel), case in cases.items():
        assert case["elems"] == 4 and case["store_bits"] == 128, case
        assert case["setup_insts"] > 0 and case["edge_per_elem"] > case["sass_per_elem"], case
        steady = {int(n): v for n, v in case["steady_per_elem"].items()}
        if kernel == "grouped_kernel":
            # one wave of warps: a binary search over the table a warp, a crossing an entry
            assert 4 <= case["search_step_insts"] <= 40 and 10 <= case["entry_insts"] <= 400, case
            assert sorted(steady) == [1, 256, 4096] and steady[1] < steady[256] < steady[4096], case
            elems = {int(n): v for n, v in case["elems_per_setup"].items()}
            crossed = {int(n): v for n, v in case["entries_crossed"].items()}
            assert crossed[1] == 0 and crossed[256] >= 1 and elems[1] == elems[256] >= 32, case
            grown = 8 * case["search_step_insts"] + crossed[256] * case["entry_insts"]
            assert steady[256] - steady[1] == pytest.approx(grown / elems[256]), case
        else:
            assert case["search_step_insts"] is None and list(steady) == [1], case
            assert case["sass_per_elem"] < steady[1] < case["sass_per_elem"] + 1, case
    text = out_md.read_text()
    assert "| cuda | philox_kernel | words |" in text and "### sm_80 (A100" in text and "Model:" in text, text
    assert text in capsys.readouterr().out
