"""bench/bench_gpu_grouped.py on tiny CPU tensors: the pipeline the GPU check runs (no timing claims).

- every case writes validated, timed rows and a JSON + markdown report;
- a method that raises is recorded with its error, the others still run, and the exit status is 1;
- the profiler trace parser reads kernels, registers and launch shapes from kineto's chrome trace.
"""

from __future__ import annotations

import json
from pathlib import Path

import bench_gpu_grouped
import pytest
import torch

TINY = ["--device", "cpu", "--blocks", "1", "--widths", "8", "--large-numel", "4K", "--shard", "16", "--budget-s", "15"]


def _report(folder: Path) -> dict:
    found = sorted(folder.glob("gpu_dryrun_*_grouped.json"))
    assert len(found) == 1 and found[0].with_suffix(".md").exists(), f"reports in {folder}: {found}"
    return json.loads(found[0].read_text())


def test_cpu_rehearsal_writes_validated_rows(tmp_path, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)
    assert bench_gpu_grouped.main([*TINY, "--cases", "large,model", "--out-dir", str(tmp_path)]) == 0
    report = _report(tmp_path)
    assert report["complete"] and not report["failed"]
    timed = {(r["case"], r["dtype"], r["method"]) for r in report["results"] if "median_s" in r}
    for dtype in ("bf16", "f32"):
        for case, method in [
            ("large", "single"),
            ("large", "grouped_1"),
            ("shard", "runs"),
            ("shard", "row_loop"),
            ("model", "grouped"),
            ("model", "per_tensor"),
            ("model", "fill_loop"),
            ("model", "torch_loop"),
        ]:
            assert (case, dtype, method) in timed, f"{case} {dtype} {method} was not timed: {report['results']}"
    grouped = next(r for r in report["results"] if r["case"] == "model" and r["method"] == "grouped")
    assert grouped["validation"]["bits"] == "equal to per_tensor"
    assert grouped["launches"]["by_name"] == {"tinit::trunc_normal_grouped_": 1}
    assert report["environment"]["git_commit"]


def test_a_failing_method_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)

    def broken(*args, **kwargs):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(bench_gpu_grouped.ops, "trunc_normal_grouped_native", broken)
    assert bench_gpu_grouped.main([*TINY, "--cases", "large", "--dtypes", "f32", "--out-dir", str(tmp_path)]) == 1
    report = _report(tmp_path)
    failed = {r["method"]: r["error"] for r in report["results"] if "error" in r}
    assert list(failed) == ["grouped_1"] and "injected failure" in failed["grouped_1"]
    assert {r["method"] for r in report["results"] if "median_s" in r} == {"single", "runs", "row_loop"}
    assert "FAILED: RuntimeError: injected failure" in (tmp_path / next(tmp_path.glob("*.md")).name).read_text()


@pytest.mark.parametrize(
    "args",
    [{"registers per thread": 72, "block": [256, 1, 1], "grid": [4096, 1, 1], "est. achieved occupancy %": 38}, {}],
    ids=["full", "bare"],
)
def test_trace_kernels_reads_kineto_kernel_events(args):
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "tinit_grouped_kernel", "args": args},
            {"ph": "X", "cat": "kernel", "name": "tinit_grouped_kernel", "args": args},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "args": {}},
            {"ph": "X", "cat": "cpu_op", "name": "tinit::trunc_normal_grouped_", "args": {}},
        ]
    }
    found = bench_gpu_grouped.trace_kernels(trace)
    assert list(found) == ["tinit_grouped_kernel"] and found["tinit_grouped_kernel"]["launches"] == 2
    if args:
        assert found["tinit_grouped_kernel"]["registers"] == 72
        assert found["tinit_grouped_kernel"]["block"] == [256, 1, 1]


def test_case_seconds_come_from_the_caller(tmp_path, monkeypatch):
    """--case-s gives each case its own seconds (bench/gpu_check.sh decides them): a case given none
    records every method as skipped, the others still run, and a bad item is refused."""
    monkeypatch.delenv("OUT", raising=False)
    args = [*TINY, "--cases", "large,model", "--dtypes", "f32", "--case-s", "model=0", "--out-dir", str(tmp_path)]
    assert bench_gpu_grouped.main(args) == 0
    rows = _report(tmp_path)["results"]
    assert {r["method"] for r in rows if r["case"] == "large" and "median_s" in r} == {"single", "grouped_1"}
    model = [r for r in rows if r["case"] == "model"]
    assert model and all("skipped" in r for r in model), model
    with pytest.raises(SystemExit):
        bench_gpu_grouped.main([*TINY, "--case-s", "nope=3", "--out-dir", str(tmp_path)])


def test_large_rows_carry_the_sass_estimate_of_their_kernel(tmp_path):
    """single reads trunc_normal_kernel's estimate, grouped_1 and runs grouped_kernel's, in the row's
    dtype and the transform mode of std 0.02 in [-0.04, 0.04]; other methods and cases none."""
    from tinit.params import transform_constants

    mode = int(transform_constants(0.0, 0.02, -0.04, 0.04, torch.float32).mode)
    cases = [
        {"backend": "cuda", "kernel": "trunc_normal_kernel", "dtype": "fp32", "mode": mode, "est_gelem_s": 600.0},
        {"backend": "cuda", "kernel": "grouped_kernel", "dtype": "fp32", "mode": mode, "est_gelem_s": 500.0},
        {"backend": "cuda", "kernel": "grouped_kernel", "dtype": "bf16", "mode": mode, "est_gelem_s": 1.0},
    ]
    sass = tmp_path / "sass.json"
    sass.write_text(json.dumps({"cases": cases}))
    estimates, note = bench_gpu_grouped.load_sass_estimates(sass)
    assert note is None
    rows = [
        {"case": "large", "dtype": "f32", "method": "single"},
        {"case": "large", "dtype": "f32", "method": "grouped_1"},
        {"case": "shard", "dtype": "f32", "method": "runs"},
        {"case": "shard", "dtype": "f32", "method": "row_loop"},
        {"case": "model", "dtype": "f32", "method": "grouped"},
    ]
    bench_gpu_grouped.add_estimates(rows, estimates)
    assert [r.get("est_gelem_s") for r in rows] == [600.0, 500.0, 500.0, None, None]


def test_the_triton_case_runs_where_the_triton_backend_fills(tmp_path, monkeypatch):
    """The triton case (the model's truncated-normal tensors, per tensor and grouped) on the CPU under
    the interpreter, the session's choice (conftest): its grouped fill equal to its per-tensor one."""
    from tinit import dispatch

    why = dispatch.BACKENDS["triton"].why_not(torch.empty(4))
    if why is not None:
        pytest.skip(f"triton backend unavailable: {why}")
    monkeypatch.delenv("OUT", raising=False)
    argv = [*TINY, "--cases", "triton", "--dtypes", "f32", "--out-dir", str(tmp_path)]
    assert bench_gpu_grouped.main(argv) == 0
    rows = {r["method"]: r for r in _report(tmp_path)["results"] if r["case"] == "triton"}
    assert "setup" not in rows, rows.get("setup")
    assert rows["triton_grouped"]["validation"]["bits"] == "equal to triton_per_tensor"
