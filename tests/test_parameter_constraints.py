"""Every estimator checks each parameter alone through scikit-learn's constraints.

``check_param_validation`` is scikit-learn's own check: every parameter has a
constraint, and a value of a wrong type or outside the allowed range raises
``InvalidParameterError`` naming the parameter from ``fit`` (and ``partial_fit``,
``fit_transform``, ``fit_predict``) before any work. The checks between
parameters keep their own messages (tests in the estimators' test files).
"""

from __future__ import annotations

import pytest
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import check_param_validation

from kernelscale import (
    DistributedKernelPCA,
    DistributedSpectralClustering,
    FederatedKernelKMeans,
    StreamingKernelPCA,
    VerticalKernelPCA,
)

ESTIMATORS = [
    DistributedKernelPCA(n_components=2, n_landmarks=10, n_workers=2, random_state=0),
    VerticalKernelPCA(n_components=2),
    StreamingKernelPCA(n_components=2, n_random_features=20, sketch_size=8, random_state=0),
    FederatedKernelKMeans(n_clusters=2, n_random_features=6, max_iter=2, coreset_size=10,
                          n_workers=2, random_state=0),
    DistributedSpectralClustering(n_clusters=2, n_landmarks=10, n_random_features=50,
                                  coreset_size=10, n_workers=2, random_state=0),
]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_scikit_learns_parameter_validation(estimator):
    check_param_validation(type(estimator).__name__, estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_a_bad_parameter_is_named_before_the_data_is_read(estimator):
    # X=None cannot be fitted: the parameter's error must come first.
    name = type(estimator).__name__
    with pytest.raises(InvalidParameterError, match=f"The 'verbose' parameter of {name} must "
                                                    r"be .* Got -1 instead."):
        clone(estimator).set_params(verbose=-1).fit(None)
