"""``tinit.patch_torch_init``: routing, keys, restore, nesting, threads, torch.compile, timm and Hugging Face.

Oracles: a routed call must write exactly what ``tinit.nn.init`` writes for
the same arguments (the public drop-in after the same ``torch.manual_seed``
without ``seed=``; its keyed function with key ``seed`` and stream id = the
call's number with ``seed=``); timm's own ``weight_init`` functions
(timm 1.0.31) and Hugging Face's own ``_init_weights`` (transformers 5.24,
unpatched) give the distribution each parameter must follow (two-sample KS)
and the constants that must stay bit for bit.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from helpers import INIT_ARGS
from scipy import stats

import tinit
from tinit.nn import init as tinit_init

NAMES = list(tinit_init.KEYED)
ARGS = INIT_ARGS
KS_P = 1e-4  # every comparison is deterministic (fixed seeds); a wrong std gives p far below this


def _codes():
    return {name: getattr(torch.nn.init, name).__code__ for name in NAMES}


def _keyed(name, shape, seed, stream, args=None):
    out = torch.empty(shape)
    tinit_init.KEYED[name](out, *(ARGS[name] if args is None else args), seed=seed, stream=stream)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_seeded_call_is_the_keyed_fill_of_its_number(name):
    shape = (37, 29)
    with tinit.patch_torch_init(seed=12345):
        first = getattr(torch.nn.init, name)(torch.empty(shape), *ARGS[name])
        second = getattr(torch.nn.init, name)(torch.empty(shape), *ARGS[name])
    torch.testing.assert_close(first, _keyed(name, shape, 12345, 0), rtol=0, atol=0)
    torch.testing.assert_close(second, _keyed(name, shape, 12345, 1), rtol=0, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_unseeded_call_is_the_drop_in_after_the_same_manual_seed(name):
    torch.manual_seed(7)
    with tinit.patch_torch_init():
        routed = getattr(torch.nn.init, name)(torch.empty(41, 13), *ARGS[name])
    torch.manual_seed(7)
    expected = getattr(tinit_init, name)(torch.empty(41, 13), *ARGS[name])
    torch.testing.assert_close(routed, expected, rtol=0, atol=0)


def test_seeded_patch_leaves_torch_rng_alone():
    state = torch.get_rng_state()
    with tinit.patch_torch_init(seed=1):
        torch.nn.Linear(16, 8)
        torch.nn.init.normal_(torch.empty(5), generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(torch.get_rng_state(), state, rtol=0, atol=0)


def test_references_taken_before_entry_are_routed():
    """A partial and a dict entry bound at import time (torchtitan's configs, transformers' table)."""
    bound = functools.partial(torch.nn.init.trunc_normal_, std=0.02)
    table = {"normal_": torch.nn.init.normal_}
    with tinit.patch_torch_init(seed=5):
        a = bound(torch.empty(8, 8))
        b = table["normal_"](torch.empty(8, 8), 0.1, 0.02)
        linear = torch.nn.Linear(8, 6)
    torch.testing.assert_close(a, _keyed("trunc_normal_", (8, 8), 5, 0, (0.0, 0.02)), rtol=0, atol=0)
    torch.testing.assert_close(b, _keyed("normal_", (8, 8), 5, 1), rtol=0, atol=0)
    # nn.Linear.reset_parameters: kaiming_uniform_(weight, a=sqrt(5)), then uniform_(bias, +-1/sqrt(fan_in))
    torch.testing.assert_close(linear.weight.detach(), _keyed("kaiming_uniform_", (6, 8), 5, 2), rtol=0, atol=0)
    bound_b = 1 / math.sqrt(8)
    expected_bias = _keyed("uniform_", (6,), 5, 3, (-bound_b, bound_b))
    torch.testing.assert_close(linear.bias.detach(), expected_bias, rtol=0, atol=0)


def test_meta_empty_and_refused_calls_use_up_their_number():
    with tinit.patch_torch_init(seed=9):
        torch.nn.init.normal_(torch.empty(4, 4, device="meta"))
        torch.nn.init.normal_(torch.empty(0, 4))
        with pytest.raises(ValueError, match="std"):
            torch.nn.init.normal_(torch.empty(4, 4), std=-1.0)
        with pytest.warns(UserWarning, match="no-op"):
            torch.nn.init.kaiming_uniform_(torch.empty(0, 3))
        written = torch.nn.init.normal_(torch.empty(4, 4), 0.1, 0.02)
    torch.testing.assert_close(written, _keyed("normal_", (4, 4), 9, 4), rtol=0, atol=0)


def test_restored_on_exit_and_on_exception():
    before = _codes()
    with pytest.raises(KeyError), tinit.patch_torch_init(seed=0):
        assert _codes() != before
        raise KeyError("body fails")
    assert _codes() == before
    torch.manual_seed(3)
    after = torch.nn.init.normal_(torch.empty(100))
    torch.manual_seed(3)
    torch.testing.assert_close(after, torch.empty(100).normal_(), rtol=0, atol=0)  # torch's own again


def test_nested_same_seed_shares_the_counter_other_seed_raises():
    before = _codes()
    with tinit.patch_torch_init(seed=2):
        a = torch.nn.init.normal_(torch.empty(6), 0.1, 0.02)
        with tinit.patch_torch_init(seed=2):
            b = torch.nn.init.normal_(torch.empty(6), 0.1, 0.02)
        with pytest.raises(ValueError, match="same seed"), tinit.patch_torch_init(seed=3):
            pass
        with pytest.raises(ValueError, match="same seed"), tinit.patch_torch_init():
            pass
        c = torch.nn.init.normal_(torch.empty(6), 0.1, 0.02)  # still routed after the refused entries
    assert _codes() == before
    for value, stream in ((a, 0), (b, 1), (c, 2)):
        torch.testing.assert_close(value, _keyed("normal_", (6,), 2, stream), rtol=0, atol=0)


def test_decorator_restarts_the_counter_per_outermost_entry():
    @tinit.patch_torch_init(seed=4)
    def build():
        return torch.nn.Linear(5, 3)

    a, b = build(), build()
    torch.testing.assert_close(a.weight, b.weight, rtol=0, atol=0)
    torch.testing.assert_close(a.weight.detach(), _keyed("kaiming_uniform_", (3, 5), 4, 0), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("seed", "error"),
    [(True, TypeError), (1.0, TypeError), ("0", TypeError), (-1, ValueError), (2**64, ValueError)],
    ids=["bool", "float", "str", "negative", "2**64"],
)
def test_bad_seed_refused_before_anything_is_routed(seed, error):
    before = _codes()
    with pytest.raises(error, match="seed"):
        tinit.patch_torch_init(seed=seed)
    assert _codes() == before


def test_threads_enter_and_leave_concurrently():
    before = _codes()
    start = threading.Barrier(4)
    inside = threading.Barrier(4)
    seen, errors = [], []

    def worker():
        try:
            start.wait()
            with tinit.patch_torch_init(seed=11):
                inside.wait()  # all four inside at once: the routing is installed once
                seen.append(torch.nn.init.normal_.__code__ is not before["normal_"])
        except Exception as exc:  # noqa: BLE001  reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert seen == [True] * 4
    assert _codes() == before


def test_routed_under_torch_compile():
    def init(t):
        torch.nn.init.normal_(t, 0.0, 0.02)
        return t * 2

    compiled = torch.compile(init, backend="eager")
    with tinit.patch_torch_init(seed=6):
        out = compiled(torch.empty(64))
        second = compiled(torch.empty(64))  # the counter advances per call, not per trace
    torch.testing.assert_close(out, _keyed("normal_", (64,), 6, 0, (0.0, 0.02)) * 2, rtol=0, atol=0)
    torch.testing.assert_close(second, _keyed("normal_", (64,), 6, 1, (0.0, 0.02)) * 2, rtol=0, atol=0)


def test_function_compiled_before_entry_is_routed_inside_and_torch_after():
    def init(t):
        torch.nn.init.normal_(t, 0.0, 0.02)
        return t * 2

    compiled = torch.compile(init, backend="eager")
    torch.manual_seed(0)
    before = compiled(torch.empty(64))
    with tinit.patch_torch_init(seed=6):
        inside = compiled(torch.empty(64))  # dynamo's guards see the swapped code and retrace
    torch.manual_seed(0)
    after = compiled(torch.empty(64))
    torch.testing.assert_close(inside, _keyed("normal_", (64,), 6, 0, (0.0, 0.02)) * 2, rtol=0, atol=0)
    torch.manual_seed(0)
    torch.testing.assert_close(before, torch.empty(64).normal_(0.0, 0.02) * 2, rtol=0, atol=0)
    torch.testing.assert_close(after, before, rtol=0, atol=0)


@pytest.mark.parametrize("reset", [False, True], ids=["kept", "dynamo-reset"])
@pytest.mark.parametrize("traced_before", [False, True], ids=["fresh", "traced-before"])
def test_fullgraph_compile_after_a_traced_patch_traces_torchs_function(traced_before, reset):
    """A trace of the routed function inside the patch leaves nothing behind in dynamo: after exit a
    ``fullgraph=True`` compile of the same torch function traces torch's own code again (torch's values
    after the same manual_seed), with or without ``torch._dynamo.reset()``, and a trace made before entry
    does not confuse the one inside (routed, the keyed fill of call 0)."""

    def init(t):
        torch.nn.init.normal_(t, 0.0, 0.02)
        return t * 2

    if traced_before:
        torch.compile(init, backend="eager", fullgraph=True)(torch.empty(64))
    with tinit.patch_torch_init(seed=6):
        inside = torch.compile(init, backend="eager")(torch.empty(64))
    torch.testing.assert_close(inside, _keyed("normal_", (64,), 6, 0, (0.0, 0.02)) * 2, rtol=0, atol=0)
    if reset:
        torch._dynamo.reset()
    torch.manual_seed(0)
    after = torch.compile(init, backend="eager", fullgraph=True)(torch.empty(64))
    torch.manual_seed(0)
    torch.testing.assert_close(after, torch.empty(64).normal_(0.0, 0.02) * 2, rtol=0, atol=0)


# ---- timm ---------------------------------------------------------------------------------------------------------


def _timm_weight_init(monkeypatch):
    """timm's weight_init module, imported as a package module when timm imports, else its file loaded alone."""
    try:
        import timm.layers.weight_init as module

        return module
    except Exception:  # noqa: BLE001  timm needs torchvision; its weight_init file needs only torch
        spec = importlib.util.find_spec("timm")
        if spec is None or not spec.submodule_search_locations:
            pytest.skip("timm is not installed")
        path = Path(next(iter(spec.submodule_search_locations))) / "layers" / "weight_init.py"
        loader = importlib.util.spec_from_file_location("timm.layers.weight_init", path)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        monkeypatch.setitem(sys.modules, "timm.layers.weight_init", module)
        return module


SHAPE_TIMM = (300, 200)  # fan_in 200, fan_out 300
_S = 0.87962566103423978  # timm's std of N(0, 1) truncated to (-2, 2)
TIMM_CASES = [  # name, args, support of the values (timm's formulas, in fp64); None: unbounded
    pytest.param("trunc_normal_", (0.1, 0.05, -0.02, 0.2), (-0.02, 0.2), id="trunc_normal_abs"),
    pytest.param("trunc_normal_tf_", (0.1, 0.05, -1.5, 2.5), (0.1 - 1.5 * 0.05, 0.1 + 2.5 * 0.05), id="tf_sigma"),
    pytest.param("variance_scaling_", (2.0, "fan_in", "truncated_normal"), 2 * math.sqrt(2 / 200) / _S, id="vs_trunc"),
    pytest.param("variance_scaling_", (1.0, "fan_avg", "normal"), None, id="vs_normal_fan_avg"),
    pytest.param("variance_scaling_", (0.5, "fan_out", "uniform"), math.sqrt(3 * 0.5 / 300), id="vs_uniform_fan_out"),
    pytest.param("lecun_normal_", (), 2 * math.sqrt(1 / 200) / _S, id="lecun_normal"),
]


@pytest.mark.parametrize(("name", "args", "support"), TIMM_CASES)
def test_timm_functions_keep_their_semantics(monkeypatch, name, args, support):
    weight_init = _timm_weight_init(monkeypatch)
    shape = SHAPE_TIMM
    torch.manual_seed(0)
    reference = torch.empty(shape)
    getattr(weight_init, name)(reference, *args)  # timm's own code, unpatched
    code = getattr(weight_init, name).__code__
    with tinit.patch_torch_init(seed=21):
        routed = torch.empty(shape)
        getattr(weight_init, name)(routed, *args)
        again = torch.empty(shape)
        getattr(weight_init, name)(again, *args)
    assert getattr(weight_init, name).__code__ is code
    assert not torch.equal(routed, again)  # two calls, two streams
    if support is not None:
        low, high = support if isinstance(support, tuple) else (-support, support)
        assert low - 1e-7 <= routed.min().item() and routed.max().item() <= high + 1e-7, (routed.aminmax(), support)
    ks = stats.ks_2samp(routed.flatten().numpy(), reference.flatten().numpy())
    assert ks.pvalue > KS_P, f"{name}{args}: KS {ks.statistic:.4f} p={ks.pvalue:.2e} against timm's own"


def test_timm_trunc_normal_tf_bounds_are_in_sigma(monkeypatch):
    weight_init = _timm_weight_init(monkeypatch)
    with tinit.patch_torch_init(seed=8):
        routed = weight_init.trunc_normal_tf_(torch.empty(50, 40), mean=0.5, std=0.1, a=-1.0, b=2.0)
    expected = _keyed("trunc_normal_", (50, 40), 8, 0, (0.5, 0.1, 0.4, 0.7))
    torch.testing.assert_close(routed, expected, rtol=0, atol=0)


def test_timm_vit_base_create_model():
    try:
        import timm
    except Exception as exc:  # noqa: BLE001  the reason is printed in the skip
        pytest.skip(f"timm does not import here ({type(exc).__name__}: {exc}); its weight_init is tested alone")
    torch.manual_seed(0)
    t0 = time.perf_counter()
    reference = timm.create_model("vit_base_patch16_224", pretrained=False)
    t1 = time.perf_counter()
    with tinit.patch_torch_init(seed=0):
        routed = timm.create_model("vit_base_patch16_224", pretrained=False)
    t2 = time.perf_counter()
    print(f"timm vit_base_patch16_224 create_model: torch {t1 - t0:.2f} s, patched {t2 - t1:.2f} s")
    ref_params = dict(reference.named_parameters())
    for name, param in routed.named_parameters():
        ref = ref_params[name].detach()
        if ref.std() == 0 or ref.numel() < 1000:
            torch.testing.assert_close(param.detach(), ref, rtol=0, atol=0, msg=lambda m, n=name: f"{n}: {m}")
            continue
        torch.testing.assert_close(param.detach().std(), ref.std(), rtol=0.05, atol=0, msg=lambda m, n=name: n + m)


# ---- Hugging Face -------------------------------------------------------------------------------------------------

HF_FAMILIES = ["llama", "qwen2", "gemma", "gpt2", "vit"]


class _Recorder:
    """Wraps ``tinit.nn.init.KEYED`` so each routed call's (name, tensor, args, stream) is kept."""

    def __init__(self, monkeypatch):
        self.calls = []
        for name, fn in list(tinit_init.KEYED.items()):
            monkeypatch.setitem(tinit_init.KEYED, name, self._wrap(name, fn))

    def _wrap(self, name, fn):
        def recorded(tensor, *args, seed=None, stream=0, **kwargs):
            self.calls.append((name, tensor.data_ptr(), tuple(tensor.shape), args, kwargs, seed, stream))
            return fn(tensor, *args, seed=seed, stream=stream, **kwargs)

        return recorded

    def last_writes(self) -> dict:
        return {(ptr, shape): call for call in self.calls for ptr, shape in [(call[1], call[2])]}


def _hf_build(family: str):
    transformers = pytest.importorskip("transformers")
    from tinit.tools import hf_families

    config = hf_families.config(family)
    return getattr(transformers, hf_families.model_class(config)).from_config(config), config


def _forward_finite(model, config):
    with torch.no_grad():
        if getattr(config, "model_type", "") == "vit":
            size = config.image_size
            out = model(pixel_values=torch.randn(1, config.num_channels, size, size)).logits
        else:
            out = model(input_ids=torch.arange(8).unsqueeze(0) % config.vocab_size).logits
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("family", HF_FAMILIES)
def test_hf_from_config_every_random_parameter_written_by_tinit(monkeypatch, family):
    _hf_build(family)  # imports the modelling code, so the times below compare builds only
    torch.manual_seed(0)
    t0 = time.perf_counter()
    reference, config = _hf_build(family)
    t1 = time.perf_counter()
    keyed = dict(tinit_init.KEYED)
    recorder = _Recorder(monkeypatch)
    with tinit.patch_torch_init(seed=0):
        model, _ = _hf_build(family)
    t2 = time.perf_counter()
    with tinit.patch_torch_init(seed=0):
        again, _ = _hf_build(family)
    print(f"{family} from_config: torch {t1 - t0:.3f} s, patched {t2 - t1:.3f} s")
    writes = recorder.last_writes()
    ref_params = dict(reference.named_parameters())
    again_params = dict(again.named_parameters())
    random_count = 0
    padding = {
        f"{path}.weight": module.padding_idx
        for path, module in model.named_modules()
        if isinstance(module, torch.nn.Embedding) and module.padding_idx is not None
    }
    for name, param in model.named_parameters():
        value, ref = param.detach(), ref_params[name].detach()
        torch.testing.assert_close(value, again_params[name].detach(), rtol=0, atol=0, msg=lambda m, n=name: n + m)
        if bool((ref == ref.flatten()[0]).all()):  # a constant of HF's init (norm ones/zeros, zero biases)
            torch.testing.assert_close(value, ref, rtol=0, atol=0, msg=lambda m, n=name: f"{n} constant: {m}")
            continue
        random_count += 1
        call = writes.get((param.data_ptr(), tuple(param.shape)))
        assert call is not None, f"{name}: drawn by HF but not by a routed call"
        fn_name, _, _, args, kwargs, seed, stream = call
        expected = torch.empty_like(value)
        keyed[fn_name](expected, *args, seed=seed, stream=stream, **kwargs)
        if name in padding:  # HF zeroes the padding row after the draw: a constant, as in the unpatched build
            torch.testing.assert_close(value[padding[name]], ref[padding[name]], rtol=0, atol=0)
            expected[padding[name]] = ref[padding[name]]
        torch.testing.assert_close(value, expected, rtol=0, atol=0, msg=lambda m, n=name: f"{n} stream: {m}")
        if ref.numel() >= 256:
            ks = stats.ks_2samp(value.flatten().float().numpy(), ref.flatten().float().numpy())
            assert ks.pvalue > KS_P, f"{name}: KS {ks.statistic:.3f} p={ks.pvalue:.1e} against HF's unpatched init"
    assert random_count > 0
    _forward_finite(model, config)


def test_hf_initialized_guard_is_kept(monkeypatch):
    model, _ = _hf_build("llama")
    embedding = model.get_input_embeddings().weight
    embedding._is_hf_initialized = True
    kept = embedding.detach().clone()
    others = {n: p.detach().clone() for n, p in model.named_parameters() if p is not embedding}
    for module in model.modules():
        module.__dict__.pop("_is_hf_initialized", None)
    with tinit.patch_torch_init(seed=1):
        model.initialize_weights()
    torch.testing.assert_close(embedding.detach(), kept, rtol=0, atol=0)
    redrawn = [n for n, p in model.named_parameters() if p is not embedding and not torch.equal(p, others[n])]
    assert any("q_proj" in n for n in redrawn)


def test_a_patch_never_entered_warns_that_it_routed_nothing():
    """A bare ``tinit.patch_torch_init()`` statement is a no-op; it says so when collected (as an
    unawaited coroutine does), while ``with`` and the decorator stay silent."""
    import gc
    import warnings

    with pytest.warns(RuntimeWarning, match=r"never entered, so it routed nothing"):
        tinit.patch_torch_init(seed=0)  # freed at once (reference counting): __del__ warns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tinit.patch_torch_init(seed=0):
            pass

        @tinit.patch_torch_init(seed=0)
        def build():
            return torch.nn.Linear(2, 2)

        del build
        gc.collect()
