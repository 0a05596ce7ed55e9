"""semshift.training: methods that train models (here, not in the detectors' post-hoc fits).

Parts:

- :mod:`~semshift.training.zsl`: the zero-shot methods of Xian et al.'s proposed-splits
  evaluation (CONSE, LATEM, ALE, DEVISE, SJE, ESZSL, SYNC, SAE), the field's data format
  (``res101.mat`` / ``att_splits.mat``) and hyperparameter selection on the split's val classes.

Modules of image-model training (``semshift train``; they need the ``vision`` extra and hold
this layer's only device code):

- :mod:`~semshift.training.methods`: the training-method registry (ce, logitnorm, oe, arpl,
  arpl_cs).
- :mod:`~semshift.training.gan`: ARPL+CS's small generator and discriminator (DCGAN, 32 x 32).
- :mod:`~semshift.training.distributed`: data-parallel runs (``--nproc``, ``torchrun``; DDP,
  gloo on the CPU) and BatchNorm over the global batch.
- :mod:`~semshift.training.recipe`: the SSB recipe (:class:`Recipe`) and :class:`TrainConfig`.
- :mod:`~semshift.training.loop`: :func:`train`, one device or data-parallel, resumable.
- :mod:`~semshift.training.images`: training images with seeded per-sample augmentation.
- :mod:`~semshift.training.checkpoint`: safetensors checkpoints with their JSON.
- :mod:`~semshift.training.outliers`: Outlier Exposure's outlier set checked against the splits.

This layer may import ``taxonomy``, ``metrics``, ``detectors``, ``features`` and ``splits``;
the protocols, report and run layers import it, never the other way round.
"""
