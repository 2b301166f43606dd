"""modded-nanogpt's init (KellerJordan/modded-nanogpt ``train_gpt.py``)."""

from __future__ import annotations

import math

from tinit.schemes._core import OUTPUT_ROLES, Context, InitSpec, Scheme, normal_spec, role_constants

_VARIANTS = ("2026-08", "2025-08")


class ModdedNanoGPT(Scheme):
    """``modded_nanogpt``: the GPT-2 speedrun's init, zero-initialised output projections.

    Hidden matrices from U(-b, b), b = sqrt(3) * 0.5 * d^-1/2 (std 0.5 d^-1/2,
    "improved init scale by @YouJiacheng"), the MLP down projection zero
    ("zero init suggested by @Grad62304977"), norms 1, biases 0:

        variant   attn q/k/v, mlp_in   attn_out   mlp_out   head             embedding
        2026-08   uniform              uniform    0         N(0, 0.005^2)    N(0, 0.005^2)
        2025-08   uniform              0          0         0                N(0, 1)

    ``2026-08`` is ``train_gpt.py`` at commit f411b3d (2026-08-01): the
    ``qk_bank`` and ``vo_bank`` (q, k, v and o) drawn uniformly, ``mlp_bank``'s
    c_proj zeroed, ``lm_head`` ``nn.init.normal_(std=0.005)`` and the
    embedding a copy of it (tied at init; here drawn alike, not copied).
    ``2025-08`` is commit 9d9dc969 (2025-08-23): ``qkvo_w[3]`` (the attention
    output), the MLP ``c_proj`` and ``lm_head`` zeroed, embeddings
    ``nn.Embedding``'s default N(0, 1). d is the model width (``model_dim``;
    the code writes ``dim ** -0.5`` for every bank). The normals are
    untruncated, as torch draws them. Not covered by roles: the 2026-08 value
    embeddings (``0.01 * torch.randn``), the zero-initialised gates and the
    scalar lambdas; classify or leave them with an override.

    Options:
        variant: "2026-08" (default) or "2025-08".
    """

    name = "modded_nanogpt"
    needs_role = True
    default_trunc = math.inf

    def tied_role(self, roles: tuple[str, ...], variant: str = "2026-08", **options) -> str | None:
        """2026-08: the head's (``GPT.__init__`` draws ``lm_head`` and copies it into the embedding);
        2025-08 ties nothing (its zero head and N(0, 1) embedding are separate tensors): None."""
        return "head" if variant == "2026-08" and "head" in roles else None

    def rule(self, ctx: Context, variant: str = "2026-08") -> InitSpec:
        if variant not in _VARIANTS:
            raise ValueError(f"scheme 'modded_nanogpt': variant must be one of {_VARIANTS}, got {variant!r}")
        old = variant == "2025-08"
        base = ctx.base
        constant = role_constants(base)
        if constant is not None:
            return constant
        if base == "mlp_out" or (old and base in (*OUTPUT_ROLES, "head")):
            return InitSpec(constant=0.0)
        if base in ("embedding", "head"):
            return normal_spec(1.0 if old else 0.005)
        return InitSpec(std=0.5 * ctx.need("d_model") ** -0.5, distribution="uniform")
