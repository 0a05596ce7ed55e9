"""The demo's small CNN (GlyphNet), its model adapter, registration and seeded CPU training.

GlyphNet: four 3x3 convolution blocks (BatchNorm, ReLU; 2x2 max-pooling after the first three)
of widths 16, 32, 64, 128 on a 32 x 32 RGB input, global average pooling to a 128-d penultimate
feature h (non-negative, as after a ResNet's last ReLU) and a linear head. About 0.1 M
parameters and 4 M multiply-adds per image.

Importing :mod:`semshift.demo` registers it as ``demo-glyphnet`` in
:mod:`semshift.features.models`, so ``load_model("demo-glyphnet", weights=..., num_classes=C)`` and
``load_model("demo-glyphnet", random_init=True, seed=s, num_classes=C)`` both work. Its adapter
exposes the last feature map (n, 128, 4, 4), so RankFeat runs on it.

Preprocessing is the extractor's ``resize32-crop32`` preset with mean = std = 0.5 per channel:
training feeds exactly what extraction computes from the PNG files (see :func:`to_input`).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from semshift.errors import InputError
from semshift.features.models import MODELS, ModelAdapter, register_model

__all__ = [
    "MEAN",
    "MODEL_NAME",
    "PINNED_NUMERICS",
    "PRESET",
    "STD",
    "GlyphNet",
    "GlyphNetAdapter",
    "TrainResult",
    "predict",
    "to_input",
    "train",
    "train_pinned",
]

MODEL_NAME = "demo-glyphnet"
PRESET = "resize32-crop32"
MEAN = (0.5, 0.5, 0.5)
STD = (0.5, 0.5, 0.5)


def _block(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


class GlyphNet(nn.Module):
    """A small CNN for 32 x 32 glyph images.

    Parameters
    ----------
    num_classes : int
    widths : tuple of four int
        Channels of the four convolution blocks; the last is the feature dimension D.
    """

    def __init__(
        self, num_classes: int = 48, widths: tuple[int, int, int, int] = (16, 32, 64, 128)
    ):
        super().__init__()
        if num_classes < 1:
            raise InputError(f"GlyphNet: num_classes must be >= 1, got {num_classes}")
        w0, w1, w2, w3 = widths
        self.trunk = nn.Sequential(
            *_block(3, w0), nn.MaxPool2d(2),
            *_block(w0, w1), nn.MaxPool2d(2),
            *_block(w1, w2), nn.MaxPool2d(2),
            *_block(w2, w3),
        )  # fmt: skip
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(w3, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(torch.flatten(self.pool(self.trunk(x)), 1))


class GlyphNetAdapter(ModelAdapter):
    """GlyphNet as backbone (trunk + pooling -> h, (n, 128)) and linear head ``fc``."""

    mean = MEAN
    std = STD
    input_size = 32
    has_feature_map = True

    def __init__(self, module: GlyphNet, name: str = MODEL_NAME) -> None:
        self.name, self.module = name, module.eval()
        self.layer = "pool(trunk) (global average pool of the last conv block)"

    def block_names(self) -> tuple[str, ...]:
        """The ReLU output of each of the four convolution blocks."""
        return tuple(
            f"trunk.{n}" for n, c in self._m.trunk.named_children() if isinstance(c, nn.ReLU)
        )

    def feature_map(self, x: Tensor) -> Tensor:
        return self._m.trunk(x)

    def from_feature_map(self, fmap: Tensor) -> tuple[Tensor, Tensor]:
        h = torch.flatten(self._m.pool(fmap), 1)
        return self.head(h), h

    def features(self, x: Tensor) -> Tensor:
        return torch.flatten(self._m.pool(self._m.trunk(x)), 1)

    def _head_module(self) -> nn.Linear:
        return self._m.fc


def _build(num_classes: int = 48, **kwargs: Any) -> ModelAdapter:
    """GlyphNet, the semshift demo's small CNN for 32x32 glyphs (preset resize32-crop32)."""
    return GlyphNetAdapter(GlyphNet(num_classes, **kwargs))


if MODEL_NAME not in MODELS:  # registration happens once, on import
    register_model(MODEL_NAME)(_build)


def to_input(images: NDArray[np.uint8]) -> Tensor:
    """``(n, H, W)`` grayscale uint8 -> ``(n, 3, H, W)`` float32, normalised like extraction.

    Equals the extractor's ``ToTensor`` + ``Normalize(MEAN, STD)`` of the RGB-converted PNG
    (the ``resize32-crop32`` resize and crop leave a 32 x 32 image unchanged).
    """
    x = torch.from_numpy(np.ascontiguousarray(images)).float().div_(255.0)
    x = (x - MEAN[0]) / STD[0]
    return x.unsqueeze(1).expand(-1, 3, -1, -1).contiguous()


@dataclass
class TrainResult:
    """What :func:`train` did.

    Attributes
    ----------
    adapter : GlyphNetAdapter
        The trained model (eval mode).
    history : list of dict
        Per epoch: ``epoch``, ``loss`` (mean training cross-entropy), ``val_accuracy``.
    val_accuracy : float
        Final closed-set accuracy on the validation images (NaN without them).
    seconds : float
    numerics : dict
        What fixed the arithmetic: torch threads, the ATen CPU capability, whether oneDNN
        (MKL-DNN) ran the convolutions, MKL's reproducibility branch, torch version and machine.
    """

    adapter: GlyphNetAdapter
    history: list[dict[str, float]]
    val_accuracy: float
    seconds: float
    numerics: dict[str, Any] = field(default_factory=dict)


@torch.no_grad()
def predict(
    adapter: ModelAdapter, images: NDArray[np.uint8], batch_size: int = 512
) -> NDArray[np.int64]:
    """Predicted class of each ``(n, H, W)`` uint8 image."""
    adapter.module.eval()
    out = [
        adapter(to_input(images[i : i + batch_size]))[0].argmax(1).numpy()
        for i in range(0, len(images), batch_size)
    ]
    return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)


def train(
    images: NDArray[np.uint8],
    labels: NDArray[np.int64],
    num_classes: int,
    *,
    val_images: NDArray[np.uint8] | None = None,
    val_labels: NDArray[np.int64] | None = None,
    epochs: int = 4,
    batch_size: int = 128,
    lr: float = 4e-3,
    weight_decay: float = 5e-4,
    seed: int = 0,
    threads: int | None = None,
    progress: Callable[[int, int], Any] | None = None,
    widths: tuple[int, int, int, int] = (16, 32, 64, 128),
) -> TrainResult:
    """Train GlyphNet on CPU with AdamW and a one-cycle schedule, deterministically.

    Parameters
    ----------
    images : array (n, H, W) uint8
        Grayscale training images (black ink on white).
    labels : array (n,) int64
        Class indices in ``[0, num_classes)``.
    num_classes : int
    val_images, val_labels : arrays, optional
        Validation images; their accuracy is recorded after each epoch.
    epochs, batch_size, lr, weight_decay : training hyperparameters
    seed : int
        Seeds the initialisation and the batch order (a private ``torch.Generator``; the global
        RNG state is restored afterwards).
    threads : int, optional
        ``torch.set_num_threads`` during training (restored afterwards).

    Notes
    -----
    What is reproducible: the same seed, thread count, CPU kernels and torch version give
    bit-identical weights. The thread count changes them (oneDNN and MKL split their sums by
    thread) and so does the CPU (oneDNN, MKL and ATen pick AVX2 or AVX-512 kernels, which sum
    in other orders): about 1e-7 at first, then amplified by training, enough to move the
    demo's AUROCs by a point. :func:`train_pinned` removes both.
    progress : callable, optional
        ``progress(batches_done, batches_total)`` after each batch.
    widths : four int
        GlyphNet's channel widths (the demo's model: the default).

    Raises
    ------
    InputError
        Empty data, mismatched lengths or labels outside ``[0, num_classes)``.
    """
    _check(images, labels, num_classes, epochs, batch_size)
    n = len(images)
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    t0 = time.perf_counter()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            net = GlyphNet(num_classes, widths=tuple(widths))  # type: ignore[arg-type]
            gen = torch.Generator().manual_seed(seed)
            x_all = to_input(images)
            y_all = torch.from_numpy(np.asarray(labels, np.int64))
            steps = epochs * -(-n // batch_size)
            opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
            sched = torch.optim.lr_scheduler.OneCycleLR(
                opt, max_lr=lr, total_steps=steps, pct_start=0.25
            )
            loss_fn = nn.CrossEntropyLoss()
            adapter = GlyphNetAdapter(net)
            history: list[dict[str, float]] = []
            done = 0
            val_acc = float("nan")
            for epoch in range(epochs):
                net.train()
                order = torch.randperm(n, generator=gen)
                total = 0.0
                for lo in range(0, n, batch_size):
                    idx = order[lo : lo + batch_size]
                    loss = loss_fn(net(x_all[idx]), y_all[idx])
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    sched.step()
                    total += float(loss.detach()) * len(idx)
                    done += 1
                    if progress is not None:
                        progress(done, steps)
                net.eval()
                if val_images is not None and val_labels is not None and len(val_images):
                    val_acc = float((predict(adapter, val_images) == val_labels).mean())
                history.append({"epoch": epoch + 1, "loss": total / n, "val_accuracy": val_acc})
        numerics = _numerics()
    finally:
        torch.set_num_threads(old_threads)
    net.eval()
    return TrainResult(adapter, history, val_acc, time.perf_counter() - t0, numerics)


def _check(
    images: NDArray[np.uint8], labels: NDArray[np.int64], num_classes: int, epochs: int,
    batch_size: int,
) -> None:  # fmt: skip
    n = len(images)
    if n == 0 or len(labels) != n:
        raise InputError(f"train: {n} images and {len(labels)} labels; need equal, non-zero counts")
    if labels.min() < 0 or labels.max() >= num_classes:
        raise InputError(
            f"train: labels must lie in [0, {num_classes}), got [{labels.min()}, {labels.max()}]"
        )
    if epochs < 1 or batch_size < 1:
        raise InputError(f"train: epochs and batch_size must be >= 1, got {epochs}, {batch_size}")


def _numerics() -> dict[str, Any]:
    """What fixes the arithmetic of this process's training (see :class:`TrainResult`)."""
    return {
        "threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkldnn": bool(torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available()),
        "mkl_cbwr": os.environ.get("MKL_CBWR"),
        "torch": torch.__version__,
        "machine": platform.machine(),
    }


#: The environment of :func:`train_pinned`'s training process: ATen's AVX2 kernels whatever
#: the CPU offers (AVX-512 ones sum in another order), MKL's conditional-numerical-
#: reproducibility branch COMPATIBLE (the code path Intel documents as giving the same results
#: on Intel and compatible processors) and one thread for OpenMP and MKL. The process also turns
#: oneDNN off (its kernels choose their blocking, hence their summation order, from the CPU's
#: ISA and cache sizes), so convolutions run as im2col + MKL GEMM.
PINNED_NUMERICS: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "COMPATIBLE,STRICT",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def train_pinned(
    images: NDArray[np.uint8],
    labels: NDArray[np.int64],
    num_classes: int,
    *,
    val_images: NDArray[np.uint8] | None = None,
    val_labels: NDArray[np.int64] | None = None,
    epochs: int = 4,
    batch_size: int = 128,
    lr: float = 4e-3,
    weight_decay: float = 5e-4,
    seed: int = 0,
    progress: Callable[[int, int], Any] | None = None,
    widths: tuple[int, int, int, int] = (16, 32, 64, 128),
) -> TrainResult:
    """:func:`train` in a child process whose arithmetic does not depend on threads or CPU.

    The child runs with :data:`PINNED_NUMERICS`, one torch thread and oneDNN off, so the weights
    are the same bits for any thread count, machine load or parent-process setting, and on
    other x86-64 CPUs with AVX2 the same kernels run. Parameters and result as :func:`train`
    (``threads`` is always 1); ``result.numerics`` records what the child ran with.

    Raises
    ------
    InputError
        Bad data (as :func:`train`), or the training process failed (its last error line).
    """
    from safetensors.torch import load_file

    _check(images, labels, num_classes, epochs, batch_size)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="semshift-train-") as tmp:
        work = Path(tmp)
        arrays: dict[str, Any] = {"images": images, "labels": np.asarray(labels, np.int64)}
        if val_images is not None and val_labels is not None:
            arrays.update(val_images=val_images, val_labels=np.asarray(val_labels, np.int64))
        np.savez(work / "data.npz", **arrays)
        settings = {
            "num_classes": int(num_classes), "epochs": int(epochs),
            "batch_size": int(batch_size), "lr": float(lr),
            "weight_decay": float(weight_decay), "seed": int(seed),
            "widths": [int(w) for w in widths],
        }  # fmt: skip
        (work / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        env = {**os.environ, **PINNED_NUMERICS}
        cmd = [sys.executable, "-m", "semshift.demo._train_process", str(work)]
        with subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            for line in proc.stdout:
                parts = line.split()
                if len(parts) == 3 and parts[0] == "progress" and progress is not None:
                    progress(int(parts[1]), int(parts[2]))
            err = proc.stderr.read()
            code = proc.wait()
        if code != 0:
            last = [ln for ln in err.strip().splitlines() if ln.strip()]
            raise InputError(
                f"train: the training process exited with status {code}: "
                f"{last[-1] if last else 'no message'}"
            )
        out = json.loads((work / "result.json").read_text(encoding="utf-8"))
        net = GlyphNet(num_classes, widths=tuple(widths))  # type: ignore[arg-type]
        net.load_state_dict(load_file(str(work / "weights.safetensors")))
    net.eval()
    return TrainResult(
        GlyphNetAdapter(net), out["history"], float(out["val_accuracy"]),
        time.perf_counter() - t0, out["numerics"],
    )  # fmt: skip
