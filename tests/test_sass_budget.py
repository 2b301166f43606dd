"""bench/sass_budget.py: the SASS parser and hot-path rules on kernels of known shape, then on tinit's own.

- Oracle kernels compiled here (grid-stride loops with a float4 store): the
  store-only loop costs a few instructions per element, stores 128 bits,
  4 elements per trip and no FP64; a double multiply shows as FP64; a rare
  branch is a slow path off the fast one; an unrolled loop is measured on its
  main loop (16 elements a trip), not its remainder; a loop of interior
  vector stores is hot, not the loop of edge units beside it.
- The enum of transform modes is read from the header, new modes included.
- trunc_normal_kernel<float, first mode> (and, where triton can compile for
  sm_90, _trunc_normal_kernel fp32) gives positive, finite figures in every
  column; the CLI writes its JSON and markdown.

Needs nvcc and an nvdisasm (on PATH or bundled with triton); skipped, saying
so, without them. No GPU is used.
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

pytestmark = [
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on PATH: the SASS budget compiles with nvcc"),
    pytest.mark.skipif(sb.tool("nvdisasm") is None, reason="no nvdisasm on PATH or bundled with triton"),
]

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


def test_cli_writes_json_and_markdown(tmp_path, capsys):
    out_json, out_md = tmp_path / "budget.json", tmp_path / "budget.md"
    assert (
        sb.main(
            [
                "--no-triton",
                "--filter",
                "^cuda/philox_kernel/",
                "--json",
                str(out_json),
                "--md",
                str(out_md),
                "--p-diverge",
                "two_sided=0.01",
            ]
        )
        == 0
    )
    report = json.loads(out_json.read_text())
    assert report["versions"]["nvcc"] and report["model"] and report["nvcc_flags"], report
    assert [c["kernel"] for c in report["cases"]] == ["philox_kernel"], report["cases"]
    assert report["cases"][0]["elems"] == 4 and report["cases"][0]["store_bits"] == 128, report["cases"]
    text = out_md.read_text()
    assert "| cuda | philox_kernel | words |" in text and "Model:" in text, text
    assert text in capsys.readouterr().out
