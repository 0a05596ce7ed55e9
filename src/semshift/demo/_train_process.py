"""The child process of :func:`semshift.demo.model.train_pinned`.

``python -m semshift.demo._train_process WORKDIR`` reads ``data.npz`` and ``settings.json``,
trains GlyphNet with one torch thread and oneDNN off (the parent sets the pinned environment),
prints ``progress DONE TOTAL`` lines and writes ``weights.safetensors`` and ``result.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    import numpy as np
    import torch
    from safetensors.torch import save_file

    from semshift.demo.model import train

    work = Path(argv[0])
    torch.backends.mkldnn.enabled = False  # type: ignore[assignment]
    settings = json.loads((work / "settings.json").read_text(encoding="utf-8"))
    with np.load(work / "data.npz", allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}

    def progress(done: int, total: int) -> None:
        print(f"progress {done} {total}", flush=True)

    result = train(
        arrays["images"], arrays["labels"], settings["num_classes"],
        val_images=arrays.get("val_images"), val_labels=arrays.get("val_labels"),
        epochs=settings["epochs"], batch_size=settings["batch_size"], lr=settings["lr"],
        weight_decay=settings["weight_decay"], seed=settings["seed"], threads=1,
        progress=progress, widths=tuple(settings.get("widths", (16, 32, 64, 128))),
    )  # fmt: skip
    state = {k: v.contiguous() for k, v in result.adapter.module.state_dict().items()}
    save_file(state, str(work / "weights.safetensors"))
    out = {
        "history": result.history,
        "val_accuracy": result.val_accuracy,
        "numerics": result.numerics,
    }
    (work / "result.json").write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
