"""A consortium run from the browser alone, from an empty market: nothing but the operator account a fresh install
makes (``manage.py createsuperuser``; here the same ``user_create(is_operator=True)``), then only pages, a real
Celery worker and the silo's own shell running what the pages show. No admin, no ORM shortcut for anything a user
does; the database is read only to check what the pages said.

1. The operator creates a federation (by request, the default) on its form, uploads its public data and
   evaluation split on the data page and edits it on the edit page; on the People page it invites a silo
   organisation and a buyer organisation, and each opens its link in its own browser and chooses a password.
2. The silo asks to join; the operator admits it on the Members tab.
3. The silo runs the federation page's toolkit commands exactly as shown, line by line with bash, in an empty folder
   holding its ``my-table.csv``: a fresh virtualenv, ``pip install`` of the wheel this market serves, login, pull,
   train, upload; the worker validates the upload. The test chooses only the environment a silo's machine would
   have: ``ONEFOLD_PASSWORD`` answers login's prompt, ``ONEFOLD_CONFIG`` keeps the login in the test's folder, and
   pip runs with ``--no-index`` (``PIP_NO_INDEX``) on a virtualenv that also sees the project's site-packages (a
   ``.pth`` file written after ``python3 -m venv``), so the ``[train]`` extra's libraries, pinned as the server's,
   count as installed and pip fetches the toolkit from the live server alone, in seconds and without PyPI.
   ``tests/workers/silo/test_toolkit_install.py`` installs from a package index instead.
4. The operator launches a job on the launcher (the worker runs it), lists the model and publishes it.
5. The buyer asks for credits, the operator approves them with the payment's reference, the buyer buys the model
   (Back and "Confirm purchase" again answer with the first purchase: one charge),
   downloads the raw-column ONNX package and runs the page's snippet exactly as shown, and the page's curl line
   with a token made on the tokens page: the same predictions.
6. The money page shows the market's fee; the operator records the silo's payout on its ledger.
7. The audit log page has every step, named by actor and organisation, and the download's SHA-256 is that of the
   bytes the browser received.

Every page the journey passes through is scanned by axe-core at 390 px (no serious or critical violation, nothing
wider than the phone) as it goes.
"""

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import pytest

from market.audit.models import AuditEvent
from market.commerce.models import Listing, WalletEntry
from market.jobs.models import Job, JobStatus
from market.submissions.models import Submission
from tests.conftest import csv_bytes, scaled_milliseconds, scaled_timeout
from tests.frontend.journey_helpers import DESKTOP, PHONE, page_problems, publish_from_card, sign_in
from tests.market.jobs.helpers import FAST_JOB_SETTINGS, job_worker

SILO_PASSWORD = "harbour-clinic-2026"
BUYER_PASSWORD = "fabrikam-insurance-2026"


class PhoneScan:
    """axe-core and the overflow check at 390 px on each page the journey reaches, collected to fail once with all."""

    def __init__(self):
        self.problems: list[str] = []

    def __call__(self, page, state: str) -> None:
        page.set_viewport_size(PHONE)
        try:
            page.wait_for_load_state("networkidle")
            self.problems += page_problems(page, f"{state} @390px")
        finally:
            page.set_viewport_size(DESKTOP)


def invite(page, url: str, organisation: str, role_label: str) -> str:
    """The People page's form: a new organisation of one role; the link the page shows once."""
    page.goto(f"{url}/people/")
    page.get_by_label("New organisation's name").fill(organisation)
    page.get_by_label(role_label).check()
    page.get_by_role("button", name="Make invitation link").click()
    return page.get_by_label("Invitation link").input_value()


def accept(browser, link: str, username: str, password: str, organisation: str, scan):
    """The invited person's own browser: open the link, choose a username and password, signed in."""
    invited = browser.new_context(viewport=DESKTOP).new_page()
    invited.context.set_default_timeout(scaled_milliseconds(120_000))
    invited.goto(link)
    scan(invited, f"invitation for {organisation}")
    invited.get_by_label("Username").fill(username)
    invited.get_by_label("Password").fill(password)
    invited.get_by_role("button", name="Create my account").click()
    invited.get_by_text(f"Welcome, {username}: you are signed in to {organisation}.").wait_for()
    return invited


def run_as_shown(commands: str, home: Path) -> str:
    """Each line the page shows, with bash, in the silo's folder; the last line's output."""
    environment = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "ONEFOLD_PASSWORD": SILO_PASSWORD,
        "ONEFOLD_CONFIG": str(home / "onefold.json"),
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    output = ""
    for line in commands.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        finished = subprocess.run(
            ["bash", "-c", line],
            cwd=home,
            env=environment,
            capture_output=True,
            text=True,
            timeout=scaled_timeout(600),
        )
        assert finished.returncode == 0, (line, finished.stdout, finished.stderr)
        if line.startswith("python3 -m venv"):
            (
                next((home / "onefold-venv").glob("lib/python*/site-packages")) / "deps.pth"
            ).write_text(sysconfig.get_paths()["purelib"] + "\n")
        output = finished.stdout
    used = subprocess.run(
        ["onefold-venv/bin/python", "-c", "import workers.silo; print(workers.silo.__file__)"],
        cwd=home,
        env=environment,
        capture_output=True,
        text=True,
        timeout=scaled_timeout(60),
    )
    # the wheel's code, installed in the virtualenv, not the checkout's
    assert used.stdout.startswith(str(home / "onefold-venv" / "lib")), used
    return output


def audit_rows(page, url: str, action: str) -> list[str]:
    """The audit log page's rows of one action, as text."""
    page.goto(f"{url}/security/audit/?action={action}")
    return page.locator("table.audit-events tbody tr").all_inner_texts()


@pytest.mark.browser
@pytest.mark.worker
def test_a_consortium_runs_from_an_empty_market_in_the_browser_alone(
    live_server,  # noqa: F811
    transactional_db,
    settings,
    media_root,
    tmp_path,
    operator,
    adult_frame,
    adult_public_csv,
    adult_evaluation_csv,
    page,
    browser,
    monkeypatch,
):
    for name, value in FAST_JOB_SETTINGS.items():
        setattr(settings, name, value)
    settings.ONEFOLD_MARKET_FEE_PERCENT = 10
    url, scan = live_server.url, PhoneScan()
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    page.set_viewport_size(DESKTOP)
    sign_in(page, url, operator.username, "operator-password")
    scan(page, "operator home")

    # 1. A federation from the form: L0 allowed and the default, membership by request (the default).
    page.get_by_role("link", name="Federations", exact=True).click()
    page.get_by_role("link", name="New federation").click()
    page.get_by_label("Name", exact=True).fill("Adult income")
    page.get_by_label("Label column").fill("income")
    page.get_by_label("Class labels").fill("<=50K, >50K")
    page.get_by_label("L0: no noise (members trust each other)").check()
    page.get_by_label("Default privacy level").select_option("L0")
    scan(page, "new federation")
    page.get_by_role("button", name="Create federation").click()
    for form, name, data, button, done in (
        ("public-form", "adult-public.csv", adult_public_csv, "Upload public data", "Public data uploaded"),
        ("evaluation-form", "adult-evaluation.csv", adult_evaluation_csv, "Upload evaluation split",
         "Evaluation split uploaded"),
    ):  # fmt: skip
        page.locator(f"#{form} input[type=file]").set_input_files(
            {"name": name, "mimeType": "text/csv", "buffer": data}
        )
        page.get_by_role("button", name=button).click()
        page.get_by_text(done).first.wait_for()
    scan(page, "federation data")
    page.goto(f"{url}/federations/adult-income/edit/")
    assert page.get_by_label("By request: the operator admits each silo").is_checked()
    page.get_by_label("Description").fill("Predict whether a household's income exceeds 50K.")
    page.get_by_label("How a sale's revenue is split among the silos").select_option("equal")
    scan(page, "federation edit")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Predict whether a household's income exceeds 50K.").wait_for()

    # ... and invites a silo and a buyer, each opening its link in its own browser.
    silo_link = invite(page, url, "Harbour Clinic", "Silo (trains and uploads)")
    scan(page, "people, a link made")
    buyer_link = invite(page, url, "Fabrikam Insurance", "Buyer (buys models)")
    silo = accept(browser, silo_link, "ada", SILO_PASSWORD, "Harbour Clinic", scan)
    buyer = accept(browser, buyer_link, "bob", BUYER_PASSWORD, "Fabrikam Insurance", scan)

    # 2. The silo asks to join; the operator admits it.
    silo.goto(f"{url}/federations/adult-income/")
    silo.get_by_role("button", name="Ask to join Adult income").click()
    silo.get_by_text("Your request to join waits for the market's operator.").wait_for()
    scan(silo, "silo, join asked")
    page.goto(f"{url}/federations/adult-income/?tab=members")
    scan(page, "members with a join request")
    page.get_by_role("button", name="Admit Harbour Clinic").click()
    page.get_by_text("Harbour Clinic is now a member of Adult income.").wait_for()

    # 3. The silo installs the toolkit from the page and pulls, trains and uploads, as shown.
    silo.reload()
    scan(silo, "silo federation page with the toolkit commands")
    commands = silo.locator("#toolkit-commands").inner_text()
    assert f"onefold-venv/bin/pip install 'onefold-toolkit[train] @ {url}/toolkit/" in commands
    assert silo.get_by_role("button", name="Copy the commands").is_visible()
    home = tmp_path / "silo-machine"
    home.mkdir()
    (home / "my-table.csv").write_bytes(csv_bytes(adult_frame.iloc[2500:3000]))
    with job_worker(settings, media_root, tmp_path / "worker.log"):
        uploaded = run_as_shown(commands, home)
        assert "status valid: the market accepted it" in uploaded
        submission = Submission.objects.get()
        assert (submission.status, submission.organisation.name, submission.privacy_level) == (
            "valid",
            "Harbour Clinic",
            "L0",  # the federation's default level, as the upload command uses it
        )
        # the page's zip of the public data is the folder `onefold pull` wrote, file for file
        pulled = silo.request.get(f"{url}/api/federations/adult-income/public-dataset/pulled.zip")
        with zipfile.ZipFile(io.BytesIO(pulled.body())) as archive:
            zipped = {name: archive.read(name) for name in archive.namelist()}
        assert zipped == {
            f"onefold-adult-income/{path.name}": path.read_bytes()
            for path in (home / "onefold-adult-income").iterdir()
            if path.is_file()
        }

        # 4. The operator launches a job from the launcher; the worker runs it.
        page.goto(f"{url}/federations/adult-income/")
        page.get_by_role("link", name="Launch a job").click()
        page.get_by_label("Kind").select_option("fedkt")
        page.get_by_label("Privacy level").select_option("L0")
        page.locator("#job-price").filter(has_text="L0 spends no privacy budget").wait_for()
        scan(page, "job launcher")
        page.get_by_role("button", name="Launch job").click()
        page.locator("#job-status").filter(has_text="Succeeded").wait_for(
            timeout=scaled_milliseconds(300_000)
        )
    job = Job.objects.get()
    assert job.status == JobStatus.SUCCEEDED
    scan(page, "job succeeded")
    page.get_by_role("link", name="List in market").click()
    page.get_by_label("Price (credits)").fill("20")
    scan(page, "new listing")
    page.get_by_role("button", name="Create draft listing").click()
    publish_from_card(page)  # answering the gate with a reason where it refuses
    page.get_by_text("Published").first.wait_for()
    listing = Listing.objects.get()
    assert (listing.status, listing.price_cents) == ("published", 2000)

    # 5. The buyer asks for credits; the operator approves them once paid.
    buyer.get_by_role("link", name="Wallet", exact=True).click()
    buyer.get_by_label("Amount (credits)").fill("50")
    buyer.get_by_label("Purchase order or note (optional)").fill("PO-2026-7")
    buyer.get_by_role("button", name="Request credits").click()
    buyer.locator("#credit-requests").filter(has_text="Pending").wait_for()
    scan(buyer, "buyer wallet, credits asked")
    page.get_by_role("link", name="Wallets", exact=True).click()
    scan(page, "wallets with a credit request")
    page.get_by_label("Payment reference for", exact=False).fill("BANK-2026-7")
    page.get_by_role("button", name="Approve").click()
    page.get_by_text("payment BANK-2026-7").wait_for()

    # ... finds, buys and runs the model from the page's snippet, as shown.
    buyer.get_by_role("link", name="Models", exact=True).click()
    scan(buyer, "catalog")
    buyer.get_by_role("link", name=listing.name).click()
    scan(buyer, "listing card")
    buyer.get_by_role("link", name="Buy").click()
    scan(buyer, "purchase confirmation")
    buyer.get_by_role("button", name="Confirm purchase").click()
    buyer.get_by_role("link", name="Use this model").wait_for()
    purchases_page = buyer.url
    # Back (the browser shows the confirmation as it kept it) and the button again: the first purchase's answer.
    buyer.go_back()
    buyer.get_by_role("button", name="Confirm purchase").click()
    buyer.get_by_text(
        "This form was already sent; here is its result. Nothing was done again."
    ).wait_for()
    assert listing.purchases.count() == 1
    buyer.get_by_role("link", name="Wallet", exact=True).click()
    assert buyer.locator("#wallet-balance").inner_text() == "30.00 credits"
    buyer.goto(purchases_page)
    buyer.get_by_role("link", name="Use this model").click()
    scan(buyer, "use this model")
    with buyer.expect_download() as download_info:
        buyer.get_by_role("button", name="Download ONNX, raw columns").click()
    delivered = Path(download_info.value.path()).read_bytes()
    buyer_folder = tmp_path / "buyer-machine"
    buyer_folder.mkdir()
    with zipfile.ZipFile(io.BytesIO(delivered)) as package:
        package.extractall(buyer_folder)
    rows = "\n".join(adult_evaluation_csv.decode().splitlines()[:21]) + "\n"
    (buyer_folder / "rows.csv").write_text(rows)
    snippet, curl_line = (
        buyer.locator(f"#{name}").inner_text() for name in ("use-snippet", "curl-line")
    )
    monkeypatch.chdir(buyer_folder)
    namespace: dict = {}
    exec(snippet, namespace)  # noqa: S102 (the page's snippet, as shown)
    # ... and the prediction API's curl line, as shown, with a token made on the page it links to.
    buyer.get_by_role("link", name="API tokens page").click()
    buyer.get_by_label("Name").fill("laptop")
    buyer.get_by_role("button", name="Create token").click()
    token = buyer.locator("#new-token-key").inner_text()
    scan(buyer, "buyer token made")
    answered = subprocess.run(
        ["bash", "-c", curl_line],
        cwd=buyer_folder,
        env={"PATH": "/usr/bin:/bin", "ONEFOLD_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=scaled_timeout(120),
    )
    platform = json.loads(answered.stdout)
    assert [str(label) for label in namespace["labels"]] == platform["classes"]
    np.testing.assert_allclose(namespace["probabilities"], platform["probabilities"], atol=2e-6)

    # 6. The money page: the fee; the silo's earnings, paid out on its ledger.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Money").click()
    assert page.locator("#fees-total").inner_text() == "2.00 credits"
    scan(page, "money")
    page.get_by_role("link", name="Harbour Clinic").click()
    assert page.locator("#ledger-payable").inner_text() == "18.00 credits"
    page.get_by_label("Amount (credits)").fill("18")
    page.get_by_label("Payment reference").fill("SEPA-2026-7")
    page.get_by_role("button", name="Record payout").click()
    paid_out = page.locator("#ledger-payable").filter(has_text=re.compile(r"^0\.00 credits$"))
    paid_out.wait_for()
    scan(page, "silo ledger paid out")
    # (sending the payout form twice is tested in test_form_resubmission.py)
    assert WalletEntry.objects.filter(kind="payout").count() == 1
    silo.get_by_role("link", name="Earnings", exact=True).click()
    assert silo.locator("#earnings-payable").inner_text() == "0.00 credits"
    assert "SEPA-2026-7" in silo.locator("#earnings-payouts").inner_text()
    scan(silo, "silo earnings paid out")

    # 7. The audit log page: every step, named, and the digest of the bytes the buyer received.
    page.goto(f"{url}/security/audit/")
    scan(page, "audit log")
    downloads = audit_rows(page, url, "model.downloaded")
    assert len(downloads) == 1 and hashlib.sha256(delivered).hexdigest() in downloads[0]
    assert "bob (Fabrikam Insurance)" in downloads[0]
    expected = {
        "federation.created": "olivia-operator (market operator)",
        "federation.updated": "olivia-operator (market operator)",
        "invitation.created": "olivia-operator (market operator)",
        "invitation.accepted": "ada (Harbour Clinic)",
        "membership.requested": "ada (Harbour Clinic)",
        "membership.admitted": "olivia-operator (market operator)\nfor Harbour Clinic",
        "submission.uploaded": "ada (Harbour Clinic)",
        "submission.validated": "Harbour Clinic",
        "job.created": "olivia-operator (market operator)",
        "listing.published": "olivia-operator (market operator)",
        "wallet.credit_request_approved": "olivia-operator (market operator)\nfor Fabrikam Insurance",
        "purchase.created": "bob (Fabrikam Insurance)",
        "wallet.payout_recorded": "olivia-operator (market operator)\nfor Harbour Clinic",
        "token.created": "bob (Fabrikam Insurance)",
        "model.predicted": "bob (Fabrikam Insurance)",
    }
    missing = {
        action: who
        for action, who in expected.items()
        if not any(who in row for row in audit_rows(page, url, action))
    }
    every_row = "\n".join(audit_rows(page, url, ""))
    assert (
        re.findall(
            r"(?:Invitation|JoinRequest|Membership|PublicDataset|EvaluationSplit|ApiToken) #",
            every_row,
        )
        == []
    )
    assert missing == {}, (missing, [event.action for event in AuditEvent.objects.order_by("id")])
    assert scan.problems == []
    assert script_errors == []
