"""Dataset layout readers against miniature trees with the releases' real names and structure.

The readers never open an image, so the image files are empty; what is asserted is the class
mapping each published convention defines.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semshift.catalog.layouts import (
    cub200,
    fgvc_aircraft,
    imagenet1k,
    imagenet21k,
    imagenet_c,
    imagenet_o,
    imagenet_r,
    imagenet_sketch,
    openood_list,
    stanford_cars,
)
from semshift.errors import InputError, UnknownNameError
from semshift.taxonomy import load_classlist

IN1K = load_classlist("imagenet1k")
IDX = {w: k for k, w in enumerate(IN1K.ids)}
# the first three leaf synsets of the real devkit meta.mat, by ILSVRC2012_ID (not sorted order)
DEVKIT_IDS = {1: "n02119789", 2: "n02100735", 3: "n02110185"}


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


# --- ImageNet-1K ------------------------------------------------------------------------------


def test_sorted_wnid_index_is_the_imagenet1k_convention():
    assert list(IN1K.ids) == sorted(IN1K.ids)
    assert IDX["n01440764"] == 0 and IDX["n02119789"] == 278 and IDX["n15075141"] == 999


def test_imagenet1k_class_folders_label_by_sorted_wnid(tmp_path):
    for wnid in ("n15075141", "n01440764", "n02119789"):
        touch(tmp_path / "train" / wnid / f"{wnid}_10026.JPEG")
        touch(tmp_path / "train" / wnid / f"{wnid}_3.JPEG")
    touch(tmp_path / "train" / "n01440764" / "notes.txt")  # not an image: ignored
    src = imagenet1k(tmp_path, "train")
    assert src.names[:2] == [
        "train/n01440764/n01440764_10026.JPEG",
        "train/n01440764/n01440764_3.JPEG",
    ]
    assert src.labels.tolist() == [0, 0, 278, 278, 999, 999]
    assert src.groups["class_id"] == ["n01440764"] * 2 + ["n02119789"] * 2 + ["n15075141"] * 2
    assert src.paths[0] == str((tmp_path / src.names[0]).resolve())
    assert src.classes is not None and src.classes.ids == IN1K.ids


def test_imagenet1k_class_folder_outside_the_1000_is_named(tmp_path):
    touch(tmp_path / "val" / "n00000001" / "a.JPEG")
    with pytest.raises(UnknownNameError, match=r"n00000001"):
        imagenet1k(tmp_path, "val")


def _flat_val(top: Path, wnids: list[str]) -> None:
    for i in range(1, len(wnids) + 1):
        touch(top / "val" / f"ILSVRC2012_val_{i:08d}.JPEG")


def _loc_csv(path: Path, wnids: list[str]) -> None:
    rows = ["ImageId,PredictionString"]
    # real rows: the wnid then a box, repeated per object; rows are not in image order
    for i, w in reversed(list(enumerate(wnids, 1))):
        rows.append(f"ILSVRC2012_val_{i:08d},{w} 12 7 200 180 {w} 1 2 3 4 ")
    path.write_text("\n".join(rows) + "\n")


def _devkit(top: Path, ids: list[int]) -> None:
    from scipy.io import savemat

    data = top / "ILSVRC2012_devkit_t12" / "data"
    data.mkdir(parents=True)
    (data / "ILSVRC2012_validation_ground_truth.txt").write_text("".join(f"{i}\n" for i in ids))
    # the real struct: leaves (num_children 0) with IDs 1..1000, then inner nodes from 1001;
    # "gloss" sits between "words" and "num_children" as in the release
    fields = ["ILSVRC2012_ID", "WNID", "words", "gloss", "num_children"]
    entries = [(k, w, "kit fox", "a fox", 0) for k, w in DEVKIT_IDS.items()]
    entries += [(1001, "n02075296", "carnivore", "a meat eater", 3)]
    syn = np.zeros((len(entries), 1), dtype=[(f, object) for f in fields])
    for r, (k, w, words, gloss, nc) in enumerate(entries):
        syn[r, 0] = (np.array([[k]], np.uint16), w, words, gloss, np.array([[nc]], np.uint8))
    savemat(str(data / "meta.mat"), {"synsets": syn})


def test_flat_val_kaggle_and_devkit_give_the_same_labels(tmp_path):
    ids = [2, 1, 3, 1]
    wnids = [DEVKIT_IDS[i] for i in ids]
    kaggle, devkit = tmp_path / "kaggle", tmp_path / "devkit"
    _flat_val(kaggle, wnids)
    _loc_csv(kaggle / "LOC_val_solution.csv", wnids)
    _flat_val(devkit, wnids)
    _devkit(devkit, ids)
    a, b = imagenet1k(kaggle), imagenet1k(devkit)
    assert a.names == b.names == [f"val/ILSVRC2012_val_{i:08d}.JPEG" for i in range(1, 5)]
    # devkit ID 1 -> n02119789 (kit fox) -> index 278 of the sorted wnids, not 0
    expect = [IDX[w] for w in wnids]
    assert expect[1] == 278
    assert a.labels.tolist() == b.labels.tolist() == expect
    assert a.groups["class_id"] == b.groups["class_id"] == wnids
    assert a.kind == "imagenet1k-val-flat"


def test_flat_val_kaggle_download_layout_and_choice_of_ground_truth(tmp_path):
    wnids = [DEVKIT_IDS[1], DEVKIT_IDS[3]]
    _flat_val(tmp_path / "ILSVRC" / "Data" / "CLS-LOC", wnids)
    _loc_csv(tmp_path / "LOC_val_solution.csv", wnids)
    src = imagenet1k(tmp_path, "val")
    assert src.names == ["val/ILSVRC2012_val_00000001.JPEG", "val/ILSVRC2012_val_00000002.JPEG"]
    assert src.labels.tolist() == [278, IDX["n02110185"]]
    # the devkit (a disagreeing one) is only read when asked for
    _devkit(tmp_path, [2, 2])
    assert imagenet1k(tmp_path, ground_truth="devkit").labels.tolist() == [IDX["n02100735"]] * 2
    assert imagenet1k(tmp_path).labels.tolist() == [278, IDX["n02110185"]]


def test_flat_val_errors_name_the_missing_piece(tmp_path):
    _flat_val(tmp_path, [DEVKIT_IDS[1]] * 3)
    with pytest.raises(InputError, match=r"LOC_val_solution\.csv or ILSVRC2012_devkit_t12"):
        imagenet1k(tmp_path)
    _loc_csv(tmp_path / "LOC_val_solution.csv", [DEVKIT_IDS[1]] * 2)
    with pytest.raises(InputError, match=r"ILSVRC2012_val_00000003\.JPEG has no label"):
        imagenet1k(tmp_path)
    with pytest.raises(InputError, match=r"imagenet1k: train not found"):
        imagenet1k(tmp_path, "train")
    with pytest.raises(InputError, match=r"does not exist"):
        imagenet1k(tmp_path / "nope")


def test_devkit_id_outside_the_leaves_is_refused(tmp_path):
    _flat_val(tmp_path, [DEVKIT_IDS[1]])
    _devkit(tmp_path, [1001])  # an inner node's ID
    with pytest.raises(InputError, match=r"line 1: '1001' is not an ILSVRC2012_ID of a leaf"):
        imagenet1k(tmp_path)


# --- ImageNet-21K ---------------------------------------------------------------------------


WINTER = load_classlist("imagenet21k-p-winter21").ids
FALL_ONLY = sorted(set(load_classlist("imagenet21k-p").ids) - set(WINTER))


def test_imagenet21k_p_tree_unknown_labels_and_class_list(tmp_path):
    w1, w2 = sorted(WINTER[:2])
    for w in (w1, w2):
        touch(tmp_path / "imagenet21k_val" / w / f"{w}_5.JPEG")
        touch(tmp_path / "imagenet21k_train" / w / f"{w}_9.JPEG")
    src = imagenet21k(tmp_path, "winter21", "val")
    assert src.names == [f"imagenet21k_val/{w1}/{w1}_5.JPEG", f"imagenet21k_val/{w2}/{w2}_5.JPEG"]
    assert src.labels.tolist() == [-1, -1] and src.classes is None
    assert src.groups["class_id"] == [w1, w2]
    lst = tmp_path / "known.txt"
    lst.write_text(f"n00000001\n{w2}\n")
    assert imagenet21k(tmp_path, split="train", classes=lst).labels.tolist() == [-1, 1]
    assert imagenet21k(tmp_path, wnids=[w2]).names == [f"imagenet21k_val/{w2}/{w2}_5.JPEG"]


def test_imagenet21k_fall11_tree_read_as_winter21_is_refused(tmp_path):
    w = FALL_ONLY[0]
    touch(tmp_path / "imagenet21k_val" / w / f"{w}_1.JPEG")
    with pytest.raises(UnknownNameError, match=r"is not a class of ImageNet-21K-P winter21"):
        imagenet21k(tmp_path, "winter21")
    assert imagenet21k(tmp_path, "fall11").groups["class_id"] == [w]


def test_imagenet21k_whole_release_with_a_file_selection(tmp_path):
    for name in ("n02925009/n02925009_2846.JPEG", "n02925009/n02925009_759.JPEG",
                 "n00005787/n00005787_1.JPEG", "n00005787/n00005787_2.JPEG"):  # fmt: skip
        touch(tmp_path / name)
    pick = ["n02925009/n02925009_759.JPEG", "./n00005787/n00005787_2.JPEG"]
    src = imagenet21k(tmp_path, "fall11", files=pick)
    assert src.names == ["n00005787/n00005787_2.JPEG", "n02925009/n02925009_759.JPEG"]
    assert src.labels.tolist() == [-1, -1]
    assert src.groups["class_id"] == ["n00005787", "n02925009"]
    assert len(imagenet21k(tmp_path, "fall11")) == 4
    gone = [*pick, "n02925009/n02925009_1.JPEG"]
    with pytest.raises(InputError, match=r"1 of 3 listed images are missing.*n02925009_1\.JPEG"):
        imagenet21k(tmp_path, "fall11", files=gone)
    src = imagenet21k(tmp_path, "fall11", files=gone, missing="skip")
    assert len(src) == 2 and src.skipped == [
        ("n02925009/n02925009_1.JPEG", "listed image not found")
    ]
    with pytest.raises(InputError, match=r"twice"):
        imagenet21k(tmp_path, "fall11", files=[pick[0], pick[0]])


def test_imagenet21k_unrecognised_root(tmp_path):
    touch(tmp_path / "images" / "a.JPEG")
    with pytest.raises(InputError, match=r"neither imagenet21k_val/<wnid>/"):
        imagenet21k(tmp_path)


# --- CUB-200-2011 ---------------------------------------------------------------------------


def _cub(parent: Path) -> Path:
    top = parent / "CUB_200_2011"
    top.mkdir(parents=True)
    names = [f"{k:03d}.Class_{k}" for k in range(1, 201)]
    names[0], names[16] = "001.Black_footed_Albatross", "017.Cardinal"
    (top / "classes.txt").write_text("".join(f"{k} {n}\n" for k, n in enumerate(names, 1)))
    imgs = [
        ("001.Black_footed_Albatross/Black_Footed_Albatross_0046_18.jpg", 1, 0),
        ("001.Black_footed_Albatross/Black_Footed_Albatross_0009_34.jpg", 1, 1),
        ("017.Cardinal/Cardinal_0001_17057.jpg", 17, 1),
        ("017.Cardinal/Cardinal_0002_19007.jpg", 17, 0),
        ("200.Class_200/Common_Yellowthroat_0003_190521.jpg", 200, 0),
    ]
    (top / "images.txt").write_text("".join(f"{i} {p}\n" for i, (p, _, _) in enumerate(imgs, 1)))
    (top / "image_class_labels.txt").write_text(
        "".join(f"{i} {t}\n" for i, (_, t, _) in enumerate(imgs, 1))
    )
    (top / "train_test_split.txt").write_text(
        "".join(f"{i} {s}\n" for i, (_, _, s) in enumerate(imgs, 1))
    )
    for p, _, _ in imgs:
        touch(top / "images" / p)
    return top


def test_cub_label_is_target_minus_one(tmp_path):
    top = _cub(tmp_path)
    src = cub200(tmp_path, "all")
    assert src.labels.tolist() == [0, 0, 16, 16, 199]
    assert src.groups["class_id"][2] == "017.Cardinal"
    assert src.names[2] == "images/017.Cardinal/Cardinal_0001_17057.jpg"
    assert src.classes is not None and src.classes.ids[16] == "017.Cardinal"
    assert src.classes.names is not None and src.classes.names[16] == "Cardinal"
    train, test = cub200(top, "train"), cub200(top, "test")
    assert train.labels.tolist() == [0, 16] and test.labels.tolist() == [0, 16, 199]
    assert test.names == cub200(tmp_path, "test").names  # same names from either root
    assert test.root == top


def test_cub_inconsistent_files_and_missing_images(tmp_path):
    top = _cub(tmp_path)
    (top / "images" / "017.Cardinal" / "Cardinal_0002_19007.jpg").unlink()
    with pytest.raises(InputError, match=r"1 of 3 listed images are missing.*Cardinal_0002"):
        cub200(tmp_path, "test")
    assert cub200(tmp_path, "test", missing="skip").labels.tolist() == [0, 199]
    labels = top / "image_class_labels.txt"
    labels.write_text(labels.read_text().replace("3 17", "3 2"))
    with pytest.raises(InputError, match=r"has target 2 but classes\.txt names class 2"):
        cub200(tmp_path, "train")
    (top / "train_test_split.txt").unlink()
    with pytest.raises(InputError, match=r"train_test_split\.txt not found"):
        cub200(tmp_path, "train")
    with pytest.raises(InputError, match=r"images.txt not found \(looked for"):
        cub200(tmp_path / "CUB_200_2011" / "images")


# --- FGVC-Aircraft --------------------------------------------------------------------------

# in release order, which is not Python's sorted order
VARIANTS = ["707-320", "Cessna 172", "A300B4", "F-16A/B", "DHC-1"]
SORTED = ["707-320", "A300B4", "Cessna 172", "DHC-1", "F-16A/B"]


def _aircraft(parent: Path) -> Path:
    data = parent / "fgvc-aircraft-2013b" / "data"
    data.mkdir(parents=True)
    (data / "variants.txt").write_text("\n".join(VARIANTS) + "\n")
    for s, split in enumerate(("train", "val", "test")):
        lines = [f"{1000000 + 10 * k + s} {v}" for k, v in enumerate(VARIANTS)]
        (data / f"images_variant_{split}.txt").write_text("\n".join(lines) + "\n")
        for line in lines:
            touch(data / "images" / f"{line.split()[0]}.jpg")
    return data


def test_aircraft_label_is_the_sorted_variant_position(tmp_path):
    _aircraft(tmp_path)
    src = fgvc_aircraft(tmp_path, "test")
    assert src.groups["class_id"] == VARIANTS  # file order kept
    assert src.labels.tolist() == [SORTED.index(v) for v in VARIANTS] == [0, 2, 1, 4, 3]
    assert src.names[1] == "data/images/1000012.jpg"
    assert src.classes is not None and list(src.classes.ids) == SORTED
    # SSB's loader: np.unique over the split's names (with their line ends) gives the same order
    assert list(np.unique([v + "\n" for v in VARIANTS])) == [v + "\n" for v in SORTED]
    train = fgvc_aircraft(tmp_path / "fgvc-aircraft-2013b", "train")
    assert dict(zip(train.groups["class_id"], train.labels.tolist(), strict=True)) == dict(
        zip(src.groups["class_id"], src.labels.tolist(), strict=True)
    )


def test_aircraft_split_missing_a_variant_is_refused(tmp_path):
    data = _aircraft(tmp_path)
    f = data / "images_variant_val.txt"
    f.write_text("".join(ln + "\n" for ln in f.read_text().splitlines() if "A300B4" not in ln))
    with pytest.raises(InputError, match=r"lacks 1 of the 5 variants \('A300B4'"):
        fgvc_aircraft(tmp_path, "val")
    with pytest.raises(InputError, match=r"images_variant_trainval\.txt not found"):
        fgvc_aircraft(tmp_path, "trainval")


# --- Stanford Cars --------------------------------------------------------------------------

#: devkit (cars_meta.mat / names.csv) order: not sorted; one name holds a "/"
CARS = ["smart fortwo Convertible 2012", "Acura RL Sedan 2012", "AM General Hummer SUV 2000",
        "Ram C/V Cargo Van Minivan 2012"]  # fmt: skip
FOLDERS = [c.replace("/", "-") for c in CARS]


def _cars(parent: Path, names_csv: bool = True) -> Path:
    """The Kaggle folder release SSB uses: car_data/car_data/{train,test}/<class>/, names.csv."""
    top = parent / "car_data" / "car_data"
    for split in ("train", "test"):
        for k, c in enumerate(FOLDERS):
            touch(top / split / c / f"0{k}123.jpg")
    if names_csv:
        (parent / "names.csv").write_text("".join(f"{c}\n" for c in CARS))
    return top


def test_cars_label_is_the_devkit_order_of_names_csv(tmp_path):
    """SSB's scars indices follow cars_meta.mat (= names.csv), not ImageFolder's sorted order."""
    top = _cars(tmp_path)
    src = stanford_cars(tmp_path, "test")
    assert src.classes is not None and list(src.classes.ids) == FOLDERS
    # each image's label is the position of its folder's class in names.csv
    assert src.labels.tolist() == [FOLDERS.index(c) for c in src.groups["class_id"]]
    assert sorted(src.groups["class_id"]) == src.groups["class_id"]  # read in folder order
    assert src.labels.tolist() == [2, 1, 3, 0]
    # the same from car_data/car_data/ itself (names.csv found two levels up)
    assert stanford_cars(top, "test").labels.tolist() == src.labels.tolist()


def test_cars_sorted_order_is_imagefolder_and_differs(tmp_path):
    top = _cars(tmp_path, names_csv=False)
    with pytest.raises(InputError, match=r"names.csv .*not found.*order='sorted'"):
        stanford_cars(tmp_path, "test")
    src = stanford_cars(tmp_path, "test", order="sorted")
    assert src.classes is not None
    ids = list(src.classes.ids)
    assert ids == sorted(FOLDERS) and ids[0] == "AM General Hummer SUV 2000"
    from torchvision.datasets import ImageFolder

    ref = ImageFolder(str(top / "test"), loader=lambda p: p)
    assert ref.class_to_idx == {c: k for k, c in enumerate(ids)}
    assert [t for _, t in ref.samples] == src.labels.tolist()
    (tmp_path / "names.csv").write_text("".join(f"{c}\n" for c in CARS))
    devkit = stanford_cars(tmp_path, "test").labels.tolist()
    assert devkit != src.labels.tolist()  # what SSB's DATA.md warns about


def test_cars_folder_not_in_names_csv(tmp_path):
    top = _cars(tmp_path)
    for split in ("train", "test"):
        touch(top / split / "Audi TT Coupe 2012" / "1.jpg")
    with pytest.raises(InputError, match=r"Audi TT Coupe 2012 is not a class of .*names.csv"):
        stanford_cars(tmp_path, "test")


def test_cars_train_and_test_must_hold_the_same_classes(tmp_path):
    top = _cars(tmp_path)
    touch(top / "train" / "Audi TT Coupe 2012" / "1.jpg")
    with pytest.raises(InputError, match=r"different class folders.*'Audi TT Coupe 2012'"):
        stanford_cars(tmp_path, "test")


def _cars_devkit(parent: Path) -> Path:
    """The original release as torchvision reads it: stanford_cars/{cars_train, cars_test,
    devkit/cars_meta.mat, devkit/cars_train_annos.mat, cars_test_annos_withlabels.mat}."""
    from scipy.io import savemat

    top = parent / "stanford_cars"
    (top / "devkit").mkdir(parents=True)
    savemat(top / "devkit" / "cars_meta.mat",
            {"class_names": np.array([CARS], dtype=object)})  # fmt: skip
    dtype = [("bbox_x1", "O"), ("bbox_y1", "O"), ("bbox_x2", "O"), ("bbox_y2", "O"),
             ("class", "O"), ("fname", "O")]  # fmt: skip
    for split, annos in (("train", top / "devkit" / "cars_train_annos.mat"),
                         ("test", top / "cars_test_annos_withlabels.mat")):  # fmt: skip
        rows = []
        for i, cls in enumerate([3, 1, 4, 2, 3]):  # 1-based devkit classes
            fname = f"{i + 1:05d}.jpg"
            touch(top / f"cars_{split}" / fname)
            rows.append((1, 1, 5, 5, np.uint8(cls), fname))
        savemat(annos, {"annotations": np.array([rows], dtype=dtype)})
    return top


def test_cars_original_devkit_release(tmp_path):
    top = _cars_devkit(tmp_path)
    for root in (tmp_path, top):
        src = stanford_cars(root, "test")
        assert src.labels.tolist() == [2, 0, 3, 1, 2]  # class - 1
        assert src.names[0] == "cars_test/00001.jpg"
        assert src.groups["class_id"][0] == "AM General Hummer SUV 2000"
        assert src.classes is not None and list(src.classes.ids) == CARS
    assert len(stanford_cars(tmp_path, "train")) == 5
    (top / "cars_test" / "00004.jpg").unlink()
    with pytest.raises(InputError, match=r"1 of 5 listed images are missing.*cars_test/00004.jpg"):
        stanford_cars(tmp_path, "test")
    with pytest.raises(InputError, match="order='sorted' applies to the folder release only"):
        stanford_cars(tmp_path, "train", order="sorted")


# --- ImageNet-R / -Sketch / -O / -C ---------------------------------------------------------


def test_imagenet_r_and_sketch_map_to_imagenet1k(tmp_path):
    for w in ("n01443537", "n01833805"):  # goldfish, hummingbird: two of ImageNet-R's 200
        touch(tmp_path / "imagenet-r" / w / "art_0.jpg")
        touch(tmp_path / "sketch" / w / "sketch_1.JPEG")
    touch(tmp_path / "imagenet-r" / "README.txt")
    r = imagenet_r(tmp_path)
    assert r.labels.tolist() == [1, IDX["n01833805"]] and r.names[0] == "n01443537/art_0.jpg"
    assert imagenet_sketch(tmp_path).labels.tolist() == [1, IDX["n01833805"]]
    touch(tmp_path / "imagenet-r" / "n99999999" / "x.jpg")
    with pytest.raises(UnknownNameError, match=r"n99999999 is not an ImageNet-1K wnid"):
        imagenet_r(tmp_path / "imagenet-r")


def test_imagenet_o_is_ood_with_its_wnid_kept(tmp_path):
    for w in ("n01443537", "n12267677"):
        touch(tmp_path / "imagenet-o" / w / "a.jpg")
    src = imagenet_o(tmp_path)
    assert src.labels.tolist() == [-1, -1]
    assert src.groups["class_id"] == ["n01443537", "n12267677"]


def test_imagenet_c_groups_and_selection(tmp_path):
    for corr in ("gaussian_noise", "fog"):
        for sev in (1, 5):
            for w in ("n01440764", "n15075141"):
                touch(tmp_path / corr / str(sev) / w / "ILSVRC2012_val_00000001.JPEG")
    src = imagenet_c(tmp_path)
    assert len(src) == 8
    assert src.groups["corruption"] == ["fog"] * 4 + ["gaussian_noise"] * 4
    assert src.groups["severity"] == [1, 1, 5, 5] * 2
    assert src.labels.tolist() == [0, 999] * 4
    one = imagenet_c(tmp_path, "fog", 5)
    assert one.names == ["fog/5/n01440764/ILSVRC2012_val_00000001.JPEG",
                         "fog/5/n15075141/ILSVRC2012_val_00000001.JPEG"]  # fmt: skip
    with pytest.raises(InputError, match=r"motion_blur not found \(present: fog, gaussian_noise"):
        imagenet_c(tmp_path, "motion_blur")
    with pytest.raises(InputError, match=r"severity folder .*fog/3 not found"):
        imagenet_c(tmp_path, "fog", 3)


# --- OpenOOD lists --------------------------------------------------------------------------


def test_openood_list_paths_are_relative_to_the_data_root(tmp_path):
    root = tmp_path / "images_largescale"
    touch(root / "imagenet_1k" / "val" / "ILSVRC2012_val_00000293.JPEG")
    touch(root / "ssb_hard" / "n00470682" / "n00470682_11401.JPEG")
    lst = tmp_path / "lists" / "test.txt"
    lst.parent.mkdir()
    lst.write_text(
        "imagenet_1k/val/ILSVRC2012_val_00000293.JPEG 17\n"
        "./ssb_hard/n00470682/n00470682_11401.JPEG\n"
    )
    src = openood_list(lst, root, classes="imagenet1k")
    assert src.names == [
        "imagenet_1k/val/ILSVRC2012_val_00000293.JPEG",
        "ssb_hard/n00470682/n00470682_11401.JPEG",
    ]
    assert src.labels.tolist() == [17, -1]
    assert src.paths[1] == str((root / src.names[1]).resolve())
    assert openood_list(lst, root, ood=True).labels.tolist() == [-1, -1]
    lst.write_text("imagenet_1k/val/ILSVRC2012_val_00000293.JPEG 1000\n")
    with pytest.raises(InputError, match=r"test.txt, line 1: label 1000 is not in \[-1, 1000\)"):
        openood_list(lst, root, classes="imagenet1k")
    lst.write_text("imagenet_1k/val/ILSVRC2012_val_00000001.JPEG 0\n")
    with pytest.raises(InputError, match=r"1 of 1 listed images are missing"):
        openood_list(lst, root)
