import io

from market.submissions.services import submission_create
from market.submissions.uploads import SubmissionUpload, UploadedModel
from workers.privacy.accounting import party_noise_privacy_bound
from workers.privacy.mechanisms import LaplaceNoise

METADATA = {
    "federation": "adult-income",
    "model_family": "random_forest",
    "n_local_examples": 2000,
    "local_validation_score": 0.81,
    "privacy_level": "L1",
}


def submit(api, files: dict[str, bytes], *, idempotency_key: str | None = None, **changes):
    """POST the files with METADATA and ``changes`` (with an Idempotency-Key header if given)."""
    headers = {"HTTP_IDEMPOTENCY_KEY": idempotency_key} if idempotency_key is not None else {}
    uploads = []
    for name, data in files.items():
        upload = io.BytesIO(data)
        upload.name = name
        uploads.append(upload)
    return api.post(
        "/api/submissions/",
        {**METADATA, **changes, "files": uploads},
        format="multipart",
        **headers,
    )


def stored_files(media_root, part: str = "submissions") -> list:
    return (
        [path for path in media_root.rglob("*") if path.is_file() and part in str(path)]
        if media_root.exists()
        else []
    )


L2_PARAMETERS = {"gamma": 0.04, "delta": 1e-5, "partitions": 2, "teachers": 5, "queries": 30}


#: What these parameters spend (example-level, δ = 1e-5): a silo declaring exactly this composes through RDP.
BOUND = party_noise_privacy_bound(
    mechanism=LaplaceNoise(gamma=0.04), n_queries=30, partitions=2, teachers=5, delta=1e-5
).epsilon


def created_through_service(federation, user, files: dict[str, bytes]):
    """A silo's L1 upload of ``files`` made through the service itself (no API), as the API would make it."""
    return submission_create(
        federation=federation,
        user=user,
        upload=SubmissionUpload(
            models=[UploadedModel(name, data) for name, data in files.items()],
            model_family="random_forest",
            n_local_examples=2000,
            local_validation_score=0.8,
            label_distribution=None,
            privacy_level="L1",
            privacy_parameters={},
            declared_epsilon=None,
        ),
    )
