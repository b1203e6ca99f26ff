"""Page views with Django's test client: pages render, sign-in is required, permissions match the API's."""

import pytest
from django.test import Client
from django.urls import reverse

from frontend.templatetags.number_tags import epsilon as epsilon_text
from market.federations.models import Membership
from market.submissions.models import Submission, SubmissionStatus


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def silo_client(silo_user):
    return client_for(silo_user)


@pytest.fixture
def other_silo_client(other_silo_user):
    return client_for(other_silo_user)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/federations/",
        "/federations/adult-income/",
        "/federations/adult-income/upload/",
        "/submissions/",
        "/submissions/1/status/",
    ],
)
def test_pages_redirect_anonymous_visitors_to_sign_in(url):
    response = Client().get(url, follow=True)

    assert response.redirect_chain[-1][0].startswith("/sign-in/?next=")
    assert 'name="password"' in response.text


def test_polling_after_the_session_ended_sends_the_page_to_sign_in(db):
    response = Client().get(
        "/submissions/1/status/",
        headers={
            "HX-Request": "true",
            "HX-Current-URL": "http://testserver/federations/adult-income/upload/",
        },
    )

    assert response.status_code == 401
    assert (
        response["HX-Redirect"]
        == "/sign-in/?next=http%3A//testserver/federations/adult-income/upload/"
    )


def test_sign_in_with_password_lands_on_the_home_page(silo_user):
    client = Client()

    response = client.post(
        "/sign-in/", {"username": "sam-silo", "password": "silo-password"}, follow=True
    )

    assert response.redirect_chain[-1] == ("/", 302)
    assert "Northwind Hospital" in response.text
    assert 'action="/sign-out/"' in response.text


def test_sign_in_with_a_wrong_password_says_so(silo_user):
    response = Client().post("/sign-in/", {"username": "sam-silo", "password": "wrong"})

    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.text


def test_sign_out_ends_the_session(silo_client):
    response = silo_client.post("/sign-out/")

    assert response.status_code == 302 and response.url == "/sign-in/"
    assert silo_client.get("/federations/").status_code == 302


def test_base_layout_has_navigation_and_vendored_htmx(silo_client, federation):
    page = silo_client.get("/federations/").text

    for link in ['href="/federations/"', 'href="/submissions/"', 'href="/api/docs/"']:
        assert link in page
    assert 'href="/admin/"' not in page
    assert "/static/frontend/vendor/htmx-2.0.11.min.js" in page


def test_operators_get_an_admin_link(operator):
    assert 'href="/admin/"' in client_for(operator).get("/federations/").text


def test_federation_list_shows_membership_and_a_join_button(
    silo_client, other_silo_client, federation_with_data
):
    member_page = silo_client.get("/federations/").text
    stranger_page = other_silo_client.get("/federations/").text

    assert "Adult income" in member_page and "Member" in member_page
    assert 'action="/federations/adult-income/join/"' not in member_page
    assert 'action="/federations/adult-income/join/"' in stranger_page


def test_join_button_makes_the_organisation_a_member(
    other_silo_client, other_silo_user, federation_with_data
):
    response = other_silo_client.post("/federations/adult-income/join/", follow=True)

    assert response.redirect_chain[-1] == ("/federations/adult-income/", 302)
    assert "Contoso Bank joined Adult income." in response.text
    assert Membership.objects.filter(
        federation=federation_with_data, organisation=other_silo_user.organisation
    ).exists()
    assert reverse("api-public-features", args=["adult-income"]) in response.text


def test_join_needs_a_csrf_token(other_silo_user, federation_with_data):
    client = Client(enforce_csrf_checks=True)
    client.force_login(other_silo_user)

    response = client.post("/federations/adult-income/join/")

    assert response.status_code == 403
    assert not Membership.objects.filter(organisation=other_silo_user.organisation).exists()


def test_operators_cannot_join_and_are_told_why(operator, federation):
    response = client_for(operator).post("/federations/adult-income/join/")

    assert response.status_code == 403
    assert "Only members of a silo organisation can join a federation." in response.text
    assert not Membership.objects.exists()


def test_member_sees_public_data_facts_and_download_links(silo_client, federation_with_data):
    public_dataset = federation_with_data.public_datasets.first()

    response = silo_client.get("/federations/adult-income/")

    assert response.status_code == 200
    assert public_dataset.content_sha256 in response.text
    assert f"<dd>{public_dataset.n_rows}</dd>" in response.text
    assert f"<dd>{public_dataset.n_features} (from" in response.text
    assert 'href="/api/federations/adult-income/public-dataset/features.npz"' in response.text
    assert 'href="/api/federations/adult-income/public-dataset/feature-spec.json"' in response.text
    assert 'href="/federations/adult-income/upload/"' in response.text


def test_non_member_sees_a_join_prompt_and_no_download_links(
    other_silo_client, federation_with_data
):
    response = other_silo_client.get("/federations/adult-income/")

    assert response.status_code == 200
    assert "Join this federation to download" in response.text
    assert "features.npz" not in response.text and "feature-spec.json" not in response.text
    assert federation_with_data.public_datasets.first().content_sha256 not in response.text


def test_download_links_work_with_the_browser_session(silo_client, federation_with_data):
    features = silo_client.get("/api/federations/adult-income/public-dataset/features.npz")
    spec = silo_client.get("/api/federations/adult-income/public-dataset/feature-spec.json")

    assert features.status_code == 200 and features.content[:2] == b"PK"
    assert (
        spec.status_code == 200
        and spec.json()["n_features"] == federation_with_data.public_datasets.first().n_features
    )


def test_unknown_federation_is_a_friendly_404(silo_client, db):
    response = silo_client.get("/federations/no-such-thing/")

    assert response.status_code == 404
    assert "There is no federation &#x27;no-such-thing&#x27;." in response.text
    assert "Back to your start page" in response.text


def test_before_public_data_exists_members_are_told_and_upload_waits(
    silo_client, silo_user, federation
):
    from market.federations.membership import federation_join

    federation_join(federation=federation, user=silo_user)

    detail = silo_client.get("/federations/adult-income/")
    upload = silo_client.get("/federations/adult-income/upload/")

    assert (
        "The operator has not uploaded public data yet." in detail.text
        and "features.npz" not in detail.text
    )
    assert upload.status_code == 404
    assert "The federation &#x27;adult-income&#x27; has no public dataset yet." in upload.text


def test_upload_page_offers_the_federation_s_choices(silo_client, federation_with_data):
    response = silo_client.get("/federations/adult-income/upload/")

    assert response.status_code == 200
    assert 'action="/api/submissions/"' in response.text
    assert 'name="csrfmiddlewaretoken"' in response.text
    assert (
        'id="drop-zone"' in response.text and 'name="files" type="file" multiple' in response.text
    )
    assert '<option value="L1" selected>' in response.text
    assert '<option value="xgboost">' in response.text
    assert "/static/frontend/upload.js" in response.text
    assert 'data-max-upload-bytes="67108864"' in response.text


def test_the_upload_page_says_what_the_market_trusts_in_an_l2_declaration(
    silo_client, federation_with_data
):
    text = " ".join(silo_client.get("/federations/adult-income/upload/").text.split())
    assert (
        "For DP-SGD it charges your budget, at your budget's δ, the larger of your declared ε and the ε that the "
        "noise multiplier (0.1 to 1,000), batch size, epochs and number of local training examples spend there; a "
        "declared δ above your budget's is refused. It cannot check that training ran as declared: the number of "
        "local training examples (declaring more lowers the charge)"
    ) in text


def test_upload_page_refuses_non_members_with_the_api_s_sentence(
    other_silo_client, federation_with_data
):
    response = other_silo_client.get("/federations/adult-income/upload/")

    assert response.status_code == 403
    assert (
        "Your organisation is not a member of &#x27;adult-income&#x27;; join it first."
        in response.text
    )


def test_status_partial_polls_while_pending_and_stops_when_final(silo_client, silo_user, submit):
    submission = submit(silo_user)
    url = f"/submissions/{submission.id}/status/"

    pending = silo_client.get(url).text
    Submission.objects.filter(id=submission.id).update(status=SubmissionStatus.VALID)
    valid = silo_client.get(url).text

    assert 'hx-trigger="every 1s"' in pending and "Waiting for validation" in pending
    assert "<html" not in pending
    assert "hx-trigger" not in valid and ">Valid<" in valid


def test_status_partial_explains_itself_on_request_and_keeps_asking_for_it(
    silo_client, silo_user, submit
):
    submission = submit(silo_user)

    compact = silo_client.get(f"/submissions/{submission.id}/status/").text
    explained = silo_client.get(f"/submissions/{submission.id}/status/?explain=1").text

    assert "status-explanation" not in compact
    assert "A worker loads the models in a sandbox" in explained
    assert f'hx-get="/submissions/{submission.id}/status/?explain=1"' in explained


DP_SGD = {
    "mechanism": "dp_sgd",
    "accountant": "rdp",
    "noise_multiplier": 1.0,
    "max_grad_norm": 1.5,
    "batch_size": 100,
    "epochs": 4,
    "delta": 1e-5,
}


def test_the_explained_status_of_a_dp_sgd_submission_shows_its_declaration_to_its_own_silo(
    silo_client, other_silo_client, silo_user, federation_with_data, model_files
):
    from market.submissions.services import submission_create
    from market.submissions.uploads import SubmissionUpload, UploadedModel
    from workers.privacy.declarations import party_side_bound

    epsilon = party_side_bound(DP_SGD, n_local_examples=2000)[0].epsilon
    submission = submission_create(
        federation=federation_with_data,
        user=silo_user,
        upload=SubmissionUpload(
            models=[
                UploadedModel(
                    name="local-model.safetensors", data=model_files["network.safetensors"]
                )
            ],
            model_family="mlp",
            n_local_examples=2000,
            local_validation_score=0.8,
            label_distribution=None,
            privacy_level="L2",
            privacy_parameters=DP_SGD,
            declared_epsilon=epsilon,
        ),
    )
    url = f"/submissions/{submission.id}/status/"

    explained = silo_client.get(f"{url}?explain=1").text
    compact = silo_client.get(url).text

    assert (
        f"L2: the declared ε = {epsilon_text(epsilon)} (example-level, δ = 0.00001) was charged to the privacy "
        "budget of Northwind Hospital when the upload was accepted. DP-SGD: noise multiplier 1, clipping norm "
        "1.5, batch size 100, 4 epochs (80 steps at sample rate 0.05, the market's RDP accountant)."
    ) in explained
    assert "privacy-declaration" not in compact  # the list's badge stays short; its row shows the ε
    assert other_silo_client.get(f"{url}?explain=1").status_code == 404


def test_status_partial_shows_the_rejection_reason(silo_client, silo_user, submit):
    submission = submit(silo_user)
    Submission.objects.filter(id=submission.id).update(
        status=SubmissionStatus.REJECTED,
        rejection_reason="Model file 'student-0.json' failed validation: it crashed.",
    )

    response = silo_client.get(f"/submissions/{submission.id}/status/")

    assert ">Rejected<" in response.text
    assert "Model file &#x27;student-0.json&#x27; failed validation: it crashed." in response.text
    assert "hx-trigger" not in response.text


def test_another_organisation_s_status_partial_is_404(other_silo_client, silo_user, submit):
    submission = submit(silo_user)

    response = other_silo_client.get(f"/submissions/{submission.id}/status/")

    assert response.status_code == 404
    assert (
        f"There is no submission #{submission.id} that your organisation can see." in response.text
    )


def test_submission_list_shows_only_the_own_organisation_s_submissions(
    silo_client, silo_user, other_silo_user, federation_with_data, submit
):
    from market.federations.membership import federation_join

    federation_join(federation=federation_with_data, user=other_silo_user)
    own = submit(silo_user, model_index=0)
    others = submit(other_silo_user, model_index=1)

    page = silo_client.get("/submissions/").text

    assert f'id="submission-{own.id}"' in page and "student-0.json" in page
    assert f'id="submission-{others.id}"' not in page and "student-1.json" not in page
    assert 'hx-trigger="every 1s"' in page


def test_submission_list_pages_through_many_submissions(
    silo_client, silo_user, submit, monkeypatch
):
    monkeypatch.setattr("frontend.views.SUBMISSIONS_PER_PAGE", 1)
    older, newer = submit(silo_user, model_index=0), submit(silo_user, model_index=1)

    first = silo_client.get("/submissions/?federation=adult-income").text
    second = silo_client.get("/submissions/?federation=adult-income&page=2").text

    assert f'id="submission-{newer.id}"' in first and f'id="submission-{older.id}"' not in first
    assert "Page 1 of 2" in first and 'href="?federation=adult-income&amp;page=2"' in first
    assert f'id="submission-{older.id}"' in second and "Page 2 of 2" in second


def test_submission_list_without_submissions_says_so(silo_client, db):
    assert "No submissions yet." in silo_client.get("/submissions/").text


def test_the_upload_page_declares_the_feature_view_with_each_views_width(
    silo_client, silo_user, federation_with_data
):
    from market.federations.membership import federation_join
    from workers.features import view_width

    federation_join(federation=federation_with_data, user=silo_user)
    spec = federation_with_data.public_datasets.first().feature_spec
    response = silo_client.get("/federations/adult-income/upload/")

    assert response.status_code == 200
    assert '<select id="field-feature_view" name="feature_view"' in response.text
    assert (
        f'<option value="one_hot">One-hot, standardised — {view_width(spec, "one_hot")} features</option>'
        in response.text
    )
    assert (
        f'<option value="ordinal">Ordinal codes, one per column — {view_width(spec, "ordinal")} features'
        "</option>"
    ) in response.text
