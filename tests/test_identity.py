"""Canonical identity: wrapped, compiled and checkpointed models get the unwrapped model's names,
streams and values (``tinit.identity``, ``tinit.stream_for``, ``tinit.init_model_``)."""

from __future__ import annotations

import hashlib
import os
import socket

import pytest
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

import tinit
from tinit import identity
from tinit.tools.toy_models import GPT, GPTConfig

CFG = GPTConfig(n_layers=2, d_model=32, n_heads=4, vocab=64, n_ctx=16)


def _built(seed: int = 0) -> GPT:
    torch.manual_seed(seed)  # the constructor's own draws, overwritten by init_model_
    return GPT(CFG)


def _initialised(wrap, scheme: str = "gpt2") -> dict[str, torch.Tensor]:
    """The state dict of a GPT wrapped by ``wrap``, initialised by tinit, under canonical names."""
    model = wrap(_built(1))
    tinit.init_model_(model, scheme, seed=0)
    return _canonical_tensors(model)


def _canonical_tensors(model) -> dict[str, torch.Tensor]:
    # named_parameters, not state_dict: CheckpointWrapper's state_dict hook drops its own prefix
    names = identity.canonical_names(model)
    tensors = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    return {names[k]: v.detach() for k, v in tensors}


def _reference(scheme: str = "gpt2") -> dict[str, torch.Tensor]:
    model = _built(2)
    tinit.init_model_(model, scheme, seed=0)
    return _canonical_tensors(model)


def _assert_same(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        torch.testing.assert_close(got[key].detach(), value, rtol=0, atol=0, msg=lambda m, k=key: f"{k}: {m}")


def _checkpoint_blocks(model: GPT) -> GPT:
    for i, block in enumerate(model.transformer.h):  # as torchtitan's apply_ac wraps each block
        model.transformer.h.register_module(str(i), checkpoint_wrapper(block))
    return model


def _compile_blocks(model: GPT) -> GPT:
    for i, block in enumerate(model.transformer.h):  # as torchtitan's apply_compile compiles each block
        model.transformer.h.register_module(str(i), torch.compile(block, backend="eager"))
    return model


WRAPS = {
    "compiled": lambda m: torch.compile(m, backend="eager"),
    "checkpointed": _checkpoint_blocks,
    "blocks-compiled": _compile_blocks,
    "checkpointed-then-compiled": lambda m: torch.compile(_checkpoint_blocks(m), backend="eager"),
}


@pytest.mark.parametrize("wrap", list(WRAPS), ids=list(WRAPS))
@pytest.mark.parametrize("scheme", ["gpt2", "depth_init"])
def test_a_wrapped_model_gets_the_unwrapped_values(wrap, scheme):
    got = _initialised(WRAPS[wrap], scheme)
    want = _reference(scheme)
    raw = [n for n, _ in WRAPS[wrap](_built()).named_parameters()]
    assert any("_orig_mod" in n or "_checkpoint_wrapped_module" in n for n in raw), "the wrap changes raw names"
    _assert_same(got, want)


def test_the_raw_names_of_a_compiled_model_are_mapped():
    model = torch.compile(_checkpoint_blocks(_built()), backend="eager")
    names = identity.canonical_names(model)
    assert names["_orig_mod.transformer.h.1._checkpoint_wrapped_module.attn.c_proj.weight"] == (
        "transformer.h.1.attn.c_proj.weight"
    )
    plain = dict(_built().named_parameters(remove_duplicate=False))
    assert sorted(set(names.values()) - {n for n, _ in _built().named_buffers()}) == sorted(plain)


def test_an_unwrapped_model_keeps_its_names_and_module_order():
    model = _built()
    assert identity.canonical_names(model) == {
        n: n for n, _ in [*model.named_parameters(remove_duplicate=False), *model.named_buffers()]
    }
    got = [(n, id(m)) for n, m in identity.canonical_modules(model)]
    assert got == [(n, id(m)) for n, m in model.named_modules(remove_duplicate=False)]


def test_stream_for_hashes_the_canonical_name():
    name = "layers.3._checkpoint_wrapped_module.attention.wq.weight"
    canonical = "layers.3.attention.wq.weight"
    oracle = int.from_bytes(hashlib.sha256(canonical.encode()).digest()[:8], "little")
    assert tinit.stream_for(name) == tinit.stream_for(canonical) == oracle
    assert tinit.stream_for("_orig_mod." + canonical) == oracle
    assert tinit.stream_for("_fsdp_wrapped_module.layers.3._fsdp_wrapped_module.attention.wq.weight") == oracle
    # a user's child named "module" is not a wrapper without the model
    assert identity.canonical_name("module.w") == "module.w"


class _Holder(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.wrapped = inner


def test_a_registered_wrapper_and_rename():
    saved = list(identity.RENAMES)
    try:
        identity.register_wrapper(_Holder, "wrapped")
        model = _Holder(_built())
        names = identity.canonical_names(model)
        assert names["wrapped.transformer.h.0.mlp.c_fc.weight"] == "transformer.h.0.mlp.c_fc.weight"
        tinit.init_model_(model, "gpt2", seed=0)
        _assert_same(_canonical_tensors(model), _reference())

        # a rename of a deeper path, relative to the registering module: local block 0 is global 1
        identity.register_rename(GPT, lambda m: {"transformer.h.0": "transformer.h.1", "transformer.h.1": None})
        names = identity.canonical_names(_built())
        assert names["transformer.h.0.ln_1.weight"] == "transformer.h.1.ln_1.weight"
        assert names["transformer.h.1.ln_1.weight"] == "ln_1.weight"
        assert identity.canonical_name("transformer.h.0.ln_1.weight", _built()) == "transformer.h.1.ln_1.weight"
    finally:
        identity.RENAMES[:] = saved


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="cls"):
        identity.register_wrapper(3, "x")
    with pytest.raises(ValueError, match="attr"):
        identity.register_wrapper(_Holder, "a.b")
    with pytest.raises(TypeError, match="paths"):
        identity.register_rename(_Holder, "no_colon")
    with pytest.raises(TypeError, match="model"):
        identity.canonical_names("model")
    with pytest.raises(ValueError, match="no parameter or buffer named 'nope'"):
        identity.canonical_name("nope", _built())
    with pytest.raises(TypeError, match="name must be a str"):
        tinit.stream_for(3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_and_fsdp1_wrappers_are_dropped():
    dist = torch.distributed
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(_built(1))
        assert identity.canonical_names(ddp)["module.lm_head.weight"] == "lm_head.weight"
        tinit.init_model_(ddp, "gpt2", seed=0)
        _assert_same(_canonical_tensors(ddp), _reference())

        from torch.distributed.fsdp import FullyShardedDataParallel

        fsdp = FullyShardedDataParallel(_built(1), use_orig_params=True, device_id=torch.device("cpu"))
        raw = [n for n, _ in fsdp.named_parameters()]
        assert any("_fsdp_wrapped_module" in n for n in raw)
        names = identity.canonical_names(fsdp)
        assert all("_fsdp_wrapped_module" not in names[n] for n in raw)
        assert all(names[n] == identity.canonical_name(n) for n in raw)
    finally:
        dist.destroy_process_group()


def _as_peft(cls_name: str, module: str):
    """A class with PEFT's qualified name: the registry matches by name, so PEFT need not be installed."""
    return type(cls_name, (torch.nn.Module,), {"__module__": module, "__qualname__": cls_name})


def test_peft_prefixes_resolve_to_the_base_model_names():
    peft_model, tuner, tuner_layer = (
        _as_peft("PeftModel", "peft.peft_model"),
        _as_peft("BaseTuner", "peft.tuners.tuners_utils"),
        _as_peft("BaseTunerLayer", "peft.tuners.tuners_utils"),
    )
    lora_model = type("LoraModel", (tuner,), {})  # a subclass matches through its bases
    base = _built()
    outer, inner = peft_model(), lora_model()
    inner.model = base
    outer.base_model = inner
    layer = tuner_layer()
    layer.base_layer = base.transformer.h[0].attn.c_attn
    layer.lora_A = torch.nn.Linear(32, 4, bias=False)
    base.transformer.h[0].attn.c_attn = layer
    names = identity.canonical_names(outer)
    assert (
        names["base_model.model.transformer.h.0.attn.c_attn.base_layer.weight"] == "transformer.h.0.attn.c_attn.weight"
    )
    assert names["base_model.model.transformer.h.0.attn.c_attn.lora_A.weight"] == (
        "transformer.h.0.attn.c_attn.lora_A.weight"
    )
    assert names["base_model.model.lm_head.weight"] == "lm_head.weight"


def test_every_built_in_rename_resolves_to_a_public_function():
    import importlib

    lazy = [r for r in identity.RENAMES if isinstance(r.paths, str)]
    assert lazy, "the Megatron renames are lazy references"
    for rename in lazy:
        module, _, function = rename.paths.partition(":")
        assert not function.startswith("_"), rename
        assert callable(getattr(importlib.import_module(module), function)), rename


def test_a_rename_returning_no_mapping_of_strs_is_named():
    saved = list(identity.RENAMES)
    try:
        identity.register_rename(_Holder, lambda m: {"wrapped": 5})
        with pytest.raises(TypeError, match="map str paths to str or None, got 'wrapped': 5"):
            identity.canonical_names(_Holder(_built()))
        identity.RENAMES[:] = saved
        identity.register_rename(_Holder, lambda m: None)
        with pytest.raises(TypeError, match="returned NoneType, not a mapping"):
            identity.canonical_names(_Holder(_built()))
    finally:
        identity.RENAMES[:] = saved


def test_only_matching_no_canonical_name_warns():
    model = torch.compile(_built(), backend="eager")
    with pytest.warns(UserWarning, match="only= matches no parameter.*'transformer.wte.weight'"):
        assert tinit.init_model_(model, "gpt2", seed=0, only=r"^_orig_mod\.") == []
