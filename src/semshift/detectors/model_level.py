"""Model-level detectors (odin, rankfeat), declared in the detector registry.

They need the network and the images, so they are computed during feature extraction
(:mod:`semshift.features.model_detectors`, ``semshift extract --score odin``) and stored as
score columns named after them. Declared here, without torch: the registry name, the
hyperparameters with their paper defaults and constraints, and what the computation needs
from the model, so a configuration naming them is checked like any other detector
(:func:`semshift.detectors.check_params`) and their names are listed by
``list_detectors(level="model")``. ``fit`` and ``score`` refuse: there is nothing to fit on
stored arrays.

References
----------
.. [1] S. Liang, Y. Li and R. Srikant, "Enhancing the Reliability of Out-of-distribution Image
   Detection in Neural Networks", ICLR 2018.
.. [2] Y. Song, N. Sebe and W. Wang, "RankFeat: Rank-1 Feature Removal for
   Out-of-distribution Detection", NeurIPS 2022.
"""

from __future__ import annotations

from numbers import Real
from typing import Any, ClassVar, NoReturn

from semshift.errors import InputError

from ._base import Detector
from ._params import Interval, ParamConstraints
from ._registry import register_detector

__all__ = ["ModelLevelDetector", "Odin", "RankFeat"]


class ModelLevelDetector(Detector):
    """Declaration of a detector computed during feature extraction (``level = "model"``).

    Attributes
    ----------
    needs_grad : bool
        The computation back-propagates to the input images.
    needs_feature_map : bool
        The computation needs the last feature map of the network (CNN adapters only).
    """

    level = "model"
    needs_grad: ClassVar[bool] = False
    needs_feature_map: ClassVar[bool] = False

    def _refuse(self, what: str) -> NoReturn:
        raise InputError(
            f"{self.name}.{what}: {self.name} is a model-level detector, computed during feature "
            f"extraction with the network and the images (semshift extract --score {self.name}, "
            f"or a run config with 'images' sets); read its scores from the store's "
            f"{self.name!r} score column"
        )

    def fit(self, **inputs: Any) -> NoReturn:
        """Refuse: a model-level detector runs during feature extraction.

        Raises
        ------
        InputError
            Always.
        """
        self._refuse("fit")

    def score(self, **inputs: Any) -> NoReturn:
        """Refuse: a model-level detector runs during feature extraction.

        Raises
        ------
        InputError
            Always.
        """
        self._refuse("score")


@register_detector
class Odin(ModelLevelDetector):
    """ODIN: temperature-scaled maximum softmax of an input perturbed toward its prediction.

    ``x' = x - epsilon sign(grad_x [-log softmax(f(x) / T)_yhat])``; score
    ``max_c softmax(f(x') / T)_c``; higher = more in-distribution. Computed by
    :class:`semshift.features.model_detectors.Odin`.

    Parameters
    ----------
    temperature : float, default 1000
        T, > 0 (the paper's and OpenOOD's ImageNet setting).
    epsilon : float, default 0.0014
        Perturbation size in [0, 1] pixel units, >= 0 (0 gives the temperature-scaled MSP).

    References
    ----------
    .. [1] S. Liang, Y. Li and R. Srikant, "Enhancing the Reliability of Out-of-distribution
       Image Detection in Neural Networks", ICLR 2018.
    """

    name = "odin"
    needs_grad = True
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "epsilon": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(self, *, temperature: float = 1000.0, epsilon: float = 0.0014) -> None:
        self.temperature = temperature
        self.epsilon = epsilon


@register_detector
class RankFeat(ModelLevelDetector):
    """RankFeat: Energy of the logits after removing the rank-1 part of the last feature map.

    ``s1 u1 v1^T`` of each sample's (C, HW) feature map is subtracted, the rest pooled and
    passed through the head; score ``logsumexp(logits)``; higher = more in-distribution.
    Computed by :class:`semshift.features.model_detectors.RankFeat`.

    References
    ----------
    .. [1] Y. Song, N. Sebe and W. Wang, "RankFeat: Rank-1 Feature Removal for
       Out-of-distribution Detection", NeurIPS 2022.
    """

    name = "rankfeat"
    needs_feature_map = True

    def __init__(self) -> None:
        pass
