"""The validation service, in this process: sandboxed prediction on public rows decides valid or rejected."""

import numpy as np

from market.sandbox import stored_models_predict
from market.storage import arrays_from_npz, artifact_read
from market.submissions.models import Submission, SubmissionStatus
from tests.conftest import native_probabilities
from tests.market.submissions.helpers import created_through_service
from workers.submission_validation import submission_validate


def test_submission_validate_marks_real_models_valid(federation_with_data, silo_user, model_files):
    submission = created_through_service(federation_with_data, silo_user, model_files)
    submission_validate(submission_id=submission.id)
    submission.refresh_from_db()
    assert (submission.status, submission.rejection_reason) == (SubmissionStatus.VALID, "")
    assert submission.validated_at is not None


def test_submission_validate_runs_once_per_claim(federation_with_data, silo_user, model_files):
    submission = created_through_service(
        federation_with_data, silo_user, {"forest.onnx": model_files["forest.onnx"]}
    )
    submission_validate(submission_id=submission.id)
    Submission.objects.filter(id=submission.id).update(rejection_reason="untouched")
    submission_validate(submission_id=submission.id)
    assert Submission.objects.get(id=submission.id).rejection_reason == "untouched"


def test_submission_validate_rejects_a_model_that_overruns_the_wall_clock_limit(
    federation_with_data, silo_user, model_files, settings
):
    settings.ONEFOLD_SANDBOX_WALL_SECONDS = 0.2
    submission = created_through_service(
        federation_with_data, silo_user, {"network.safetensors": model_files["network.safetensors"]}
    )
    submission_validate(submission_id=submission.id)
    submission.refresh_from_db()
    assert submission.status == SubmissionStatus.REJECTED
    assert submission.rejection_reason == (
        "Model file 'network.safetensors' failed validation: "
        "The model did not finish predicting within 0.2 seconds."
    )


def test_safe_path_predictions_equal_the_native_libraries(
    federation_with_data, silo_user, model_files, adult_models
):
    submission = created_through_service(federation_with_data, silo_user, model_files)
    features = arrays_from_npz(submission.public_dataset.features_file)["features"]
    stored = [artifact_read(model_file.stored_name) for model_file in submission.model_files.all()]
    outcomes = stored_models_predict(stored, features, n_classes=2)
    for name, outcome, expected in zip(
        model_files, outcomes, native_probabilities(adult_models, features).values()
    ):
        assert outcome.error is None, name
        assert np.max(np.abs(outcome.probabilities - expected)) <= 1e-5, name
