"""``semshift splits laid`` speed (issue 33 item 3): the library's LAID training
(:func:`semshift.splits.laid.train_laid`) beside a bare PyTorch loop of the same triplet and
orthogonality losses, on the same text embeddings, epochs, batch size and threads, one after
the other; and the text encoding that comes before both (the library's
:func:`~semshift.splits.laid.embed_triplets` beside open_clip's ``encode_text`` called bare).

The embeddings are those of ``semshift splits laid --random-init``: the texts of 20,000
(standard, semantic-shift, covariate-shift) triplets over the first ``--labels`` ImageNet-1K
classes and the 48 covariate templates, encoded by a randomly initialised open_clip ViT-B-32
(no download); ``--synthetic`` uses random unit vectors of the same shape instead (seconds).
Target: the library within 1.5x of the bare loop. Both share one thread count (``--threads``).

Run: ``.venv/bin/python benchmarks/bench_laid.py [--labels 48] [--epochs 5] [--synthetic]
[--threads 2]``. Nothing is written to disk.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def bare_loop(st, ss, cs, *, epochs, batch_size, lr, margin, seed):  # type: ignore[no-untyped-def]
    """The triplet + orthogonality losses as one would write them in plain PyTorch."""
    import torch
    import torch.nn.functional as F

    st, ss, cs = (torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)) for x in (st, ss, cs))
    n, dim = st.shape
    half = dim // 2
    gen = torch.Generator().manual_seed(seed)
    w = torch.nn.Parameter(torch.eye(dim))
    opt = torch.optim.Adam([w], lr=lr)
    eye = torch.eye(dim)
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        for lo in range(0, n, batch_size):
            idx = perm[lo : lo + batch_size]
            a, b, c = st[idx] @ w, ss[idx] @ w, cs[idx] @ w
            dist = lambda x, y: 1 - F.cosine_similarity(x, y, dim=1)  # noqa: E731
            l_sem = F.relu(
                dist(a[:, :half], c[:, :half]) - dist(a[:, :half], b[:, :half]) + margin
            ).mean()
            l_cov = F.relu(
                dist(a[:, half:], b[:, half:]) - dist(a[:, half:], c[:, half:]) + margin
            ).mean()
            loss = l_sem + l_cov + ((w.T @ w - eye) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.detach().numpy()


def bare_encode(module, tokenizer, texts, batch_size=256):  # type: ignore[no-untyped-def]
    """open_clip's text tower as one would call it: tokenize, ``encode_text``, normalise."""
    import torch

    out = []
    with torch.inference_mode():
        for lo in range(0, len(texts), batch_size):
            emb = module.encode_text(tokenizer(texts[lo : lo + batch_size]))
            out.append(torch.nn.functional.normalize(emb.float(), dim=-1).numpy())
    return np.concatenate(out)


def embeddings(n_labels: int, n: int, synthetic: bool, seed: int):  # type: ignore[no-untyped-def]
    """(st, ss, cs) triplet embeddings, the number of distinct texts and the seconds the
    library's and a bare encoding took (None for synthetic embeddings)."""
    from semshift.splits.laid import COVARIATE_TEMPLATES, embed_triplets, laid_triplets
    from semshift.taxonomy import load_taxonomy

    names = [f"class {i}" for i in range(n_labels)]
    if synthetic:
        st, ss, cs = laid_triplets(names, COVARIATE_TEMPLATES, n=n, seed=seed)
        texts = sorted(set(st) | set(ss) | set(cs))
        emb = np.random.default_rng(seed).standard_normal((len(texts), 512)).astype(np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        row = {t: i for i, t in enumerate(texts)}
        take = lambda g: emb[[row[t] for t in g]]  # noqa: E731
        return take(st), take(ss), take(cs), len(texts), None, None
    from semshift.features.models import load_model
    from semshift.splits.ssb import resolve_classes

    tax = load_taxonomy("wordnet")
    ids, _ = resolve_classes(tax, "imagenet1k", "labels")
    names = tax.labels(ids[:n_labels])
    enc = load_model("open_clip/ViT-B-32", random_init=True, seed=seed)
    t0 = time.perf_counter()
    st, ss, cs = embed_triplets(enc, names, n_triplets=n, seed=seed)
    lib_s = time.perf_counter() - t0
    texts = sorted(
        {t for g in laid_triplets(names, COVARIATE_TEMPLATES, n=n, seed=seed) for t in g}
    )
    t0 = time.perf_counter()
    bare = bare_encode(enc.module, enc.tokenizer, texts)
    bare_s = time.perf_counter() - t0
    same = np.array_equal(
        np.sort(bare, axis=0), np.sort(np.unique(np.vstack([st, ss, cs]), axis=0), axis=0)
    )
    print(f"  bare and library text embeddings equal: {same}")
    return st, ss, cs, len(texts), lib_s, bare_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", type=int, default=48)
    ap.add_argument("--triplets", type=int, default=20_000)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--synthetic", action="store_true")
    args = ap.parse_args()
    import torch

    from semshift.splits.laid import train_laid

    torch.set_num_threads(args.threads)
    st, ss, cs, n_texts, enc_lib, enc_bare = embeddings(
        args.labels, args.triplets, args.synthetic, 0
    )
    if enc_lib is None:
        print(f"text embeddings: {n_texts} distinct texts, random unit vectors")
    else:
        print(
            f"text encoding of {n_texts} distinct texts by open_clip ViT-B-32 (random init): "
            f"library {enc_lib:.2f} s, bare {enc_bare:.2f} s ({enc_lib / enc_bare:.2f}x)"
        )
    kw = dict(epochs=args.epochs, batch_size=args.batch_size, lr=1e-2, seed=0)
    warm = dict(epochs=1, batch_size=args.batch_size, lr=1e-2, seed=0)
    train_laid(st[: 2 * args.batch_size], ss[: 2 * args.batch_size], cs[: 2 * args.batch_size],
               **warm)  # type: ignore[arg-type]  # fmt: skip
    bare_loop(st[: 2 * args.batch_size], ss[: 2 * args.batch_size], cs[: 2 * args.batch_size],
              margin=0.3, **warm)  # fmt: skip  # warm-up: threads, allocator, first Adam step
    best_lib, best_bare = float("inf"), float("inf")
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        laid = train_laid(st, ss, cs, margin=0.3, **kw)  # type: ignore[arg-type]
        best_lib = min(best_lib, time.perf_counter() - t0)
        t0 = time.perf_counter()
        w = bare_loop(st, ss, cs, margin=0.3, **kw)
        best_bare = min(best_bare, time.perf_counter() - t0)
    diff = float(np.abs(laid.W - w).max())
    steps = args.epochs * -(-args.triplets // args.batch_size)
    print(
        f"training: {args.triplets} triplets x {st.shape[1]}-d, {args.epochs} epochs of batch "
        f"{args.batch_size} ({steps} steps), {args.threads} threads"
    )
    print(f"  library train_laid: {best_lib:.2f} s ({1e3 * best_lib / steps:.1f} ms/step)")
    print(f"  bare PyTorch loop:  {best_bare:.2f} s ({1e3 * best_bare / steps:.1f} ms/step)")
    print(f"  ratio library / bare: {best_lib / best_bare:.2f}x; max |W_lib - W_bare| {diff:.2e}")
    if enc_lib is not None:
        lib, bare = enc_lib + best_lib, enc_bare + best_bare  # type: ignore[operator]
        print(f"encoding + training: library {lib:.2f} s, bare {bare:.2f} s ({lib / bare:.2f}x)")


if __name__ == "__main__":
    main()
