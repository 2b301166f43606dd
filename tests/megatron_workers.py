"""Workers for tests/test_megatron.py: Megatron-Core GPTModels on gloo, initialised by ``tinit.megatron``.

Run by ``torch.multiprocessing.spawn`` as ``run_world(rank, world, port, out_dir, layouts)`` in the style
of tests/dist_workers.py (whose process-group and result helpers they use). Each rank first builds the
TP = PP = EP = 1 model of every kind (the oracle: with ``parallel_state`` at sizes 1 every rank holds the
whole model, as one process does) and initialises it; then, for each layout, it re-initialises
``megatron.core.parallel_state`` at that layout's sizes, builds the model again with
``perform_initialization=False``, initialises it and checks that each local tensor equals the oracle's
tensor of the same global identity, cut as Megatron's own ``_initialize_affine_weight_cpu`` cuts a master
weight for this rank. The global identity is computed here from the layout (layer ``pp_rank *
num_layers / pp + i``, expert ``ep_rank * num_local_experts + i``), not from ``tinit.megatron``.
"""

from __future__ import annotations

import math
import re
import warnings

import torch
import torch.distributed as dist
from dist_workers import _on_every_rank, _process_group, _write_results

SEED = 11
KINDS = {
    # (config fields, layer-spec arguments, GPTModel arguments)
    "dense": (
        {"add_bias_linear": True, "normalization": "LayerNorm"},
        {},
        {"share_embeddings_and_output_weights": True},
    ),
    "moe": (
        {
            "add_bias_linear": False,
            "normalization": "RMSNorm",
            "num_moe_experts": 4,
            "moe_router_topk": 2,
            "moe_token_dispatcher_type": "allgather",
            "moe_ffn_hidden_size": 32,
        },
        {"num_experts": 4, "normalization": "RMSNorm"},
        {"share_embeddings_and_output_weights": False},
    ),
}
COMMON = {
    "num_layers": 4,
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_query_groups": 2,
    "ffn_hidden_size": 64,
    "gated_linear_unit": True,
    "init_method_std": 0.03,
    "embedding_init_method_std": 0.5,
    "use_cpu_initialization": True,
    "pipeline_dtype": torch.float32,
}
VOCAB, SEQ = 64, 16


def _quiet():
    warnings.simplefilter("ignore")  # megatron warns about TE/Apex being absent at every import


def build(kind: str, tp: int, pp: int, ep: int, perform_initialization: bool = False):
    """The GPTModel of ``kind`` for this rank at the current ``parallel_state`` sizes (local spec, no TE)."""
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    fields, spec_args, model_args = KINDS[kind]
    config = TransformerConfig(
        **COMMON,
        **fields,
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        expert_model_parallel_size=ep,
        perform_initialization=perform_initialization,
    )
    # LanguageModule.setup_embeddings_and_output_layer moves a tied stage's copy of the embedding to
    # CUDA before its all-reduce (``weight.data.cuda()``): on a CPU-only host it stays where it is.
    cuda = torch.Tensor.cuda
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    try:
        return GPTModel(
            config,
            get_gpt_layer_local_spec(**spec_args),
            vocab_size=VOCAB,
            max_sequence_length=SEQ,
            pre_process=ps.is_pipeline_first_stage(),
            post_process=ps.is_pipeline_last_stage(),
            **model_args,
        )
    finally:
        torch.Tensor.cuda = cuda


def _set_sizes(tp: int, pp: int, ep: int) -> None:
    from megatron.core import parallel_state as ps

    ps.destroy_model_parallel()
    ps.initialize_model_parallel(tp, pp, expert_model_parallel_size=ep)


def _global_name(raw: str, model, pp: int) -> str:
    from megatron.core import parallel_state as ps

    per_stage = model.config.num_layers // pp
    stage, ep_rank = ps.get_pipeline_model_parallel_rank(), ps.get_expert_model_parallel_rank()
    name = re.sub(r"layers\.(\d+)\.", lambda m: f"layers.{stage * per_stage + int(m[1])}.", raw, count=1)
    local = getattr(model.config, "num_moe_experts", None)
    if local:
        local //= ps.get_expert_model_parallel_world_size()
        name = re.sub(r"local_experts\.(\d+)\.", lambda m: f"local_experts.{ep_rank * local + int(m[1])}.", name)
    if name == "output_layer.weight" and model.share_embeddings_and_output_weights:
        name = "embedding.word_embeddings.weight"  # the last stage's copy of the tied embedding
    return name


def _megatron_slice(full: torch.Tensor, local: torch.Tensor, module, leaf: str, raw: str) -> torch.Tensor:
    """This rank's block of ``full`` as Megatron cuts it: ``_initialize_affine_weight_cpu`` with an
    init method that writes ``full`` as the master weight (biases, 1-D, by the same rule by hand)."""
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel.layers import (
        ColumnParallelLinear,
        RowParallelLinear,
        VocabParallelEmbedding,
        _initialize_affine_weight_cpu,
    )

    expert = ".experts." in raw
    rank = ps.get_expert_tensor_parallel_rank() if expert else ps.get_tensor_model_parallel_rank()
    size = ps.get_expert_tensor_parallel_world_size() if expert else ps.get_tensor_model_parallel_world_size()
    stride = 2 if raw.endswith(("linear_fc1.weight", "linear_fc1.bias")) else 1
    if isinstance(module, (ColumnParallelLinear, VocabParallelEmbedding)):
        dim = 0
    elif isinstance(module, RowParallelLinear) and leaf == "weight":
        dim = 1
    else:
        return full
    if full.dim() == 1:
        chunks = full.chunk(size * stride)
        return torch.cat(chunks[rank::size])
    out = torch.empty_like(local)
    _initialize_affine_weight_cpu(
        out,
        full.shape[0],
        full.shape[1],
        local.shape[dim],
        dim,
        lambda w: w.copy_(full),
        stride,
        rank=rank,
        world_size=size,
        params_dtype=full.dtype,
    )
    return out


def _check_layout(kind: str, sizes: tuple, scheme, oracle: dict) -> list[str]:
    import tinit.megatron

    _set_sizes(*sizes)
    model = build(kind, *sizes)
    seen = []

    def step():
        tinit.megatron.init_model_(model, seed=SEED, scheme=scheme)
        for module_name, module in model.named_modules():
            for leaf, param in module.named_parameters(recurse=False):
                raw = f"{module_name}.{leaf}" if module_name else leaf
                name = _global_name(raw, model, sizes[1])
                expected = _megatron_slice(oracle[name], param, module, leaf, raw)
                torch.testing.assert_close(param, expected, rtol=0, atol=0, msg=lambda m, raw=raw: f"{raw}: {m}")
                seen.append(name)

    failures = _on_every_rank(step)
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, seen)
    missing = sorted(set(oracle) - {n for names in gathered for n in names})
    return failures + ([f"no rank holds {missing}"] if missing else [])


def _check_megatron_stds(kind: str) -> list[str]:
    """Megatron's own init (perform_initialization=True) against the specs tinit reports: constants
    equal, each random tensor's std within 5 / sqrt(2 n) (about 5 standard errors) of the spec's."""
    import tinit.megatron

    _set_sizes(1, 1, 1)
    torch.manual_seed(0)
    theirs = dict(build(kind, 1, 1, 1, perform_initialization=True).named_parameters())
    failures = []
    for entry in tinit.megatron.init_model_(build(kind, 1, 1, 1), seed=SEED):
        value = theirs[entry.name].detach()
        if entry.spec.constant is not None:
            if not torch.equal(value, torch.full_like(value, entry.spec.constant)):
                failures.append(f"{entry.name}: Megatron writes {value.flatten()[:4]}, tinit {entry.spec.constant}")
            continue
        if entry.spec.trunc != math.inf:
            failures.append(f"{entry.name}: tinit truncates at {entry.spec.trunc} std; Megatron draws a normal")
        ratio = value.std().item() / entry.spec.std
        if abs(ratio - 1) > 5 / math.sqrt(2 * value.numel()):
            failures.append(f"{entry.name}: Megatron's std is {ratio:.3f} x tinit's {entry.spec.std:.5f}")
    return failures


def run_world(rank: int, world: int, port: int, out_dir: str, layouts: list) -> None:
    """Every layout of ``layouts`` ((kind, (tp, pp, ep), scheme) triples) on ``world`` ranks."""
    _quiet()
    with _process_group(rank, world, port):
        import tinit.megatron

        oracles = {}
        for kind, _, scheme in layouts:
            if (kind, scheme) not in oracles:
                _set_sizes(1, 1, 1)
                model = build(kind, 1, 1, 1)
                tinit.megatron.init_model_(model, seed=SEED, scheme=scheme)
                oracles[kind, scheme] = {k: v.detach().clone() for k, v in model.named_parameters()}
        results = {}
        for kind, sizes, scheme in layouts:
            results[layout_id(kind, sizes, scheme)] = _check_layout(kind, sizes, scheme, oracles[kind, scheme])
        if world == 2:
            for kind in KINDS:
                results[f"stds-{kind}"] = _on_every_rank(lambda kind=kind: _raise(_check_megatron_stds(kind)))
        _write_results(out_dir, results)


def _raise(failures: list[str]) -> None:
    if failures:
        raise AssertionError("; ".join(failures))


def layout_id(kind: str, sizes: tuple, scheme) -> str:
    tp, pp, ep = sizes
    return f"{kind}-tp{tp}-pp{pp}-ep{ep}-{scheme or 'megatron-config'}"
