"""What a buyer downloads says no more than the card: an ensemble bundle names its members by position, not by
the submissions (and so the silos) they came from."""

import io
import json
import zipfile

from market.storage import artifact_read
from tests.market.jobs.helpers import launch, succeeded


def test_an_ensemble_bundle_names_its_members_by_position_only(
    eager_celery,
    operator,
    fedkt_submissions,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    federation = fedkt_submissions[0].federation
    body = launch(
        operator,
        federation,
        django_capture_on_commit_callbacks,
        kind="ensemble",
        privacy_level="L0",
        parameters={},
        seed=1,
    )
    job = succeeded(body)
    with zipfile.ZipFile(
        io.BytesIO(artifact_read(job.global_model.files.get().stored_name))
    ) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        names = sorted(archive.namelist())
    assert [member["file"] for member in manifest["members"]] == [
        f"member-{index:04d}.onnx" for index in range(6)
    ]
    assert names == sorted(["manifest.json", *(member["file"] for member in manifest["members"])])
