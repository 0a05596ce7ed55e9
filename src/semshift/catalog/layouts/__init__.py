"""Readers for the folder layouts of the public dataset releases and their class-index conventions.

Each reader takes the folder a release unpacks to (or its parent) and returns an
:class:`~semshift.features.data.ImageSource` whose labels follow the published convention:

==========================  ===========================================  ==========================
reader                      layout                                       label
==========================  ===========================================  ==========================
:func:`imagenet1k`          ``{train,val}/<wnid>/*.JPEG`` or flat        index in the shipped
                            ``val/ILSVRC2012_val_*.JPEG`` + Kaggle        ``imagenet1k`` list
                            ``LOC_val_solution.csv`` or the devkit        (sorted wnids)
:func:`imagenet21k`         ``imagenet21k_{train,val}/<wnid>/`` (21K-P)   -1, or index in
                            or ``<wnid>/<wnid>_N.JPEG`` (fall11 whole)    ``classes`` when given
:func:`cub200`              ``CUB_200_2011/images.txt`` ...               target - 1
:func:`fgvc_aircraft`       ``fgvc-aircraft-2013b/data/...``              sorted variant position
:func:`stanford_cars`       ``car_data/car_data/{train,test}/<name>/``    sorted folder position
:func:`imagenet_r`,         ``<wnid>/*``                                  index in ``imagenet1k``
:func:`imagenet_sketch`
:func:`imagenet_o`          ``<wnid>/*``                                  -1 (OOD)
:func:`imagenet_c`          ``<corruption>/<severity>/<wnid>/*``          index in ``imagenet1k``
:func:`openood_list`        ``path [label]`` relative to a data root      as listed
:func:`openimage_o`         ``openimage_o/<id>.jpg`` (shipped list)       -1 (OOD)
==========================  ===========================================  ==========================

``names`` are relative to ``source.root``, the release's own top folder, so the same images get
the same names (and fingerprint) whichever of the accepted roots was given. The wnid or class
folder of every image is kept as the group column ``class_id`` (a store index column).

Every folder is listed with one :func:`os.scandir` pass and no ``stat`` per file; a file named by
a release's list is checked against the scan of its folder, so a missing image is reported before
any extraction starts.

The package's modules, by dataset family: :mod:`.imagenet`, :mod:`.fine_grained`,
:mod:`.variants`, :mod:`.lists`, :mod:`.openimages`, with :mod:`._common` (what the readers
share) and :mod:`.registry`. Every name is importable from ``semshift.catalog.layouts``.
"""

from __future__ import annotations

from ._common import (  # noqa: F401
    _21K_RELEASES,
    _DEVKIT,
    _EXT_CASES,
    _VAL_IMAGE,
    MissingImagesError,
    _as_classlist,
    _check_files,
    _in1k_label_of,
    _locate,
    _read_lines,
    _root,
    _Rows,
    _scan,
    _shipped,
    _wnid_index,
    _wnid_tree,
    is_image_name,
)
from .fine_grained import (  # noqa: F401
    _cars_devkit,
    _cars_names_csv,
    _mat,
    cub200,
    fgvc_aircraft,
    stanford_cars,
)
from .imagenet import (  # noqa: F401
    _devkit_wnids,
    _read_devkit,
    _read_loc_solution,
    _strip_prefix,
    _val_ground_truth,
    imagenet1k,
    imagenet21k,
)
from .lists import (
    openood_list,
)
from .openimages import openimage_o
from .registry import (  # noqa: F401
    LAYOUTS,
    _adopt,
    check_sample,
    layout_parameters,
    list_layouts,
    open_layout,
    register_layout,
    sample_positions,
)
from .variants import (  # noqa: F401
    _in1k_variant,
    imagenet_c,
    imagenet_o,
    imagenet_r,
    imagenet_sketch,
)

__all__ = [
    "LAYOUTS",
    "MissingImagesError",
    "check_sample",
    "cub200",
    "fgvc_aircraft",
    "imagenet1k",
    "imagenet21k",
    "imagenet_c",
    "imagenet_o",
    "imagenet_r",
    "imagenet_sketch",
    "is_image_name",
    "layout_parameters",
    "list_layouts",
    "open_layout",
    "openimage_o",
    "openood_list",
    "register_layout",
    "sample_positions",
    "stanford_cars",
]
