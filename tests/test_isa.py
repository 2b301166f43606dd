"""The CPU engine (csrc/cpu/isa.h): chosen once, overridable, every engine the same bits;
contraction off by the sources themselves; the load-time self-test; FTZ/DAZ cleared per worker.

Every engine this CPU runs (``torch.ops.tinit.cpu_isas()``) fills every mode and dtype in a
subprocess with ``TINIT_CPU_ISA`` set, and the digests must agree with each other bit for bit
(the AVX-512 two-sided entries also against the compiled ones, ``TINIT_CPU_PORTABLE=1``).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tinit
from tinit import ops, params

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = ROOT / "csrc" / "include"
CPU = ROOT / "csrc" / "cpu"

needs_native = pytest.mark.skipif(
    not ops.native_available(), reason=f"native extension not built: {ops.native_load_error()}"
)

# (name, mean, std, a, b): every mode of tinit.params for fp32 and fp64 (test_cases_cover_every_mode),
# far tails, narrow windows and subnormal std.
WINDOWS = [
    ("two_sided", 0.0, 0.02, -0.04, 0.04),
    ("two_sided_wide", 0.0, 1.0, -2.0, 2.0),
    ("one_sided", 0.3, 1.5, float("-inf"), 0.5),
    ("untruncated", 0.0, 0.02, float("-inf"), float("inf")),
    ("precise_cancel", 1.0, 1.0, -0.5, 0.5),
    ("precise_tiny_std", 0.0, 1e-35, -2e-35, 2e-35),
    ("uniform_narrow", 0.0, 1.0, 0.5, 0.50001),
    ("uniform_narrow_f64", 0.0, 1.0, 0.5, 0.5 + 2.0**-40),
    ("tail", 0.0, 1.0, 9.0, 12.0),
    ("tail_mirrored", 0.0, 0.02, -0.5, -0.2),
    ("tail_far", 2.0, 0.5, 30.0, 40.0),
    ("subnormal", 0.0, 1e-39, -3e-39, 3e-39),
    ("subnormal_window", 0.0, 1e-40, -1e-40, 2e-40),
    ("subnormal_f64", 0.0, 1e-310, -3e-310, 3e-310),
]
DTYPES = ["float32", "bfloat16", "float16", "float64"]

# Run in a subprocess per engine: {case: sha256 or error class}, the engine and the modes.
DIGEST_SCRIPT = r"""
import hashlib, json, sys
import torch
import tinit
from tinit import params
windows, dtypes = json.loads(sys.argv[1])
out, modes = {}, {}
def h(t):
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
for name, mean, std, a, b in windows:
    for dt in dtypes:
        dtype = getattr(torch, dt)
        key = f"{name} {dt}"
        try:
            modes[key] = int(params.transform_constants(mean, std, a, b, dtype).mode)
            t = torch.empty(5003, dtype=dtype)
            # Crosses a 2^32-block boundary of the counter (the vector Philox stops short of it).
            tinit.trunc_normal_at_(t, mean, std, a, b, seed=12345, stream=7, offset=4 * 2**32 - 1001)
            out[key] = h(t)
            g = [torch.empty(n, dtype=dtype) for n in (17, 4099, 70001)]
            rec = list(params.transform_constants(mean, std, a, b, dtype))
            torch.ops.tinit.trunc_normal_grouped_(g, 99, [1, 2, 3], [0, 5, 2**40], rec * 3)
            out[key + " grouped"] = h(torch.cat([x.view(torch.uint8) for x in g]))
        except (ValueError, TypeError) as exc:
            out[key] = "ERR " + type(exc).__name__
w = torch.empty(70001, dtype=torch.int32)
torch.ops.tinit.philox_(w, 99, 1, 2**34 - 401)
out["philox words"] = h(w)
print(json.dumps({"isa": torch.ops.tinit.cpu_isa(), "isas": list(torch.ops.tinit.cpu_isas()),
                  "digests": out, "modes": modes}))
"""


def _run_engine(env_extra: dict[str, str]) -> dict:
    env = {**os.environ, **env_extra, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", DIGEST_SCRIPT, json.dumps([WINDOWS, DTYPES])],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def engines() -> dict[str, dict]:
    if not ops.native_available():
        pytest.skip("native extension not built")
    runs = {isa: _run_engine({"TINIT_CPU_ISA": isa}) for isa in ops.cpu_isas()}
    if "avx512" in runs:
        runs["avx512 portable"] = _run_engine({"TINIT_CPU_ISA": "avx512", "TINIT_CPU_PORTABLE": "1"})
    return runs


@needs_native
def test_every_engine_is_chosen_by_the_override(engines):
    for name, run in engines.items():
        assert run["isa"] == name.split()[0]
        assert run["isas"] == ops.cpu_isas()
    assert ops.cpu_isas()[0] == "scalar"


@needs_native
def test_cases_cover_every_mode(engines):
    modes = next(iter(engines.values()))["modes"]
    for dt in ("float32", "float64"):
        got = {m for key, m in modes.items() if key.endswith(" " + dt)}
        assert got == {int(m) for m in params.Mode}, (dt, got)


@needs_native
def test_every_engine_writes_the_same_bits(engines):
    """Each engine against the scalar one, every mode and dtype, contiguous and grouped, and the words."""
    if len(engines) < 2:
        pytest.skip(f"this CPU runs only {list(engines)}")
    reference = engines["scalar"]["digests"]
    errors = [k for k, v in reference.items() if v.startswith("ERR")]
    assert len(errors) < len(reference) // 4, errors  # the cases mostly run
    for name, run in engines.items():
        moved = [k for k in reference if run["digests"][k] != reference[k]]
        assert not moved, f"engine {name} differs from scalar on {moved}"


@needs_native
def test_this_process_uses_the_best_engine(engines):
    if "TINIT_CPU_ISA" in os.environ:
        pytest.skip("TINIT_CPU_ISA is set for this run")
    assert ops.cpu_isa() == ops.cpu_isas()[-1]
    # This process's fills are the chosen engine's.
    t = torch.empty(5003)
    tinit.trunc_normal_at_(t, 0.0, 1.0, 9.0, 12.0, seed=12345, stream=7, offset=4 * 2**32 - 1001)
    import hashlib

    want = engines[ops.cpu_isa()]["digests"]["tail float32"]
    assert hashlib.sha256(t.view(torch.uint8).numpy().tobytes()).hexdigest() == want


def _refused(value: str) -> str:
    code = (
        "import torch, tinit\n"
        "t = torch.full((8,), 7.0)\n"
        "try:\n"
        "    tinit.trunc_normal_at_(t, 0.0, 1.0, -2.0, 2.0, seed=1)\n"
        "except RuntimeError as exc:\n"
        "    assert bool((t == 7.0).all()), 'written before the refusal'\n"
        "    print(str(exc).splitlines()[0])\n"
        "else:\n"
        "    print('accepted')\n"
    )
    env = {**os.environ, "TINIT_CPU_ISA": value, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@needs_native
def test_unknown_engine_is_refused():
    msg = _refused("sse9")
    assert "TINIT_CPU_ISA=sse9 is not an engine" in msg and "scalar" in msg, msg


@needs_native
def test_engine_the_cpu_lacks_is_refused():
    missing = [isa for isa in ("avx2", "avx512") if isa not in ops.cpu_isas()]
    if not missing:
        pytest.skip("this CPU runs every engine")
    msg = _refused(missing[-1])
    assert f"TINIT_CPU_ISA={missing[-1]}" in msg and "lacks that engine" in msg, msg
    assert ", ".join(ops.cpu_isas()) in msg, msg


# ------------------------------------------------------------------ contraction and the known answers

HARNESS = r"""
#include "tinit/transform.h"
#include "known_answers.h"
#include "denormal_guard.h"
#include <cstdio>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
using namespace tinit;
// argv[1]: "ftz" sets FTZ/DAZ first; argv[2]: "guard" runs the answers under a DenormalGuard.
int main(int argc, char** argv) {
  if (argc > 1 && argv[1][0] == 'f') {
#if defined(__x86_64__)
    _mm_setcsr(_mm_getcsr() | 0x8040u);
#endif
  }
  int wrong[2] = {0, 0};
  {
    cpu::DenormalGuard* guard = argc > 2 ? new cpu::DenormalGuard() : nullptr;
    for (const cpu::KnownAnswer& k : cpu::kKnownAnswers) {
      const auto P = TruncNormalParams<float>::from_packed(k.packed);
      float x = P.mode == kTail ? trunc_normal_value<float, kTail>(k.word, P)
              : P.mode == kTwoSidedPrecise ? trunc_normal_value<float, kTwoSidedPrecise>(k.word, P)
              : P.mode == kTwoSided ? trunc_normal_value<float, kTwoSided>(k.word, P)
              : trunc_normal_value<float, kUniform>(k.word, P);
      wrong[k.catches] += float_as_bits(x) != k.bits;
    }
    delete guard;
  }
#if defined(__x86_64__)
  std::printf("%d %d %d\n", wrong[0], wrong[1], (_mm_getcsr() & 0x8040u) != 0);
#else
  std::printf("%d %d 0\n", wrong[0], wrong[1]);
#endif
  return 0;
}
"""


def _fma_flags() -> list[str]:
    """Flags that give the host compiler an fma instruction to contract into."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        if ops.native_available() and "avx2" not in ops.cpu_isas():
            pytest.skip("this x86 CPU has no FMA (x86-64-v3) to contract into")
        return ["-march=x86-64-v3"]
    if machine in ("aarch64", "arm64", "ppc64le", "s390x"):
        return []  # fma is baseline there
    pytest.skip(f"no known fma flags for {machine}")


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> dict[str, Path]:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ on PATH")
    folder = tmp_path_factory.mktemp("known_answers")
    src = folder / "known_answers.cpp"
    src.write_text(HARNESS)
    base = [cxx, "-O3", "-std=c++17", "-fno-math-errno", "-fno-trapping-math", *_fma_flags()]
    base += ["-I", str(INCLUDE), "-I", str(CPU), str(src)]
    exes = {}
    # "fast": GCC's default contraction on the command line, the sources' pragma in force.
    # "contracted": the same with the pragma removed (what a build without it would compute).
    for name, extra in {
        "fast": ["-ffp-contract=fast"],
        "contracted": ["-ffp-contract=fast", "-DTINIT_TEST_CONTRACTED_BUILD"],
    }.items():
        exe = folder / name
        proc = subprocess.run([*base, *extra, "-o", str(exe)], capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        exes[name] = exe
    return exes


def _answers(exe: Path, *args: str) -> tuple[int, int, int]:
    """(wrong contraction answers, wrong flush answers, whether FTZ/DAZ is set at exit)."""
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60, check=True)
    contraction, flush, ftz = proc.stdout.split()
    return int(contraction), int(flush), int(ftz)


def _count(cause: str) -> int:
    """How many known answers name `cause` (kContraction or kFlush)."""
    return (CPU / "known_answers.h").read_text().count(f'", {cause}, ')


def test_pragma_keeps_contraction_off(harness):
    assert _answers(harness["fast"]) == (0, 0, 0)


def test_known_answers_catch_a_contracted_build(harness):
    """Every kContraction answer was picked because contraction changes it."""
    assert _count("kContraction") >= 6
    assert _answers(harness["contracted"])[0] == _count("kContraction")


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="sets MXCSR (x86)")
def test_known_answers_catch_ftz_and_the_guard_clears_it(harness):
    assert _count("kFlush") >= 2
    _, flush, ftz = _answers(harness["fast"], "ftz")
    assert flush == _count("kFlush") and ftz == 1
    assert _answers(harness["fast"], "ftz", "guard") == (0, 0, 1)  # cleared inside, restored after


def test_every_source_turns_contraction_off_first():
    """fp_contract.h is the first include of every CPU and shared source (the generated
    coefficient table holds no code)."""
    files = [*CPU.glob("*.cpp"), *CPU.glob("*.h"), *(ROOT / "csrc").glob("*.cpp"), *(ROOT / "csrc").glob("*.h")]
    files += [p for p in (INCLUDE / "tinit").glob("*.h") if p.name not in ("fp_contract.h", "ndtri_table.h")]
    files.append(ROOT / "csrc" / "cuda" / "bindings.cpp")
    for path in files:
        includes = [line for line in path.read_text().splitlines() if line.startswith("#include")]
        assert includes and includes[0] == '#include "tinit/fp_contract.h"', path.name


# ------------------------------------------------------------------ FTZ / DAZ set by the caller

FTZ_CASES = [
    ("subnormal", 0.0, 1e-39, -3e-39, 3e-39, torch.float32),
    ("subnormal_window", 0.0, 1e-40, -1e-40, 2e-40, torch.float32),
    ("subnormal_bf16", 0.0, 1e-39, -3e-39, 3e-39, torch.bfloat16),
    ("subnormal_f64", 0.0, 1e-310, -3e-310, 3e-310, torch.float64),
]
TINY = {torch.float32: 2.0**-126, torch.bfloat16: 2.0**-126, torch.float64: 2.0**-1022}


def _flushing() -> bool:
    """Whether this thread flushes subnormals (an independent reading: one torch product)."""
    return (torch.tensor(2.0**-126) * 0.5).item() == 0.0


@pytest.fixture
def ftz():
    if not torch.set_flush_denormal(True):
        pytest.skip("torch.set_flush_denormal is unsupported on this CPU")
    threads = torch.get_num_threads()
    try:
        assert _flushing()
        yield
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(threads)


def _fill(case, backend: str, numel: int = 200_003) -> torch.Tensor:
    _, mean, std, a, b, dtype = case
    t = torch.empty(numel, dtype=dtype)
    tinit.trunc_normal_at_(t, mean, std, a, b, seed=5, stream=3, offset=11, backend=backend)
    return t


def _subnormals(t: torch.Tensor) -> int:
    x = t.double().abs()
    return int(((x > 0) & (x < TINY[t.dtype])).sum())


@needs_native
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", FTZ_CASES, ids=[c[0] for c in FTZ_CASES])
def test_native_fill_ignores_callers_ftz(case, threads, ftz):
    torch.set_flush_denormal(False)
    torch.set_num_threads(threads)
    want = _fill(case, "cpu")
    assert _subnormals(want) > 1000  # so a flushed fill could not equal it
    torch.set_flush_denormal(True)
    got = _fill(case, "cpu")
    assert _flushing(), "the caller's FTZ/DAZ was not restored"
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
    # The grouped op's workers too.
    g = [torch.empty(n, dtype=case[5]) for n in (70_001, 33)]
    rec = list(params.transform_constants(*case[1:5], case[5]))
    torch.ops.tinit.trunc_normal_grouped_(g, 5, [3, 3], [11, 11], rec * 2)
    assert _flushing()
    assert torch.equal(g[0].view(torch.uint8), want[:70_001].view(torch.uint8))


@pytest.mark.parametrize("case", FTZ_CASES, ids=[c[0] for c in FTZ_CASES])
def test_torch_backend_ignores_callers_ftz(case, ftz):
    torch.set_flush_denormal(False)
    want = _fill(case, "torch", numel=20_003)
    assert _subnormals(want) > 100
    torch.set_flush_denormal(True)
    got = _fill(case, "torch", numel=20_003)
    assert _flushing(), "the caller's FTZ/DAZ was not restored"
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
