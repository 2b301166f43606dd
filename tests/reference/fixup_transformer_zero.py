"""Fixup's Transformer initialisation, vendored from the authors' code for the tinit tests.

Source: https://github.com/hongyi-zhang/Fixup, commit f3fa449fbb8906ccb7143cea822f8b964b3d9258,
files fairseq/fairseq/models/transformer_zero.py (LayerShift, LayerScale, TransformerZeroEncoderLayer,
TransformerZeroDecoderLayer, Embedding, Linear) and fairseq/fairseq/modules/multihead_attention_zero.py
(MultiheadAttentionZero). License: BSD 3-Clause (the Fixup repository's LICENSE; the files' own header
names fairseq's license, Copyright (c) 2017-present, Facebook, Inc.).
Only the parameter-creating code is kept: the classes' __init__ and reset_parameters as written there,
forward passes and fairseq imports removed. ``TinyTransformerZero`` at the end is test scaffolding, not
reference code: it holds the embeddings, layers and untied output embedding the way
TransformerZeroEncoder/TransformerZeroDecoder create them.
"""
# ruff: noqa
# fmt: off

import math

import torch
import torch.nn as nn
from torch.nn import Parameter


class LayerShift(nn.Module):
    def __init__(self, init=1.):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(1))


class LayerScale(nn.Module):
    def __init__(self, init=1.):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1) * init)



class MultiheadAttentionZero(nn.Module):
    """Multi-headed attention.

    See "Attention Is All You Need" for more details.
    """
    def __init__(self, embed_dim, num_heads, dropout=0., bias=True, num_blocks=12):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.head_dim = embed_dim // num_heads
        assert self.head_dim * num_heads == self.embed_dim, "embed_dim must be divisible by num_heads"
        self.scaling = self.head_dim**-0.5
        self._mask = None

        self.in_proj_weight = Parameter(torch.Tensor(3*embed_dim, embed_dim))
        if bias:
            self.in_proj_bias = Parameter(torch.Tensor(3*embed_dim))
        else:
            self.register_parameter('in_proj_bias', None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.num_blocks = num_blocks

        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.in_proj_weight)
        nn.init.xavier_uniform_(self.out_proj.weight)
        self.in_proj_weight.data *= math.pow(self.num_blocks, -1./6.)
        self.out_proj.weight.data *= 0.
        if self.in_proj_bias is not None:
            nn.init.constant_(self.in_proj_bias, 0.)
            nn.init.constant_(self.out_proj.bias, 0.)


class TransformerZeroEncoderLayer(nn.Module):
    """Encoder layer block.

    In the original paper each operation (multi-head attention or FFN) is
    postprocessed with: `dropout -> add residual -> layernorm`. In the
    tensor2tensor code they suggest that learning is more robust when
    preprocessing each layer with layernorm and postprocessing with:
    `dropout -> add residual`. We default to the approach in the paper, but the
    tensor2tensor approach can be enabled by setting
    *args.encoder_normalize_before* to ``True``.

    Args:
        args (argparse.Namespace): parsed command-line arguments
    """

    def __init__(self, args):
        super().__init__()
        self.embed_dim = args.encoder_embed_dim
        self.self_attn = MultiheadAttentionZero(
            self.embed_dim, args.encoder_attention_heads,
            dropout=args.attention_dropout,
            bias=False,
            num_blocks=args.encoder_layers * 2 + args.decoder_layers * 3
        )
        self.dropout = args.dropout
        self.relu_dropout = args.relu_dropout
        self.normalize_before = args.encoder_normalize_before
        self.fc1 = Linear(self.embed_dim, args.encoder_ffn_embed_dim, scale=1./math.sqrt(args.encoder_layers * 2 + args.decoder_layers * 3), bias=False)
        self.fc2 = Linear(args.encoder_ffn_embed_dim, self.embed_dim, scale=0., bias=False)
        # self.layer_norms = nn.ModuleList([LayerNorm(self.embed_dim) for i in range(2)])

        self.shift0 = LayerShift()
        self.shift1 = LayerShift()
        self.shift2 = LayerShift()
        self.shift3 = LayerShift()
        self.scale0 = LayerScale()
        self.scale1 = LayerScale()


class TransformerZeroDecoderLayer(nn.Module):
    """Decoder layer block.

    In the original paper each operation (multi-head attention, encoder
    attention or FFN) is postprocessed with: `dropout -> add residual ->
    layernorm`. In the tensor2tensor code they suggest that learning is more
    robust when preprocessing each layer with layernorm and postprocessing with:
    `dropout -> add residual`. We default to the approach in the paper, but the
    tensor2tensor approach can be enabled by setting
    *args.decoder_normalize_before* to ``True``.

    Args:
        args (argparse.Namespace): parsed command-line arguments
        no_encoder_attn (bool, optional): whether to attend to encoder outputs.
            Default: ``False``
    """

    def __init__(self, args, no_encoder_attn=False):
        super().__init__()
        self.embed_dim = args.decoder_embed_dim
        self.self_attn = MultiheadAttentionZero(
            self.embed_dim, args.decoder_attention_heads,
            dropout=args.attention_dropout,
            bias=False,
            num_blocks=args.encoder_layers * 2 + args.decoder_layers * 3
        )
        self.dropout = args.dropout
        self.relu_dropout = args.relu_dropout
        self.normalize_before = args.decoder_normalize_before

        # self.self_attn_layer_norm = LayerNorm(self.embed_dim)

        if no_encoder_attn:
            self.encoder_attn = None
            self.encoder_attn_layer_norm = None
        else:
            self.encoder_attn = MultiheadAttentionZero(
                self.embed_dim, args.decoder_attention_heads,
                dropout=args.attention_dropout,
                bias=False
            )
            # self.encoder_attn_layer_norm = LayerNorm(self.embed_dim)

        self.fc1 = Linear(self.embed_dim, args.decoder_ffn_embed_dim, scale=1./math.sqrt(args.encoder_layers * 2 + args.decoder_layers * 3), bias=False)
        self.fc2 = Linear(args.decoder_ffn_embed_dim, self.embed_dim, scale=0, bias=False)

        # self.final_layer_norm = LayerNorm(self.embed_dim)
        self.need_attn = True

        self.shift0 = LayerShift()
        self.shift1 = LayerShift()
        self.shift2 = LayerShift()
        self.shift3 = LayerShift()
        self.shift4 = LayerShift()
        self.scale0 = LayerScale()
        self.scale1 = LayerScale()
        self.scale2 = LayerScale()


def Embedding(num_embeddings, embedding_dim, padding_idx):
    m = nn.Embedding(num_embeddings, embedding_dim, padding_idx=padding_idx)
    nn.init.normal_(m.weight, mean=0, std=embedding_dim ** -0.5)
    nn.init.constant_(m.weight[padding_idx], 0)
    return m


def LayerNorm(embedding_dim):
    m = nn.LayerNorm(embedding_dim)
    return m


def Linear(in_features, out_features, bias=True, uniform=True, scale=1.):
    m = nn.Linear(in_features, out_features, bias)
    if uniform:
        nn.init.xavier_uniform_(m.weight)
    else:
        nn.init.xavier_normal_(m.weight)
    m.weight.data *= scale
    if bias:
        nn.init.constant_(m.bias, 0.)
    return m



class TinyTransformerZero(nn.Module):
    """Test scaffolding: encoder/decoder stacks of the reference's layers, with their embeddings."""

    def __init__(self, args, vocab=64, padding_idx=1):
        super().__init__()
        self.encoder = nn.Module()
        self.encoder.embed_tokens = Embedding(vocab, args.encoder_embed_dim, padding_idx)
        self.encoder.layers = nn.ModuleList([TransformerZeroEncoderLayer(args) for _ in range(args.encoder_layers)])
        self.decoder = nn.Module()
        self.decoder.embed_tokens = Embedding(vocab, args.decoder_embed_dim, padding_idx)
        self.decoder.layers = nn.ModuleList([TransformerZeroDecoderLayer(args) for _ in range(args.decoder_layers)])
        # TransformerZeroDecoder without shared input/output embeddings:
        self.decoder.embed_out = nn.Parameter(torch.Tensor(vocab, args.decoder_embed_dim))
        self.decoder.embed_out.data.fill_(0)
