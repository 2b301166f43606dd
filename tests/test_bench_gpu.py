"""bench/bench_gpu.py on tiny CPU tensors, and what the GPU check needs of its modules (no GPU needed).

- every window's rows are validated and timed, and the report is written;
- the SASS estimate is matched by backend kernel, dtype and transform mode;
- the benchmark's exact moments and test_backends' closed form agree with scipy's;
- bench_gpu, bench_gpu_grouped and the GPU test files (test_gpu, test_backends, test_stream_contract) import
  without scipy, matplotlib and transformers (the GPU machine has none of them).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import bench_gpu
import pytest
import test_backends
import torch
from helpers import WINDOWS, exact_moments

import tinit

ROOT = Path(__file__).resolve().parent.parent

SASS = {
    "cases": [
        {
            "backend": "cuda",
            "kernel": "trunc_normal_kernel",
            "dtype": "fp32",
            "mode": 1,
            "mode_name": "two_sided",
            "est_gelem_s": 600.0,
            "bound": "issue",
            "sass_per_elem": 50.0,
        },
        {
            "backend": "cuda",
            "kernel": "grouped_kernel",
            "dtype": "fp32",
            "mode": 1,
            "mode_name": "two_sided",
            "est_gelem_s": 1.0,
        },
        {
            "backend": "cuda",
            "kernel": "trunc_normal_kernel",
            "dtype": "bf16",
            "mode": 3,
            "mode_name": "excursion",
            "est_gelem_s": 250.0,
        },
        {"backend": "cuda", "kernel": "philox_kernel", "dtype": "words", "mode": None, "est_gelem_s": 1200.0},
    ]
}


def test_cpu_rehearsal_writes_validated_rows(tmp_path, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)
    sass = tmp_path / "sass.json"
    sass.write_text(json.dumps(SASS))
    assert (
        bench_gpu.main(
            ["--device", "cpu", "--sizes", "4K", "--sass-json", str(sass), "--out-dir", str(tmp_path / "out")]
        )
        == 0
    )
    found = sorted((tmp_path / "out").glob("gpu_dryrun_*.json"))
    assert len(found) == 1 and found[0].with_suffix(".md").exists(), found
    report = json.loads(found[0].read_text())
    assert report["complete"] and not report["failed"]
    timed = {(r["dtype"], r["window"], r["method"]) for r in report["results"] if "median_s" in r}
    for dtype in ("f32", "bf16"):
        assert (dtype, "-", "fill") in timed
        for window in bench_gpu.WINDOWS:
            assert (dtype, window, "tinit_cpu") in timed and (dtype, window, "torch") in timed, (dtype, window)
    cpu = next(r for r in report["results"] if r["method"] == "tinit_cpu" and r["window"] == "tail")
    assert cpu["mode"] == "TAIL" and set(cpu["validation"]["cpu_check"].values()) == {"equal to the cpu backend's"}
    assert "- f32 pm2sigma [TWO_SIDED]: cuda 600.0, triton - G elem/s" in report["environment"]["planned_estimates"]
    assert "estimate (SASS)" in found[0].with_suffix(".md").read_text()


def test_estimates_match_backend_kernel_dtype_and_mode(tmp_path):
    sass = tmp_path / "sass.json"
    sass.write_text(json.dumps(SASS))
    estimates, note = bench_gpu.load_estimates(sass)
    assert note is None
    constants = bench_gpu.WINDOWS["pm2sigma"].constants(torch.float32)
    mode = int(constants.mode)
    assert mode == tinit.params.Mode.TWO_SIDED
    assert bench_gpu._estimate(estimates, "tinit_cuda", "f32", mode)["est_gelem_s"] == 600.0
    assert bench_gpu._estimate(estimates, "tinit_triton", "f32", mode) == {}
    assert bench_gpu._estimate(estimates, "torch", "f32", mode) == {}
    renamed = bench_gpu._estimate(estimates, "tinit_cuda", "bf16", int(tinit.params.Mode.TAIL))
    assert renamed["est_gelem_s"] == 250.0 and renamed["est_mode_name"] == "excursion"
    assert bench_gpu.load_estimates(None)[0] == {} and bench_gpu.load_estimates(tmp_path / "none.json")[1]


def test_annotate_adds_the_estimates_a_run_lacked(tmp_path, monkeypatch):
    """gpu_check.sh compiles Triton's SASS while the benchmark runs, then annotates its report: the triton
    rows get the estimate of their kernel, dtype and mode, and what was measured stays as it was."""
    monkeypatch.delenv("OUT", raising=False)
    env = bench_gpu.gpu_environment(torch.device("cpu"))
    base = {"numel": 4096, "size": "4K", "dtype": "f32", "bytes": 16384}

    def timed(t):
        return {"median_s": t, "g_elements_per_s": 4096 / t / 1e9, "write_gb_per_s": 16384 / t / 1e9}

    rows = [
        {**base, "window": "-", "method": "fill", **timed(1e-6)},
        {**base, "window": "pm2sigma", "method": "tinit_triton", "mode": "TWO_SIDED", **timed(2e-6)},
        {**base, "window": "pm2sigma", "method": "torch", "mode": "TWO_SIDED", **timed(8e-6)},
    ]
    bench_gpu._derive(rows)
    (written,) = [p for p in bench_gpu.write(env, rows, tmp_path, complete=True) if p.suffix == ".json"]
    assert "est_gelem_s" not in json.loads(written.read_text())["results"][1]
    triton = {**SASS["cases"][0], "backend": "triton", "kernel": "_trunc_normal_kernel", "est_gelem_s": 599.0}
    sass = tmp_path / "sass.json"
    sass.write_text(json.dumps({"cases": [*SASS["cases"], triton]}))
    assert bench_gpu.main(["--annotate", str(written), "--sass-json", str(sass), "--out-dir", str(tmp_path)]) == 0
    after = json.loads(written.read_text())["results"]
    assert after[1]["est_gelem_s"] == 599.0 and after[1]["median_s"] == 2e-6
    assert "est_gelem_s" not in after[2] and after[2]["median_s"] == 8e-6
    assert "599.0" in written.with_suffix(".md").read_text()
    with pytest.raises(ValueError, match="unreadable"):
        bench_gpu.annotate(written, tmp_path / "missing.json", tmp_path)


@pytest.mark.parametrize("name", list(bench_gpu.WINDOWS))
def test_window_moments_equal_scipy(name):
    window = bench_gpu.WINDOWS[name]
    if window.uniform:
        lo, hi = window.args
        want = ((lo + hi) / 2, (hi - lo) / math.sqrt(12))
    else:
        want = exact_moments(*window.args)
    got = window.moments()
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12), f"{name}: {got} vs scipy {want}"


@pytest.mark.parametrize("name", ["central_2sigma", "gpt2", "shifted"])
def test_backend_suite_closed_form_moments_equal_scipy(name):
    window = WINDOWS[name]
    assert test_backends.two_sided_moments(*window) == pytest.approx(exact_moments(*window), rel=1e-12)


BLOCK_MODULES = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("scipy", "matplotlib", "transformers"):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)")
sys.meta_path.insert(0, Block())
sys.path[:0] = ["bench", "tests"]
"""


def gpu_test_files() -> list[str]:
    """bench/gpu_check.sh's GPU_TEST_FILES: the test files its GPU step runs."""
    text = (ROOT / "bench" / "gpu_check.sh").read_text()
    match = re.search(r"^GPU_TEST_FILES=\(([^)]*)\)", text, re.MULTILINE)
    assert match, "bench/gpu_check.sh has no GPU_TEST_FILES=(...)"
    return match.group(1).split()


def test_gpu_check_modules_import_without_scipy():
    files = gpu_test_files()
    assert "tests/test_gpu.py" in files and "tests/test_backends.py" in files, files
    code = (
        BLOCK_MODULES
        + f"FILES = {files!r}\n"
        + """
import bench_gpu, bench_gpu_grouped
import pytest
sys.exit(pytest.main(["-q", "--collect-only", "-p", "no:cacheprovider", *FILES]))
"""
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " collected in " in proc.stdout.splitlines()[-1], proc.stdout[-3000:]


def test_a_misaligned_fill_is_validated_on_its_view():
    """``tinit_cuda_misaligned`` fills ``x[1:]`` from stream index 0: the check reads the view, so the
    right values pass bit for bit, and values one element off (the whole tensor's fill) fail."""
    window = bench_gpu.WINDOWS["pm2sigma"]
    constants = window.constants(torch.float32)
    fill = tinit.dispatch.BACKENDS["cpu"].fill
    x = torch.full((70001,), float("nan"))  # x[0] stays NaN: the check must not read it
    fill(x[1:], bench_gpu.SEED, 0, 0, constants)
    facts = bench_gpu.validate("tinit_cpu_misaligned", window, x)
    assert set(facts["cpu_check"].values()) == {"equal to the cpu backend's"}
    fill(x, bench_gpu.SEED, 0, 0, constants)
    with pytest.raises(AssertionError, match="differ from the cpu backend's"):
        bench_gpu.validate("tinit_cpu_misaligned", window, x)
