"""Derive semshift's compact WordNet 3.0 noun table from Debian's ``wordnet-base``.

Run once by a maintainer (the result ships inside the package, so users need neither apt nor nltk)::

    apt-get install -y wordnet-base
    python scripts/build_wordnet.py            # reads /usr/share/wordnet, writes the package table

It writes two Parquet files next to ``src/semshift/taxonomy/data/WORDNET_LICENSE``:

``wordnet30_nouns.parquet``
    one row per noun synset, in ``data.noun`` order: ``wnid`` ("n" + 8-digit offset), ``name``
    (nltk-style synset name such as ``dog.n.01``, the sense number read from ``index.noun``),
    ``lemmas`` ("|"-joined, as written in data.noun), ``senses`` ("|"-joined sense number of
    each lemma, from ``index.noun``: 1 = the lemma's most frequent sense), ``gloss`` and
    ``lexname``.
``wordnet30_noun_edges.parquet``
    one row per hypernym (``@``) or instance-hypernym (``@i``) pointer: ``child`` and ``parent`` row
    numbers, ``kind`` (0 hypernym, 1 instance) and ``order``, the position of the child among the
    parent's hyponym and instance-hyponym pointers (``~``, ``~i``) as listed on the parent's
    line, so    breadth-first traversals can follow WordNet's own child order.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

# WordNet's lexnames file (lexicographer files), indexed by lex_filenum; Debian's wordnet-base
# does not ship it, the list is fixed for WordNet 3.0.
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group "
    "noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant "
    "noun.possession noun.process noun.quantity noun.relation noun.shape noun.state "
    "noun.substance noun.time verb.body verb.change verb.cognition verb.communication "
    "verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()

EXPECTED_SYNSETS = 82_115
EXPECTED_EDGES = 84_427
PACKAGE_DATA = Path(__file__).resolve().parents[1] / "src" / "semshift" / "taxonomy" / "data"


def parse_index(path: Path) -> dict[str, list[int]]:
    """Map each lemma of ``index.noun`` to its synset offsets in sense order."""
    senses: dict[str, list[int]] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.startswith(" "):
                continue  # license header
            parts = line.split()
            lemma, p_cnt = parts[0], int(parts[3])
            synset_cnt = int(parts[2])
            offsets = parts[4 + p_cnt + 2 :]
            if len(offsets) != synset_cnt:
                raise ValueError(f"{path}: malformed line for {lemma!r}")
            senses[lemma] = [int(o) for o in offsets]
    return senses


def parse_data(path: Path) -> tuple[list[dict[str, object]], list[tuple[int, int, int]]]:
    """Parse ``data.noun`` into synset records and (child, parent, kind) offset triples."""
    records: list[dict[str, object]] = []
    hypernyms: list[tuple[int, int, int]] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.startswith(" "):
                continue
            body, _, gloss = line.partition(" | ")
            parts = body.split()
            offset, lex_filenum, ss_type = int(parts[0]), int(parts[1]), parts[2]
            if ss_type != "n":
                raise ValueError(f"{path}:{lineno}: not a noun synset")
            w_cnt = int(parts[3], 16)
            words = parts[4 : 4 + 2 * w_cnt : 2]
            pos = 4 + 2 * w_cnt
            p_cnt = int(parts[pos])
            hyponyms: list[int] = []
            for k in range(p_cnt):
                symbol, target, tpos = parts[pos + 1 + 4 * k : pos + 4 + 4 * k]
                if tpos != "n":
                    continue
                if symbol in ("@", "@i"):
                    hypernyms.append((offset, int(target), 0 if symbol == "@" else 1))
                elif symbol in ("~", "~i"):
                    hyponyms.append(int(target))
            records.append(
                {
                    "offset": offset,
                    "words": words,
                    "gloss": gloss.strip(),
                    "lexname": LEXNAMES[lex_filenum],
                    "hyponyms": hyponyms,
                }
            )
    return records, hypernyms


def build(wordnet_dir: Path, out_dir: Path) -> tuple[int, int]:
    """Build the two Parquet tables; return (number of synsets, number of edges)."""
    senses = parse_index(wordnet_dir / "index.noun")
    records, hypernyms = parse_data(wordnet_dir / "data.noun")
    row_of = {int(r["offset"]): i for i, r in enumerate(records)}  # type: ignore[call-overload]

    names: list[str] = []
    sense_numbers: list[str] = []
    for r in records:
        sense_numbers.append(
            "|".join(
                str(senses[str(w).lower()].index(int(r["offset"])) + 1)  # type: ignore[call-overload]
                for w in r["words"]  # type: ignore[attr-defined]
            )
        )
        first = str(r["words"][0]).lower()  # type: ignore[index]
        sense = senses[first].index(int(r["offset"])) + 1  # type: ignore[call-overload]
        names.append(f"{first}.n.{sense:02d}")

    # position of each child in its parent's hyponym pointer list
    order: dict[tuple[int, int], int] = {}
    for r in records:
        for k, child in enumerate(r["hyponyms"]):  # type: ignore[call-overload]
            order.setdefault((child, int(r["offset"])), k)  # type: ignore[call-overload]

    child = [row_of[c] for c, _, _ in hypernyms]
    parent = [row_of[p] for _, p, _ in hypernyms]
    kind = [k for _, _, k in hypernyms]
    rank = [order[(c, p)] for c, p, _ in hypernyms]

    nodes = pa.table(
        {
            "wnid": pa.array([f"n{int(r['offset']):08d}" for r in records]),  # type: ignore[call-overload]
            "name": pa.array(names),
            "lemmas": pa.array(["|".join(r["words"]) for r in records]),  # type: ignore[call-overload]
            "senses": pa.array(sense_numbers),
            "gloss": pa.array([r["gloss"] for r in records]),
            "lexname": pa.array([r["lexname"] for r in records]).dictionary_encode(),
        }
    )
    edges = pa.table(
        {
            "child": pa.array(child, pa.int32()),
            "parent": pa.array(parent, pa.int32()),
            "kind": pa.array(kind, pa.int8()),
            "order": pa.array(rank, pa.int32()),
        }
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        nodes, out_dir / "wordnet30_nouns.parquet", compression="zstd", compression_level=19
    )
    pq.write_table(
        edges, out_dir / "wordnet30_noun_edges.parquet", compression="zstd", compression_level=19
    )
    return nodes.num_rows, edges.num_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wordnet-dir", type=Path, default=Path("/usr/share/wordnet"))
    parser.add_argument("--out", type=Path, default=PACKAGE_DATA)
    args = parser.parse_args(argv)
    if not (args.wordnet_dir / "data.noun").exists():
        print(
            f"error: {args.wordnet_dir}/data.noun not found; install Debian's wordnet-base "
            "(apt-get install -y wordnet-base) or pass --wordnet-dir",
            file=sys.stderr,
        )
        return 2
    n_nodes, n_edges = build(args.wordnet_dir, args.out)
    print(f"wrote {n_nodes} noun synsets and {n_edges} hypernym edges to {args.out}")
    if (n_nodes, n_edges) != (EXPECTED_SYNSETS, EXPECTED_EDGES):
        print(
            f"error: expected {EXPECTED_SYNSETS} synsets and {EXPECTED_EDGES} edges",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
