"""A federation's membership policy, join requests the operator admits or refuses, removal and edit."""

import pytest

from market.audit.models import AuditEvent
from market.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from market.federations.membership import (
    federation_join,
    join_request_admit,
    join_request_refuse,
    membership_remove,
)
from market.federations.models import Federation, JoinRequest, Membership
from market.federations.services import federation_update
from tests.conftest import ADULT_LABELS, api_client_for


@pytest.fixture
def by_request(operator):
    """A federation created without a policy: by request, the default."""
    from market.federations.services import federation_create

    return federation_create(
        name="Clinics",
        description="",
        class_labels=ADULT_LABELS,
        label_column="income",
        allowed_privacy_levels=["L1"],
        default_privacy_level="L1",
        default_parameters={},
        created_by=operator,
    )


def actions():
    return list(AuditEvent.objects.order_by("id").values_list("action", "outcome"))


def test_a_new_federation_admits_by_request_and_a_silo_asking_waits_for_the_operator(
    by_request, silo_user
):
    assert by_request.membership_policy == "request"

    asked = federation_join(federation=by_request, user=silo_user)
    again = federation_join(federation=by_request, user=silo_user)

    assert asked.membership is None and asked.created
    assert again.join_request == asked.join_request and not again.created
    assert not Membership.objects.filter(federation=by_request).exists()
    assert JoinRequest.objects.get().status == "pending"
    assert actions()[-1] == ("membership.requested", "success")


def test_the_operator_admits_a_request_and_the_silo_becomes_a_member_once(
    by_request, silo_user, operator
):
    join_request = federation_join(federation=by_request, user=silo_user).join_request

    join_request_admit(join_request_id=join_request.id, user=operator)
    with pytest.raises(Conflict, match="already admitted"):
        join_request_admit(join_request_id=join_request.id, user=operator)

    assert list(Membership.objects.values_list("organisation__name", flat=True)) == [
        "Northwind Hospital"
    ]
    join_request.refresh_from_db()
    assert (join_request.status, join_request.decided_by) == ("admitted", operator)
    joined = AuditEvent.objects.get(action="membership.joined")
    assert joined.details["via"] == "admitted" and joined.organisation == silo_user.organisation
    assert federation_join(federation=by_request, user=silo_user).membership is not None


def test_a_refused_request_says_why_and_the_silo_may_ask_again(by_request, silo_user, operator):
    join_request = federation_join(federation=by_request, user=silo_user).join_request

    join_request_refuse(join_request_id=join_request.id, user=operator, reason="Not yet audited")
    asked_again = federation_join(federation=by_request, user=silo_user)

    join_request.refresh_from_db()
    assert (join_request.status, join_request.reason) == ("refused", "Not yet audited")
    assert asked_again.created and asked_again.join_request.id != join_request.id
    assert not Membership.objects.exists()
    refused = AuditEvent.objects.get(action="membership.refused", outcome="success")
    assert refused.details == {"federation": "clinics", "reason": "Not yet audited"}


def test_only_operators_decide_requests_and_nothing_changes_when_a_silo_tries(
    by_request, silo_user, other_silo_user
):
    join_request = federation_join(federation=by_request, user=silo_user).join_request

    for decide in (join_request_admit, join_request_refuse):
        with pytest.raises(PermissionDenied):
            decide(join_request_id=join_request.id, user=other_silo_user)

    assert JoinRequest.objects.get().status == "pending" and not Membership.objects.exists()
    assert ("membership.admitted", "refused") in actions()


def test_a_federation_by_invitation_refuses_self_join_with_a_sentence(by_request, silo_user):
    Federation.objects.filter(id=by_request.id).update(membership_policy="invitation")
    by_request.refresh_from_db()

    with pytest.raises(PermissionDenied, match="by invitation only; ask the market's operator"):
        federation_join(federation=by_request, user=silo_user)

    assert not JoinRequest.objects.exists() and not Membership.objects.exists()


def test_removing_a_member_keeps_its_submissions_and_budget_and_keeps_it_out_of_new_jobs(
    federation_with_data, silo_user, other_silo_user, operator, model_files
):
    from market.budgets.models import PrivacyBudget
    from market.budgets.selectors import budget_list
    from market.jobs.services import _chosen_submissions
    from market.submissions.models import Submission
    from market.submissions.services import submission_create
    from market.submissions.uploads import SubmissionUpload, UploadedModel

    federation_join(federation=federation_with_data, user=other_silo_user)
    budget_list(federation=federation_with_data, user=operator)  # the members' budgets exist
    submissions = [
        submission_create(
            federation=federation_with_data,
            user=user,
            upload=SubmissionUpload(
                models=[UploadedModel("forest.onnx", model_files["forest.onnx"])],
                model_family="random_forest",
                n_local_examples=100,
                local_validation_score=0.8,
                label_distribution=None,
                privacy_level="L1",
                privacy_parameters={},
                declared_epsilon=None,
            ),
        )
        for user in (silo_user, other_silo_user)
    ]
    Submission.objects.update(status="valid")

    membership_remove(
        federation=federation_with_data,
        organisation_id=other_silo_user.organisation_id,
        user=operator,
    )

    assert Submission.objects.count() == 2  # nothing is deleted
    assert PrivacyBudget.objects.filter(organisation=other_silo_user.organisation).exists()
    chosen = _chosen_submissions(
        federation=federation_with_data, privacy_level="L1", submissions="all"
    )
    assert [submission.id for submission in chosen] == [submissions[0].id]
    with pytest.raises(InvalidInput, match="no longer a member"):
        _chosen_submissions(
            federation=federation_with_data,
            privacy_level="L1",
            submissions=[submissions[1].id],
        )
    with pytest.raises(PermissionDenied):  # it cannot upload any more
        submission_create(
            federation=federation_with_data,
            user=other_silo_user,
            upload=SubmissionUpload(
                models=[UploadedModel("forest.onnx", model_files["forest.onnx"])],
                model_family="random_forest",
                n_local_examples=100,
                local_validation_score=0.8,
                label_distribution=None,
                privacy_level="L1",
                privacy_parameters={},
                declared_epsilon=None,
            ),
        )
    removed = AuditEvent.objects.get(action="membership.removed")
    assert removed.details["organisation"] == "Contoso Bank"
    with pytest.raises(NotFound):
        membership_remove(
            federation=federation_with_data,
            organisation_id=other_silo_user.organisation_id,
            user=operator,
        )


def test_the_operator_edits_name_description_and_policy_and_the_slug_stays(by_request, operator):
    federation_update(
        federation=by_request,
        user=operator,
        name="Clinics of the north",
        description="Four clinics.",
        membership_policy="open",
    )

    by_request.refresh_from_db()
    assert (by_request.slug, by_request.name, by_request.membership_policy) == (
        "clinics",
        "Clinics of the north",
        "open",
    )
    updated = AuditEvent.objects.get(action="federation.updated")
    assert updated.details["changed"] == {
        "name": {"from": "Clinics", "to": "Clinics of the north"},
        "membership_policy": {"from": "request", "to": "open"},
        "description": "changed",
    }


def test_an_edit_with_a_bad_policy_or_by_a_silo_changes_nothing(by_request, operator, silo_user):
    with pytest.raises(InvalidInput, match="'membership_policy' must be one of"):
        federation_update(federation=by_request, user=operator, membership_policy="anyone")
    with pytest.raises(PermissionDenied):
        federation_update(federation=by_request, user=silo_user, name="Mine")

    by_request.refresh_from_db()
    assert (by_request.name, by_request.membership_policy) == ("Clinics", "request")
    assert not AuditEvent.objects.filter(action="federation.updated").exists()


def test_the_api_answers_202_for_a_request_and_the_operator_admits_it_over_the_api(
    by_request, silo_user, operator
):
    silo, operator_api = api_client_for(silo_user), api_client_for(operator)

    asked = silo.post("/api/federations/clinics/join/")
    listed = operator_api.get("/api/federations/clinics/join-requests/")
    admitted = operator_api.post(f"/api/join-requests/{listed.json()[0]['id']}/admit/")
    after = silo.get("/api/federations/clinics/")

    assert asked.status_code == 202
    assert (asked.json()["is_member"], asked.json()["join_requested"]) == (False, True)
    assert listed.json()[0]["organisation"] == "Northwind Hospital"
    assert admitted.status_code == 200 and admitted.json()["status"] == "admitted"
    assert (after.json()["is_member"], after.json()["join_requested"]) == (True, False)
    members = operator_api.get("/api/federations/clinics/members/").json()
    assert [member["organisation"] for member in members] == ["Northwind Hospital"]


def test_the_api_edits_and_removes_and_a_silo_is_refused_both(by_request, silo_user, operator):
    silo, operator_api = api_client_for(silo_user), api_client_for(operator)
    Membership.objects.create(federation=by_request, organisation=silo_user.organisation)

    refused_edit = silo.patch(
        "/api/federations/clinics/", {"membership_policy": "open"}, format="json"
    )
    edited = operator_api.patch(
        "/api/federations/clinics/", {"membership_policy": "invitation"}, format="json"
    )
    bad = operator_api.patch(
        "/api/federations/clinics/", {"membership_policy": "all"}, format="json"
    )
    fixed = operator_api.patch(
        "/api/federations/clinics/",
        {"allowed_privacy_levels": ["L0"], "name": "Renamed"},
        format="json",
    )
    silo_fixed = silo.patch(
        "/api/federations/clinics/", {"allowed_privacy_levels": ["L0"]}, format="json"
    )
    removed = operator_api.post(
        f"/api/federations/clinics/members/{silo_user.organisation_id}/remove/"
    )
    joined = silo.post("/api/federations/clinics/join/")

    assert refused_edit.status_code == 403
    assert edited.status_code == 200 and edited.json()["membership_policy"] == "invitation"
    assert bad.status_code == 400 and "membership_policy" in bad.json()
    # Issue 38 item 6: a field a PATCH cannot change is refused by name, and nothing else in the request is applied.
    assert fixed.status_code == 400
    assert "'allowed_privacy_levels' cannot be changed" in fixed.json()["detail"]
    by_request.refresh_from_db()
    assert by_request.name != "Renamed" and by_request.allowed_privacy_levels != ["L0"]
    assert silo_fixed.status_code == 403
    assert removed.status_code == 204
    assert joined.status_code == 403 and "by invitation only" in joined.json()["detail"]
    assert not Membership.objects.exists()
