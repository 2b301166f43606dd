"""``tinit init``: the printed report is parsed and checked against the model and the scheme."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tinit
from tinit import schemes
from tinit.cli import build_model, main, materialise_, truncated_std
from tinit.models import GPT, GPTConfig

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--layers", "2", "--d-model", "64", "--no-progress"]
STD = 0.02


def _hf_available() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


needs_hf = pytest.mark.skipif(not _hf_available(), reason="transformers is not installed (pip install transformers)")


def _parse(out: str) -> dict:
    """The numbers of a ``tinit init`` report: count, tied lines, timings and the role table."""
    lines = out.splitlines()
    report = {"tied": [], "rows": {}}
    for line in lines:
        if line.startswith("parameters:"):
            report["count"] = int(line.split()[1].replace(",", ""))
        elif line.startswith("tied:"):
            report["tied"].append(line)
        elif line.startswith("tensors written:"):
            written, distinct = (int(part.split(":")[1]) for part in line.split(","))
            report["written"], report["distinct"] = written, distinct
        elif line.startswith("tinit again:"):
            report["second_pass_identical"] = "values identical to the first pass" in line
        elif line.startswith("speed-up:"):
            report["speedup"] = float(line.split()[1].rstrip("x"))
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["role", "tensors"])
    header = lines[start].split()
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        row = dict(zip(header, line.split(), strict=True))
        assert row["role"] not in report["rows"], f"two table rows for role {row['role']}: {out}"
        report["rows"][row["role"]] = row
    return report


def _run(capsys, *argv: str) -> dict:
    status = main(["init", *argv])
    out = capsys.readouterr().out
    assert status == 0, out
    return _parse(out)


def _check_report(report: dict, model: torch.nn.Module, n_layers: int, dtype_tol: float = 0.0) -> None:
    unique = sum(p.numel() for p in model.parameters())
    assert report["count"] == unique
    assert sum(int(r["elements"].replace(",", "")) for r in report["rows"].values()) == unique
    assert report["written"] == report["distinct"] == len(list(model.parameters()))
    assert len(report["tied"]) == 1
    assert "transformer.wte.weight = lm_head.weight" in report["tied"][0]
    assert report["tied"][0].endswith("written 1x")

    rows = report["rows"]
    assert set(rows) == {"embedding", "attn_qkv", "attn_out", "mlp_in", "mlp_out", "norm", "bias"}
    out = STD / math.sqrt(2 * n_layers)
    expected_parent = {"embedding": STD, "attn_qkv": STD, "mlp_in": STD, "attn_out": out, "mlp_out": out}
    for role, parent in expected_parent.items():
        row = rows[role]
        assert float(row["parent_std"]) == pytest.approx(parent, rel=1e-5), role
        assert float(row["trunc"]) == math.inf  # gpt2: HF's untruncated normal_
        intended = float(row["intended"])
        assert intended == pytest.approx(parent, rel=1e-4), role
        measured = float(row["measured"])
        assert abs(measured / intended - 1) < 0.03 + dtype_tol, f"{role}: measured {measured}, intended {intended}"
        assert abs(float(row["mean"])) < 0.05 * intended, role
    for role, value in (("norm", 1.0), ("bias", 0.0)):
        assert rows[role]["intended"] == f"={value:g}"
        assert float(rows[role]["measured"]) == value
        assert rows[role]["error"] == "dev=0"


def _meta_gpt(n_layers: int, d_model: int) -> GPT:
    with torch.device("meta"):
        return GPT(GPTConfig(n_layers=n_layers, d_model=d_model, n_heads=1))


def test_init_tinit_model(capsys):
    report = _run(capsys, *SMALL)
    _check_report(report, _meta_gpt(2, 64), n_layers=2)


def test_init_prints_the_stream_version(capsys):
    assert main(["init", *SMALL]) == 0
    out = capsys.readouterr().out
    assert f"stream version {tinit.STREAM_VERSION} (tinit {tinit.__version__}" in out
    assert tinit.STREAM_VERSION == 2


def test_residual_std_follows_depth(capsys):
    report = _run(capsys, "--layers", "8", "--d-model", "64", "--no-progress")
    assert float(report["rows"]["mlp_out"]["parent_std"]) == pytest.approx(STD / 4.0, rel=1e-5)
    _check_report(report, _meta_gpt(8, 64), n_layers=8)


def test_init_compare_bf16(capsys):
    report = _run(capsys, *SMALL, "--compare", "--dtype", "bfloat16", "--seed", "7")
    _check_report(report, _meta_gpt(2, 64), n_layers=2, dtype_tol=0.01)
    assert report["speedup"] > 0
    assert report["second_pass_identical"]
    for role in ("embedding", "attn_qkv", "attn_out", "mlp_in", "mlp_out"):
        row = report["rows"][role]
        assert abs(float(row["torch_measured"]) / float(row["intended"]) - 1) < 0.04, role


@needs_hf
def test_init_hf_gpt2(capsys):
    import transformers

    report = _run(capsys, "--model", "hf-gpt2", *SMALL)
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=64, n_head=1))
    _check_report(report, model, n_layers=2)


def test_hf_missing_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` raise ImportError
    with pytest.raises(SystemExit) as exit_info:
        main(["init", "--model", "hf-gpt2", *SMALL])
    assert exit_info.value.code == 2
    assert "pip install transformers" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["gpt2-small", pytest.param("hf-gpt2", marks=needs_hf)])
def test_materialise_restores_tie(name):
    model, _, _ = build_model(name, layers=1, d_model=64)
    materialise_(model)
    assert model.lm_head.weight is model.transformer.wte.weight
    assert model.lm_head.weight.device.type == "cpu"


def test_materialise_restores_tie_without_tie_weights():
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    model[1].weight = model[0].weight
    materialise_(model)
    assert model[1].weight is model[0].weight


def test_materialise_recomputes_buffers():
    with torch.device("meta"):
        model = torch.nn.BatchNorm1d(4)
    materialise_(model)
    assert torch.equal(model.running_var, torch.ones(4)) and torch.equal(model.running_mean, torch.zeros(4))


@pytest.mark.parametrize(
    "alpha,beta",
    [(-2.0, 2.0), (-3.0, 3.0), (0.0, math.inf), (-1.0, 0.5), (8.0, 100.0)],
    ids=["2sigma", "3sigma", "half", "skew", "far-tail"],
)
def test_truncated_std_matches_scipy(alpha, beta):
    truncnorm = pytest.importorskip("scipy.stats").truncnorm
    assert truncated_std(0.02, alpha, beta) == pytest.approx(0.02 * truncnorm.std(alpha, beta), rel=1e-6)


def test_python_dash_m():
    result = subprocess.run(
        [sys.executable, "-m", "tinit", "init", "--layers", "1", "--d-model", "64", "--no-progress"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = _parse(result.stdout)
    assert report["count"] == sum(p.numel() for p in _meta_gpt(1, 64).parameters())


HF_ROLES = {
    "gpt2": {"embedding", "attn_qkv", "attn_out", "mlp_in", "mlp_out", "norm", "bias"},
    "llama": {"embedding", "attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out", "norm", "head"},
    "mistral": {"embedding", "attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out", "norm", "head"},
    "qwen2": {"embedding", "attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out", "norm", "head", "bias"},
    "t5": {"embedding", "attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out", "norm"},
    "bert": {"embedding", "attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out", "norm", "bias"},
}


@needs_hf
@pytest.mark.parametrize("model_type", sorted(HF_ROLES))
def test_init_hf_families(capsys, model_type):
    """--hf MODEL_TYPE: a reduced config of each family, every role of the scheme within 3 % of its std."""
    report = _run(capsys, "--hf", model_type, "--layers", "2", "--d-model", "64", "--no-progress", "--scheme", "modern")
    assert set(report["rows"]) == HF_ROLES[model_type]
    assert report["written"] == report["distinct"]
    for role, row in report["rows"].items():
        if row["intended"].startswith("="):
            assert row["error"] == "dev=0", role
        else:
            assert float(row["trunc"]) == 3.0
            assert abs(float(row["measured"]) / float(row["intended"]) - 1) < 0.03, (role, row)
    small = math.sqrt(2 / (5 * 64))
    assert float(report["rows"]["attn_out"]["parent_std"]) == pytest.approx(small / 2, rel=1e-5)


def test_init_scheme_options(capsys):
    report = _run(capsys, *SMALL, "--scheme", "mitchell", "--variance-preserving", "--trunc", "2")
    row = report["rows"]["mlp_in"]
    assert float(row["trunc"]) == 2.0
    assert float(row["intended"]) == pytest.approx(1 / 8, rel=1e-4)  # realised std = 1/sqrt(d), d = 64
    assert float(row["parent_std"]) == pytest.approx(1 / 8 / truncated_std(1.0, -2.0, 2.0), rel=1e-5)
    deepnorm = _run(capsys, *SMALL, "--scheme", "deepnorm")["rows"]["attn_qkv"]
    assert deepnorm["parent_std"] == "parts"
    assert abs(float(deepnorm["measured"]) / float(deepnorm["intended"]) - 1) < 0.03


def test_init_depth_rows(capsys):
    rows = _run(capsys, "--layers", "3", "--d-model", "64", "--no-progress", "--scheme", "depth_init")["rows"]
    for layer in range(3):
        assert float(rows[f"attn_out@{layer}"]["parent_std"]) == pytest.approx(
            STD / math.sqrt(2 * (layer + 1)), rel=1e-5
        )


def test_init_refused_scheme_exits_2(capsys):
    assert main(["init", *SMALL, "--scheme", "rezero"]) == 2
    assert "residual_gate" in capsys.readouterr().err


def _cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m tinit`` in a fresh process, so that stderr is exactly what a user sees."""
    return subprocess.run(
        [sys.executable, "-m", "tinit", *argv],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tinit init: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA device")
@pytest.mark.parametrize("backend", ["auto", "cuda", "triton"])
def test_device_cuda_without_gpu_is_one_line(backend):
    _one_line_error(_cli("init", *SMALL, "--device", "cuda", "--backend", backend), "--device cuda", "no CUDA device")


def test_backend_cuda_on_the_cpu_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["init", *SMALL, "--backend", "cuda"])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip().splitlines() == [
        "tinit init: error: --backend cuda fills CUDA tensors only; add --device cuda"
    ]


def test_backend_triton_on_the_cpu_needs_the_interpreter():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    _one_line_error(_cli("init", *SMALL, "--backend", "triton", env=env), "TRITON_INTERPRET=1", "--device cuda")


def test_device_cpu_is_the_default(capsys):
    assert main(["init", *SMALL, "--device", "cpu"]) == 0
    assert "materialised on cpu" in capsys.readouterr().out


@pytest.mark.parametrize("flag", [[], ["--no-progress"]], ids=["bar", "no-bar"])
def test_progress_bars_on_stderr(flag, capsys):
    argv = ["init", "--layers", "1", "--d-model", "64", "--compare", *flag]
    assert main(argv) == 0
    captured = capsys.readouterr()
    bars = (
        "tinit fill (gpt2): 100%",
        "measuring stds: 100%",
        "torch.nn.init.trunc_normal_: 100%",
        "tinit fill again (gpt2): 100%",
    )
    n = len(list(_meta_gpt(1, 64).parameters()))
    if flag:
        assert captured.err == ""
    else:
        for bar in bars:
            assert f"{bar}|" in captured.err and f"{n}/{n}" in captured.err, (bar, captured.err)
    assert "100%" not in captured.out


def test_compare_names_the_torch_call(capsys):
    assert main(["init", *SMALL, "--scheme", "xavier_uniform", "--compare"]) == 0
    out = capsys.readouterr().out
    assert "trunc_normal_" not in out
    assert any(line.startswith("torch.nn.init.uniform_: ") and "same bounds" in line for line in out.splitlines())
    assert "x over torch.nn.init.uniform_ (" in out
    assert main(["init", *SMALL, "--compare"]) == 0
    out = capsys.readouterr().out
    assert "x over torch.nn.init.trunc_normal_ (" in out and "uniform_" not in out


def test_torch_calls_of_specs():
    from tinit.cli import _torch_calls

    normal = schemes.InitSpec(std=0.02, trunc=2.0)
    uniform = schemes.InitSpec(std=0.02, trunc=math.sqrt(3.0), distribution="uniform")
    assert _torch_calls(normal) == ("trunc_normal_",)
    assert _torch_calls(uniform) == ("uniform_",)
    assert _torch_calls(schemes.InitSpec(constant=1.0)) == ("constant_",)
    assert _torch_calls(schemes.InitSpec(parts=(uniform, normal, uniform))) == ("uniform_", "trunc_normal_")
