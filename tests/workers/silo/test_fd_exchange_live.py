"""Five silos run an FD exchange with the toolkit's `fd` rounds over real HTTP; a real Celery worker computes
every round's global logits; the networks they end with are submitted and validated like any other."""

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.conftest import csv_bytes, scaled_timeout

pytestmark = pytest.mark.django_db(transaction=True)


def joined_silos(federation, silo_user, count: int) -> list:
    """``silo_user`` and ``count - 1`` more silos (``silo-<n>`` / ``silo-<n>-password``), each joined."""
    from market.accounts.services import organisation_create, user_create
    from market.federations.membership import federation_join

    users = [silo_user]
    for index in range(1, count):
        user = user_create(
            username=f"silo-{index}",
            password=f"silo-{index}-password",
            organisation=organisation_create(name=f"Silo {index}"),
        )
        federation_join(federation=federation, user=user)
        users.append(user)
    return users


@pytest.fixture
def five_members(federation_with_data, silo_user):
    return joined_silos(federation_with_data, silo_user, 5)


@pytest.mark.worker
def test_five_silos_run_two_fd_rounds_through_the_api_and_submit_their_networks(
    live_server, celery_worker, five_members, operator, adult_frame, tmp_path
):
    from market.accounts.services import user_token
    from market.exchanges.models import ExchangeRound, LogitUpload
    from market.submissions.models import Submission
    from workers.silo.cli import build_parser
    from workers.silo.client import OnefoldClient
    from workers.silo.fd_command import fd

    operator_client = OnefoldClient(live_server.url, user_token(user=operator))
    exchange = operator_client.exchange_create(
        federation="adult-income", name="FD on Adult", rounds=2, round_seconds=3600, min_silos=5
    )
    silo_client = OnefoldClient(live_server.url, user_token(user=five_members[0]))
    pulled = tmp_path / "pulled"
    pulled.mkdir()
    (pulled / "federation.json").write_text(json.dumps(silo_client.federation("adult-income").data))
    (pulled / "feature-spec.json").write_text(json.dumps(silo_client.feature_spec("adult-income")))
    (pulled / "features.npz").write_bytes(silo_client.public_features("adult-income"))

    def silo_rounds(index: int):
        table = tmp_path / f"silo-{index}.csv"
        table.write_bytes(csv_bytes(adult_frame.iloc[2000 + 200 * index : 2200 + 200 * index]))
        args = build_parser().parse_args(
            [
                "fd",
                str(exchange["id"]),
                "--data",
                str(table),
                "--pulled",
                str(pulled),
                "--output",
                str(tmp_path / f"model-{index}"),
                "--hidden-sizes",
                "16",
                "--seed",
                str(index),
                "--wait-timeout",
                str(round(scaled_timeout(120))),
            ]
        )
        client = OnefoldClient(
            live_server.url,
            user_token(user=five_members[index]),
            timeout_seconds=scaled_timeout(120),
        )
        return fd(args, client)

    with ThreadPoolExecutor(max_workers=5) as pool:
        futures = [pool.submit(silo_rounds, index) for index in range(5)]
        errors = [repr(future.exception()) for future in futures if future.exception() is not None]
    assert not errors, (
        errors,
        list(ExchangeRound.objects.values_list("number", "status")),
        list(LogitUpload.objects.values_list("organisation__name", "exchange_round__number")),
    )
    results = [future.result() for future in futures]
    for result, _ in results:
        assert [
            (item["round"], item["status"], item["participants"]) for item in result["rounds"]
        ] == [(1, "aggregated", 5), (2, "aggregated", 5)]
    assert list(ExchangeRound.objects.order_by("number").values_list("status", flat=True)) == [
        "aggregated",
        "aggregated",
    ]
    # every silo's download is the average of the other four uploads (leave-one-out), label by label
    uploads = list(LogitUpload.objects.filter(exchange_round__number=2).order_by("id"))
    local = np.array([upload.logits for upload in uploads])
    for position, upload in enumerate(uploads):
        others = np.delete(local, position, axis=0)
        assert np.allclose(upload.global_logits, others.mean(axis=0))
    assert operator_client.exchange(exchange["id"])["status"] == "finished"
    # the final networks are submissions like any other
    submission = silo_client.submission_create(
        federation="adult-income",
        files=[_upload(tmp_path / "model-0" / "local-model.safetensors")],
        metadata={
            name: results[0][0][name]
            for name in (
                "model_family",
                "n_local_examples",
                "local_validation_score",
                "label_distribution",
                "privacy_level",
                "privacy_parameters",
                "declared_epsilon",
                "feature_view",
            )
        },
    )
    assert (
        silo_client.submission_wait(submission.id, timeout_seconds=scaled_timeout(300)).status
        == "valid"
    )
    assert Submission.objects.get(id=submission.id).model_family == "mlp"


def _upload(path):
    from workers.silo.client import ModelUpload

    return ModelUpload(path.name, path.read_bytes())


@pytest.fixture
def three_members(federation_with_data, silo_user):
    """The fewest members an FD round takes (each silo's average is made of at least two other silos')."""
    return joined_silos(federation_with_data, silo_user, 3)


@pytest.mark.worker
def test_fd_as_typed_says_each_round_step_while_it_waits_and_trains(
    run_cli, live_server, celery_worker, three_members, operator, adult_frame, tmp_path
):
    """Issue 43 item 7: `onefold fd` printed nothing while it waited for rounds and trained; each step now says
    what it does on stderr (stdout keeps the summary), and scores read as the pages' percentages."""
    import re
    import threading

    from market.accounts.services import user_token
    from workers.silo.cli import build_parser
    from workers.silo.client import OnefoldClient
    from workers.silo.fd_command import fd

    operator_client = OnefoldClient(live_server.url, user_token(user=operator))
    exchange = operator_client.exchange_create(
        federation="adult-income", name="FD said aloud", rounds=2, round_seconds=3600, min_silos=3
    )
    silo_client = OnefoldClient(live_server.url, user_token(user=three_members[0]))
    pulled = tmp_path / "onefold-adult-income"
    pulled.mkdir()
    (pulled / "federation.json").write_text(json.dumps(silo_client.federation("adult-income").data))
    (pulled / "feature-spec.json").write_text(json.dumps(silo_client.feature_spec("adult-income")))
    (pulled / "features.npz").write_bytes(silo_client.public_features("adult-income"))
    tables = []
    for index in range(3):
        table = tmp_path / f"silo-{index}.csv"
        table.write_bytes(csv_bytes(adult_frame.iloc[2000 + 200 * index : 2200 + 200 * index]))
        tables.append(table)
    common = ["--pulled", pulled, "--hidden-sizes", "16", "--wait-timeout"]
    common.append(round(scaled_timeout(120)))
    other_silos = []
    for index in (1, 2):  # quiet (--json): their lines are not the ones read here
        arguments = [
            "fd",
            exchange["id"],
            "--data",
            tables[index],
            "--output",
            tmp_path / f"o{index}",
        ]
        other_args = build_parser().parse_args(
            [str(item) for item in [*arguments, *common, "--json"]]
        )
        other_client = OnefoldClient(
            live_server.url,
            user_token(user=three_members[index]),
            timeout_seconds=scaled_timeout(120),
        )
        other_silos.append(threading.Thread(target=fd, args=(other_args, other_client)))
        other_silos[-1].start()
    code, _, err = run_cli(
        "login", "--market", live_server.url, "--username", three_members[0].username,
        "--password", "silo-password",
    )  # fmt: skip
    assert code == 0, err

    code, out, err = run_cli("fd", exchange["id"], "--data", tables[0], *common)
    for other_silo in other_silos:
        other_silo.join(timeout=scaled_timeout(120))

    assert code == 0, err
    steps = [line for line in err.splitlines() if line]
    patterns = [rf"Reading {re.escape(str(tables[0]))}\.\.\."]
    for number, toward in ((1, ""), (2, " toward the last global logits")):
        patterns += [
            rf"Round {number} of 2: waiting for it to open\.\.\.",
            rf"Round {number} of 2: training the network on \d+ rows{toward}\.\.\.",
            rf"Round {number} of 2: logits uploaded; waiting for the round to close \(its other silos\)\.\.\.",
            rf"Round {number} of 2: aggregated \(3 silos\); local validation score \d+\.\d %\.",
        ]
    assert len(steps) == len(patterns), steps
    assert all(re.fullmatch(pattern, step) for pattern, step in zip(patterns, steps)), steps
    assert re.search(r"Round 2: aggregated \(3 silos\); local validation score \d+\.\d %\.", out)
    assert (pulled / "fd-model" / "local-model.safetensors").exists()
