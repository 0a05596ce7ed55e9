"""`semshift taxonomy ...`: query WordNet or a custom hierarchy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    pass

from semshift.cli._app import taxonomy_app
from semshift.cli._options import TaxonomyOption, console


@taxonomy_app.command("show")
def taxonomy_show(
    node: Annotated[str, typer.Argument(help="wnid, synset name (dog.n.01), lemma or custom id.")],
    taxonomy: TaxonomyOption = "wordnet",
) -> None:
    """Show a node: names, gloss, depth, parents, children and its path to the root."""
    from semshift.taxonomy import load_taxonomy

    tax = load_taxonomy(taxonomy)
    i = tax.index(node)
    console.print(f"[bold]{tax.id(i)}[/bold] {tax.alias(i) or ''}  {', '.join(tax.lemmas(i))}")
    if tax.gloss(i):
        console.print(f"  {tax.gloss(i)}")
    console.print(f"  depth {tax.depth(i)} (longest {tax.depth(i, 'max')})  {tax.lexname(i)}")
    for label, ids in (("parents", tax.parents(i)), ("children", tax.children(i))):
        shown = ", ".join(f"{tax.label(x)} ({x})" for x in ids[:10])
        more = f" ... (+{len(ids) - 10})" if len(ids) > 10 else ""
        console.print(f"  {label}: {shown}{more}" if ids else f"  {label}: none")


@taxonomy_app.command("distance")
def taxonomy_distance(
    a: Annotated[str, typer.Argument(help="First node.")],
    b: Annotated[str, typer.Argument(help="Second node.")],
    taxonomy: TaxonomyOption = "wordnet",
) -> None:
    """Path distance, Leacock-Chodorow and Wu-Palmer similarity of two nodes."""
    from semshift.taxonomy import load_taxonomy

    tax = load_taxonomy(taxonomy)
    lca = ", ".join(f"{tax.label(x)} ({x})" for x in tax.lowest_common_ancestors(a, b))
    console.print(
        f"{tax.label(a)} ({tax.id(a)}) - {tax.label(b)} ({tax.id(b)}): path "
        f"{tax.path_distance(a, b)}, lch {tax.lch(a, b):.4f}, wup {tax.wup(a, b):.4f}; "
        f"lowest common: {lca or 'none'}"
    )
