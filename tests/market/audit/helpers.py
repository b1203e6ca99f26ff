"""A submission made through the service, as the audit tests record it."""

from market.submissions.services import UploadedModel, submission_create


def upload(federation, user, files: dict[str, bytes]):
    return submission_create(
        federation=federation,
        user=user,
        models=[UploadedModel(name, data) for name, data in files.items()],
        model_family="random_forest",
        n_local_examples=2000,
        local_validation_score=0.8,
        label_distribution=None,
        privacy_level="L1",
        privacy_parameters={},
        declared_epsilon=None,
    )
