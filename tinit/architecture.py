"""What a model's architecture says about its parameters' geometry: fused q/k/v layouts and expert stacks.

Two things a parameter's name and shape alone do not tell:

- **Fused q/k/v projections.** One weight holds the query, key and value
  projections along its output dim; with MQA/GQA the parts have different
  widths (q = h * head_dim, k = v = kv * head_dim) and some families
  interleave them per head or per key/value group. ``FusedQKV`` records the
  layout; ``fused_qkv_of_config`` reads it from a model's config, by family:

  ======================================  ==========================================
  family (``model_type``)                 output dim, as the model's forward splits it
  ======================================  ==========================================
  phi3, dbrx; falcon with ``multi_query``  contiguous ``[q | k | v]``, k = v = kv * hd
  and not ``new_decoder_architecture``;
  gpt_bigcode with ``multi_query``
  falcon ``new_decoder_architecture``;    per key/value group ``[q * (h / kv), k, v]``
  Megatron-Core ``linear_qkv``
  (``num_query_groups``)
  gpt_neox, gpt_neox_japanese, bloom,     per head ``[q, k, v]``
  persimmon; falcon with neither flag;
  gpt_bigcode without ``multi_query``
  codegen                                 4 groups (``mp_num``) of ``[q, v, k]``
  gpt2 (``Conv1D`` c_attn, dim 1), any    equal thirds ``[q | k | v]``
  other family with kv == h
  ======================================  ==========================================

  (transformers 5.24: ``FalconAttention._split_heads``, ``Phi3Attention.forward``,
  ``GPTBigCodeAttention.forward``, ``GPTNeoXAttention.forward``,
  ``BloomAttention._reshape``, ``DbrxAttention.forward``,
  ``CodeGenAttention.forward``; Megatron-Core ``SelfAttention.get_query_key_value_tensors``.)
  Any other family whose key/value heads differ from its query heads is
  refused: its layout is unknown (pass ``overrides={pattern: {"qkv": ...}}``).

- **Expert stacks.** A mixture-of-experts layer may keep all its experts in
  one tensor; the fans of a fan-based scheme are those of ONE expert's matrix.
  ``expert_layout`` tells the layout (``tinit.schemes.LAYOUTS``):
  ``expert_out_in`` (E, out, in) for transformers 5's ``*Experts`` modules
  (``gate_up_proj`` (E, 2F, d) applied as ``F.linear`` per expert) and
  torchtitan's ``GroupedExperts`` (``w1_EFD`` (E, F, D), applied as
  ``x @ w.transpose(-2, -1)``); ``expert_in_out`` (E, in, out) for modules
  marked ``is_transposed`` (GPT-OSS: ``x @ gate_up_proj[e]``); the 2-D
  grouped forms ``grouped_in_out`` (in, E * out) and ``stacked_in_out``
  (E * in, out) for Megatron-Core's ``GroupedMLP`` ``weight1`` / ``weight2``
  (viewed as (E, d, -1) and (E, -1, d) and multiplied untransposed), and
  ``stacked_out_in`` (E * out, in) for DBRX's ``w1`` / ``v1`` (``w2`` is
  ``stacked_in_out``).
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

FUSED_LAYOUTS = ("contiguous", "grouped", "per_head")
_PART_NAMES = ("q", "k", "v")


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int >= 1, got {type(value).__name__} {value!r}")
    value = operator.index(value)
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value}")
    return value


@dataclass(frozen=True)
class FusedQKV:
    """The layout of a fused q/k/v projection's output dim.

    The output dim holds ``groups`` repeats of one block; each block holds the
    parts in ``order`` (0 = q, 1 = k, 2 = v), part q ``q`` rows wide, k ``k``
    and v ``v`` (rows of an (out, in) weight; columns of an (in, out) one).
    E.g. Llama-style GQA fused contiguously, h = 8, kv = 2, head_dim 64:
    ``FusedQKV(1, 512, 128, 128)``; Falcon's new decoder architecture with the
    same heads: ``FusedQKV(2, 256, 64, 64)``; GPT-NeoX with 8 heads of 64:
    ``FusedQKV(8, 64, 64, 64)``.

    Attributes:
        groups: repeats of the block, >= 1.
        q, k, v: width of each part within one block, >= 1.
        order: the parts' order within a block, a permutation of (0, 1, 2).

    Raises:
        TypeError, ValueError: a count that is not an int >= 1, an order that
            is not a permutation of (0, 1, 2).
    """

    groups: int
    q: int
    k: int
    v: int
    order: tuple[int, int, int] = (0, 1, 2)

    def __post_init__(self):
        for name in ("groups", "q", "k", "v"):
            object.__setattr__(self, name, _positive_int(f"FusedQKV.{name}", getattr(self, name)))
        order = tuple(self.order)
        if sorted(order) != [0, 1, 2] or any(type(i) is not int for i in order):
            raise ValueError(f"FusedQKV.order must be a permutation of (0, 1, 2), got {self.order!r}")
        object.__setattr__(self, "order", order)

    @classmethod
    def from_heads(cls, heads: int, kv_heads: int, head_dim: int, layout: str = "contiguous") -> FusedQKV:
        """The layout of h query heads and kv key/value heads of ``head_dim`` each.

        Args:
            heads: query heads h, >= 1.
            kv_heads: key/value heads (query groups) kv, >= 1, dividing h.
            head_dim: width of one head, >= 1.
            layout: "contiguous" (``[q | k | v]``), "grouped" (per key/value
                group ``[q * (h / kv), k, v]``) or "per_head" (per head
                ``[q, k, v]``, needs kv == h; the same as "grouped" then).

        Returns:
            A ``FusedQKV``.

        Raises:
            ValueError: an unknown layout, kv not dividing h, or "per_head" with kv != h.
        """
        heads = _positive_int("heads", heads)
        kv_heads = _positive_int("kv_heads", kv_heads)
        head_dim = _positive_int("head_dim", head_dim)
        if layout not in FUSED_LAYOUTS:
            raise ValueError(f"fused q/k/v layout must be one of {FUSED_LAYOUTS}, got {layout!r}")
        if heads % kv_heads:
            raise ValueError(f"{kv_heads} key/value heads do not divide {heads} query heads")
        if layout == "contiguous":
            return cls(1, heads * head_dim, kv_heads * head_dim, kv_heads * head_dim)
        if layout == "per_head" and kv_heads != heads:
            raise ValueError(
                f"a per-head [q, k, v] layout needs as many key/value heads as heads, got {kv_heads} != {heads}"
            )
        return cls(kv_heads, heads // kv_heads * head_dim, head_dim, head_dim)

    @property
    def widths(self) -> tuple[int, int, int]:
        """(q, k, v) widths over the whole output dim: the fan_out of each part as a separate matrix."""
        return self.groups * self.q, self.groups * self.k, self.groups * self.v

    @property
    def width(self) -> int:
        """The output dim the layout spans."""
        return sum(self.widths)

    @property
    def equal_thirds(self) -> bool:
        """Whether the layout is three equal contiguous slices q, k, v (``InitSpec`` without segments)."""
        return self.groups == 1 and self.q == self.k == self.v and self.order == (0, 1, 2)

    def segments(self) -> tuple[tuple[int, int], ...]:
        """((part, length), ...) in output-dim order: ``InitSpec.segments``."""
        block = tuple((part, (self.q, self.k, self.v)[part]) for part in self.order)
        return block * self.groups


def as_fused_qkv(value, name: str = "qkv") -> FusedQKV:
    """A ``FusedQKV`` from itself or a (heads, kv_heads, head_dim[, layout]) tuple (an override's "qkv").

    Raises:
        TypeError, ValueError: anything else, naming ``name``.
    """
    if isinstance(value, FusedQKV):
        return value
    if isinstance(value, (tuple, list)) and len(value) in (3, 4):
        try:
            return FusedQKV.from_heads(*value)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{name}: {exc}") from None
    raise TypeError(
        f"{name} must be a tinit.architecture.FusedQKV or (heads, kv_heads, head_dim[, layout]) with layout in "
        f"{FUSED_LAYOUTS}, got {value!r}"
    )


_HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "num_query_groups", "kv_n_heads")
_HEAD_DIM = ("head_dim", "kv_channels", "head_size")
_WIDTH = ("hidden_size", "n_embd", "d_model", "dim")
_PER_HEAD = frozenset({"gpt_neox", "gpt_neox_japanese", "bloom", "persimmon"})
_CONTIGUOUS = frozenset({"phi3", "phi4_multimodal", "dbrx", "exaone4_5_vision"})


def _int_field(config, names) -> tuple[str | None, int | None]:
    for name in names:
        value = config.get(name) if isinstance(config, dict) else getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return name, value
    return None, None


def _flag(config, name: str) -> bool:
    return bool(config.get(name) if isinstance(config, dict) else getattr(config, name, False))


def fused_qkv_of_config(config, width: int | None = None) -> FusedQKV | None:
    """The fused q/k/v layout a model config describes (see the module docstring's table).

    Args:
        config: a ``transformers`` config, a dict of its fields, a Megatron-Core
            ``TransformerConfig`` (``num_query_groups``, ``kv_channels``) or a
            torchtitan ``ModelArgs`` (``n_heads``, ``n_kv_heads``, ``dim``).
        width: the fused projection's output dim, when known: in a family of
            unknown layout with kv != h, a width of 3 * h * head_dim proves the
            parts equal (a tensor of h heads each, e.g. a vision tower's qkv
            under a GQA text config).

    Returns:
        A ``FusedQKV``, or None where the parts are equal thirds (kv == h, or a
        config that names no heads): ``tinit.schemes`` splits those by default.

    Raises:
        ValueError: a family whose layout is unknown with kv != h, or a config
            missing the fields its family needs; the message names the fields.
    """
    model_type = config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)
    _, heads = _int_field(config, _HEADS)
    if heads is None:
        return None
    kv_name, kv = _int_field(config, _KV_HEADS)
    _, head_dim = _int_field(config, _HEAD_DIM)
    if head_dim is None:
        _, hidden = _int_field(config, _WIDTH)
        head_dim = hidden // heads if hidden is not None and hidden % heads == 0 else None

    def needing(fields: str) -> FusedQKV:
        raise ValueError(
            f"the fused q/k/v layout of a {model_type or 'model'} config needs {fields} "
            f"(found heads={heads}, kv heads={kv}, head_dim={head_dim})"
        )

    if head_dim is None:
        return needing(f"head_dim or a hidden size divisible by the {heads} heads")
    if model_type == "falcon":
        if _flag(config, "new_decoder_architecture"):
            return FusedQKV.from_heads(heads, _int_field(config, ("num_kv_heads",))[1] or heads, head_dim, "grouped")
        if _flag(config, "multi_query"):
            return FusedQKV.from_heads(heads, 1, head_dim, "contiguous")
        return FusedQKV.from_heads(heads, heads, head_dim, "per_head")
    if model_type == "gpt_bigcode":
        return FusedQKV.from_heads(heads, 1, head_dim) if _flag(config, "multi_query") else _per_head(heads, head_dim)
    if model_type in _PER_HEAD:
        return _per_head(heads, head_dim)
    if model_type == "codegen":  # CodeGenAttention: mp_num = 4 groups, each [q, v, k]
        local = heads * head_dim // 4
        if local * 4 != heads * head_dim:
            return needing("a hidden size divisible by 4 (mp_num)")
        return FusedQKV(4, local, local, local, order=(0, 2, 1))
    if model_type in _CONTIGUOUS:
        return FusedQKV.from_heads(heads, kv or heads, head_dim, "contiguous")
    if model_type is None and kv_name == "num_query_groups":  # Megatron-Core linear_qkv
        return FusedQKV.from_heads(heads, kv, head_dim, "grouped")
    if kv is None or kv == heads or width == 3 * heads * head_dim:
        return None
    raise ValueError(
        f"a fused q/k/v projection of a {model_type or 'model'} config with {kv} key/value heads "
        f"({kv_name}) and {heads} query heads: tinit does not know how this family lays out q, k and v; "
        'pass overrides={pattern: {"qkv": (heads, kv_heads, head_dim, layout)}} with layout in '
        f"{FUSED_LAYOUTS}"
    )


def _per_head(heads: int, head_dim: int) -> FusedQKV | None:
    return FusedQKV.from_heads(heads, heads, head_dim, "per_head")


_TORCHTITAN_EXPERT = re.compile(r"_E[A-Z]{2}$")  # torchtitan's w1_EFD / w2_EDF: (experts, out, in)


def expert_layout(module, leaf: str, ndim: int, model_type: str | None = None) -> tuple[str, int | None] | None:
    """The expert layout of parameter ``leaf`` of ``module`` inside an ``experts`` scope.

    Args:
        module: the module holding the parameter.
        leaf: the parameter's name in ``module``.
        ndim: the parameter's number of dims.
        model_type: the model config's ``model_type`` (GPT-OSS: (E, in, out)).

    Returns:
        (layout, expert count or None), or None for a parameter that is not an
        expert stack (a 2-D parameter of an ordinary module, a bias).
    """
    kind = type(module).__name__
    if ndim == 3:
        transposed = getattr(module, "is_transposed", None)
        if isinstance(transposed, bool):  # transformers' use_experts_implementation records it
            return ("expert_in_out" if transposed else "expert_out_in"), None
        if _TORCHTITAN_EXPERT.search(leaf):
            return "expert_out_in", None
        return ("expert_in_out" if model_type == "gpt_oss" else "expert_out_in"), None
    if ndim != 2:
        return None
    if kind == "GroupedMLP" and leaf in ("weight1", "weight2"):  # Megatron-Core (legacy grouped GEMM)
        experts = getattr(module, "num_local_experts", None)
        if isinstance(experts, int) and experts > 0:
            return ("grouped_in_out" if leaf == "weight1" else "stacked_in_out"), experts
        return None
    if kind == "DbrxExpertGLU" and leaf in ("w1", "v1", "w2"):  # DbrxExperts: x @ w1[e].T, x @ w2[e]
        experts = getattr(module, "moe_num_experts", None)
        if isinstance(experts, int) and experts > 0:
            return ("stacked_in_out" if leaf == "w2" else "stacked_out_in"), experts
    return None


class ModelGeometry:
    """Per-parameter geometry of one model, for ``tinit.init_model_``: fused q/k/v layouts from the
    nearest config and expert-stack layouts, looked up only for the parameters that need them.

    Args:
        model: the model (an ``nn.Module``, on any device, meta included).
        prefix: the prefix ``init_model_`` puts before every name.
    """

    def __init__(self, model, prefix: str = ""):
        self._model = model
        self._prefix = prefix
        self._modules: dict | None = None
        self._layouts: dict = {}  # (id(config), width) -> FusedQKV or None, or the ValueError's message

    def _module(self, path: str):
        if self._modules is None:
            self._modules = dict(self._model.named_modules(remove_duplicate=False))
        return self._modules.get(path)

    def _config(self, path: str):
        """The config of the deepest module at or above ``path`` that has one (a tower's own config)."""
        while True:
            module = self._module(path)
            for attr in ("config", "model_args"):
                config = getattr(module, attr, None) if module is not None else None
                if config is not None and not callable(config):
                    return config
            if not path:
                return None
            path = path.rpartition(".")[0]

    def args(self, name: str, shape: tuple[int, ...], role: str | None, layout: str, override) -> tuple[str, dict]:
        """(layout, extra ``Scheme.spec`` arguments) of parameter ``name`` of logical ``shape``.

        A fused q/k/v projection gets ``qkv`` (the override's, else its config's layout); a
        parameter under an ``experts`` scope its expert layout (and ``experts`` count), unless the
        override sets ``layout``.

        Raises:
            ValueError, TypeError: an unknown fused layout or a bad override, naming the parameter.
        """
        ndim = len(shape)
        local = name[len(self._prefix) :] if self._prefix and name.startswith(self._prefix) else name
        path, _, leaf = local.rpartition(".")
        extra = {}
        if "experts" in override:
            extra["experts"] = override["experts"]
        if "qkv" in override:
            extra["qkv"] = as_fused_qkv(override["qkv"], f"override qkv of parameter {name}")
        elif role == "attn_qkv" and ndim == 2:
            config = self._config(path)
            if config is not None:
                width = shape[1] if layout == "in_out" else shape[0]
                key = id(config), width
                if key not in self._layouts:
                    try:
                        self._layouts[key] = fused_qkv_of_config(config, width)
                    except ValueError as exc:
                        self._layouts[key] = str(exc)
                found = self._layouts[key]
                if isinstance(found, str):
                    raise ValueError(f"parameter {name}: {found}")
                if found is not None:
                    extra["qkv"] = found
        if role == "mlp_gate_up" and (
            leaf.startswith("mlp1") or getattr(self._config(path), "model_type", None) == "gpt_oss"
        ):  # GPT-OSS (HF's gate_up_proj, torchtitan's mlp1): gate = x[..., ::2], up = x[..., 1::2]
            extra["gate_up"] = "interleaved"
        if "layout" not in override and ndim >= 2 and ".experts." in f".{local}":
            model_type = getattr(self._config(path), "model_type", None) if ndim == 3 else None
            found = expert_layout(self._module(path), leaf, ndim, model_type if isinstance(model_type, str) else None)
            if found is not None:
                layout, experts = found
                if experts is not None and "experts" not in extra:
                    extra["experts"] = experts
        return layout, extra
