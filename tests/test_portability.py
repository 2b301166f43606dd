"""The CPU kernels write the same bits on other architectures (scripts/portability_check.py).

- setup.py's CPU_KERNEL_SOURCES are exactly the csrc/cpu sources that include no torch header
  but header-only torch (torch/headeronly: the ones a torch-free harness can link), and its
  cxx_flags compile them for every cross compiler present (GCC for aarch64, s390x and ppc64le
  rejects the x86-only options).
- The harness (tests/portability_harness.cpp over the torch/headeronly stand-ins of tests/portability_shim),
  built natively, writes what the extension writes for the check's case list: its fill is the
  extension's, not a copy.
- Cross-built for aarch64 (little-endian) and s390x (big-endian) and run under qemu-user, it
  writes the extension's bits in every mode and dtype (the FTZ groups and fp64, which do not
  hold yet, declared).
- A build with -ffp-contract=fast gives the same bits (the sources' pragmas); one without the
  pragmas differs, and the check says so (exit 1): it can fail.

Skipped, saying so, where g++ is absent; the cross checks where the cross compilers or
qemu-user are absent (.ci/run installs them: g++-aarch64-linux-gnu, g++-s390x-linux-gnu,
g++-powerpc64le-linux-gnu, qemu-user).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "portability_check.py"
# Known today: FTZ/DAZ set by the caller changes subnormal windows, and fp64 calls libm's log.
TODAY = ()  # no declared group: every case is identical on every target


def _load_check():
    spec = importlib.util.spec_from_file_location("portability_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _load_check()
CROSS = {t.name: t for t in check.targets()}


def _needs(*names: str):
    missing = sorted({tool for n in names for tool in check.missing_tools(CROSS[n])})
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not on PATH (.ci/run installs them)")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--no-extension-variants", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )


def _cells(stdout: str, target: str) -> dict[str, tuple[int, int]]:
    """The table row of ``target``: group -> (equal, differ) cases, (0, 0) for a group not run."""
    line = next(row for row in stdout.splitlines() if row.startswith(target + "  "))
    tokens = line[len(target) :].split()[: len(check.GROUPS)]
    assert all(re.fullmatch(r"\d+/\d+|-", t) for t in tokens), line
    return {g: (0, 0) if t == "-" else tuple(map(int, t.split("/"))) for g, t in zip(check.GROUPS, tokens, strict=True)}


def test_setup_lists_the_torch_free_cpu_sources():
    torch_free = sorted(
        f"csrc/cpu/{p.name}"
        for p in (ROOT / "csrc" / "cpu").glob("*.cpp")
        if not re.search(r"#include\s*<(ATen/|c10/|torch/(?!headeronly/))", p.read_text())
    )
    assert sorted(check.setup_definitions()["sources"]) == torch_free


@pytest.mark.parametrize("machine", ["x86_64", "aarch64", "s390x", "ppc64le"])
def test_cxx_flags_compile_the_cpu_sources_for(machine, tmp_path):
    target = next(t for t in CROSS.values() if t.machine == machine)
    if shutil.which(target.compiler) is None:
        pytest.skip(f"{target.compiler} not on PATH (.ci/run installs it)")
    setup = check.setup_definitions()
    flags = setup["cxx_flags"](machine)
    assert ("-mprefer-vector-width=512" in flags) == (machine == "x86_64")
    includes = [f"-I{d}" for d in (check.SHIM, ROOT / "csrc" / "include", ROOT / "csrc" / "cpu")]
    for source in setup["sources"]:
        done = subprocess.run(
            [target.compiler, *flags, "-O0", *includes, "-c", str(ROOT / source), "-o", str(tmp_path / "x.o")],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{machine} {source}:\n{done.stderr[-3000:]}"


@_needs("x86-64")
def test_the_native_harness_writes_the_extensions_bits():
    done = _run("--targets", "x86-64", "--xfail", "ftz", "--xfail", "ftz-fp64")
    assert done.returncode == 0, done.stdout + done.stderr
    cells = _cells(done.stdout, "x86-64")
    for group in ("uniform", "two-sided", "precise", "tail", "far-tail", "narrow", "subnormal", "fp64"):
        equal, differ = cells[group]
        assert equal > 0 and differ == 0, (group, done.stdout)


@_needs("aarch64 armv8-a", "s390x")
def test_aarch64_and_big_endian_s390x_write_the_extensions_bits():
    done = _run("--targets", "aarch64 armv8-a,s390x", *TODAY)
    assert done.returncode == 0, done.stdout + done.stderr
    for target in ("aarch64 armv8-a", "s390x"):
        cells = _cells(done.stdout, target)
        for group in ("uniform", "two-sided", "precise", "tail", "far-tail", "narrow", "subnormal"):
            equal, differ = cells[group]
            assert equal > 0 and differ == 0, (target, group, done.stdout)


@_needs("aarch64 armv8-a")
def test_the_sources_keep_contraction_off_whatever_the_build_line():
    """-ffp-contract=fast on the command line: fp_contract.h's pragmas keep the bits."""
    done = _run("--targets", "aarch64 armv8-a", "--contract", "fast", *TODAY)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "contraction: fast" in done.stdout


@_needs("aarch64 armv8-a")
def test_a_contracting_build_is_caught():
    """Without the pragmas (TINIT_TEST_CONTRACTED_BUILD) -ffp-contract=fast changes values: the
    kernels' own load-time self-test refuses to run (every CPU op would), and the check fails."""
    done = _run("--targets", "aarch64 armv8-a", "--contract", "fast-unguarded", *TODAY)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "the build contracts a*b + c into an fma" in done.stdout, done.stdout
