"""Write tests/data/nltk_wordnet_pairs.csv: reference values computed by nltk on WordNet 3.0.

Maintainer script, run once (needs ``pip install nltk`` and Debian's ``wordnet-base`` copied to
``~/nltk_data/corpora/wordnet`` with a ``lexnames`` file, see scripts/build_wordnet.py's LEXNAMES).
The test suite compares semshift's vectorised taxonomy against these values, so nltk is never a
runtime or test dependency::

    python scripts/make_nltk_fixture.py --root ~/nltk_data/corpora/wordnet --pairs 1500
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

from nltk.corpus.reader.wordnet import WordNetCorpusReader

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "nltk_wordnet_pairs.csv"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    WordNetCorpusReader.map_wn = lambda self, version="3.0": None  # no OMW mapping needed
    wn = WordNetCorpusReader(str(args.root), None)
    synsets = sorted(wn.all_synsets("n"), key=lambda s: s.offset())
    rng = random.Random(args.seed)
    # random pairs, plus pairs of near relatives (siblings, parent-child) so short paths and
    # multiple-inheritance cases are well represented
    pairs = [(rng.choice(synsets), rng.choice(synsets)) for _ in range(args.pairs)]
    for _ in range(args.pairs // 3):
        s = rng.choice(synsets)
        hyps = s.hypernyms() + s.instance_hypernyms()
        if hyps:
            h = rng.choice(hyps)
            sibs = h.hyponyms() + h.instance_hyponyms()
            pairs.append((s, rng.choice(sibs)))
            pairs.append((s, h))
    with OUT.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "a",
                "b",
                "name_a",
                "path",
                "lch",
                "wup",
                "min_depth_a",
                "max_depth_a",
                "lowest_common",
            ]
        )
        for a, b in pairs:
            lch = a.lch_similarity(b)
            w.writerow(
                [
                    f"n{a.offset():08d}",
                    f"n{b.offset():08d}",
                    a.name(),
                    a.shortest_path_distance(b),
                    repr(lch),
                    repr(a.wup_similarity(b)),
                    a.min_depth(),
                    a.max_depth(),
                    "|".join(f"n{s.offset():08d}" for s in a.lowest_common_hypernyms(b)),
                ]
            )
    print(f"wrote {len(pairs)} pairs to {OUT}")


if __name__ == "__main__":
    main()
