"""Training images: an image source with seeded, per-sample augmentation.

Every random draw of an image's augmentation comes from a generator seeded by
``(seed, epoch, sample index)``, so an epoch's batches are the same whichever process or
DataLoader worker builds them, and a run resumed at an epoch boundary sees exactly the images
an uninterrupted run would have seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from semshift.features.data import ImageSource, load_image, parse_preset

__all__ = ["TrainImages", "derived_seed", "epoch_order"]


def derived_seed(*keys: int) -> int:
    """A 63-bit seed that depends on every key (NumPy's ``SeedSequence`` hashing).

    >>> derived_seed(0, 1) == derived_seed(0, 1), derived_seed(0, 1) == derived_seed(1, 0)
    (True, False)
    """
    state = np.random.SeedSequence([int(k) for k in keys]).generate_state(2, np.uint32)
    return int(state[0]) << 31 ^ int(state[1])


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The shuffled sample order of an epoch (a permutation of ``range(n)``).

    >>> sorted(epoch_order(5, 0, 3)) == list(range(5))
    True
    """
    gen = torch.Generator().manual_seed(derived_seed(seed, epoch, 1))
    return [int(i) for i in torch.randperm(n, generator=gen)]


class TrainImages:
    """``ds[i] -> (image (3, C, C) float32, label)`` with the recipe's augmentation.

    Steps: decode, resize (bilinear) to the preset's resize, random crop of the preset's crop
    with ``padding`` zero pixels, random horizontal flip, RandAugment(N, M), ``ToTensor``,
    normalise by ``mean`` / ``std``. With ``augment=False`` the images are preprocessed exactly
    as extraction does (resize, center crop, normalise).

    Parameters
    ----------
    source : ImageSource
    preset : str
        ``resize<R>-crop<C>`` or a preset name.
    mean, std : sequence of float
    seed : int
    augment : bool
    randaugment : (int, int)
        N and M; N = 0 skips RandAugment.
    flip : bool
    padding : int
    """

    def __init__(
        self,
        source: ImageSource,
        preset: str,
        mean: Sequence[float],
        std: Sequence[float],
        *,
        seed: int = 0,
        augment: bool = True,
        randaugment: tuple[int, int] = (2, 30),
        flip: bool = True,
        padding: int = 4,
    ) -> None:
        from torchvision import transforms as T

        resize, crop = parse_preset(preset)
        self.source, self.seed, self.epoch = source, int(seed), 0
        self.labels = np.asarray(source.labels, np.int64)
        steps: list[Any] = [
            T.Resize(resize, interpolation=T.InterpolationMode.BILINEAR, antialias=True)
        ]
        if augment:
            steps.append(T.RandomCrop(crop, padding=padding))
            if flip:
                steps.append(T.RandomHorizontalFlip())
            n_ops, magnitude = randaugment
            if n_ops > 0:
                steps.append(T.RandAugment(n_ops, magnitude, num_magnitude_bins=31))
        else:
            steps.append(T.CenterCrop(crop))
        steps += [T.ToTensor(), T.Normalize(list(mean), list(std))]
        self.transform = T.Compose(steps)
        self.augment = augment

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose augmentation draws the next items use."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img = load_image(self.source.paths[i])  # ImageError (an InputError) names the file
        if not self.augment:
            return self.transform(img), int(self.labels[i])
        with torch.random.fork_rng(devices=[]):
            # the CPU generator only: torch.manual_seed would also queue a seed for every
            # accelerator, recording a stack trace per call (a third of a small epoch's time)
            torch.default_generator.manual_seed(derived_seed(self.seed, self.epoch, int(i), 2))
            return self.transform(img), int(self.labels[i])
