"""Taxonomy core behaviour not tied to one source."""

from __future__ import annotations


def test_membership_is_a_plain_lookup(wn, monkeypatch):
    """``key in taxonomy`` never builds index()'s close-match message (a scan of every id,
    alias and lemma): a run asks it for every class id of 320,000 rows."""
    from semshift.taxonomy.core import Taxonomy

    def no_suggestions(self, key, n=3):
        raise AssertionError("suggest() called by __contains__")

    monkeypatch.setattr(Taxonomy, "suggest", no_suggestions)
    assert "n02084071" in wn and "dog.n.01" in wn and 0 in wn
    assert "no-such-node" not in wn and "n99999999" not in wn and len(wn) not in wn
    assert ("dog" in wn) is False  # a lemma naming several nodes is not one node
