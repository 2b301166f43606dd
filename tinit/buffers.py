"""Recompute the buffers of a materialised module tree with each module's own code.

``nn.Module.to_empty`` gives every buffer fresh, uninitialised storage, and a
model built on the meta device never had values to keep: a rotary module's
``inv_freq`` comes back as whatever the allocator held. Buffers are not
drawn from the Philox stream; they are functions of the module's
configuration, so each is recomputed by the recipe of its module type (the
code the module's constructor or its library's ``_init_weights`` runs),
on the target device, and the model matches one built there eagerly bit for
bit.

Materialising in two steps lets a buffer nothing can recompute be reported
before anything is allocated: ``plan`` (on the meta model) assigns every
buffer a recipe or keeps its values (a buffer already off the meta device),
and raises ``UninitialisedBufferError`` for the rest; ``recompute_`` (after
``to_empty``) writes them. Persistent buffers are treated like non-persistent
ones: a checkpoint may overwrite them later, but until then they hold what
the module's own code computes, never garbage.

Recipes (``RECIPES``, the first that claims a buffer wins):
    hf_rotary       ``inv_freq`` / ``original_inv_freq`` (and the per-layer-type
                    ``{type}_inv_freq`` pairs) of transformers' rotary modules
    hf_embed_scale  ``embed_scale`` of Gemma-style scaled word embeddings
    hf_input_ids    ``position_ids`` (arange) and ``token_type_ids`` (zeros) of
                    transformers' embedding modules (BERT and its relatives)
    hf_sinusoidal   ``embed_positions``, the sin/cos table of GPT-J's and CodeGen's
                    rotary modules
    hf_causal_mask  the boolean lower-triangular ``bias`` of GPT-BigCode, GPT-Neo
                    (its local layers banded), ImageGPT and their kind
    hf_zeros        ``final_logits_bias`` (BART and its relatives) and
                    ``e_score_correction_bias`` (DeepSeek-V3-style routers): zeros
    hf_falcon_h1_mup
                    Falcon-H1's per-channel ``mup_vector`` of each Mamba mixer, from the
                    model's config
    torchtitan      the buffers of torchtitan modules that compute their own
                    (``_init_self_buffers``: the RoPE cache, MoE token counters)
    batch_norm      running statistics of torch's BatchNorm/InstanceNorm
    hf_constructor  last: any other buffer of a transformers module that its own constructor
                    computes deterministically (MiniMax's ``slope_rate`` and decay tables):
                    the module built again on the CPU, parameters on meta, under two torch seeds
"""

from __future__ import annotations

import contextlib
import inspect
import math
import sys
import warnings
import weakref
from dataclasses import dataclass, field

import torch

__all__ = ["RECIPES", "BufferRecipe", "UninitialisedBufferError", "plan", "recompute_", "register"]


def owner_config(model: torch.nn.Module, owner: str, module: torch.nn.Module):
    """The config ``module`` (``model``'s submodule named ``owner``) was built from: its own
    ``config``, else that of its nearest transformers ``PreTrainedModel`` ancestor; None when there
    is none (or transformers is not imported)."""
    if getattr(module, "config", None) is not None:
        return module.config
    kind = getattr(sys.modules.get("transformers.modeling_utils"), "PreTrainedModel", None)
    found, path = None, ""
    for part in [""] + owner.split("."):
        path = part if not path else f"{path}.{part}" if part else path
        sub = model.get_submodule(path)
        if kind is not None and isinstance(sub, kind):
            found = sub.config
    return found


def constructor_args(
    model: torch.nn.Module, owner: str, module: torch.nn.Module, dtype=None, *, strict: bool = False
) -> dict | None:
    """The arguments to build ``module`` (``model``'s submodule named ``owner``) again: ``config``
    (``owner_config``), and each other argument of its ``__init__`` the module holds under the same
    name (Conv1D's ``nf``/``nx``, an attention's ``layer_idx``), else its default (``dtype``: the
    dtype of the tensors to rebuild, when given).

    Args:
        strict: take a default only for ``device`` and ``dtype``; any other argument the module does
            not hold makes the result None (a default may not be what the module was built with).

    Returns:
        {argument: value}, or None when one can be read neither way.
    """
    try:
        signature = inspect.signature(type(module).__init__)
    except (TypeError, ValueError):
        return None
    args = {}
    for i, (arg, spec) in enumerate(signature.parameters.items()):
        if i == 0 or spec.kind in (spec.VAR_POSITIONAL, spec.VAR_KEYWORD):
            continue
        if arg == "config":
            args[arg] = owner_config(model, owner, module)
            if args[arg] is None:
                return None
        elif arg in module.__dict__ and not isinstance(module.__dict__[arg], torch.Tensor):
            args[arg] = module.__dict__[arg]
        elif arg == "dtype" and dtype is not None:  # XIELU(dtype=config.dtype): the dtype its tensors have
            args[arg] = dtype
        elif spec.default is inspect.Parameter.empty or (strict and arg not in ("device", "dtype")):
            return None
    return args


@contextlib.contextmanager
def _parameters_on_meta():
    """Every parameter registered inside goes to the meta device (buffers stay where they are made):
    accelerate's ``init_empty_weights(include_buffers=False)`` rule, so a constructor's buffers are
    computed without allocating or filling its weights."""
    register = torch.nn.Module.register_parameter

    def on_meta(self, name, param):
        register(self, name, param)
        if param is not None and not param.is_meta:
            self._parameters[name] = torch.nn.Parameter(param.detach().to("meta"), param.requires_grad)

    torch.nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def rebuilt(module: torch.nn.Module, args: dict, *, parameters_on_meta: bool = False) -> list | None:
    """``type(module)(**args)`` built twice on the CPU, under torch seeds 1 and 2
    (``torch.random.fork_rng``: the caller's RNG untouched), warnings silenced; a value both builds
    agree on is the constructor's deterministic one. ``parameters_on_meta``: only the buffers are
    wanted (``_parameters_on_meta``). None when a build fails."""
    builds = []
    try:
        for seed in (1, 2):
            with torch.random.fork_rng(devices=[]), torch.device("cpu"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.manual_seed(seed)
                with _parameters_on_meta() if parameters_on_meta else contextlib.nullcontext():
                    builds.append(type(module)(**args))
    except Exception:  # noqa: BLE001 - a module that cannot be rebuilt has no constructor value
        return None
    return builds


class UninitialisedBufferError(RuntimeError):
    """Buffers of a meta-built model that tinit cannot recompute (or whose recipe failed).

    A RuntimeError, like the other failures of materialising: the model's
    arguments are valid, its state cannot be produced.

    Attributes:
        names: the fully qualified buffer names.
    """

    def __init__(self, message: str, names: list[str]):
        super().__init__(message)
        self.names = list(names)


class BufferRecipe:
    """How to recompute some buffers of one kind of module; subclass and ``register`` an instance.

    ``claims`` runs on the meta model (it may read attributes, shapes and
    dtypes, never values); ``values`` runs after ``to_empty`` under
    ``torch.device(target)``, so factory calls without a device land there,
    as they do in a module built under that device.
    """

    name = "recipe"

    def prepare(self, model: torch.nn.Module) -> None:
        """Called by ``plan`` with the whole model before any ``claims``, for a recipe whose values
        depend on more than the module (Falcon-H1's mixers on their model's config); does nothing
        by default.

        Args:
            model: the module tree ``plan`` walks (its buffers still on the meta device).
        """

    def planned(self) -> None:
        """Called by ``plan`` once every module has been offered to every recipe: drop what
        ``claims`` kept only to answer later calls (``values``' own inputs stay); does nothing by
        default."""

    def claims(self, module: torch.nn.Module) -> tuple[str, ...]:
        """Which of ``module``'s own buffers this recipe recomputes.

        Args:
            module: a module of the model, its buffers still on the meta device.

        Returns:
            Buffer names (leaves, as in ``module._buffers``); empty when the
            recipe does not apply.
        """
        raise NotImplementedError

    def values(self, module: torch.nn.Module) -> dict[str, torch.Tensor]:
        """The values of the claimed buffers.

        Args:
            module: the materialised module.

        Returns:
            {leaf: tensor} for every name ``claims`` gave, each of the buffer's
            shape (copied into the buffer, which keeps its own dtype).
        """
        raise NotImplementedError


def _from_transformers(module: torch.nn.Module) -> bool:
    return type(module).__module__.startswith("transformers.")


class HFRotaryEmbedding(BufferRecipe):
    """transformers' rotary position embeddings: ``inv_freq`` and ``original_inv_freq``.

    Mirrors ``LlamaRotaryEmbedding.__init__`` (and its copies in Mistral,
    Qwen2, Gemma and most decoders): ``rope_init_fn`` is the module's
    ``compute_default_rope_parameters`` for ``rope_type == "default"``, else
    ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type]``, or
    one of the module's own ``compute_axial_rope_parameters`` /
    ``compute_ntk_alpha_rope_parameters``, as
    ``PreTrainedModel._init_weights`` picks them; both buffers get
    ``rope_init_fn(config)[0]``. Modules with one rope type per layer type
    (``Gemma3RotaryEmbedding``: ``rope_type`` a dict, buffers
    ``{layer_type}_inv_freq``) follow ``Gemma3PreTrainedModel._init_weights``,
    calling ``rope_init_fn(config, layer_type=...)``.
    """

    name = "hf_rotary"

    @staticmethod
    def _layer_types(module) -> list[str | None] | None:
        rope_type = getattr(module, "rope_type", None)
        if isinstance(rope_type, str):
            return [None]
        if isinstance(rope_type, dict):
            return list(rope_type)
        return None

    def claims(self, module):
        if "RotaryEmbedding" not in type(module).__name__ or getattr(module, "config", None) is None:
            return ()
        layer_types = self._layer_types(module)
        if layer_types is None:
            return ()
        names = []
        for layer_type in layer_types:
            prefix = "" if layer_type is None else f"{layer_type}_"
            pair = (f"{prefix}inv_freq", f"{prefix}original_inv_freq")
            # A rope type without an init function is left unclaimed, so plan reports it before allocating.
            if any(module._buffers.get(name) is None for name in pair) or self._function(module, layer_type) is None:
                return ()
            names.extend(pair)
        return tuple(names)

    @staticmethod
    def _function(module, layer_type):
        rope_type = module.rope_type if layer_type is None else module.rope_type[layer_type]
        functions = {
            "axial": getattr(module, "compute_axial_rope_parameters", None),
            "ntk_alpha": getattr(module, "compute_ntk_alpha_rope_parameters", None),
            "default": getattr(module, "compute_default_rope_parameters", None),
        }
        if rope_type not in ("axial", "ntk_alpha", "default"):
            try:
                from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
            except ImportError:
                return None
            functions = {**functions, **ROPE_INIT_FUNCTIONS}
        function = functions.get(rope_type)
        return function if callable(function) else None

    def values(self, module):
        found = {}
        for layer_type in self._layer_types(module):
            prefix, kwargs = ("", {}) if layer_type is None else (f"{layer_type}_", {"layer_type": layer_type})
            inv_freq, _ = self._function(module, layer_type)(module.config, **kwargs)
            found[f"{prefix}inv_freq"] = inv_freq
            found[f"{prefix}original_inv_freq"] = inv_freq
        return found


class HFScaledWordEmbedding(BufferRecipe):
    """The ``embed_scale`` buffer of Gemma-style word embeddings (sqrt(hidden_size) for Gemma).

    Mirrors ``GemmaTextScaledWordEmbedding.__init__``
    (``torch.tensor(embed_scale)``) and ``GemmaPreTrainedModel._init_weights``
    (``init.constant_(module.embed_scale, module.scalar_embed_scale)``): the
    module keeps the float it was built with as ``scalar_embed_scale``.
    """

    name = "hf_embed_scale"

    def claims(self, module):
        ok = module._buffers.get("embed_scale") is not None and isinstance(
            getattr(module, "scalar_embed_scale", None), (int, float)
        )
        return ("embed_scale",) if ok else ()

    def values(self, module):
        return {"embed_scale": torch.full(module.embed_scale.shape, float(module.scalar_embed_scale))}


class HFInputIds(BufferRecipe):
    """``position_ids`` and ``token_type_ids`` of transformers' embedding modules.

    Mirrors ``BertEmbeddings.__init__``
    (``torch.arange(max_position_embeddings).expand((1, -1))`` and
    ``torch.zeros(position_ids.size(), dtype=torch.long)``) and
    ``BertPreTrainedModel._init_weights`` (``init.copy_(module.position_ids,
    torch.arange(module.position_ids.shape[-1]).expand((1, -1)))``,
    ``init.zeros_(module.token_type_ids)``); RoBERTa, ELECTRA and the other
    BERT relatives register the same two buffers. Only integer buffers of
    modules defined in transformers are claimed: elsewhere a buffer of that
    name need not be an arange.
    """

    name = "hf_input_ids"

    def claims(self, module):
        if not _from_transformers(module):
            return ()
        names = []
        for name in ("position_ids", "token_type_ids"):
            buffer = module._buffers.get(name)
            if buffer is not None and not buffer.is_floating_point() and buffer.dim() in (1, 2):
                if name == "position_ids" and buffer.dim() == 2 and buffer.shape[0] != 1:
                    continue
                names.append(name)
        return tuple(names)

    def values(self, module):
        found = {}
        for name in self.claims(module):
            buffer = module._buffers[name]
            if name == "position_ids":
                found[name] = torch.arange(buffer.shape[-1]).expand(buffer.shape)
            else:
                found[name] = torch.zeros(buffer.shape, dtype=torch.long)
        return found


class BatchNormStats(BufferRecipe):
    """``running_mean``, ``running_var`` and ``num_batches_tracked`` of torch's batch and instance norms.

    Mirrors ``torch.nn.modules.batchnorm._NormBase.reset_running_stats``
    (zeros, ones, zero), which the module's constructor runs; transformers'
    ``PreTrainedModel._init_weights`` does the same.
    """

    name = "batch_norm"

    def claims(self, module):
        if not isinstance(module, torch.nn.modules.batchnorm._NormBase):
            return ()
        return tuple(
            name
            for name in ("running_mean", "running_var", "num_batches_tracked")
            if module._buffers.get(name) is not None
        )

    def values(self, module):
        fill = {"running_mean": 0, "running_var": 1, "num_batches_tracked": 0}
        return {
            name: torch.full(module._buffers[name].shape, fill[name], dtype=module._buffers[name].dtype)
            for name in self.claims(module)
        }


class HFSinusoidalPositions(BufferRecipe):
    """``embed_positions`` of GPT-J's and CodeGen's rotary modules: a (max_positions, dim) sin/cos table.

    Mirrors ``GPTJRotaryEmbedding.__init__`` (and ``CodeGenRotaryEmbedding``):
    ``create_sinusoidal_positions(max_positions, pos_embd_dim)``, the function of
    the module's own ``transformers`` module (inverse frequencies
    ``10000 ** (-arange(0, dim, 2) / dim)``, then ``cat(sin, cos)`` of positions
    times frequencies), which ``GPTJPreTrainedModel._init_weights`` copies in
    too. The function is called, not re-derived, so a model's copy of it is
    followed exactly.
    """

    name = "hf_sinusoidal"

    @staticmethod
    def _function(module):
        source = sys.modules.get(type(module).__module__)
        return getattr(source, "create_sinusoidal_positions", None)

    def claims(self, module):
        buffer = module._buffers.get("embed_positions")
        ok = (
            buffer is not None
            and buffer.dim() == 2
            and _from_transformers(module)
            and isinstance(getattr(module, "max_positions", None), int)
            and isinstance(getattr(module, "pos_embd_dim", None), int)
            and callable(self._function(module))
        )
        return ("embed_positions",) if ok else ()

    def values(self, module):
        return {"embed_positions": self._function(module)(module.max_positions, module.pos_embd_dim)}


class HFCausalMask(BufferRecipe):
    """The boolean causal mask ``bias`` of transformers' GPT-2-era attention: ``tril(ones(n, n))``.

    Mirrors ``GPTBigCodeModel.__init__`` (``torch.tril(torch.ones((n, n),
    dtype=torch.bool))``, n = ``max_position_embeddings``) and
    ``GPTNeoSelfAttention.__init__`` / ``GPTNeoPreTrainedModel._init_weights``
    (the same viewed as (1, 1, n, n); a layer with ``attention_type ==
    "local"`` keeps only the last ``config.window_size`` positions:
    ``bitwise_xor(bias, tril(bias, -window_size))``); ImageGPT, CLVP and Bark
    register the (1, 1, n, n) form. Only square boolean buffers with leading
    dims of 1, in modules defined in transformers, are claimed.
    """

    name = "hf_causal_mask"

    def claims(self, module):
        buffer = module._buffers.get("bias")
        if buffer is None or buffer.dtype != torch.bool or buffer.dim() < 2 or not _from_transformers(module):
            return ()
        if buffer.shape[-1] != buffer.shape[-2] or any(size != 1 for size in buffer.shape[:-2]):
            return ()
        attention_type = getattr(module, "attention_type", None)
        if attention_type == "local" and not isinstance(
            getattr(getattr(module, "config", None), "window_size", None), int
        ):
            return ()
        return ("bias",)

    def values(self, module):
        shape = module._buffers["bias"].shape
        mask = torch.tril(torch.ones((shape[-1], shape[-1]), dtype=torch.bool)).view(shape)
        if getattr(module, "attention_type", None) == "local":
            mask = torch.bitwise_xor(mask, torch.tril(mask, -module.config.window_size))
        return {"bias": mask}


class HFZeroBuffers(BufferRecipe):
    """Buffers transformers' models create and initialise as zeros.

    ``final_logits_bias``: ``BartForConditionalGeneration.__init__``
    (``torch.zeros((1, vocab))``) and ``BartPreTrainedModel._init_weights``
    (``init.zeros_``), and the same in mBART, Marian, Pegasus, Blenderbot, LED.
    ``e_score_correction_bias``: ``DeepseekV3TopkRouter.__init__``
    (``torch.zeros(n_routed_experts, dtype=torch.float32)``) and
    ``DeepseekV3PreTrainedModel._init_weights`` (``init.zeros_``), and the
    routers that copy it (GLM-4-MoE, dots1, ...). Modules outside
    transformers are not claimed: a buffer of that name need not be zero there.
    """

    name = "hf_zeros"
    NAMES = ("final_logits_bias", "e_score_correction_bias")

    def claims(self, module):
        if not _from_transformers(module):
            return ()
        return tuple(name for name in self.NAMES if module._buffers.get(name) is not None)

    def values(self, module):
        return {name: torch.zeros(module._buffers[name].shape) for name in self.claims(module)}


class HFFalconH1MupVector(BufferRecipe):
    """Falcon-H1's ``mup_vector`` (1, 1, 2 * d_ssm + 2 * groups * d_state + heads): the per-channel
    multipliers of each Mamba mixer's ``in_proj`` output.

    Mirrors ``FalconH1Model.__init__`` and ``FalconH1PreTrainedModel._init_weights``
    (``compute_mup_vector(config)`` into every ``layer.mamba.mup_vector``): the function of the
    model's own ``transformers`` module, called with the config of the ``FalconH1Model`` holding the
    mixer (``prepare`` finds it; the mixer keeps no config of its own).
    """

    name = "hf_falcon_h1_mup"

    def __init__(self):
        self._configs = weakref.WeakKeyDictionary()  # mixer -> the config of its FalconH1Model

    def prepare(self, model):
        for module in model.modules():
            if type(module).__name__ == "FalconH1Model" and _from_transformers(module):
                for layer in getattr(module, "layers", ()):
                    mixer = getattr(layer, "mamba", None)
                    if isinstance(mixer, torch.nn.Module):
                        self._configs[mixer] = module.config

    def claims(self, module):
        ok = module._buffers.get("mup_vector") is not None and module in self._configs
        return ("mup_vector",) if ok and callable(self._function(module)) else ()

    @staticmethod
    def _function(module):
        return getattr(sys.modules.get(type(module).__module__), "compute_mup_vector", None)

    def values(self, module):
        return {"mup_vector": self._function(module)(self._configs[module])}


class TorchtitanBuffers(BufferRecipe):
    """Buffers of torchtitan modules, by the module's own ``_init_self_buffers``.

    torchtitan's ``Module.init_states`` (``torchtitan.protocols.module``) calls each module's
    ``_init_self_buffers(buffer_device=...)`` after its parameters; ``RoPE`` recomputes its
    ``cache`` (``_precompute_cache``), the MoE layer its ``tokens_per_expert_E`` and
    ``expert_bias_E`` counters (zeros). A module is claimed only when its class overrides the
    protocol's no-op default, and then for every buffer it holds. ``values`` runs the method on the
    materialised module (which assigns new tensors), takes what it assigned and puts the module's
    own tensors back, so ``recompute_`` copies the values in as for every other recipe.
    """

    name = "torchtitan"

    @staticmethod
    def _own(module) -> bool:
        if not type(module).__module__.startswith("torchtitan."):
            return False
        method = getattr(type(module), "_init_self_buffers", None)
        try:
            from torchtitan.protocols.module import Module
        except ImportError:
            return False
        return callable(method) and method is not getattr(Module, "_init_self_buffers", None)

    def claims(self, module):
        if not self._own(module):
            return ()
        return tuple(leaf for leaf, buffer in module._buffers.items() if buffer is not None)

    def values(self, module):
        before = dict(module._buffers)
        try:
            module._init_self_buffers()
            found = {leaf: module._buffers[leaf] for leaf in self.claims(module)}
        finally:
            module._buffers.update(before)
        return found


def _same_settings(module: torch.nn.Module, build: torch.nn.Module) -> bool:
    """Whether ``build`` holds every plain setting (a public int, float, str, bool or None attribute,
    ``training`` aside) ``module`` holds, with the same value: a module changed after construction
    (its ``rope_type`` set by hand) is not what its constructor gives."""
    plain = (int, float, str, bool, type(None))
    for key, value in vars(module).items():
        if key.startswith("_") or key == "training" or not isinstance(value, plain):
            continue
        other = vars(build).get(key, build)  # build itself: a sentinel no setting equals
        if type(other) is not type(value) or other != value:
            return False
    return True


class HFConstructorBuffers(BufferRecipe):
    """Any other meta buffer of a transformers module whose own code computes it deterministically
    at construction: MiniMax's lightning-attention ``slope_rate``, ``query_decay``, ``key_decay``
    and ``diagonal_decay`` (``MiniMaxLightningAttention.__init__``: ``get_slope_rate`` and
    ``decay_factors``, which its ``_init_weights`` repeats), GPT's causal ``bias`` mask, XIELU's
    ``beta``/``eps``, a weightless norm's ``weight``, sinusoidal position tables.

    ``claims`` builds again on the CPU, its parameters on meta (``rebuilt``) and under two torch
    seeds, the nearest module on the path from the buffer's module up to the top that can be built
    from its own arguments (``constructor_args`` with ``strict``: ``config`` from the module or its
    nearest Hugging Face model, every other argument held by the module; no guessed default): the
    buffer's module itself, else the first ancestor (``OpenAIGPTModel`` for its blocks' masks).
    When the builds hold the plain settings of both that module and the buffer's
    (``_same_settings``: nothing was changed after construction), it claims the buffers both builds
    agree on, of the buffer's shape and dtype; those values are what ``values`` gives. Each module
    is built at most once per ``plan``. Last in ``RECIPES``: a named recipe always wins.
    """

    name = "hf_constructor"

    def __init__(self):
        self._owners = weakref.WeakKeyDictionary()  # module -> (its model, its qualified name)
        self._values = weakref.WeakKeyDictionary()  # module -> {leaf: tensor}
        self._builds: dict = {}  # (id(model), qualified name) -> two builds or None, for one plan

    def prepare(self, model):
        self._builds = {}
        for name, module in model.named_modules():
            if _from_transformers(module) and any(b is not None and b.is_meta for b in module._buffers.values()):
                self._owners[module] = (weakref.ref(model), name)

    def _built(self, model, name: str):
        key = (id(model), name)
        if key not in self._builds:
            sub = model.get_submodule(name)
            args = constructor_args(model, name, sub, strict=True) if _from_transformers(sub) else None
            builds = None if args is None else rebuilt(sub, args, parameters_on_meta=True)
            self._builds[key] = builds if builds and all(_same_settings(sub, b) for b in builds) else None
        return self._builds[key]

    def claims(self, module):
        held = self._owners.get(module)
        model = held[0]() if held else None
        if model is None:
            return ()
        parts = held[1].split(".") if held[1] else []
        for depth in range(len(parts), -1, -1):
            builds = self._built(model, ".".join(parts[:depth]))
            inner = ".".join(parts[depth:])
            try:
                copies = [b.get_submodule(inner) for b in builds] if builds else []
            except AttributeError:
                copies = []
            if not copies or not all(_same_settings(module, c) for c in copies):
                continue
            found = {}
            for leaf, buffer in module._buffers.items():
                values = [c._buffers.get(leaf) for c in copies]
                if buffer is None or not buffer.is_meta or any(v is None or v.is_meta for v in values):
                    continue
                if all(v.shape == buffer.shape and v.dtype == buffer.dtype for v in values) and torch.equal(*values):
                    found[leaf] = values[0]
            if found:
                self._values[module] = found
                return tuple(found)
        return ()

    def planned(self):
        self._builds = {}  # the ancestors' builds: their values for the claimed buffers are in _values

    def values(self, module):
        return dict(self._values.get(module, {}))


RECIPES: list[BufferRecipe] = [
    HFRotaryEmbedding(),
    HFScaledWordEmbedding(),
    HFInputIds(),
    HFSinusoidalPositions(),
    HFCausalMask(),
    HFZeroBuffers(),
    HFFalconH1MupVector(),
    TorchtitanBuffers(),
    BatchNormStats(),
    HFConstructorBuffers(),
]


def register(recipe: BufferRecipe, *, first: bool = True) -> BufferRecipe:
    """Add a recipe to ``RECIPES``.

    Args:
        recipe: a ``BufferRecipe`` instance.
        first: put it before the built-in recipes (it wins for the buffers
            it claims); False puts it after them, before the last-resort
            ``hf_constructor``.

    Returns:
        ``recipe`` (so a subclass can be registered where it is defined).

    Raises:
        TypeError: ``recipe`` is not a ``BufferRecipe``.
    """
    if not isinstance(recipe, BufferRecipe):
        raise TypeError(f"register: expected a tinit.buffers.BufferRecipe instance, got {type(recipe).__name__}")
    if first:
        RECIPES.insert(0, recipe)
    else:  # still before the constructor fallback, which only takes what no named recipe claims
        last = len(RECIPES) - (1 if RECIPES and isinstance(RECIPES[-1], HFConstructorBuffers) else 0)
        RECIPES.insert(last, recipe)
    return recipe


@dataclass
class BufferPlan:
    """What ``recompute_`` does after ``to_empty``: made by ``plan`` on the meta model.

    Attributes:
        recipes: (module name, module, recipe, claimed leaves) for each module
            with buffers to recompute, in ``named_modules`` order.
        kept: (qualified name, module, leaf, tensor) for buffers that already
            held values (not on the meta device); their old tensors, copied
            back into a buffer that was re-allocated (``to_empty``).
        unclaimed: (qualified name, module, leaf) for the floating-point meta
            buffers no recipe claims, under ``plan(..., unclaimed="nan")``:
            ``recompute_`` fills them with NaN for the model's own code to
            overwrite (its ``_init_weights``), so a value it never wrote shows.
    """

    recipes: list[tuple[str, torch.nn.Module, BufferRecipe, tuple[str, ...]]] = field(default_factory=list)
    kept: list[tuple[str, torch.nn.Module, str, torch.Tensor]] = field(default_factory=list)
    unclaimed: list[tuple[str, torch.nn.Module, str]] = field(default_factory=list)
    # plan(..., unclaimed="nan"): a recipe that fails leaves its buffers NaN (added to ``unclaimed``)
    # for the model's own code to write, instead of raising
    nan_on_failure: bool = False


def _qualified(module_name: str, leaf: str) -> str:
    return f"{module_name}.{leaf}" if module_name else leaf


def plan(model: torch.nn.Module, *, unclaimed: str = "error") -> BufferPlan:
    """Assign every buffer of ``model`` a recipe, or keep its values; reads no buffer values.

    Args:
        model: the module tree before ``to_empty`` (typically on the meta device).
        unclaimed: what to do with a meta buffer no recipe claims: "error"
            refuses it; "nan" plans a floating-point one to be filled with NaN
            (``BufferPlan.unclaimed``: the model's own code computes it next,
            as ``init_model_(model, "hf")`` runs it), plans any other to be
            allocated and left for the caller (listed there too), and makes a
            recipe that fails leave its floating-point buffers NaN (added to
            ``unclaimed``) instead of raising.

    Returns:
        A ``BufferPlan`` for ``recompute_``.

    Raises:
        TypeError: ``unclaimed`` is not a str. ValueError: it is neither "error" nor "nan".
        UninitialisedBufferError: a buffer on the meta device that no recipe
            claims (all such buffers are named, with module type and whether
            they are persistent); raised before anything is allocated.
    """
    if not isinstance(unclaimed, str):
        raise TypeError(f"tinit.buffers.plan: unclaimed must be a str, got {type(unclaimed).__name__}")
    if unclaimed not in ("error", "nan"):
        raise ValueError(f"tinit.buffers.plan: unclaimed must be 'error' or 'nan', got {unclaimed!r}")
    result, missing = BufferPlan(nan_on_failure=unclaimed == "nan"), []
    for recipe in RECIPES:
        recipe.prepare(model)
    for module_name, module in model.named_modules():
        buffers = {leaf: b for leaf, b in module._buffers.items() if b is not None}
        if not buffers:
            continue
        on_meta = {leaf for leaf, b in buffers.items() if b.is_meta}
        for leaf, buffer in buffers.items():
            if leaf not in on_meta:
                result.kept.append((_qualified(module_name, leaf), module, leaf, buffer))
        for recipe in RECIPES:
            if not on_meta:
                break
            claimed = tuple(leaf for leaf in recipe.claims(module) if leaf in on_meta)
            if claimed:
                result.recipes.append((module_name, module, recipe, claimed))
                on_meta -= set(claimed)
        for leaf in sorted(on_meta, key=list(buffers).index):
            if unclaimed == "nan":  # the caller checks what the model's code wrote (an integral one: rebuilt)
                result.unclaimed.append((_qualified(module_name, leaf), module, leaf))
                continue
            kind = "non-persistent" if leaf in module._non_persistent_buffers_set else "persistent"
            missing.append(f"{_qualified(module_name, leaf)} ({type(module).__name__}, {kind})")
    for recipe in RECIPES:
        recipe.planned()
    if missing:
        raise UninitialisedBufferError(
            f"tinit cannot recompute {len(missing)} buffer(s) of this meta-built model, and to_empty would leave "
            f"them uninitialised: {', '.join(missing[:8])}{', ...' if len(missing) > 8 else ''}. Register a "
            "tinit.buffers.BufferRecipe for the module type (tinit.buffers.register), or materialise the model "
            "yourself (tinit.materialise_(model, device, recompute_buffers=False), then fill these buffers or "
            "load a checkpoint) and call init_model_ without device=",
            [entry.split(" ", 1)[0] for entry in missing],
        )
    return result


def recompute_(buffer_plan: BufferPlan, device: str | torch.device) -> list[str]:
    """Write every buffer of a materialised model as ``buffer_plan`` says.

    Args:
        buffer_plan: from ``plan``, made before ``to_empty``.
        device: the device the model was materialised on; recipes compute there.

    Returns:
        The qualified names of the buffers written (recomputed or restored; not
        the ``unclaimed`` ones, which are filled with NaN).

    Raises:
        UninitialisedBufferError: a recipe failed or gave a value of the wrong
            shape (the buffer is named; the model is materialised by then).
    """
    written = []
    with torch.no_grad():
        for name, module, leaf, old in buffer_plan.kept:
            if module._buffers[leaf] is not old:  # re-allocated (to_empty); tinit.materialise_ keeps the tensor
                module._buffers[leaf].copy_(old)
            written.append(name)
        for _, module, leaf in buffer_plan.unclaimed:  # the model's own code writes these next
            if module._buffers[leaf].is_floating_point():
                module._buffers[leaf].fill_(math.nan)
        with torch.device(device):
            for module_name, module, recipe, claimed in buffer_plan.recipes:
                names = [_qualified(module_name, leaf) for leaf in claimed]
                try:
                    found = recipe.values(module)
                except Exception as err:
                    floating = all(module._buffers[leaf].is_floating_point() for leaf in claimed)
                    if buffer_plan.nan_on_failure and floating:
                        for leaf, qualified in zip(claimed, names, strict=True):
                            module._buffers[leaf].fill_(math.nan)
                            buffer_plan.unclaimed.append((qualified, module, leaf))
                        continue
                    raise UninitialisedBufferError(
                        f"buffer recipe {recipe.name!r} failed for {', '.join(names)} ({type(module).__name__}): {err}",
                        names,
                    ) from err
                for leaf, qualified in zip(claimed, names, strict=True):
                    buffer, value = module._buffers[leaf], found.get(leaf)
                    if value is None or tuple(value.shape) != tuple(buffer.shape):
                        got = "nothing" if value is None else f"shape {tuple(value.shape)}"
                        raise UninitialisedBufferError(
                            f"buffer recipe {recipe.name!r} gave {got} for {qualified} (shape {tuple(buffer.shape)})",
                            [qualified],
                        )
                    buffer.copy_(value)
                    written.append(qualified)
    return written
