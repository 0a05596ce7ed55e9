"""IS-OOD graded shift: LAID recovers a planted decomposition; exact nearest distances; binning."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cdist

from semshift.errors import InputError
from semshift.splits import _ann
from semshift.splits.graded import (
    AUTO_EXACT_PAIRS,
    COVARIATE_TEMPLATES,
    LAID,
    bin_levels,
    graded_grid,
    laid_triplets,
    nearest_distances,
    resolve_search_method,
    train_laid,
)


def _planted(seed=0, dim=16, n=2000):
    """Embeddings e = A s + B c, [A B] orthogonal: s semantic (label), c covariate (template)."""
    rng = np.random.default_rng(seed)
    h = dim // 2
    q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    a_mat, b_mat = q[:, :h], q[:, h:]
    s_vec, c_vec = rng.normal(size=(50, h)), rng.normal(size=(40, h))
    a = rng.integers(0, 50, n)
    b = (a + rng.integers(1, 50, n)) % 50
    i = rng.integers(0, 40, n)
    j = (i + rng.integers(1, 40, n)) % 40

    def emb(s, c):
        return s_vec[s] @ a_mat.T + c_vec[c] @ b_mat.T

    return emb(a, i), emb(b, i), emb(a, j), a_mat, b_mat


def _leakage(w, a_mat, b_mat):
    """Fraction of f_sem's variance coming from c, and of f_cov's from s."""
    h = w.shape[0] // 2
    ws, wc = w[:, :h], w[:, h:]
    sem = (
        np.linalg.norm(b_mat.T @ ws) ** 2
        / np.linalg.norm(np.vstack([a_mat.T @ ws, b_mat.T @ ws])) ** 2
    )
    cov = (
        np.linalg.norm(a_mat.T @ wc) ** 2
        / np.linalg.norm(np.vstack([a_mat.T @ wc, b_mat.T @ wc])) ** 2
    )
    return sem, cov


def test_laid_recovers_a_planted_decomposition(tmp_path):
    st, ss, cs, a_mat, b_mat = _planted()
    before = _leakage(np.eye(16), a_mat, b_mat)
    assert min(before) > 0.3  # the identity mixes both factors in each half
    seen: list[tuple[int, float]] = []
    laid = train_laid(st, ss, cs, epochs=40, batch_size=500, margin=0.5, seed=0,
                      on_epoch=lambda k, loss: seen.append((k, loss)))  # fmt: skip
    assert [k for k, _ in seen] == list(range(1, 41))  # one call per epoch (a progress bar)
    assert seen[-1][1] == laid.meta["final_loss"]
    sem_leak, cov_leak = _leakage(laid.W, a_mat, b_mat)
    assert sem_leak < 0.02 and cov_leak < 0.02
    assert laid.orthogonality_error() < 0.05
    # f_sem of two embeddings with the same label and different templates nearly coincide
    f_sem, f_cov = laid.transform(np.vstack([st[:1], cs[:1]]))
    assert np.linalg.norm(f_sem[0] - f_sem[1]) < 0.2 * np.linalg.norm(f_cov[0] - f_cov[1])
    # deterministic and round-trips through a file
    short = [train_laid(st, ss, cs, epochs=2, batch_size=500, seed=7).W for _ in range(2)]
    np.testing.assert_array_equal(short[0], short[1])
    path = laid.save(tmp_path / "laid.npz")
    back = LAID.load(path)
    np.testing.assert_array_equal(back.W, laid.W)
    assert back.meta["seed"] == "0"


def test_laid_file_with_pickled_objects_is_refused(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, W=np.array([object()], dtype=object))
    with pytest.raises(InputError, match="cannot load a LAID matrix"):
        LAID.load(path)


def test_triplet_texts_share_template_or_label():
    labels = ["LABEL_A", "LABEL_B", "LABEL_C"]
    st, ss, cs = laid_triplets(labels, n=200, seed=1)
    assert len(COVARIATE_TEMPLATES) >= 40

    def parts(text):
        label = next(lbl for lbl in labels if lbl in text)
        return label, text.replace(label, "{}")

    for a, b, c in zip(st, ss, cs, strict=True):
        (la, ta), (lb, tb), (lc, tc) = parts(a), parts(b), parts(c)
        assert ta == tb and la != lb  # semantic shift: same template, other label
        assert la == lc and ta != tc  # covariate shift: same label, other template
    with pytest.raises(InputError, match="exactly one"):
        laid_triplets(labels, ["a {} {}", "b {}"])


def test_nearest_distances_equal_brute_force():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(700, 12)).astype(np.float32)
    y = rng.normal(size=(333, 12)).astype(np.float32)
    d, j = nearest_distances(x, y, block_test=50, block_id=128)
    ref = cdist(y.astype(np.float64), x.astype(np.float64), "cosine")
    np.testing.assert_array_equal(j, ref.argmin(axis=1))
    np.testing.assert_allclose(d, ref.min(axis=1), atol=1e-6)
    with pytest.raises(InputError, match="dimension mismatch: ID features 12, test 5"):
        nearest_distances(x, y[:, :5])
    y[3, 1] = np.inf
    with pytest.raises(InputError, match=r"test_features has 1 rows with NaN or inf.*row 3"):
        nearest_distances(x, y)


def _clustered(n_id, n_test, dim=16, k=40, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, dim))
    x = centres[rng.integers(0, k, n_id)] + 0.3 * rng.normal(size=(n_id, dim))
    y = centres[rng.integers(0, k, n_test)] + 0.5 * rng.normal(size=(n_test, dim))
    return x.astype(np.float32), y.astype(np.float32)


def test_ivf_search_probing_every_cell_is_exact():
    x, y = _clustered(1500, 400)
    d, j = nearest_distances(x, y, method="exact")
    d_all, j_all = nearest_distances(x, y, method="ivf", nlist=30, nprobe=30)
    np.testing.assert_array_equal(j_all, j)
    np.testing.assert_allclose(d_all, d, atol=1e-6)


def test_ivf_search_is_close_to_exact_and_never_nearer(monkeypatch):
    """Default cells on clustered data: nearly every nearest row found; misses are farther."""
    x, y = _clustered(4000, 1000)
    d, j = nearest_distances(x, y, method="exact")
    params = _ann.ivf_params(len(x))
    assert (params.nlist, params.nprobe, params.train_size) == (126, 16, 4000)
    d_ivf, j_ivf = nearest_distances(x, y, method="ivf")
    assert np.mean(j_ivf == j) > 0.97
    assert (d_ivf >= d - 1e-6).all()  # a subset of the ID rows: never a nearer row
    hit = j_ivf == j
    np.testing.assert_allclose(d_ivf[hit], d[hit], atol=1e-6)
    # deterministic for a seed; the search is over ID rows, so their order does not matter
    np.testing.assert_array_equal(nearest_distances(x, y, method="ivf")[1], j_ivf)
    perm = np.random.default_rng(1).permutation(len(x))
    d_p, j_p = nearest_distances(x[perm], y, method="ivf", nprobe=126)
    np.testing.assert_array_equal(perm[j_p], j)
    np.testing.assert_allclose(d_p, d, atol=1e-6)
    # test rows in chunks and products in small blocks: the same answer
    monkeypatch.setattr(_ann, "_QUERIES", 97)
    monkeypatch.setattr(_ann, "_BLOCK", 40)
    monkeypatch.setattr(_ann, "_workers", lambda: 3)  # threads do not change the answer
    d_c, j_c = nearest_distances(x, y, method="ivf")
    np.testing.assert_array_equal(j_c, j_ivf)
    np.testing.assert_allclose(d_c, d_ivf, atol=1e-6)
    # fewer probes -> never more accurate (on these data, strictly less)
    d_1, _ = nearest_distances(x, y, method="ivf", nprobe=1)
    assert (d_1 >= d_ivf - 1e-6).all() and d_1.mean() > d_ivf.mean()


def test_spherical_kmeans_reseeds_empty_cells():
    """Six distinct rows, eight cells: empty cells take the worst-fitting rows; unit centroids."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=(6, 5)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    x = np.repeat(base, 10, axis=0)
    c = _ann.spherical_kmeans(x, 8, niter=5, seed=0)
    assert c.shape == (8, 5) and np.isfinite(c).all()
    np.testing.assert_allclose(np.linalg.norm(c, axis=1), 1.0, atol=1e-6)
    # every distinct row ends up as (the centroid of) some cell
    assert np.allclose((base @ c.T).max(axis=1), 1.0, atol=1e-6)


def test_search_method_choice_and_bad_input():
    assert resolve_search_method(1000, 1000) == "exact"
    assert resolve_search_method(AUTO_EXACT_PAIRS, 1) == "exact"
    assert resolve_search_method(AUTO_EXACT_PAIRS, 2) == "ivf"
    assert resolve_search_method(10, 10, "ivf") == "ivf"
    with pytest.raises(InputError, match="must be one of auto, exact, ivf, got 'hnsw'"):
        resolve_search_method(10, 10, "hnsw")
    x, y = _clustered(50, 20)
    with pytest.raises(InputError, match="nprobe must be >= 1, got 0"):
        nearest_distances(x, y, method="ivf", nprobe=0)


def test_bin_levels_policies():
    v = np.arange(100, dtype=float)
    lv, e = bin_levels(v, 4, policy="quantile")
    assert np.bincount(lv)[1:].tolist() == [25, 25, 25, 25]
    lv, e = bin_levels(v, 5, policy="equal-width", quantile_range=(0.0, 1.0))
    np.testing.assert_allclose(e, np.linspace(0, 99, 6))
    assert lv.min() == 1 and lv.max() == 5 and lv[0] == 1 and lv[-1] == 5
    lv, e = bin_levels([-5.0, 0.5, 1.5, 2.5, 99.0], policy="fixed", edges=[0, 1, 2, 3])
    assert lv.tolist() == [1, 1, 2, 3, 3]
    with pytest.raises(InputError, match="strictly increasing"):
        bin_levels(v, policy="fixed", edges=[0, 2, 1])
    with pytest.raises(InputError, match="unknown policy"):
        bin_levels(v, policy="log")


def test_graded_grid_levels_follow_the_planted_shift():
    """Test images shifted further along the semantic subspace get higher semantic levels."""
    rng = np.random.default_rng(0)
    dim = 8
    laid = LAID(W=np.eye(dim))  # first half = semantic, second half = covariate
    base = np.tile(np.r_[np.ones(4), np.ones(4)], (50, 1)) + 0.01 * rng.normal(size=(50, dim))
    sem_shift = np.repeat(np.linspace(0, 3, 4), 30)
    cov_shift = np.tile(np.linspace(0, 3, 3), 40)
    test = np.ones((120, dim))
    test[:, 0] += sem_shift
    test[:, 4] += cov_shift
    samples, cells = graded_grid(base, test, laid, n_levels=4, policy="quantile", min_count=5)
    assert len(cells) == 16 and cells["count"].sum() == 120
    # semantic distance grows with the planted semantic shift, not with the covariate one
    means = samples.groupby(sem_shift)["d_sem"].mean().to_numpy()
    assert np.all(np.diff(means) > 0)
    assert samples.groupby(cov_shift)["d_sem"].mean().std() < 0.02
    assert (samples.sem_level.to_numpy()[sem_shift == 3] >= 3).all()
    assert samples["cell_valid"].to_numpy().sum() == cells.loc[cells.valid, "count"].sum()
    assert cells.attrs["search"] == {"method": "exact", "nlist": None, "nprobe": None, "k": 10}
    # probing every cell of the inverted file gives the same grid
    s_ivf, c_ivf = graded_grid(
        base, test, laid, n_levels=4, policy="quantile", min_count=5, method="ivf", nprobe=99
    )
    assert c_ivf.attrs["search"] == {"method": "ivf", "nlist": 14, "nprobe": 14, "k": 10}
    np.testing.assert_allclose(s_ivf[["d_sem", "d_cov"]], samples[["d_sem", "d_cov"]], atol=1e-6)
    pd.testing.assert_frame_equal(c_ivf, cells, check_like=False, check_flags=False)
    with pytest.raises(InputError, match="LAID expects features of dimension 8"):
        graded_grid(base[:, :4], test, laid)


TINY_CLIP = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}


def test_laid_from_clip_text_embeddings_and_cli(tmp_path, capsys):
    """LAID on a (tiny, randomly initialised) open_clip text tower, through Python and the CLI."""
    from semshift.cli import main
    from semshift.features.models import load_model, register_open_clip_config
    from semshift.splits.graded import fit_laid_from_text

    register_open_clip_config("semshift-laid-clip", TINY_CLIP)
    clip = load_model("open_clip/semshift-laid-clip", random_init=True, seed=0)
    labels = ["dog", "cat", "airliner", "teapot", "violin"]
    laid = fit_laid_from_text(
        clip, labels, templates=COVARIATE_TEMPLATES[:10], n_triplets=400, epochs=3, batch_size=200
    )
    assert laid.dim == 16 and laid.meta["triplets"] == 400
    assert laid.orthogonality_error() < 0.5
    # the semantic half separates labels better than the raw embedding does, on training texts
    st, ss, _ = laid_triplets(labels, COVARIATE_TEMPLATES[:10], n=400)
    e_st, e_ss = clip.encode(st), clip.encode(ss)
    sem_st, _ = laid.transform(e_st)
    sem_ss, _ = laid.transform(e_ss)

    def cos(a, b):
        return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)

    assert (1 - cos(sem_st, sem_ss)).mean() > (1 - cos(e_st, e_ss)).mean()
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "splits",
                "laid",
                "--model",
                "open_clip/semshift-laid-clip",
                "--random-init",
                "--labels",
                "imagenet1k",
                "--triplets",
                "300",
                "--epochs",
                "2",
                "--out",
                str(tmp_path / "laid.npz"),
            ]
        )
    assert exit_.value.code == 0
    assert LAID.load(tmp_path / "laid.npz").dim == 16
    assert "LAID 16 x 16 from 300 triplets (1000 labels" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["splits", "laid", "--model", "resnet50", "--random-init", "--out", "x.npz"])
    assert exit_.value.code == 2


def _graded_args(tmp_path):
    """``semshift splits graded`` on 300 ID and 120 test clustered rows (files under tmp_path)
    with the identity LAID, less ``--out``."""
    x, y = _clustered(300, 120, dim=8)
    np.save(tmp_path / "id.npy", x)
    np.save(tmp_path / "test.npy", y)
    LAID(W=np.eye(8)).save(tmp_path / "laid.npz")
    return [
        "splits", "graded", "--id-features", str(tmp_path / "id.npy"),
        "--test-features", str(tmp_path / "test.npy"), "--laid", str(tmp_path / "laid.npz"),
    ]  # fmt: skip


def test_cli_graded_with_the_inverted_file(tmp_path, capsys):
    """`semshift splits graded --method ivf`: probing every cell gives the exact levels."""
    from semshift.cli import main

    args = _graded_args(tmp_path)
    for method, extra in (("exact", []), ("ivf", ["--nprobe", "35"])):
        with pytest.raises(SystemExit) as exit_:
            main([*args, "--out", str(tmp_path / method), "--method", method, *extra])
        assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # whatever the console width
    assert "120 test images, exact search of the 10th nearest ID image" in out
    ivf = "ivf (approximate: 35 of 35 cells probed) search of the 10th nearest ID image"
    assert f"120 test images, {ivf}" in out
    a = pd.read_csv(tmp_path / "exact" / "levels.csv")
    b = pd.read_csv(tmp_path / "ivf" / "levels.csv")
    pd.testing.assert_frame_equal(a[["sem_level", "cov_level"]], b[["sem_level", "cov_level"]])
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--out", str(tmp_path / "bad"), "--method", "hnsw"])
    assert exit_.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--method: unknown search method 'hnsw'; choose auto, exact, ivf" in err


def test_cli_graded_with_fixed_edges(tmp_path, capsys):
    """--policy fixed with --sem-edges / --cov-edges bins by the given edges; the params model
    refuses the combinations that make no sense, one line naming the option."""
    from semshift.cli import main

    args = _graded_args(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--out", str(tmp_path / "free"), "--method", "exact"])
    assert exit_.value.code == 0
    free = pd.read_csv(tmp_path / "free" / "levels.csv")
    sem, cov = free["d_sem"], free["d_cov"]
    sem_edges = np.quantile(sem, [0, 0.5, 1]).round(6)
    cov_edges = np.quantile(cov, [0, 0.5, 1]).round(6)
    sem_edges[0], cov_edges[0] = 0.0, 0.0
    sem_edges[-1], cov_edges[-1] = sem.max() + 1, cov.max() + 1
    fixed = [
        "--policy", "fixed", "--sem-edges", ",".join(map(str, sem_edges)),
        "--cov-edges", ",".join(map(str, cov_edges)), "--min-count", "0",
    ]  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--out", str(tmp_path / "fixed"), "--method", "exact", *fixed])
    assert exit_.value.code == 0
    got = pd.read_csv(tmp_path / "fixed" / "levels.csv")
    want_sem = np.where(got["d_sem"] < sem_edges[1], 1, 2)  # levels count from 1
    np.testing.assert_array_equal(got["sem_level"], want_sem)
    np.testing.assert_array_equal(got["cov_level"], np.where(got["d_cov"] < cov_edges[1], 1, 2))
    cells = pd.read_csv(tmp_path / "fixed" / "cells.csv")
    assert len(cells) == 4 and cells["count"].sum() == 120
    capsys.readouterr()
    for extra, message in (
        (["--policy", "fixed"], "error: --sem-edges: required by policy 'fixed'"),
        ([*fixed, "--levels", "3"], "error: --levels: policy 'fixed' takes its levels"),
        (["--sem-edges", "0,1"], "error: --sem-edges: applies to policy 'fixed'"),
        (["--policy", "fixed", "--sem-edges", "0,x"], "error: --sem-edges: expected numbers"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main([*args, "--out", str(tmp_path / "bad"), *extra])
        assert exit_.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(message), err
        assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("k", [1, 3, 10])
def test_the_kth_nearest_distance_equals_a_full_sort(k):
    """Distances to the k-th most similar ID row: exact (any block size) and the inverted file
    probing every cell equal a full sort of every similarity."""
    rng = np.random.default_rng(k)
    x = rng.normal(size=(300, 6))
    y = rng.normal(size=(70, 6))
    xu = x / np.linalg.norm(x, axis=1, keepdims=True)
    yu = y / np.linalg.norm(y, axis=1, keepdims=True)
    sim = (yu @ xu.T).astype(np.float32)
    want = 1.0 - np.sort(sim, axis=1)[:, ::-1][:, k - 1].astype(np.float64)
    d, idx = nearest_distances(x, y, k=k, method="exact")
    np.testing.assert_allclose(d, want, atol=1e-6)
    np.testing.assert_allclose(1.0 - sim[np.arange(70), idx], want, atol=1e-6)
    small, small_idx = nearest_distances(x, y, k=k, method="exact", block_test=16, block_id=7)
    np.testing.assert_array_equal(small_idx, idx)  # ties and blocks: the same rows
    np.testing.assert_allclose(small, d, atol=1e-6)
    ivf, ivf_idx = nearest_distances(x, y, k=k, method="ivf", nlist=8, nprobe=8)
    np.testing.assert_allclose(ivf, d, atol=1e-6)
    np.testing.assert_array_equal(ivf_idx, idx)


def test_k_is_checked_and_the_released_default_is_the_tenth():
    x = np.eye(4)
    with pytest.raises(InputError, match="k = 5 but there are only 4 ID rows"):
        nearest_distances(x, x, k=5)
    with pytest.raises(InputError, match=r"k .* must be >= 1"):
        nearest_distances(x, x, k=0)
    # the 10th nearest is further than the nearest: the graded grid's default
    rng = np.random.default_rng(0)
    base, test = rng.normal(size=(40, 4)), rng.normal(size=(30, 4))
    laid = LAID(W=np.eye(4))
    s10, c10 = graded_grid(base, test, laid, n_levels=2, min_count=1)
    s1, _ = graded_grid(base, test, laid, n_levels=2, min_count=1, k=1)
    assert c10.attrs["search"]["k"] == 10
    assert (s10["d_sem"] >= s1["d_sem"] - 1e-12).all() and (s10["d_sem"] > s1["d_sem"]).any()
