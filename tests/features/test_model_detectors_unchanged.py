"""odin and rankfeat give the scores they gave before they moved into the detector registry.

The numbers were computed by the earlier implementation (``semshift.features.model_detectors``'s
``Odin`` and ``RankFeat`` classes, before issue 16) on a seeded random-init ResNet-18 and seeded
inputs, in float64 and in float32; the registry entries must reproduce them.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semshift.features.model_detectors import get_model_detector, score_batch
from semshift.features.models import load_model

BEFORE = {
    "float64": {
        "odin": [0.17023708940285362, 0.16972573624764584, 0.17042804879220697,
                 0.17017410312841713],
        "odin_t10_e01": [0.8593568733680376, 0.8275110050337322, 0.8710191361214059,
                         0.8567834872048585],
        "rankfeat": [1.959136678275586, 2.4934244813611346, 2.178270203317516,
                     1.8355667488026997],
    },
    "float32": {
        "odin": [0.17023707926273346, 0.16972573101520538, 0.1704280525445938,
                 0.17017410695552826],
        "odin_t10_e01": [0.8593571782112122, 0.8275110125541687, 0.8710190653800964,
                         0.8567833304405212],
        "rankfeat": [1.9591381549835205, 2.493426561355591, 2.178267478942871,
                     1.835566759109497],
    },
}  # fmt: skip


@pytest.mark.parametrize(("dtype", "rtol"), [("float64", 1e-9), ("float32", 1e-5)])
def test_scores_equal_the_earlier_implementation(dtype: str, rtol: float) -> None:
    model = load_model("resnet18", random_init=True, seed=0, num_classes=6)
    x = torch.from_numpy(np.random.default_rng(1).normal(size=(4, 3, 64, 64)))
    if dtype == "float64":
        model.module.double()
    else:
        x = x.float()
    dets = {
        "odin": get_model_detector("odin"),
        "odin_t10_e01": get_model_detector("odin", temperature=10, epsilon=0.01),
        "rankfeat": get_model_detector("rankfeat"),
    }
    for key, det in dets.items():
        got = det.score_batch(model, x)
        assert got.dtype == getattr(torch, dtype)
        np.testing.assert_allclose(got.numpy(), BEFORE[dtype][key], rtol=rtol, err_msg=key)
    # the executor's columns: the same scores as float32
    cols = score_batch([dets["odin"], dets["rankfeat"]], model, x)
    assert {k: v.dtype for k, v in cols.items()} == {"odin": np.float32, "rankfeat": np.float32}
    np.testing.assert_allclose(cols["rankfeat"], BEFORE[dtype]["rankfeat"], rtol=1e-5)
