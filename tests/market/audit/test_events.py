"""The security events other services record: joins, uploads accepted, refused and validated."""

import pytest

from market.accounts.services import organisation_create, user_create
from market.audit.models import AuditEvent
from market.audit.selectors import audit_chain_verify
from market.errors import PermissionDenied, RefusedFormat
from market.federations.membership import federation_join
from tests.market.submissions.helpers import created_through_service
from workers.submission_validation import submission_validate


def events(action: str) -> list[tuple]:
    return list(
        AuditEvent.objects.filter(action=action)
        .order_by("id")
        .values_list("outcome", "actor__username", "object_type", "details")
    )


def test_joining_is_audited_once_and_a_refused_join_with_its_reason(federation, other_silo_user):
    federation_join(federation=federation, user=other_silo_user)
    federation_join(federation=federation, user=other_silo_user)  # already a member: nothing new
    buyer = user_create(
        username="bob-buyer",
        password="buyer-password",
        organisation=organisation_create(name="Fabrikam", is_silo=False, is_buyer=True),
    )
    with pytest.raises(PermissionDenied):
        federation_join(federation=federation, user=buyer)
    assert events("membership.joined") == [
        (
            "success",
            "bea-bank",
            "Membership",
            {"federation": "adult-income", "organisation": "Contoso Bank", "via": "open"},
        ),
        (
            "refused",
            "bob-buyer",
            "Federation",
            {"reason": "Only members of a silo organisation can join a federation."},
        ),
    ]
    assert audit_chain_verify().ok


def test_an_accepted_upload_and_its_validation_are_audited(
    federation_with_data, silo_user, model_files
):
    submission = created_through_service(
        federation_with_data, silo_user, {"forest.onnx": model_files["forest.onnx"]}
    )
    submission_validate(submission_id=submission.id)
    assert events("submission.uploaded") == [
        (
            "success",
            "sam-silo",
            "Submission",
            {"federation": "adult-income", "files": 1, "privacy_level": "L1"},
        )
    ]
    assert events("submission.validated") == [("success", None, "Submission", {"reason": ""})]
    assert (
        AuditEvent.objects.get(action="submission.validated").organisation == silo_user.organisation
    )


def test_a_refused_upload_is_audited_with_the_reason(federation_with_data, other_silo_user):
    with pytest.raises(PermissionDenied):
        created_through_service(federation_with_data, other_silo_user, {"model.onnx": b"x"})
    assert events("submission.uploaded") == [
        (
            "refused",
            "bea-bank",
            "Federation",
            {"reason": "Your organisation is not a member of 'adult-income'; join it first."},
        )
    ]


def test_an_upload_in_a_refused_format_is_audited_with_the_reason(federation_with_data, silo_user):
    with pytest.raises(RefusedFormat):
        created_through_service(
            federation_with_data, silo_user, {"model.pkl": b"\x80\x04\x95pickle"}
        )
    [(outcome, actor, _, details)] = events("submission.uploaded")
    assert (outcome, actor) == ("refused", "sam-silo")
    assert details["reason"].startswith("'model.pkl': ")
