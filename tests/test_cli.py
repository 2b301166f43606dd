"""``tinit init``: the printed report is parsed and checked against the model and the scheme."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tinit
from tinit import schemes
from tinit.tools import hf_families
from tinit.tools.cli import DTYPES, main, materialise_, truncated_std
from tinit.tools.cli_models import build_model
from tinit.tools.toy_models import GPT, GPTConfig

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
    assert tinit.STREAM_VERSION == 3


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
    "llama": {"embedding", "attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_up", "mlp_out", "norm", "head"},
    "mistral": {"embedding", "attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_up", "mlp_out", "norm", "head"},
    "qwen2": {
        "embedding",
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_out",
        "mlp_in",
        "mlp_up",
        "mlp_out",
        "norm",
        "head",
        "bias",
    },
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
        "torch.nn.init.normal_: 100%",
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
    line = next(line for line in out.splitlines() if line.startswith("torch.nn.init.uniform_: "))
    assert "the recipe reference's call, same distribution per parameter" in line
    assert "x over torch.nn.init.uniform_ (" in out
    # gpt2 (the default) is untruncated: Hugging Face's GPT-2 init calls normal_, and so does the comparison
    assert main(["init", *SMALL, "--compare"]) == 0
    out = capsys.readouterr().out
    assert "x over torch.nn.init.normal_ (" in out and "trunc_normal_" not in out and "uniform_" not in out
    # truncated by the user: trunc_normal_ with the recipe's bounds
    assert main(["init", *SMALL, "--trunc", "2", "--compare"]) == 0
    out = capsys.readouterr().out
    assert "x over torch.nn.init.trunc_normal_ (" in out


def test_torch_calls_of_specs():
    from tinit.tools.cli import _torch_calls

    normal = schemes.InitSpec(std=0.02, trunc=2.0)
    uniform = schemes.InitSpec(std=0.02, trunc=math.sqrt(3.0), distribution="uniform")
    assert _torch_calls(normal) == ("trunc_normal_",)
    assert _torch_calls(schemes.InitSpec(std=0.02, trunc=math.inf)) == ("normal_",)
    assert _torch_calls(uniform) == ("uniform_",)
    assert _torch_calls(schemes.InitSpec(constant=1.0)) == ("constant_",)
    assert _torch_calls(schemes.InitSpec(parts=(uniform, normal, uniform))) == ("uniform_", "trunc_normal_")


# --config, --set and --save: Hugging Face configs as users have them, and the weights written out.
TINY_LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 128,
    "bos_token_id": 0,
    "eos_token_id": 0,
}
QUIET = ["--no-progress", "--scheme", "normal"]


def _saved(directory: Path) -> tuple[dict, dict]:
    from safetensors.torch import load_file

    return load_file(str(directory / "model.safetensors")), json.loads((directory / "tinit_init.json").read_text())


def _fresh(model: torch.nn.Module, scheme: str, seed: int, **kwargs) -> dict:
    tinit.init_model_(model, scheme, seed=seed, device="cpu", **kwargs)
    return model.state_dict()


def _assert_bits(saved: dict, fresh: dict, skip: set = frozenset()) -> None:
    assert set(saved) == set(fresh) - skip
    for name, tensor in saved.items():
        torch.testing.assert_close(tensor, fresh[name], rtol=0, atol=0, msg=lambda m, n=name: f"{n}: {m}")


@needs_hf
@pytest.mark.parametrize("inline", [False, True], ids=["file", "inline"])
def test_config_file_and_inline(tmp_path, capsys, inline):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_LLAMA))
    source = json.dumps(TINY_LLAMA) if inline else str(path)
    report = _run(capsys, "--config", source, *QUIET)
    model = hf_families.build(
        hf_families.from_fields("llama", {k: v for k, v in TINY_LLAMA.items() if k != "model_type"})
    )
    assert type(model).__name__ == "LlamaForCausalLM"
    assert report["count"] == sum(p.numel() for p in model.parameters())


@needs_hf
def test_config_from_save_pretrained_round_trips(tmp_path, capsys):
    """A config.json that transformers wrote (architectures, dtype, version) builds the same class, no warning."""
    config = hf_families.config("qwen2", num_hidden_layers=2)
    config.architectures = ["Qwen2ForCausalLM"]
    config.save_pretrained(tmp_path)
    assert main(["init", "--config", str(tmp_path / "config.json"), *QUIET]) == 0
    captured = capsys.readouterr()
    assert "Qwen2ForCausalLM" in captured.out and "warning" not in captured.err


@needs_hf
def test_config_unknown_field_is_a_warning(capsys):
    assert main(["init", "--config", json.dumps({**TINY_LLAMA, "my_custom_width": 3}), *QUIET]) == 0
    err = capsys.readouterr().err
    assert "tinit init: warning: the config's my_custom_width are not fields of LlamaConfig" in err


@needs_hf
def test_set_overrides_fields(tmp_path, capsys):
    argv = ["--hf", "llama", "--set", "num_hidden_layers=3", "--set", 'rope_scaling={"type":"linear","factor":2}']
    assert main(["init", *argv, "--set", "hidden_act=gelu", *QUIET, "--save", str(tmp_path)]) == 0
    capsys.readouterr()
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["num_hidden_layers"] == 3 and config["hidden_act"] == "gelu"
    assert config["rope_parameters"]["rope_type"] == "linear" and config["rope_parameters"]["factor"] == 2
    # --set wins over the generic flags; a dotted key reaches a held config
    report = _run(capsys, "--hf", "llava", "--set", "text_config.num_hidden_layers=1", "--layers", "3", *QUIET)
    rows = _run(capsys, "--hf", "llava", *QUIET)
    assert report["count"] < rows["count"]


def test_parse_set():
    from tinit.tools.cli_models import parse_set

    assert parse_set(["a=1", "b=[1, 2]", "c=gelu", 'd="x"', "e=null", "t.n=2", "t.m=true", "a=2"]) == {
        "a": 2,
        "b": [1, 2],
        "c": "gelu",
        "d": "x",
        "e": None,
        "t": {"n": 2, "m": True},
    }
    for bad, needle in (("novalue", "expected KEY=VALUE"), ("=1", "expected KEY=VALUE"), ('r={"a":', "not valid JSON")):
        with pytest.raises(ValueError, match=needle):
            parse_set([bad])


@needs_hf
def test_generic_flags_reach_each_family_s_fields():
    from tinit.tools.cli_models import generic_fields

    t5 = generic_fields(hf_families.config("t5"), layers=3, d_model=128, heads=2)
    assert t5 == {"num_layers": 3, "num_decoder_layers": 3, "d_model": 128, "num_heads": 2, "d_ff": 512, "d_kv": 64}
    llama = generic_fields(hf_families.config("llama"), layers=None, d_model=None, heads=8)
    assert llama == {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32}
    gemma = generic_fields(hf_families.config("gemma"), layers=None, d_model=512, heads=None)
    assert gemma["head_dim"] == 64 and gemma["num_attention_heads"] == 8 and gemma["intermediate_size"] == 2048
    mla = generic_fields(hf_families.config("deepseek_v3"), layers=None, d_model=None, heads=8)
    assert mla["num_key_value_heads"] == 8  # MLA keeps one key/value head per query head
    assert generic_fields(hf_families.config("llava"), layers=2, d_model=None, heads=None) == {
        "text_config": {"num_hidden_layers": 2}
    }
    with pytest.raises(ValueError, match="--heads 3 must divide d_model 256"):
        generic_fields(hf_families.config("llama"), layers=None, d_model=None, heads=3)


def test_save_round_trip_tinit_model(tmp_path, capsys):
    """tinit's own model: the safetensors file holds, bit for bit, a fresh init with the same seed (one
    tensor per tie)."""
    pytest.importorskip("safetensors", reason="safetensors is not installed (pip install safetensors)")
    assert main(["init", *SMALL, "--seed", "5", "--save", str(tmp_path / "out")]) == 0
    assert "saved to" in capsys.readouterr().out
    saved, record = _saved(tmp_path / "out")
    fresh = _fresh(build_model("gpt2-small", layers=2, d_model=64)[0], "gpt2", 5)
    _assert_bits(saved, fresh, skip={"lm_head.weight"})
    from safetensors import safe_open

    with safe_open(str(tmp_path / "out" / "model.safetensors"), "pt") as handle:
        assert json.loads(handle.metadata()["tied"]) == {"lm_head.weight": "transformer.wte.weight"}
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["n_layers"] == 2 and config["d_model"] == 64
    assert record["scheme"] == "gpt2" and record["seed"] == 5
    assert record["stream_version"] == tinit.STREAM_VERSION and record["tinit_version"] == tinit.__version__
    assert sum(row["elements"] for row in record["roles"]) == sum(t.numel() for t in saved.values())


@needs_hf
@pytest.mark.parametrize(
    "family,dtype", [("llama", "float32"), ("llama", "bfloat16"), ("mixtral", "float32")], ids=lambda v: v
)
def test_save_round_trip_hf(tmp_path, capsys, family, dtype):
    """An HF model: from_pretrained(DIR) gives, bit for bit, a fresh init with the same seed; for Llama the
    safetensors file holds it under the model's own names (transformers writes Mixtral's experts one by one,
    in the checkpoint's original layout, and converts them back when loading)."""
    argv = ["--hf", family, "--layers", "2", "--seed", "3", "--dtype", dtype, "--save", str(tmp_path)]
    assert main(["init", *argv, *QUIET]) == 0
    capsys.readouterr()
    saved, record = _saved(tmp_path)
    model = hf_families.build(family, num_hidden_layers=2).to(dtype=DTYPES[dtype])
    fresh = _fresh(model, "normal", 3)
    if family == "llama":
        _assert_bits(saved, fresh, skip={n for n in fresh if "rotary" in n})
    assert sum(t.numel() for t in saved.values()) == sum(p.numel() for p in model.parameters())
    assert record["transformers_version"] and record["dtype"] == dtype
    import transformers

    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=DTYPES[dtype])
    assert set(loaded.state_dict()) == set(fresh)
    for name, tensor in loaded.state_dict().items():
        torch.testing.assert_close(tensor, fresh[name], rtol=0, atol=0, msg=lambda m, n=name: f"{n}: {m}")


def _refused(monkeypatch, capsys, *argv: str) -> str:
    """``tinit init ARGV`` exits 2 with one line on stderr, before the model is materialised."""

    def no_allocation(*args, **kwargs):
        raise AssertionError("materialised before the arguments were checked")

    monkeypatch.setattr("tinit.tools.cli.materialise_", no_allocation)
    with pytest.raises(SystemExit) as exit_info:
        main(["init", *argv])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err.strip().splitlines()[-1]


@needs_hf
@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--config", '{"model_type": "llama",'], "--config inline JSON: not valid JSON"),
        (["--config", "[1, 2]"], "--config inline JSON: expected a JSON object, got list"),
        (["--config", '{"hidden_size": 64}'], 'no "model_type"'),
        (["--config", '{"model_type": "no_such_type"}'], "unknown transformers model type 'no_such_type'"),
        (["--config", "/no/such/config.json"], "--config /no/such/config.json: cannot read it"),
        (["--hf", "lama"], "invalid choice: 'lama'"),
        (["--hf", "llama", "--set", "num_hidden_layer=80"], "did you mean num_hidden_layers?"),
        (["--hf", "llava", "--set", "text_config.hiden_size=8"], "text_config.hiden_size"),
        (["--hf", "llama", "--set", "num_hidden_layers"], "expected KEY=VALUE"),
        (["--hf", "llama", "--set", 'rope_scaling={"type":'], "not valid JSON"),
        (["--set", "n_layer=3"], "GPTConfig has no field n_layer"),
        (["--hf", "llama", "--config", "{}"], "not allowed with argument"),
        (["--hf", "llama", "--heads", "3"], "--heads 3 must divide d_model 256"),
        (
            ["--hf", "llama", "--set", "num_hidden_layers=-2"],
            "--set num_hidden_layers=-2: a count or size must be >= 1",
        ),
        (
            ["--hf", "mixtral", "--set", "num_local_experts=0"],
            "--set num_local_experts=0: a count or size must be >= 1",
        ),
        (["--hf", "llama", "--set", "vocab_size=0"], "--set vocab_size=0: a count or size must be >= 1"),
        (["--hf", "llava", "--set", "text_config.num_hidden_layers=0"], "--set text_config.num_hidden_layers=0: a"),
        (["--model", "hf-gpt2", "--set", "n_layer=0"], "--set n_layer=0: a count or size must be >= 1"),
    ],
    ids=[
        "bad-json",
        "json-not-object",
        "no-model-type",
        "unknown-model-type",
        "missing-file",
        "unknown-family",
        "unknown-field",
        "unknown-held-field",
        "set-without-value",
        "set-bad-json",
        "set-tinit-model",
        "hf-and-config",
        "bad-shape",
        "negative-layers",
        "zero-experts",
        "zero-vocab",
        "zero-held-layers",
        "hf-gpt2-zero-layers",
    ],
)
def test_config_errors_exit_2_before_allocating(monkeypatch, capsys, argv, needle):
    assert needle in _refused(monkeypatch, capsys, *argv, *QUIET)


@pytest.mark.parametrize("where", ["file", "under-a-file"])
def test_save_to_an_unwritable_place(tmp_path, monkeypatch, capsys, where):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    target = blocker if where == "file" else blocker / "out"
    line = _refused(monkeypatch, capsys, *SMALL, "--save", str(target))
    assert line.startswith(f"tinit init: error: --save {target}: ")
    assert ("is not a directory") in line


# A config.json as the Hub serves it for Meta-Llama-3-8B (transformers 4.40: legacy rope_theta, torch_dtype).
LLAMA3_8B = {
    "_name_or_path": "meta-llama/Meta-Llama-3-8B",
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.0.dev0",
    "vocab_size": 128256,
}


@needs_hf
def test_config_of_a_released_model(tmp_path, capsys):
    """A Hub config.json with legacy names: no warning (rope_theta is read), the architecture as given,
    shrunk by --set; --set takes the legacy name too."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA3_8B))
    shrink = ["--set", "num_hidden_layers=1", "--set", "vocab_size=512", "--set", "intermediate_size=1024"]
    argv = ["--config", str(path), *shrink, "--set", "rope_theta=1e6", *QUIET, "--save", str(tmp_path / "out")]
    assert main(["init", *argv]) == 0
    captured = capsys.readouterr()
    assert "tinit init: warning" not in captured.err
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["hidden_size"] == 4096 and config["num_key_value_heads"] == 8 and config["num_hidden_layers"] == 1
    assert config["rope_parameters"]["rope_theta"] == 1e6


@needs_hf
@pytest.mark.parametrize("family", sorted(hf_families.FAMILIES))
def test_every_family_builds_through_the_cli(family):
    from tinit.tools.cli_models import build_hf

    built = build_hf(family)
    assert built.hf and built.n_layers is None and built.description.startswith(f"hf {family} (")
    expected = hf_families.build(family)
    assert type(built.model) is type(expected) and all(p.is_meta for p in built.model.parameters())
    assert sum(p.numel() for p in built.model.parameters()) == sum(p.numel() for p in expected.parameters())


def test_save_without_safetensors_exits_2_before_allocating(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "safetensors", None)  # makes `import safetensors` raise ImportError
    line = _refused(monkeypatch, capsys, *SMALL, "--save", str(tmp_path / "out"))
    assert "--save needs safetensors (pip install safetensors)" in line
    assert not (tmp_path / "out").exists()


def test_unclassified_reaches_init_model(monkeypatch, capsys):
    """--unclassified is passed to init_model_ as is; a value that is neither 'error' nor a role exits 2."""
    seen = {}
    real = tinit.init_model_

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(tinit, "init_model_", spy)
    _run(capsys, "--layers", "1", "--d-model", "64", "--unclassified", "linear", *QUIET)
    assert seen["unclassified"] == "linear"
    with pytest.raises(SystemExit) as exit_info:
        main(["init", "--unclassified", "skip", *QUIET])
    assert exit_info.value.code == 2
    assert "invalid choice: 'skip'" in capsys.readouterr().err


@needs_hf
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--hf", "llama", "--set", "num_hidden_layers=abc"], "LlamaConfig refused the fields"),
        (["--hf", "llama", "--set", "hidden_size=250"], "not a multiple of the number of attention heads"),
        (["--config", '{"model_type": "lama"}'], "did you mean llama"),
    ],
)
def test_configs_the_model_refuses_exit_2(capsys, argv, needle):
    """A config transformers' own validation refuses is a usage error (exit 2, no traceback)."""
    with pytest.raises(SystemExit) as exit_info:
        main(["init", *argv, *QUIET])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("tinit init: error:") and needle in err and "Traceback" not in err


def _allocated_bytes(argv: list[str], dtype: torch.dtype) -> int:
    """The bytes the model of ``argv`` really takes: materialised, each storage once (ties share one)."""
    from tinit.tools.cli import build_parser, make_model

    args = build_parser().parse_args(["init", *argv])
    model = make_model(args.model, layers=args.layers, d_model=args.d_model, heads=args.heads, fields={}).model
    model.to(dtype=dtype)
    materialise_(model, "cpu")
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in model.state_dict().values()}
    storages.update({b.untyped_storage().data_ptr(): b.untyped_storage().nbytes() for b in model.buffers()})
    return sum(storages.values())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_model_larger_than_the_memory_left_exits_2_with_both_figures(monkeypatch, capsys, dtype):
    """The parameter and buffer bytes are counted on meta and checked against the available figure
    (here a monkeypatched one) before anything is allocated; exactly enough memory runs."""
    from tinit.tools import memory

    argv = [*SMALL, "--dtype", dtype]
    needed = _allocated_bytes(argv, DTYPES[dtype])
    monkeypatch.setattr(memory, "available", lambda device: memory.Available(needed - 1, "a test's figure"))
    line = _refused(monkeypatch, capsys, *argv)
    assert line.startswith("tinit init: error: the model's parameters and buffers need ")
    assert f"{needed:,} bytes" in line and f"{needed - 1:,} bytes" in line and "(a test's figure)" in line
    monkeypatch.undo()
    monkeypatch.setattr(memory, "available", lambda device: memory.Available(needed, "a test's figure"))
    assert main(["init", *argv]) == 0
    capsys.readouterr()


def test_the_reported_oom_case_is_refused_without_allocating(monkeypatch, capsys):
    """``--layers 2000 --d-model 16384``: 6.4e12 parameters, refused at once on this machine's own figure."""
    line = _refused(monkeypatch, capsys, "--layers", "2000", "--d-model", "16384", "--no-progress")
    assert "available on cpu (" in line and "more than the" in line


def test_check_sizes_rule():
    """Counts and sizes (num_*, n_*, *_size) >= 1 where the class default is >= 1, >= 0 where it is 0 or
    None (an optional count); other integer fields (token ids) and non-integers are not sizes."""
    from tinit.tools.cli_models import check_sizes

    defaults = {"num_layers": 4, "n_shared_experts": None, "num_extra": 0, "hidden_size": 8, "text_config": {"n_x": 2}}
    check_sizes(
        {"n_shared_experts": 0, "num_extra": 0, "bos_token_id": -1, "num_layers": 1, "hidden_size": 2.5}, defaults
    )
    for fields, needle in [
        ({"num_layers": 0}, "num_layers=0: a count or size must be >= 1 (the config's default is 4)"),
        ({"n_shared_experts": -1}, "n_shared_experts=-1: a count or size must be >= 0"),
        ({"text_config": {"n_x": 0}}, "--set text_config.n_x=0: a count or size must be >= 1"),
    ]:
        with pytest.raises(ValueError, match=re.escape(needle)):
            check_sizes(fields, defaults)


# --save that cannot tear, --force, --config DIR, --version, storage fields.
def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_save_refuses_a_non_empty_directory_without_force(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    assert main(["init", *SMALL, "--seed", "0", "--save", str(out)]) == 0
    capsys.readouterr()
    before = _files(out)
    line = _refused(monkeypatch, capsys, *SMALL, "--seed", "1", "--save", str(out))
    assert line.startswith(f"tinit init: error: --save {out}: the directory is not empty (pass --force")
    assert _files(out) == before  # the earlier save is untouched


def test_save_with_force_replaces_the_directory_whole(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["init", *SMALL, "--seed", "0", "--save", str(out)]) == 0
    (out / "stale.txt").write_text("a file added to the earlier save")
    assert main(["init", *SMALL, "--seed", "1", "--save", str(out), "--force"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tinit_init.json"]
    saved, record = _saved(out)
    assert record["seed"] == 1
    fresh = _fresh(build_model("gpt2-small", layers=2, d_model=64)[0], "gpt2", 1)
    _assert_bits(saved, fresh, skip={"lm_head.weight"})
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # nothing left beside it


@pytest.mark.parametrize("step", ["weights", "record"])
def test_an_interrupted_save_leaves_the_earlier_one_whole(tmp_path, monkeypatch, capsys, step):
    """A KeyboardInterrupt while writing (Ctrl-C during the weights or the record) leaves the earlier
    save exactly as it was and no partial copy beside it."""
    from tinit.tools import cli_models

    out = tmp_path / "out"
    assert main(["init", *SMALL, "--seed", "0", "--save", str(out)]) == 0
    capsys.readouterr()
    before = _files(out)
    real = Path.write_text

    def interrupted(self, *args, **kwargs):
        if self.name == "tinit_init.json":
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    if step == "weights":
        import safetensors.torch

        def stop(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(safetensors.torch, "save_file", stop)
    else:
        monkeypatch.setattr(Path, "write_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(["init", *SMALL, "--seed", "1", "--save", str(out), "--force"])
    monkeypatch.undo()
    assert _files(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert cli_models.check_save_dir(str(out)) is not None  # still the earlier, non-empty save


def test_force_refuses_a_directory_that_is_not_an_earlier_save(tmp_path, monkeypatch, capsys):
    """--force replaces an earlier save only: a user's other directory is refused, byte for byte untouched."""
    out = tmp_path / "thesis"
    (out / "sub").mkdir(parents=True)
    (out / "thesis.tex").write_text("\\documentclass{article}")
    (out / "sub" / "data.bin").write_bytes(b"\x00\x01")
    line = _refused(monkeypatch, capsys, *SMALL, "--save", str(out), "--force")
    assert line.startswith(f"tinit init: error: --save {out}: --force replaces only an earlier tinit save")
    assert "tinit_init.json" in line
    assert (out / "thesis.tex").read_text() == "\\documentclass{article}"
    assert (out / "sub" / "data.bin").read_bytes() == b"\x00\x01"
    assert [p.name for p in tmp_path.iterdir()] == ["thesis"]  # nothing staged beside it


@pytest.mark.parametrize("where", [".", ".."])
def test_save_refuses_the_current_directory_and_its_parents(tmp_path, monkeypatch, capsys, where):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    (work / "tinit_init.json").write_text("{}")  # even one that looks like an earlier save
    monkeypatch.chdir(work)
    line = _refused(monkeypatch, capsys, *SMALL, "--save", where, "--force")
    assert "is the current directory or one of its parents" in line
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt", "tinit_init.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def test_force_without_save_is_refused(monkeypatch, capsys):
    line = _refused(monkeypatch, capsys, *SMALL, "--force")
    assert "--force" in line and "--save" in line


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"tinit {tinit.__version__} (stream version {tinit.STREAM_VERSION})"


@needs_hf
def test_config_takes_a_saved_model_directory(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--config", json.dumps(TINY_LLAMA), *QUIET, "--seed", "2", "--save", str(out)]
    assert main(["init", *argv]) == 0
    first = _run(capsys, "--config", json.dumps(TINY_LLAMA), *QUIET)
    again = _run(capsys, "--config", str(out), *QUIET)
    assert again["count"] == first["count"]


@needs_hf
def test_config_directory_without_config_json_is_refused(tmp_path, monkeypatch, capsys):
    line = _refused(monkeypatch, capsys, "--config", str(tmp_path), *QUIET)
    assert f"--config {tmp_path}: a directory without a config.json" in line


@needs_hf
def test_quantization_config_is_dropped_and_the_save_loads(tmp_path, capsys):
    """A Hub config with an fp8 quantization_config (DeepSeek-V3's form): dropped with one line, and
    from_pretrained loads the save with no extra package, bit for bit."""
    import transformers

    config = {
        **TINY_LLAMA,
        "quantization_config": {
            "activation_scheme": "dynamic",
            "fmt": "e4m3",
            "quant_method": "fp8",
            "weight_block_size": [128, 128],
        },
    }
    out = tmp_path / "out"
    assert main(["init", "--config", json.dumps(config), *QUIET, "--dtype", "bfloat16", "--save", str(out)]) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if "quantization_config" in line]
    assert len(notes) == 1 and "dropped" in notes[0]
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
    model = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.bfloat16)
    saved, _ = _saved(out)
    loaded = model.state_dict()
    for name, tensor in saved.items():
        torch.testing.assert_close(loaded[name], tensor, rtol=0, atol=0)


@needs_hf
@pytest.mark.parametrize(("model_type", "theta"), [("mixtral", 1e6), ("deepseek_v3", 10000.0), ("llama", 5e5)])
def test_rope_theta_at_its_default_is_no_false_alarm(model_type, theta):
    base = hf_families.from_fields(model_type, {}, check=False)
    assert hf_families.unknown_fields(base, {"rope_theta": theta}) == []
    assert hf_families.unknown_fields(base, {"rope_thetta": theta})[0].startswith("rope_thetta")


def test_config_that_is_not_text_json_or_an_hf_config_names_the_cause(tmp_path, monkeypatch, capsys):
    """A binary file, an inline JSON list and tinit's own saved gpt2-small each get a line that says
    what --config got, before anything is built."""
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\x89PNG\x00\xff\xfe")
    line = _refused(monkeypatch, capsys, "--config", str(binary), *QUIET)
    assert line.endswith(f"--config {binary}: not a text file (a config.json is UTF-8 JSON)")
    line = _refused(monkeypatch, capsys, "--config", "[1]", *QUIET)
    assert line.endswith("--config inline JSON: expected a JSON object, got list")
    monkeypatch.undo()
    own = tmp_path / "own"
    assert main(["init", *SMALL, "--save", str(own)]) == 0
    capsys.readouterr()
    line = _refused(monkeypatch, capsys, "--config", str(own), *QUIET)
    assert 'no "model_type"' in line and "tinit's own gpt2-small config" in line


@pytest.mark.parametrize(
    ("command", "argv", "needle"),
    [
        ("init", ["--layers", "0"], "argument --layers: expected an int >= 1, got 0"),
        ("init", ["--d-model", "x"], "argument --d-model: expected an int >= 1, got 'x'"),
        ("init", ["--heads", "-3"], "argument --heads: expected an int >= 1, got -3"),
        ("init", ["--seed", "-1"], "argument --seed: expected an int in [0, 2**64), got -1"),
        ("init", ["--seed", str(2**64)], f"argument --seed: expected an int in [0, 2**64), got {2**64}"),
        ("report", ["--layers", "0"], "argument --layers: expected an int >= 1, got 0"),
        ("report", ["--batch", "0"], "argument --batch: expected an int >= 1, got 0"),
        ("report", ["--d-ff", "1.5"], "argument --d-ff: expected an int >= 1, got '1.5'"),
    ],
)
def test_bad_numbers_name_the_flag_not_a_config_field(capsys, command, argv, needle):
    with pytest.raises(SystemExit) as exit_info:
        main([command, *argv])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"tinit {command}: error: {needle}"


def test_t5_on_tinits_own_model_reads_the_head_width_from_its_config(capsys):
    """T5's recipe needs d_kv; tinit's GPT config gives it as ``head_dim`` (d_model // heads), as
    Hugging Face configs do: q (d * d_kv)^-1/2, k and v d^-1/2, o (h * d_kv)^-1/2 (T5's _init_weights)."""
    d, heads = 64, 2
    rows = _run(capsys, "--layers", "2", "--d-model", str(d), "--heads", str(heads), "--no-progress", "--scheme", "t5")[
        "rows"
    ]
    d_kv = d // heads
    q, k, v = (float(s) for s in rows["attn_qkv"]["trunc"].split("/"))
    assert q == pytest.approx((d * d_kv) ** -0.5, rel=1e-3)
    assert k == v == pytest.approx(d**-0.5, rel=1e-3)
    assert float(rows["attn_out"]["parent_std"]) == pytest.approx((heads * d_kv) ** -0.5, rel=1e-3)
