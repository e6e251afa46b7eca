"""A small decoder-only transformer for the built-in engine's demo and tests, and the files a
model directory holds.

    model, tokenizer, config = load_model("/path/to/dir")

A model directory has config.json (TinyConfig's fields, plus "format": "tessera-tiny-lm"),
model.pt (torch.save of the state dict) and tokenizer.json (ByteTokenizer.to_dict()).
`python3 -m tessera.serve.llm.make_demo_model OUT_DIR` writes one.

The model: a token embedding, pre-LayerNorm blocks (multi-head attention with rotary position
embeddings, GELU MLP), a final LayerNorm and an output layer tied to the token embedding. Rotary
positions (relative, unlike learned absolute ones) let a model this small learn word-like text
in a minute of CPU; `max_position` only bounds the sequence length. `forward` is the
plain causal pass over whole sequences (training, and the reference the tests compare the paged
engine with); `forward_tokens` runs a flat batch of tokens from many sequences and leaves
attention to the caller, which is how the engine's model runner attends over its paged cache;
`embed`, `forward_layers` and `logits` are its parts, which the stages of a model split across
processes (pipeline.py) run one after another, and `keep_only` drops what a stage does not run.

Threading: a module is used by one thread at a time. Cost: O(layers x tokens x d_model^2) for the
projections; attention is the caller's in forward_tokens, O(T^2) per sequence in forward.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Callable, Dict, Optional, Tuple

import torch
from torch import nn
from torch.nn import functional as F

from tessera.serve.llm.tokenizer import ByteTokenizer

MODEL_FORMAT = "tessera-tiny-lm"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.pt"
TOKENIZER_FILE = "tokenizer.json"

ROPE_BASE = 10000.0
# attend(layer_index, q, k, v) -> output; q, k, v and the output are [tokens, heads, head_dim].
AttendFn = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclasses.dataclass(frozen=True)
class TinyConfig:
    vocab_size: int = 263
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 512
    max_position: int = 512

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"TinyConfig.{field.name} must be a positive int, got {value!r}")
        if self.d_model % (2 * self.n_heads):
            raise ValueError(f"TinyConfig.d_model ({self.d_model}) must be a multiple of twice "
                             f"n_heads ({self.n_heads}): rotary embeddings turn pairs")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "TinyConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


# Above this many input numbers, bmm() multiplies through oneDNN's convolution (the bound under
# which torch's own convolution stops choosing oneDNN for a one-image input).
ONEDNN_MIN_ELEMENTS = 20480


def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.bmm(a, b) of [G, M, K] and [G, K, N], through a grouped 1x1 convolution when `a` is
    a large float32 input: Debian's torch multiplies matrices with the reference BLAS (about
    5 GFLOP/s on one core) but convolves with oneDNN (over 100 GFLOP/s on two), which makes
    training fit in about a minute. Small inputs (decode steps) and other dtypes take torch.bmm.
    Row m of the product is output position m of the convolution; column n its channel n."""
    if a.dtype != torch.float32 or a.numel() <= ONEDNN_MIN_ELEMENTS:
        return torch.bmm(a, b)
    groups, rows, inner = a.shape
    columns = b.shape[2]
    image = a.transpose(1, 2).reshape(1, groups * inner, rows, 1)
    kernel = b.transpose(1, 2).reshape(groups * columns, inner, 1, 1)
    out = F.conv2d(image, kernel, groups=groups)                   # [1, G*N, M, 1]
    return out.reshape(groups, columns, rows).transpose(1, 2)


def dense(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None
          ) -> torch.Tensor:
    """F.linear(x, weight, bias), through bmm()'s fast path when that applies."""
    if x.dtype != torch.float32 or x.numel() <= ONEDNN_MIN_ELEMENTS:
        return F.linear(x, weight, bias)
    rows = x.reshape(1, -1, x.shape[-1])
    y = bmm(rows, weight.t().unsqueeze(0)).reshape(x.shape[:-1] + (weight.shape[0],))
    return y if bias is None else y + bias


class Dense(nn.Linear):
    """nn.Linear (same parameters, same state dict keys) computed by dense()."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dense(x, self.weight, self.bias)


def rotary_tables(positions: torch.Tensor, head_dim: int, dtype: torch.dtype
                  ) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [*positions.shape, 1, head_dim / 2] of rotary position embeddings."""
    inv_freq = 1.0 / (ROPE_BASE ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = positions.to(torch.float64)[..., None] * inv_freq
    return angles.cos().to(dtype)[..., None, :], angles.sin().to(dtype)[..., None, :]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., heads, head_dim] turned by its position's angles (the halves as pairs)."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)


class Block(nn.Module):
    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.head_dim = config.head_dim
        self.ln1 = nn.LayerNorm(config.d_model)
        self.qkv = Dense(config.d_model, 3 * config.d_model)
        self.proj = Dense(config.d_model, config.d_model)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.fc = Dense(config.d_model, config.d_ff)
        self.out = Dense(config.d_ff, config.d_model)

    def forward(self, x: torch.Tensor, rotary: Tuple[torch.Tensor, torch.Tensor],
                attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
                ) -> torch.Tensor:
        """x: [..., d_model]; attend takes and gives [..., heads, head_dim] tensors (queries and
        keys already turned by their positions, so the cache holds turned keys)."""
        shape = x.shape[:-1] + (self.n_heads, self.head_dim)
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k = rotate(q.reshape(shape), *rotary), rotate(k.reshape(shape), *rotary)
        attended = attend(q, k, v.reshape(shape))
        x = x + self.proj(attended.reshape(x.shape))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyTransformer(nn.Module):
    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.config = config
        self.tok = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.d_model)
        nn.init.normal_(self.tok.weight, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Causal logits [batch, T, vocab] of ids [batch, T] at positions 0..T-1."""
        _, length = ids.shape
        self._check_positions(length)
        positions = torch.arange(length, device=ids.device)
        x = self.tok(ids)
        rotary = rotary_tables(positions, self.config.head_dim, x.dtype)
        for block in self.blocks:
            x = block(x, rotary, causal_attention)
        return self.logits(x)

    def forward_tokens(self, ids: torch.Tensor, positions: torch.Tensor,
                       attend: AttendFn) -> torch.Tensor:
        """Hidden states [N, d_model] of a flat batch: token ids [N] at `positions` [N], with
        attention left to `attend` (the engine's paged attention)."""
        return self.forward_layers(self.embed(ids), positions, attend,
                                   range(self.config.n_layers))

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """The hidden states [N, d_model] the first layer takes for token ids [N]."""
        return self.tok(ids)

    def forward_layers(self, hidden: torch.Tensor, positions: torch.Tensor, attend: AttendFn,
                       layers: range) -> torch.Tensor:
        """Layers `layers` (consecutive) over hidden states [N, d_model] of tokens at
        `positions` [N]: a pipeline stage's part of forward_tokens, which it gives the same
        numbers as (the same operations in the same order), with attention left to
        `attend(layer, q, k, v)`."""
        if positions.numel():
            self._check_positions(int(positions.max()) + 1)
        rotary = rotary_tables(positions, self.config.head_dim, hidden.dtype)
        for index in layers:
            hidden = self.blocks[index](hidden, rotary,
                                        lambda q, k, v, i=index: attend(i, q, k, v))
        return hidden

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return dense(self.norm(hidden), self.tok.weight)

    def keep_only(self, layers: range, embedding: bool, head: bool) -> "TinyTransformer":
        """Drops the weights a pipeline stage does not run: the blocks outside `layers`, the
        token embedding unless it embeds (`embedding`) or computes logits (`head`: the output
        layer is tied to it), the final norm unless `head`. Returns self."""
        for index in range(self.config.n_layers):
            if index not in layers:
                self.blocks[index] = nn.Identity()
        if not (embedding or head):
            self.tok = None
        if not head:
            self.norm = None
        return self

    def _check_positions(self, length: int) -> None:
        if length > self.config.max_position:
            raise ValueError(f"sequence of {length} tokens is longer than the model's "
                             f"max_position {self.config.max_position}")


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Scaled dot-product attention of [batch, T, heads, head_dim] tensors, each position seeing
    itself and the positions before it."""
    batch, length, heads, head_dim = q.shape

    def per_head(x: torch.Tensor) -> torch.Tensor:                 # [batch * heads, T, head_dim]
        return x.transpose(1, 2).reshape(batch * heads, length, head_dim)

    scores = bmm(per_head(q), per_head(k).transpose(1, 2)) / math.sqrt(head_dim)
    mask = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
    weights = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
    out = bmm(weights, per_head(v))
    return out.reshape(batch, heads, length, head_dim).transpose(1, 2)


def num_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def save_model(directory: str, model: TinyTransformer, tokenizer: ByteTokenizer,
               extra: Optional[Dict[str, Any]] = None) -> None:
    """Writes a model directory (config.json, model.pt, tokenizer.json); `extra` goes into
    config.json beside the model's fields (how it was trained)."""
    os.makedirs(directory, exist_ok=True)
    config = {"format": MODEL_FORMAT, **dataclasses.asdict(model.config), **(extra or {})}
    torch.save(model.state_dict(), os.path.join(directory, WEIGHTS_FILE))
    _write_json(os.path.join(directory, TOKENIZER_FILE), tokenizer.to_dict())
    # config.json last: a directory with it is complete (is_model_dir checks for it).
    _write_json(os.path.join(directory, CONFIG_FILE), config)


def is_model_dir(directory: str) -> bool:
    """Whether `directory` holds a model of this format (what the engine can load)."""
    try:
        with open(os.path.join(directory, CONFIG_FILE), encoding="utf-8") as f:
            return json.load(f).get("format") == MODEL_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def load_model_config(directory: str) -> Tuple[TinyConfig, ByteTokenizer, Dict[str, Any]]:
    """(the model's shape, tokenizer, config.json as a dict) of a model directory, without its
    weights (what an engine whose stages hold the weights needs)."""
    path = os.path.join(directory, CONFIG_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except OSError as e:
        raise FileNotFoundError(f"no model in {directory}: cannot read {CONFIG_FILE} "
                                f"({e.strerror})") from None
    if not isinstance(config, dict) or config.get("format") != MODEL_FORMAT:
        raise ValueError(f"{path} is not a {MODEL_FORMAT} model config")
    with open(os.path.join(directory, TOKENIZER_FILE), encoding="utf-8") as f:
        tokenizer = ByteTokenizer.from_dict(json.load(f))
    shape = TinyConfig.from_dict(config)
    if shape.vocab_size != tokenizer.vocab_size:
        raise ValueError(f"{path}: vocab_size {shape.vocab_size} does not match the "
                         f"tokenizer's {tokenizer.vocab_size}")
    return shape, tokenizer, config


def load_model(directory: str, dtype: torch.dtype = torch.float32
               ) -> Tuple[TinyTransformer, ByteTokenizer, Dict[str, Any]]:
    """(model in eval mode, tokenizer, config.json as a dict) of a model directory."""
    shape, tokenizer, config = load_model_config(directory)
    model = TinyTransformer(shape)
    # weights_only: a model directory is data, never code to unpickle.
    state = torch.load(os.path.join(directory, WEIGHTS_FILE), map_location="cpu",
                       weights_only=True)
    model.load_state_dict(state)
    return model.to(dtype).eval(), tokenizer, config


def random_model(config: Optional[TinyConfig] = None, seed: int = 0,
                 dtype: torch.dtype = torch.float32) -> TinyTransformer:
    """An untrained model with seeded weights (tests)."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = TinyTransformer(config or TinyConfig())
    finally:
        torch.random.set_rng_state(generator_state)
    return model.to(dtype).eval()


def _write_json(path: str, data: Dict[str, Any]) -> None:
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(temporary, path)
