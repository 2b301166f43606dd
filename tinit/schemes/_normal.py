"""Normal-family recipes: one std for every matrix, output projections scaled by depth."""

from __future__ import annotations

import math
from types import MappingProxyType

from tinit.schemes._core import (
    OUTPUT_ROLES,
    Context,
    InitSpec,
    Scheme,
    normal_spec,
    positive,
    role_constants,
)


class Normal(Scheme):
    """``normal``: every matrix and embedding from N(0, std^2), untruncated.

    std = the model config's ``initializer_range`` (else ``init_std``, as
    OPT's and BART's configs name it), 0.02 without a config: GPT-2's and
    BERT's default (Radford et al., 2019; Devlin et al., 2019), drawn as
    Hugging Face's ``PreTrainedModel._init_weights`` draws it
    (``init.normal_(mean=0.0, std=initializer_range)``: no truncation).
    ``trunc=`` truncates, rescaled so the realised std stays ``std`` unless
    ``variance_preserving=False``. Norm weights 1, biases 0, residual gates 1;
    attention sinks (GPT-OSS) N(0, std^2), as HF
    ``GptOssPreTrainedModel._init_weights`` draws them. Where the model's own
    code draws a matrix otherwise and a ``tinit.families.Family`` says so
    (``Context.model_spec``: HF Mamba's and Mamba-2's kaiming-uniform
    ``conv1d`` and ``out_proj``, Nemotron-H's ``out_proj``, Mamba's
    ``dt_proj``), that draw; and its constants where they are not the role's
    (GraniteSWA's zero ``sinks``, Afmoe's zero router, NemotronLayerNorm1P's
    weight 1, xLSTM's gate pre-activations). Needs no role for the formula (every matrix
    alike), but ``init_model_`` refuses a parameter nothing classifies
    unless told what to do with it (``unclassified=``).

    Options:
        std: float > 0, default 0.02 (``init_model_`` reads it from the config).
    """

    name = "normal"
    needs_role = False
    default_trunc = math.inf
    # transformers' tie_weights points the head at the input embeddings' tensor (T5's
    # _init_weights draws lm_head only when not tied); Megatron-Core's tied output layer reuses
    # the word embeddings' weight. gpt2 and megatron inherit it.
    tied = "embedding"
    config_options = MappingProxyType({"std": ("initializer_range", "init_std")})

    def rule(self, ctx: Context, std: float = 0.02) -> InitSpec:
        std = positive(self.name, "std", std)
        if ctx.model_spec is not None:  # the model's own draw of this matrix (a Family's inits)
            return ctx.model_spec
        if ctx.role in ("attn_sink", "router"):  # sinks and a router's bias too: HF GptOss draws them
            return normal_spec(std)
        return role_constants(ctx.base) or normal_spec(std)


class GPT2(Normal):
    """``gpt2``: ``normal`` plus residual output projections scaled by depth.

    std_out = std / sqrt(multiplier * L) for attn_out and mlp_out (HF GPT-2
    ``attn.c_proj``/``mlp.c_proj``), std elsewhere; multiplier = 2 because each
    of the L blocks adds two branches to the residual stream. Radford et al.,
    "Language Models are Unsupervised Multitask Learners" (2019), section 2.3,
    scale "the weights of residual layers at initialization by a factor of
    1/sqrt(N) where N is the number of residual layers"; Hugging Face's
    ``GPT2PreTrainedModel._init_weights`` and nanoGPT take N = 2L, as here.
    Both draw from an untruncated normal (``init.normal_``, ``torch.nn.init.normal_``),
    as tinit does by default (transformers 5.24, ``modeling_gpt2.py``: ``c_proj``
    weights get std ``initializer_range / sqrt(2 * n_layer)``). std is the
    config's ``initializer_range`` (or ``init_std``), as for ``normal``.

    Options:
        std: float > 0, default 0.02 (``init_model_`` reads it from the config).
        multiplier: residual branches per block, default 2.
    """

    name = "gpt2"
    needs_role = True

    def rule(self, ctx: Context, std: float = 0.02, multiplier: float = 2.0) -> InitSpec:
        std = positive(self.name, "std", std)
        multiplier = positive(self.name, "multiplier", multiplier)
        if ctx.base in OUTPUT_ROLES:
            return normal_spec(std / math.sqrt(multiplier * ctx.need("n_layers")))
        if ctx.role in ("attn_sink", "router"):  # HF GptOss draws the sinks and the router's bias
            return normal_spec(std)
        return role_constants(ctx.base) or normal_spec(std)


class Megatron(GPT2):
    """``megatron``: Megatron-LM's ``init_method_normal`` / ``scaled_init_method_normal``.

    Every matrix (embeddings, q/k/v, MLP in, output layer) from N(0, std^2)
    with std = ``init_method_std`` (0.02); the output projections (attention
    ``dense``/``linear_proj``, MLP ``dense_4h_to_h``/``linear_fc2``) from
    N(0, std^2 / (multiplier * L)) with multiplier = 2.0 (Shoeybi et al.,
    "Megatron-LM", arXiv:1909.08053, 2019; ``megatron/core/utils.py``
    ``init_method_normal`` / ``scaled_init_method_normal``, which call
    ``torch.nn.init.normal_``). The same numbers as ``gpt2``, untruncated.

    Options:
        std: float > 0, default 0.02 (Megatron's own default, not read from an HF config).
        multiplier: default 2.0 (Megatron's ``scaled_init_method_normal``).
    """

    name = "megatron"
    config_options = MappingProxyType({})


class DepthInit(Normal):
    """``depth_init``: torchtitan's Llama 3 init, output projections scaled by their own depth.

    torchtitan 0.3.0, ``torchtitan/models/llama3/__init__.py`` (``_LINEAR_INIT``,
    ``_depth_init``, ``_output_linear_init``, ``_EMBEDDING_INIT``) with
    ``torchtitan/models/common/param_init.py`` ``depth_scaled_std``; the same
    rule for DeepSeek-V3's MoE (``torchtitan/models/deepseek_v3/__init__.py``,
    ``_depth_experts_init``, router ``gate_param_init=depth_init(layer_id)``):

        q, k, v (fused wqkv), MLP gate w1, MLA projections   std
        attn_out (wo), mlp_out (w2), MLP up w3 (mlp_up),
        MoE router, attention sinks (GPT-OSS)                 std / sqrt(2 (l + 1))
        token embedding                                       N(0, embedding_std^2), untruncated
        output head                                           head_std = d^-1/2, +-3 std
        norms 1, biases 0

    l is the 0-based block index, std = 0.02. torchtitan draws the hidden
    matrices with ``nn.init.trunc_normal_(std=s)``, whose bounds are the
    absolute defaults a = -2, b = 2: tinit's default is those bounds, trunc =
    2 / s in units of std (+-100 std at s = 0.02, a normal in effect); the
    embedding with ``nn.init.normal_(std=1.0)``; the head with bounds +-3 s.
    OLMo-core's ``InitMethod.llama_depth`` is the same idea with other
    details (``olmo_llama_depth``). An explicit ``trunc=`` applies to every
    matrix (variance-preserving by default where torchtitan's draw is
    untruncated in effect, i.e. all but the head). torchtitan's tied flavours
    (Llama 3.2 1B/3B, Qwen3 0.6B-4B: ``enable_weight_tying``) skip the embedding
    (``_EMBEDDING_SKIP_INIT``) and give the shared tensor the head's init
    (``_output_linear_init``): so does ``init_model_`` (``tied = "head"``).

    Options:
        std: float > 0, default 0.02.
        embedding_std: std of embeddings, default 1.0 (torchtitan's).
        head_std: std of the output head, default d^-1/2 (torchtitan's; needs d_model).
    """

    name = "depth_init"
    config_options = MappingProxyType({})  # torchtitan's 0.02, not an HF config's initializer_range
    needs_role = True
    depth_dependent = True
    tied = "head"  # torchtitan's Decoder.init_states re-ties tok_embeddings to the initialised lm_head
    _DEPTH_ROLES = (*OUTPUT_ROLES, "mlp_up", "router", "attn_sink")  # sinks: torchtitan's GPT-OSS sinks_init
    _ABSOLUTE_BOUND = 2.0  # nn.init.trunc_normal_'s default a = -2, b = 2

    def rule(
        self, ctx: Context, std: float = 0.02, embedding_std: float | None = 1.0, head_std: float | None = None
    ) -> InitSpec:
        std = positive(self.name, "std", std)
        if ctx.role in self._DEPTH_ROLES or ctx.base in OUTPUT_ROLES:
            return normal_spec(std / math.sqrt(2.0 * (ctx.need("layer_idx") + 1)))
        if ctx.base == "embedding":
            return normal_spec(std if embedding_std is None else positive(self.name, "embedding_std", embedding_std))
        if ctx.base == "head":
            if head_std is None:
                return normal_spec(ctx.need("d_model") ** -0.5)
            return normal_spec(positive(self.name, "head_std", head_std))
        return role_constants(ctx.base) or normal_spec(std)

    def reference_trunc(self, ctx: Context, spec: InitSpec) -> float:
        """torchtitan's bounds: embeddings untruncated, the head +-3 std, the rest absolute +-2."""
        if ctx.base == "embedding":
            return math.inf
        if ctx.base == "head":
            return 3.0
        return self._ABSOLUTE_BOUND / spec.std
