"""LAID's templates (named sets, files), the LAID-vs-PCA check of IS-OOD Table 3 on a planted,
hand-checked decomposition, and feature stores as graded-shift inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from semshift.errors import InputError
from semshift.splits.graded import LAID, build_graded_split, read_features
from semshift.splits.laid import (
    COVARIATE_TEMPLATES,
    embed_triplets,
    fit_laid_from_text,
    resolve_templates,
)
from semshift.splits.laid_pca import (
    PCADecomposition,
    compare_decompositions,
    fit_pca_decomposition,
    pca_basis,
    topk_accuracy,
)

# four classes: coordinate 0 splits {0, 1} from {2, 3} by 10, coordinate 1 splits within by 1
SEM = np.array([[10.0, 1.0], [10.0, -1.0], [-10.0, 1.0], [-10.0, -1.0]])
# four templates on the covariate coordinates 2, 3, likewise
COV = np.array([[5.0, 0.5], [-5.0, 0.5], [5.0, -0.5], [-5.0, -0.5]])


def _planted_triplets() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (label a, other label b, template i, other template j): text = [SEM[a], COV[i]]."""
    a, b, i, j = (g.ravel() for g in np.meshgrid(*[np.arange(4)] * 4, indexing="ij"))
    keep = (a != b) & (i != j)
    a, b, i, j = a[keep], b[keep], i[keep], j[keep]
    text = lambda lab, tpl: np.hstack([SEM[lab], COV[tpl]])  # noqa: E731
    return text(a, i), text(b, i), text(a, j)


def test_named_template_sets_and_template_files(tmp_path):
    assert resolve_templates("covariate-48") is COVARIATE_TEMPLATES
    assert len(COVARIATE_TEMPLATES) == 48
    clip80 = resolve_templates("clip-imagenet-80")
    # OpenAI CLIP's notebook: 80 prompts, the first "a bad photo of a {}.", the last a tattoo
    assert len(clip80) == len(set(clip80)) == 80
    assert clip80[0] == "a bad photo of a {}." and clip80[-1] == "a tattoo of the {}."
    f = tmp_path / "t.txt"
    f.write_text("# mine\na {} in fog\n\n  an x-ray of a {}  \n", encoding="utf-8")
    assert resolve_templates(f) == ("a {} in fog", "an x-ray of a {}")
    assert resolve_templates(["a {}", "b {}"]) == ("a {}", "b {}")
    f.write_text("a {} in fog\nno label here\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"t\.txt line 2: template 'no label here'"):
        resolve_templates(f)
    f.write_text("a {} in {fog}\nb {}\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1"):
        resolve_templates(f)
    f.write_text("only {}\n", encoding="utf-8")
    with pytest.raises(InputError, match="at least two templates, got 1"):
        resolve_templates(f)
    with pytest.raises(InputError, match=r"neither a template set .* nor a file"):
        resolve_templates("clip-imagenet-81")


class _HashEncoder:
    """Each text -> a fixed unit vector (its characters' codes), counting the texts it saw."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.seen += list(texts)
        codes = np.zeros((len(texts), 6), np.float32)
        for r, t in enumerate(texts):
            for k, ch in enumerate(t):
                codes[r, k % 6] += ord(ch) * (1 + k % 5)
        return codes / np.linalg.norm(codes, axis=1, keepdims=True)


def test_embed_triplets_is_what_fit_laid_from_text_trains_on():
    enc = _HashEncoder()
    labels = ["cat", "dog", "owl"]
    st, ss, cs = embed_triplets(enc, labels, templates=("a {}", "the {}!"), n_triplets=50)
    assert st.shape == ss.shape == cs.shape == (50, 6) and st.dtype == np.float32
    assert len(enc.seen) == len(set(enc.seen)) == 6  # 3 labels x 2 templates, each once
    assert not np.array_equal(st, ss) and not np.array_equal(st, cs)
    from semshift.splits.laid import train_laid

    a = fit_laid_from_text(enc, labels, templates=("a {}", "the {}!"), n_triplets=50, epochs=2)
    b = train_laid(st, ss, cs, epochs=2)
    np.testing.assert_array_equal(a.W, b.W)
    assert a.meta is not None and a.meta["templates"] == 2


def test_pca_basis_keeps_the_fewest_directions_reaching_the_variance():
    u, v = np.array([1.0, -1, 1, -1]), np.array([1.0, 1, -1, -1])  # centred, orthogonal
    x = np.stack([2 * u, v, 0 * u], axis=1)  # variances 4 : 1 : 0 -> the first axis explains 0.8
    one = pca_basis(x, 0.8)
    assert one.shape == (3, 1)
    np.testing.assert_allclose(one[:, 0], [1, 0, 0], atol=1e-12)  # sign: largest entry positive
    np.testing.assert_allclose(pca_basis(-x, 0.8), one, atol=1e-12)
    assert pca_basis(x, 0.9).shape == (3, 2) and pca_basis(x, 1.0).shape == (3, 2)
    with pytest.raises(InputError, match="no variance"):
        pca_basis(np.ones((5, 3)))
    with pytest.raises(InputError, match=r"in \(0, 1\]"):
        pca_basis(x, 1.5)


def test_topk_accuracy_ties_go_to_the_lower_class():
    classes = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # classes 0 and 1 tie
    images = np.array([[2.0, 0.1], [2.0, 0.1], [0.0, 3.0], [0.0, 0.0]])
    acc = topk_accuracy(images, np.array([0, 1, 2, 2]), classes, ks=(1, 2, 3))
    # class 0: first; class 1: behind 0 (tie) -> 2nd; class 2: first; zero image: all tie
    # at 0 -> class 2 is 3rd
    assert acc == {1: 0.5, 2: 0.75, 3: 1.0}
    with pytest.raises(InputError, match="labels must index the 3 class embeddings"):
        topk_accuracy(images, np.array([0, 1, 2, 3]), classes)


def test_laid_beats_pca_on_a_planted_decomposition():
    """Hand-checked IS-OOD Table 3. Label changes move coordinate 0 by 20 and coordinate 1 by 2
    (variance 100 : 1), so PCA's semantic part (90% of the variance) is coordinate 0 alone, which
    cannot tell class 0 from 1 nor 2 from 3: top-1 1/2, top-2 1. LAID (here the identity:
    coordinates 0-1 semantic, 2-3 covariate) keeps both: top-1 1. The class embeddings' covariate
    part is the templates' mean, zero, so both covariate parts rank every class alike and
    predict class 0: top-1 1/4, top-2 1/2."""
    st, ss, cs = _planted_triplets()
    pca = fit_pca_decomposition(st, ss, cs)
    np.testing.assert_allclose(pca.sem, [[1], [0], [0], [0]], atol=1e-12)
    np.testing.assert_allclose(pca.cov, [[0], [0], [1], [0]], atol=1e-12)
    y = np.repeat(np.arange(4), 4)  # every class under every template
    images = np.hstack([SEM[y], COV[np.tile(np.arange(4), 4)]])
    class_text = np.hstack([SEM, np.zeros((4, 2))])
    table = compare_decompositions(LAID(W=np.eye(4)), pca, images, y, class_text, ks=(1, 2))
    expected = pd.DataFrame(
        {
            "part": ["full", "semantic", "semantic", "covariate", "covariate"],
            "method": ["CLIP", "PCA", "LAID", "PCA", "LAID"],
            "dims": [4, 1, 2, 1, 2],
            "acc@1": [1.0, 0.5, 1.0, 0.25, 0.25],
            "acc@2": [1.0, 1.0, 1.0, 0.5, 0.5],
        }
    )
    pd.testing.assert_frame_equal(table, expected)
    with pytest.raises(InputError, match="expects features of dimension 4"):
        PCADecomposition(sem=pca.sem, cov=pca.cov).transform(images[:, :3])


def _write_store(path, feats):
    from semshift.features import write_store

    index = pd.DataFrame({"path": [f"img{k}.png" for k in range(len(feats))]})
    return write_store(path, index=index, arrays={"features": feats}, fsync=False)


def test_graded_split_reads_feature_stores(tmp_path):
    rng = np.random.default_rng(3)
    base = rng.standard_normal((60, 4)).astype(np.float32)
    test = rng.standard_normal((30, 4)).astype(np.float32)
    _write_store(tmp_path / "id", base)
    _write_store(tmp_path / "test", test)
    np.save(tmp_path / "test.npy", test)
    arr, src = read_features(tmp_path / "id", "id_features")
    np.testing.assert_array_equal(arr, base)
    assert src == str(tmp_path / "id")
    laid = LAID(W=np.eye(4))
    kw = dict(n_levels=3, min_count=1, k=2)
    from_store = build_graded_split(tmp_path / "id", tmp_path / "test", laid, **kw)
    from_arrays = build_graded_split(base, tmp_path / "test.npy", laid, **kw)
    pd.testing.assert_frame_equal(from_store.samples, from_arrays.samples)
    assert from_store.manifest.params["id_features"] == str(tmp_path / "id")
    with pytest.raises(InputError, match=r"id_features .*id.*logits"):
        read_features(tmp_path / "id", "id_features", array="logits")


def test_laid_cli_templates_file_and_compare_pca(tmp_path, capsys):
    """``semshift splits laid --templates FILE --compare-pca STORE`` on a tiny random CLIP: the
    table it writes is :func:`compare_decompositions` of the same LAID, PCA and class texts."""
    from semshift.cli import main
    from semshift.features.models import load_model, register_open_clip_config
    from semshift.splits.laid import train_laid
    from semshift.splits.laid_pca import class_text_embeddings

    tiny = {
        "embed_dim": 16,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 16},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2,
                     "layers": 1},
    }  # fmt: skip
    register_open_clip_config("semshift-laid-pca-clip", tiny)
    ids = ["n01440764", "n01443537", "n01484850"]  # tench, goldfish, great white shark
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n", encoding="utf-8")
    (tmp_path / "t.txt").write_text("a photo of a {}.\na sketch of a {}.\nan {} toy\n", "utf-8")
    rng = np.random.default_rng(0)
    folders = ["n01440764", "n01443537", "n01484850", "n01440764", "n99999999", "n01484850"]
    index = pd.DataFrame({"path": [f"{c}/{k}.png" for k, c in enumerate(folders)]})
    from semshift.features import write_store

    feats = rng.standard_normal((6, 16)).astype(np.float32)
    write_store(tmp_path / "imgs", index=index, arrays={"features": feats}, fsync=False)
    args = ["splits", "laid", "--model", "open_clip/semshift-laid-pca-clip", "--random-init",
            "--labels", str(tmp_path / "ids.txt"), "--templates", str(tmp_path / "t.txt"),
            "--triplets", "60", "--epochs", "2", "--out", str(tmp_path / "laid.npz")]  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--compare-pca", str(tmp_path / "imgs")])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "(3 labels x 3 templates)" in out and "1 image(s) of other classes left out" in out
    table = pd.read_csv(tmp_path / "laid_vs_pca.csv")
    # the same numbers from the library, step by step
    clip = load_model("open_clip/semshift-laid-pca-clip", random_init=True, seed=0)
    names = ["tench", "goldfish", "great white shark"]
    templates = ("a photo of a {}.", "a sketch of a {}.", "an {} toy")
    st, ss, cs = embed_triplets(clip, names, templates=templates, n_triplets=60)
    laid = LAID.load(tmp_path / "laid.npz")
    np.testing.assert_array_equal(laid.W, train_laid(st, ss, cs, epochs=2).W)
    expected = compare_decompositions(
        laid,
        fit_pca_decomposition(st, ss, cs),
        feats[[0, 1, 2, 3, 5]],
        np.array([0, 1, 2, 0, 2]),
        class_text_embeddings(clip, names, templates),
    )
    pd.testing.assert_frame_equal(table, expected)
    assert list(table["dims"])[:3:2] == [16, 8]
    with pytest.raises(SystemExit) as exit_:
        main([*args[:-2], "--templates", "clip-imagenet-81", "--out", str(tmp_path / "x.npz")])
    assert exit_.value.code == 2
    assert "--templates: templates 'clip-imagenet-81'" in capsys.readouterr().err
