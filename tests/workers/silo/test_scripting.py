"""The toolkit for scripts (issue 29): JSON errors on stderr with distinct exit codes, `submission wait` and
`job wait` against a live market, and `webhook verify` of an `Onefold-Signature` header."""

import hashlib
import hmac
import io
import json
import time

import pytest

from workers.silo.errors import EXIT_DATA, EXIT_REFUSED, EXIT_TIMED_OUT, EXIT_USAGE
from workers.silo.webhooks import (
    WebhookSignatureInvalid,
    webhook_signature_header,
    webhook_signature_verify,
)

SECRET = "whsec_test_3f9a"
BODY = b'{"event": "job.succeeded", "data": {"job": 7}}'


def stripe_style(secret: str, timestamp: int, body: bytes) -> str:
    """The header as issue 29's server side writes it, computed here independently of the toolkit."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def test_verify_accepts_the_servers_header_and_refuses_a_changed_body_another_secret_or_an_old_delivery():
    now = int(time.time())
    header = stripe_style(SECRET, now, BODY)
    assert webhook_signature_header(SECRET, BODY, timestamp=now) == header
    assert webhook_signature_verify(SECRET, header, BODY) == now
    assert (
        webhook_signature_verify(SECRET, f"t={now},v1={'0' * 64},v1={header.split('v1=')[1]}", BODY)
        == now
    )
    for secret, signed, body, reason in [
        (SECRET, header, BODY + b" ", "does not match"),
        ("whsec_other", header, BODY, "does not match"),
        (SECRET, stripe_style(SECRET, now - 301, BODY), BODY, "more than 300 s"),
        (SECRET, f"v1={header.split('v1=')[1]}", BODY, "t=<unix seconds>,v1=<hex>"),
    ]:
        with pytest.raises(WebhookSignatureInvalid, match=reason):
            webhook_signature_verify(secret, signed, body)
    assert webhook_signature_verify(
        SECRET, stripe_style(SECRET, now - 301, BODY), BODY, tolerance=600
    )


def test_webhook_verify_command_exits_0_on_a_genuine_delivery_and_3_with_a_json_error_otherwise(
    run_cli, tmp_path, monkeypatch
):
    body = tmp_path / "delivery.json"
    body.write_bytes(BODY)
    header = stripe_style(SECRET, int(time.time()), BODY)
    arguments = ["webhook", "verify", "--signature", header, "--body", body]
    code, out, err = run_cli(*arguments, "--secret", SECRET, "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["valid"] is True
    monkeypatch.setenv("ONEFOLD_WEBHOOK_SECRET", SECRET)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(BODY)))
    assert run_cli("webhook", "verify", "--signature", header, "--body", "-")[0] == 0
    body.write_bytes(BODY.replace(b"7", b"8"))
    code, out, err = run_cli(*arguments, "--secret", SECRET, "--json")
    assert (code, out) == (EXIT_DATA, "")
    error = json.loads(err)["error"]
    assert error["exit_code"] == EXIT_DATA and "does not match" in error["message"]


def test_a_bad_command_line_with_json_is_one_json_error_on_stderr_with_exit_2(run_cli):
    with pytest.raises(SystemExit) as exited:
        run_cli("job", "wait", "seven", "--json")
    assert exited.value.code == EXIT_USAGE


@pytest.mark.django_db(transaction=True)
def test_job_wait_returns_a_finished_job_and_gives_up_with_exit_8_on_one_still_queued(
    run_cli, live_server, federation_with_data, operator, invariants_not_checked
):
    from market.jobs.models import Job

    def job(status: str) -> Job:
        return Job.objects.create(
            federation=federation_with_data,
            kind="fedkt",
            privacy_level="L0",
            parameters={},
            seed=0,
            evaluation_split=federation_with_data.evaluation_splits.get(),
            public_dataset=federation_with_data.public_datasets.get(),
            requested_by=operator,
            status=status,
        )

    finished, queued = job("succeeded"), job("queued")
    run_cli(
        "login", "--market", live_server.url, "--username", "olivia-operator",
        "--password", "operator-password",
    )  # fmt: skip
    code, out, err = run_cli("job", "wait", finished.id, "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "succeeded"
    assert run_cli("job", finished.id)[0] == 0  # `job ID` still shows
    code, out, err = run_cli("job", "wait", queued.id, "--wait-timeout", "0.5", "--json")
    assert (code, out) == (EXIT_TIMED_OUT, "")
    assert json.loads(err)["error"]["exit_code"] == EXIT_TIMED_OUT
    code, out, err = run_cli("job", "wait", 999999, "--json")
    assert (code, out) == (EXIT_REFUSED, "")
    assert json.loads(err)["error"]["status"] == 404


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_upload_no_wait_then_submission_wait_sees_the_workers_verdict(
    run_cli, live_server, celery_worker, federation_with_data, pulled, silo_csv
):
    run_cli(
        "login",
        "--market",
        live_server.url,
        "--username",
        "sam-silo",
        "--password",
        "silo-password",
    )
    code, _, err = run_cli(
        "train", "adult-income", "--data", silo_csv, "--pulled", pulled,
        "--student-param", "n_estimators=5", "--privacy-level", "L1",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run_cli("upload", pulled / "students", "--no-wait", "--json")
    assert code == 0, err
    uploaded = json.loads(out)
    code, out, err = run_cli("submission", "wait", uploaded["id"], "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "valid"
