"""FD exchanges through the API: rounds, validated logit uploads, leave-one-out global logits, quorum."""

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from market.exchanges.models import ExchangeRound, LogitUpload
from market.exchanges.services import exchange_reap, exchange_round_aggregate
from tests.conftest import api_client_for

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
        "A round's quorum is 2 to 5 silos (the federation has 5 members; each silo learns from the others' "
        "logits), not 1.",
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
