# The init statements of KellerJordan/modded-nanogpt's train_gpt.py, vendored: the file is a
# training script (CUDA kernels, torch.distributed at import), not a package. Each function
# holds the statements of the constructor named in its docstring verbatim (comments included),
# applied to the tensors it is given in place of the module's attributes.
# https://github.com/KellerJordan/modded-nanogpt/blob/f411b3d346aa52d3504324ca93c230fd84c6c07f/train_gpt.py
# https://github.com/KellerJordan/modded-nanogpt/blob/9d9dc969/train_gpt.py
# License: MIT License, Copyright (c) 2024 Keller Jordan.

import torch
from torch import nn


def gpt_2026_08(model_dim, qk_bank, vo_bank, mlp_bank, lm_head_weight, embed_weight, num_qk_groups, num_vo_real):
    """Commit f411b3d (2026-08-01): ``GPT.__init__`` (lm_head, embed), ``GPT.init_attn`` (the
    q/k and v/o banks) and ``GPT.init_mlp`` (c_fc, c_proj)."""
    nn.init.normal_(lm_head_weight, mean=0, std=0.005)
    with torch.no_grad():
        # tie embed and lm_head at init
        embed_weight.copy_(lm_head_weight.T)

    # improved init scale by @YouJiacheng and @srashedll
    std = 0.5 * model_dim**-0.5
    bound = (3**0.5) * std
    with torch.no_grad():
        qk_bank[:num_qk_groups].uniform_(-bound, bound)
        qk_bank[num_qk_groups:].zero_()
        vo_bank[:num_vo_real].uniform_(-bound, bound)
        vo_bank[num_vo_real:].zero_()

    # improved init scale by @YouJiacheng and @srashedll
    std = 0.5 * model_dim**-0.5
    bound = (3**0.5) * std
    with torch.no_grad():
        mlp_bank[:, 0, :, :].uniform_(-bound, bound)  # c_fc
        mlp_bank[:, 1, :, :].zero_()  # c_proj - zero init suggested by @Grad62304977


def attention_2025_08(dim, qkvo_w):
    """Commit 9d9dc969 (2025-08-23): ``CausalSelfAttention.__init__``."""
    std = 0.5 * (dim**-0.5)
    bound = (3**0.5) * std  # improved init scale by @YouJiacheng
    with torch.no_grad():
        qkvo_w[:3].uniform_(-bound, bound)  # init QKV weights
        qkvo_w[3].zero_()  # init output weights to zero


def mlp_2025_08(dim, c_fc, c_proj):
    """Commit 9d9dc969: ``MLP.__init__``."""
    std = 0.5 * (dim**-0.5)
    bound = (3**0.5) * std  # improved init scale by @YouJiacheng
    with torch.no_grad():
        c_fc.uniform_(-bound, bound)
        c_proj.zero_()  # zero init suggested by @Grad62304977


def gpt_2025_08(embed, lm_head):
    """Commit 9d9dc969: ``GPT.__init__`` (``nn.Embedding``'s own N(0, 1) init, then the head)."""
    embed.reset_parameters()
    lm_head.weight.detach().zero_()  # @Grad62304977
