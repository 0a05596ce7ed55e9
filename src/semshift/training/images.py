"""Training images: an image source with seeded, per-sample augmentation.

Every random draw of an image's augmentation comes from a generator seeded by
``(seed, epoch, sample index)``, so an epoch's batches are the same whichever process or
DataLoader worker builds them, and a run resumed at an epoch boundary sees exactly the images
an uninterrupted run would have seen.

Decoding and the resize (no random draw in either) are done once per image while a memory
budget allows (``cache_bytes``): the resized images are kept and every later epoch starts from
them, so the epochs after the first decode nothing (the same tensors, bit for bit, as decoding
again). An item may be asked for as ``ds[(epoch, i)]``, which draws that epoch's augmentation
whatever :meth:`TrainImages.set_epoch` said: a DataLoader whose workers live for the whole run
(and keep their cache) is then fed every epoch by its batch sampler (:class:`EpochBatches`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from semshift.features.data import ImageSource, load_image, parse_preset

__all__ = ["DEFAULT_CACHE_BYTES", "EpochBatches", "TrainImages", "derived_seed", "epoch_order"]

#: Memory for decoded, resized training images (per dataset; split between DataLoader workers).
DEFAULT_CACHE_BYTES = 1 << 30


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
    cache_bytes : int
        Memory for decoded, resized images (an RGB image counts ``4 * width * height`` bytes, as
        PIL holds it); the images past the budget are decoded on every use. 0 keeps none.
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
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        from torchvision import transforms as T

        resize, crop = parse_preset(preset)
        self.source, self.seed, self.epoch = source, int(seed), 0
        self.labels = np.asarray(source.labels, np.int64)
        self.resize = T.Resize(resize, interpolation=T.InterpolationMode.BILINEAR, antialias=True)
        self.cache_bytes, self._cached = int(cache_bytes), 0
        self._cache: dict[int, Any] = {}
        steps: list[Any] = []
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

    @property
    def cached_bytes(self) -> int:
        """Bytes of the decoded images kept (``4 * width * height`` each)."""
        return self._cached

    @property
    def cached(self) -> list[int]:
        """Indices of the images kept, in the order they were first decoded."""
        return list(self._cache)

    def set_cache_bytes(self, cache_bytes: int) -> None:
        """Change the budget; images already kept beyond it are dropped."""
        self.cache_bytes = int(cache_bytes)
        if self._cached > self.cache_bytes:
            self._cache, self._cached = {}, 0

    def _resized(self, i: int) -> Any:
        """Image ``i`` decoded and resized: from the cache, or decoded (and kept if it fits)."""
        img = self._cache.get(i)
        if img is None:
            # ImageError (an InputError) names the file
            img = self.resize(load_image(self.source.paths[i]))
            size = 4 * img.width * img.height
            if self._cached + size <= self.cache_bytes:
                self._cache[i] = img  # torchvision's PIL transforms return new images
                self._cached += size
        return img

    def __getitem__(self, key: int | tuple[int, int]) -> tuple[torch.Tensor, int]:
        epoch, i = (int(key[0]), int(key[1])) if isinstance(key, tuple) else (self.epoch, int(key))
        img = self._resized(i)
        if not self.augment:
            return self.transform(img), int(self.labels[i])
        with torch.random.fork_rng(devices=[]):
            # the CPU generator only: torch.manual_seed would also queue a seed for every
            # accelerator, recording a stack trace per call (a third of a small epoch's time)
            torch.default_generator.manual_seed(derived_seed(self.seed, epoch, i, 2))
            return self.transform(img), int(self.labels[i])


class EpochBatches:
    """A batch sampler over epochs ``start`` to ``stop - 1``: each epoch's batches (lists of
    ``(epoch, index)`` keys) one after the other, made when the loader reaches them.

    ``batches(epoch)`` gives an epoch's batches of sample indices, ``per_epoch`` of them.

    >>> eb = EpochBatches(lambda e: [[e, 1], [2]], 3, 5, per_epoch=2)
    >>> len(eb), list(eb)
    (4, [[(3, 3), (3, 1)], [(3, 2)], [(4, 4), (4, 1)], [(4, 2)]])
    """

    def __init__(
        self, batches: Callable[[int], list[list[int]]], start: int, stop: int, *, per_epoch: int
    ) -> None:
        self.batches, self.start, self.stop = batches, int(start), int(stop)
        self.per_epoch = int(per_epoch)

    def __len__(self) -> int:
        return max(0, self.stop - self.start) * self.per_epoch

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        for epoch in range(self.start, self.stop):
            for batch in self.batches(epoch):
                yield [(epoch, int(i)) for i in batch]
