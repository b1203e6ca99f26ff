"""The operator's writes on federations are audited (the pages and the API call the same services), and the
settings a new federation may take are checked with a sentence."""

import pytest

from market.audit.models import AuditEvent
from market.errors import InvalidInput
from market.federations.models import Federation
from market.federations.services import (
    evaluation_split_upload,
    feature_spec_preview,
    federation_create,
    public_dataset_upload,
)

ADULT = {
    "name": "Adult income",
    "description": "",
    "class_labels": ["<=50K", ">50K"],
    "label_column": "income",
    "allowed_privacy_levels": ["L1", "L2"],
    "default_privacy_level": "L1",
    "default_parameters": {},
}


def test_creating_a_federation_and_uploading_its_data_are_audited(
    operator, adult_public_csv, adult_evaluation_csv
):
    federation = federation_create(
        **ADULT,
        created_by=operator,
        policies={
            "default_epsilon_limit": "4",
            "publish_contributions": True,
            "fd_min_contributors": 3,
        },
    )
    assert (
        float(federation.default_epsilon_limit),
        federation.publish_contributions,
        federation.fd_min_contributors,
    ) == (4.0, True, 3)
    preview = feature_spec_preview(federation=federation, data=adult_public_csv, user=operator)
    assert len(preview["columns"]) == 14 and not federation.public_datasets.exists()
    public_dataset_upload(federation=federation, data=adult_public_csv, uploaded_by=operator)
    evaluation_split_upload(federation=federation, data=adult_evaluation_csv, uploaded_by=operator)
    assert list(
        AuditEvent.objects.filter(actor=operator).order_by("id").values_list("action", flat=True)
    ) == ["federation.created", "public_dataset.uploaded", "evaluation_split.uploaded"]


@pytest.mark.parametrize(
    "policies, sentence",
    [
        ({"default_delta": "1.5"}, "'default_delta' must be positive and below 1"),
        ({"default_epsilon_limit": "many"}, "'default_epsilon_limit' must be a number"),
        ({"publish_contributions": "yes"}, "must be true or false"),
        ({"surprise": True}, "Unknown federation setting"),
        ({"fd_min_contributors": 1}, "'fd_min_contributors' must be a whole number from 2 to 1000"),
        (
            {"fd_min_contributors": "3"},
            "'fd_min_contributors' must be a whole number from 2 to 1000",
        ),
    ],
)
def test_a_bad_federation_setting_is_refused_and_nothing_is_created(operator, policies, sentence):
    with pytest.raises(InvalidInput, match=sentence):
        federation_create(**ADULT, created_by=operator, policies=policies)
    assert (
        not Federation.objects.exists()
        and not AuditEvent.objects.filter(action="federation.created").exists()
    )
