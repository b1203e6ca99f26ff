"""A global model's export as a job runs it: the portable file is evaluated in another thread while the native one
is written, and the files are those :func:`export_global_model` writes."""

import threading

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from workers.jobs.export import export_global_model, export_global_model_while
from workers.learners.aligned import AlignedClassifier
from workers.modelio.base import ModelFormat
from workers.modelio.native import predict_probabilities

FEATURES = np.random.default_rng(0).normal(size=(120, 3)).astype(np.float32)
LABELS = (FEATURES[:, 0] > 0).astype(np.int64) + (FEATURES[:, 1] > 0.5)


def final_model():
    forest = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)
    return AlignedClassifier(forest, n_classes=3).fit(FEATURES, LABELS)


def test_the_portable_file_is_evaluated_in_another_thread_while_the_native_file_is_written(
    monkeypatch,
):
    from workers.modelio import artifact

    native_threads, evaluated = [], []
    writer = artifact._NATIVE_WRITERS["skops"]

    def recording_writer(estimator):
        native_threads.append(threading.current_thread().name)
        return writer(estimator)

    monkeypatch.setitem(artifact._NATIVE_WRITERS, "skops", recording_writer)

    def evaluate(portable):
        evaluated.append((portable.format, threading.current_thread().name))
        return predict_probabilities(portable.data, ModelFormat.ONNX, FEATURES, n_classes=3)

    model = final_model()
    files, probabilities = export_global_model_while(
        model, n_features=3, n_classes=3, evaluate=evaluate
    )
    assert [(file.role, file.format, file.filename) for file in files] == [
        ("native", "skops", "model.skops"),
        ("portable", "onnx", "model.onnx"),
    ]
    assert len(evaluated) == 1 and evaluated[0][0] == "onnx"
    assert evaluated[0][1].startswith("portable-evaluation")
    assert native_threads == [threading.current_thread().name]
    assert np.abs(probabilities - model.predict_proba(FEATURES)).max() < 1e-6
    assert files[1].data == export_global_model(model, n_features=3, n_classes=3)[1].data


def test_an_evaluation_that_fails_is_raised_once_the_native_file_is_written():
    def failing(portable):
        raise RuntimeError("the sandbox could not run it")

    with pytest.raises(RuntimeError, match="the sandbox could not run it"):
        export_global_model_while(final_model(), n_features=3, n_classes=3, evaluate=failing)
    assert not [
        thread for thread in threading.enumerate() if thread.name.startswith("portable-evaluation")
    ]


def test_a_final_model_missing_a_class_is_refused_before_anything_runs():
    calls = []
    model = AlignedClassifier(RandomForestClassifier(n_estimators=2), n_classes=3).fit(
        FEATURES, (FEATURES[:, 0] > 0).astype(np.int64)
    )
    with pytest.raises(ValueError, match=r"classes \[0, 1\] only, not all 3"):
        export_global_model_while(model, n_features=3, n_classes=3, evaluate=calls.append)
    assert calls == []
