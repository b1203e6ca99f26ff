"""FD exchanges through the API: rounds, validated logit uploads, leave-one-out global logits, quorum."""

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from market.exchanges.models import ExchangeRound, LogitUpload
from market.exchanges.services import exchange_reap
from tests.conftest import api_client_for
from workers.exchange_aggregation import exchange_round_aggregate

EXCHANGE = {
    "federation": "adult-income",
    "name": "FD on Adult",
    "rounds": 2,
    "round_seconds": 3600,
    "min_silos": 3,
}


def silo_logits(index: int) -> tuple[list[int], list[list[float]]]:
    """Silo 0 holds only label 0; the others both labels, with distinct numbers."""
    if index == 0:
        return [0], [[0.5, -0.5], [0.0, 0.0]]
    return [0, 1], [[float(index), -float(index)], [-2.0 * index, 2.0 * index]]


def open_exchange(operator_api, **changes):
    response = operator_api.post("/api/exchanges/", {**EXCHANGE, **changes}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def upload(user, exchange_id, number, labels, logits):
    return api_client_for(user).post(
        f"/api/exchanges/{exchange_id}/rounds/{number}/logits/",
        {"labels": labels, "logits": logits},
        format="json",
    )


def test_five_silos_get_the_average_of_the_others_logits_and_the_next_round_opens(
    operator_api, five_silos
):
    exchange = open_exchange(operator_api)
    assert [(item["number"], item["status"]) for item in exchange["round_list"]] == [(1, "open")]
    for index, user in enumerate(five_silos):
        response = upload(user, exchange["id"], 1, *silo_logits(index))
        assert response.status_code == 201, response.json()
    [first] = ExchangeRound.objects.filter(number=1)
    assert first.status == "closing"  # every member uploaded: closed before its deadline
    exchange_round_aggregate(exchange_round_id=first.id)  # the worker's step
    downloads = [
        api_client_for(user).get(f"/api/exchanges/{exchange['id']}/rounds/1/download/").json()
        for user in five_silos
    ]
    # silo 0: label 0 is the mean of silos 1-4's rows, label 1 too (silo 0 never uploaded a label-1 vector)
    assert downloads[0]["global_logits"] == [[2.5, -2.5], [-5.0, 5.0]]
    assert downloads[0]["available"] == [True, True]
    # silo 1: label 0 averages silos 0, 2, 3, 4; label 1 only silos 2, 3, 4 (silo 0 does not hold it)
    assert np.allclose(
        downloads[1]["global_logits"],
        [[(0.5 + 2 + 3 + 4) / 4, -(0.5 + 2 + 3 + 4) / 4], [-6.0, 6.0]],
    )
    assert downloads[1]["labels"] == [0, 1]
    detail = operator_api.get(f"/api/exchanges/{exchange['id']}/").json()
    assert [
        (item["number"], item["status"], item["participants"]) for item in detail["round_list"]
    ] == [(1, "aggregated", 5), (2, "open", 0)]
    assert detail["payload_bits_per_silo_round"] == 2 * 2 * 32
    assert detail["min_contributors"] == 2


def test_a_round_short_of_its_quorum_closes_with_a_clear_status_and_no_downloads(
    operator_api, five_silos
):
    exchange = open_exchange(operator_api, rounds=1)
    for index, user in enumerate(five_silos[:2]):
        assert upload(user, exchange["id"], 1, *silo_logits(index)).status_code == 201
    ExchangeRound.objects.filter(number=1).update(
        deadline=timezone.now() - timedelta(seconds=1)
    )  # time passes
    assert exchange_reap() == 1
    exchange_round_aggregate(exchange_round_id=ExchangeRound.objects.get(number=1).id)
    reason = (
        "Round 1 closed with 2 of the 3 silos its quorum needs; no global logits were computed and nothing "
        "was charged."
    )
    detail = operator_api.get(f"/api/exchanges/{exchange['id']}/").json()
    assert (
        detail["status"],
        detail["round_list"][0]["status"],
        detail["round_list"][0]["status_reason"],
    ) == ("finished", "missed_quorum", reason)
    response = api_client_for(five_silos[0]).get(
        f"/api/exchanges/{exchange['id']}/rounds/1/download/"
    )
    assert (response.status_code, response.json()["detail"]) == (409, reason)
    assert LogitUpload.objects.filter(global_logits__isnull=False).count() == 0
    late = upload(five_silos[2], exchange["id"], 1, *silo_logits(2))
    assert late.status_code == 409 and late.json()["detail"].startswith("Round 1 of exchange")


@pytest.mark.parametrize(
    "labels, logits, sentence",
    [
        ([0, 1], [[1.0, 2.0]], "'logits' must be 2 rows of 2 numbers (labels × classes)."),
        (
            [0, 1],
            [[1.0, 2.0], [1.0, 2.0, 3.0]],
            "'logits' must be 2 rows of 2 numbers (labels × classes).",
        ),
        ([0, 1], [[1.0, "x"], [1.0, 2.0]], "'logits' must hold numbers only."),
        (
            [0, 1],
            [[1e6, 0.0], [0.0, 0.0]],
            "Every logit must be finite and at most 10000 in magnitude.",
        ),
        (
            [0],
            [[1.0, 2.0], [3.0, 4.0]],
            "Rows of labels you did not declare must be zeros: declare every label you send "
            "a vector for in 'labels'.",
        ),
        (
            [2],
            [[0.0, 0.0], [0.0, 0.0]],
            "'labels' must list the distinct class indices (0 to 1) you hold, at least one.",
        ),
        (
            [0, 0],
            [[1.0, 2.0], [0.0, 0.0]],
            "'labels' must list the distinct class indices (0 to 1) you hold, at least one.",
        ),
        (
            [],
            [[0.0, 0.0], [0.0, 0.0]],
            "'labels' must list the distinct class indices (0 to 1) you hold, at least one.",
        ),
    ],
)
def test_bad_logits_are_refused_with_a_sentence_and_nothing_stored(
    operator_api, five_silos, labels, logits, sentence
):
    exchange = open_exchange(operator_api)
    response = upload(five_silos[0], exchange["id"], 1, labels, logits)
    assert (response.status_code, response.json()["detail"]) == (
        400,
        f"The logits are not valid: {sentence}",
    )
    assert LogitUpload.objects.count() == 0


def test_non_finite_json_and_a_second_upload_are_refused(operator_api, five_silos):
    exchange = open_exchange(operator_api)
    client = api_client_for(five_silos[0])
    response = client.post(
        f"/api/exchanges/{exchange['id']}/rounds/1/logits/",
        data='{"labels": [0], "logits": [[NaN, 0], [0, 0]]}',
        content_type="application/json",
    )
    assert response.status_code == 400 and "not finite" in response.json()["detail"]
    assert upload(five_silos[0], exchange["id"], 1, *silo_logits(0)).status_code == 201
    again = upload(five_silos[0], exchange["id"], 1, *silo_logits(0))
    assert (again.status_code, again.json()["detail"]) == (
        409,
        "Your organisation already uploaded logits for round 1.",
    )
    assert LogitUpload.objects.count() == 1


def test_only_operators_open_exchanges_and_only_members_upload(
    silo_api, operator_api, five_silos, other_silo_user
):
    response = silo_api.post("/api/exchanges/", EXCHANGE, format="json")
    assert (response.status_code, response.json()["detail"]) == (
        403,
        "Only operators open federated distillation exchanges.",
    )
    refused = operator_api.post("/api/exchanges/", {**EXCHANGE, "min_silos": 1}, format="json")
    assert (refused.status_code, refused.json()["detail"]) == (
        400,
        "A round's quorum is 3 to 5 silos (the federation has 5 members; each silo's per-label average is "
        "made of at least 2 other silos' logits), not 1.",
    )
    exchange = open_exchange(operator_api)
    outsider = upload(other_silo_user, exchange["id"], 1, *silo_logits(1))
    assert outsider.status_code == 404  # not a member: the exchange does not exist for it
    not_yet = api_client_for(five_silos[1]).get(
        f"/api/exchanges/{exchange['id']}/rounds/1/download/"
    )
    assert (
        not_yet.status_code == 404 and "uploaded no logits in round 1" in not_yet.json()["detail"]
    )


def test_the_exchange_page_shows_rounds_participation_and_payload(
    client, operator_api, five_silos, other_silo_user
):
    exchange = open_exchange(operator_api)
    for index, user in enumerate(five_silos[:2]):
        assert upload(user, exchange["id"], 1, *silo_logits(index)).status_code == 201
    client.force_login(five_silos[0])
    page = client.get(f"/exchanges/{exchange['id']}/").content.decode()
    assert "FD on Adult" in page and "2 × 2 logits per round (128 bits)" in page
    assert (
        '<tr id="round-1">' in page
        and "<td>2</td>" in page
        and "uploaded" in page
        and "<td>256</td>" in page
    )
    assert f'href="/exchanges/{exchange["id"]}/"' in client.get("/exchanges/").content.decode()
    client.force_login(other_silo_user)
    assert client.get(f"/exchanges/{exchange['id']}/").status_code == 404


def _closed_round(exchange, uploads):
    """Upload ``(user, labels, logits)`` to round 1, let its deadline pass and run the worker's step."""
    for user, labels, logits in uploads:
        assert upload(user, exchange["id"], 1, labels, logits).status_code == 201
    ExchangeRound.objects.filter(number=1).update(deadline=timezone.now() - timedelta(seconds=1))
    exchange_reap()
    exchange_round_aggregate(exchange_round_id=ExchangeRound.objects.get(number=1).id)


def test_a_label_only_one_other_silo_holds_is_withheld_rather_than_handing_over_its_upload(
    operator_api, five_silos
):
    exchange = open_exchange(operator_api)
    only_label_0 = ([0], [[0.5, -0.5], [0.0, 0.0]])
    _closed_round(
        exchange,
        [
            (five_silos[0], *only_label_0),
            (five_silos[1], [0, 1], [[1.0, -1.0], [-2.0, 2.0]]),
            (five_silos[2], [0, 1], [[3.0, -3.0], [-4.0, 4.0]]),
        ],
    )
    download = api_client_for(five_silos[1]).get(
        f"/api/exchanges/{exchange['id']}/rounds/1/download/"
    )
    assert download.status_code == 200
    # label 0: silos 0 and 2; label 1: silo 2 alone held it, so its average would be silo 2's own row
    assert download.json() == {
        "round": 1,
        "labels": [0, 1],
        "global_logits": [[1.75, -1.75], [0.0, 0.0]],
        "available": [True, False],
        "withheld": "No average for label(s) 1: fewer than 2 other silos uploaded them, and an average of "
        "fewer silos would hand over their own logits.",
    }
    # silo 0 gets label 1 from silos 1 and 2: two silos, published
    assert api_client_for(five_silos[0]).get(
        f"/api/exchanges/{exchange['id']}/rounds/1/download/"
    ).json()["global_logits"] == [[2.0, -2.0], [-3.0, 3.0]]
    # no stored download equals another participant's upload row for a published label
    uploads = list(LogitUpload.objects.filter(exchange_round__number=1))
    for mine in uploads:
        for label, shown in enumerate(mine.available):
            assert not shown or all(
                mine.global_logits[label] != other.logits[label] for other in uploads
            )


def test_the_federation_sets_how_many_other_silos_an_average_needs(
    operator_api, five_silos, federation_with_data
):
    federation_with_data.fd_min_contributors = 3
    federation_with_data.save()
    refused = operator_api.post("/api/exchanges/", EXCHANGE, format="json")  # a quorum of 3
    assert (refused.status_code, refused.json()["detail"]) == (
        400,
        "A round's quorum is 4 to 5 silos (the federation has 5 members; each silo's per-label average is "
        "made of at least 3 other silos' logits), not 3.",
    )
    exchange = open_exchange(operator_api, min_silos=4)
    _closed_round(
        exchange, [(user, *silo_logits(index)) for index, user in enumerate(five_silos[:4])]
    )
    downloads = {
        upload.organisation_id: upload.available
        for upload in LogitUpload.objects.filter(exchange_round__number=1)
    }
    # label 1: silo 0 does not hold it, so silos 1-3 each see only 2 others: withheld; silo 0 sees 3
    assert downloads == {
        five_silos[0].organisation_id: [True, True],
        five_silos[1].organisation_id: [True, False],
        five_silos[2].organisation_id: [True, False],
        five_silos[3].organisation_id: [True, False],
    }


def test_a_quorum_of_two_is_refused_since_each_average_would_be_one_silo(operator_api, five_silos):
    from market.exchanges.models import Exchange

    refused = operator_api.post("/api/exchanges/", {**EXCHANGE, "min_silos": 2}, format="json")
    assert (refused.status_code, refused.json()["detail"]) == (
        400,
        "A round's quorum is 3 to 5 silos (the federation has 5 members; each silo's per-label average is "
        "made of at least 2 other silos' logits), not 2.",
    )
    assert not Exchange.objects.exists()


def test_an_exchange_opens_only_in_a_federation_that_allows_l0(
    operator_api, five_silos, federation_with_data
):
    from market.exchanges.models import Exchange

    federation_with_data.allowed_privacy_levels = ["L1", "L2"]
    federation_with_data.default_privacy_level = "L1"
    federation_with_data.save()
    refused = operator_api.post("/api/exchanges/", EXCHANGE, format="json")
    assert (refused.status_code, refused.json()["detail"]) == (
        400,
        "'adult-income' does not allow L0 (it allows L1, L2): an FD exchange passes silos each other's "
        "logits without noise, so it is L0 and opens only in a federation whose members trust each other.",
    )
    assert not Exchange.objects.exists() and not ExchangeRound.objects.exists()


def test_a_network_trained_through_an_exchange_is_accepted_at_l0_only(
    operator_api, five_silos, model_files
):
    from market.budgets.models import BudgetEntry
    from market.submissions.models import Submission
    from tests.market.submissions.helpers import submit

    exchange = open_exchange(operator_api)
    assert upload(five_silos[0], exchange["id"], 1, *silo_logits(0)).status_code == 201
    silo_api = api_client_for(five_silos[0])
    files = {"forest.onnx": model_files["forest.onnx"]}
    at_l1 = submit(silo_api, files, privacy_level="L1", exchange=exchange["id"])
    assert (at_l1.status_code, at_l1.json()["detail"]) == (
        400,
        f"A network trained through FD exchange #{exchange['id']} learnt from the other silos' noiseless "
        "logits, so it is L0, not L1: submit it at L0.",
    )
    elsewhere = submit(
        api_client_for(five_silos[1]), files, privacy_level="L0", exchange=exchange["id"]
    )
    assert (elsewhere.status_code, elsewhere.json()["detail"]) == (
        400,
        f"Your organisation took part in no exchange #{exchange['id']} of 'adult-income'; declare the "
        "exchange the network was trained through.",
    )
    assert not Submission.objects.exists() and not BudgetEntry.objects.exists()
    at_l0 = submit(silo_api, files, privacy_level="L0", exchange=exchange["id"])
    assert at_l0.status_code == 202, at_l0.json()
    assert Submission.objects.get().privacy_level == "L0"
