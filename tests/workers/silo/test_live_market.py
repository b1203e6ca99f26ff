"""The toolkit against a live market: real HTTP to a live test server, a real Celery worker validating uploads."""

import hashlib
import json

import numpy as np
import pytest

from tests.conftest import scaled_timeout
from tests.fixtures.silo import SMALL_FORESTS
from workers.silo.errors import EXIT_AUTH, EXIT_REFUSED

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def login_as(run_cli, live_server):
    def login(username: str, password: str):
        return run_cli(
            "login", "--market", live_server.url, "--username", username, "--password", password
        )

    return login


def test_login_stores_the_token_with_its_market_and_later_commands_use_it(
    login_as, run_cli, live_server, federation_with_data, private_config
):
    code, out, err = login_as("sam-silo", "silo-password")
    assert code == 0, err
    assert err == ""
    assert (
        out
        == f"Logged in to {live_server.url}/ as sam-silo (Northwind Hospital). Token stored in {private_config}.\n"
    )
    stored = json.loads(private_config.read_text())
    assert set(stored) == {"market_url", "username", "token"}
    assert (stored["market_url"], stored["username"]) == (f"{live_server.url}/", "sam-silo")
    assert len(stored["token"]) >= 20
    assert private_config.stat().st_mode & 0o777 == 0o600
    code, out, _ = run_cli("federations", "--json")
    assert code == 0
    assert [(item["slug"], item["is_member"]) for item in json.loads(out)["federations"]] == [
        ("adult-income", True)
    ]


def test_login_with_a_wrong_password_exits_4_and_stores_nothing(
    login_as, live_server, silo_user, private_config
):
    code, out, err = login_as("sam-silo", "not-the-password")
    assert (code, out) == (EXIT_AUTH, "")
    assert err == (
        f"Error: The market at {live_server.url}/ refused the username and password (Unable to log in "
        "with provided credentials.); check them and try again.\n"
    )
    assert not private_config.exists()


def test_a_token_for_another_market_is_refused_before_anything_is_sent(
    login_as, run_cli, live_server, silo_user
):
    login_as("sam-silo", "silo-password")
    code, out, err = run_cli("federations", "--market", "http://market.example.org", "--json")
    assert code == EXIT_AUTH
    message = (
        f"The stored token was issued by the market at {live_server.url}/, not by http://market.example.org/; "
        "a token only works on the market that issued it. Run `python -m workers.silo login --market "
        "http://market.example.org/` to log in there."
    )
    assert out == ""  # with --json the error is one JSON object on stderr
    assert json.loads(err) == {
        "error": {"message": message, "status": None, "exit_code": EXIT_AUTH}
    }


def test_a_token_this_market_did_not_issue_is_explained(
    run_cli, live_server, silo_user, private_config
):
    private_config.parent.mkdir(parents=True)
    private_config.write_text(
        json.dumps({"market_url": live_server.url, "token": "f" * 40, "username": "sam-silo"})
    )
    code, _, err = run_cli("federations")
    assert code == EXIT_AUTH
    assert err == (
        f"Error: The market at {live_server.url}/ refused the stored token (Invalid token.). It may belong "
        "to another market or have been revoked; run `python -m workers.silo login` again.\n"
    )


def test_pull_writes_the_public_features_and_specification(
    login_as, run_cli, federation_with_data, tmp_path
):
    import numpy as np

    from market.federations.selectors import public_dataset_current

    login_as("sam-silo", "silo-password")
    code, out, err = run_cli("pull", "adult-income", "--output", tmp_path / "pulled", "--json")
    assert code == 0, err
    assert json.loads(out)["n_public_rows"] == 2000
    public_dataset = public_dataset_current(federation=federation_with_data)
    assert (
        json.loads((tmp_path / "pulled" / "feature-spec.json").read_text())
        == public_dataset.feature_spec
    )
    with np.load(tmp_path / "pulled" / "features.npz") as arrays:
        assert arrays["features"].shape == (2000, public_dataset.n_features)


def test_a_silo_that_is_not_a_member_gets_the_markets_reason_and_exit_5(
    login_as, run_cli, federation_with_data, other_silo_user, tmp_path
):
    login_as("bea-bank", "bank-password")
    code, out, err = run_cli("pull", "adult-income", "--output", tmp_path / "pulled")
    assert (code, out) == (EXIT_REFUSED, "")
    assert err.startswith("Error: ") and "adult-income" in err
    code, out, _ = run_cli("join", "adult-income")
    assert (code, out) == (0, "Your organisation is a member of 'adult-income'.\n")
    assert run_cli("pull", "adult-income", "--output", tmp_path / "pulled")[0] == 0


def test_join_asks_a_federation_by_request_and_says_so_until_the_operator_admits(
    login_as, run_cli, federation_with_data, other_silo_user, operator
):
    from market.federations.membership import join_request_admit
    from market.federations.models import Federation, JoinRequest

    Federation.objects.update(membership_policy="request")
    login_as("bea-bank", "bank-password")

    code, out, _ = run_cli("join", "adult-income")
    join_request_admit(join_request_id=JoinRequest.objects.get().id, user=operator)
    admitted = run_cli("join", "adult-income")

    assert (code, out) == (
        0,
        "Your organisation asked to join 'adult-income'; the market's operator admits or refuses the "
        "request. Run this command again to see whether you are in.\n",
    )
    assert admitted[:2] == (0, "Your organisation is a member of 'adult-income'.\n")


@pytest.mark.worker
def test_pull_train_upload_gives_a_submission_the_worker_validates_and_one_it_rejects_exits_7(
    login_as,
    run_cli,
    live_server,
    celery_worker,
    federation_with_data,
    silo_csv,
    adult_training,
    tmp_path,
):
    """One worker validates what `pull`, `train` and `upload` produce; then an upload it rejects: a logistic
    regression whose ONNX graph emits raw scores (post_transform NONE) passes the static checks but predicts no
    probability distribution, and `upload` prints the market's reason and exits 7."""
    from onnx import ModelProto
    from sklearn.linear_model import LogisticRegression

    from market.submissions.models import Submission
    from workers.modelio.export import export_sklearn_onnx
    from workers.silo.errors import EXIT_REJECTED

    login_as("sam-silo", "silo-password")
    pulled = tmp_path / "pulled"
    assert run_cli("pull", "adult-income", "--output", pulled)[0] == 0
    code, out, err = run_cli(
        "train",
        "adult-income",
        "--data",
        silo_csv,
        "--pulled",
        pulled,
        *SMALL_FORESTS,
        "--privacy-level",
        "L2",
        "--gamma",
        "0.05",
        "--queries",
        "100",
        "--json",
    )
    assert code == 0, err
    trained = json.loads(out)
    code, out, err = run_cli("upload", pulled / "students", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["status"] == "valid"
    submission = Submission.objects.get(id=answer["id"])
    assert (submission.status, submission.model_family, submission.privacy_level) == (
        "valid",
        "random_forest",
        "L2",
    )
    assert (submission.n_local_examples, submission.label_distribution) == (
        400,
        trained["label_distribution"],
    )
    assert submission.local_validation_score == trained["local_validation_score"]
    assert submission.declared_epsilon == trained["declared_epsilon"]
    assert submission.privacy_report["epsilon"] == trained["declared_epsilon"]
    assert [f.original_name for f in submission.model_files.all()] == [
        "student-1.onnx",
        "student-2.onnx",
    ]
    code, out, err = run_cli("upload", pulled / "students", "--json")
    assert code == 0, err  # the same upload run again: its key returns the first submission
    assert json.loads(out)["id"] == answer["id"]
    assert json.loads(out)["idempotency_key"] == answer["idempotency_key"]
    code, out, _ = run_cli("upload", pulled / "students", "--idempotency-key", "another-run")
    assert (
        code == EXIT_REFUSED
    )  # the same files under a new key: the market's 409 sentence, no second row
    assert Submission.objects.count() == 1

    features, labels = adult_training
    model = ModelProto.FromString(
        export_sklearn_onnx(
            LogisticRegression(max_iter=200).fit(features, labels), features.shape[1]
        )
    )
    for attribute in model.graph.node[0].attribute:
        if attribute.name == "post_transform":
            attribute.s = b"NONE"
    folder = tmp_path / "trained"
    folder.mkdir()
    (folder / "scores.onnx").write_bytes(model.SerializeToString())
    (folder / "metadata.json").write_text(
        json.dumps(
            {
                "federation": "adult-income",
                "files": ["scores.onnx"],
                "model_family": "logistic_regression",
                "n_local_examples": 2000,
                "local_validation_score": 0.8,
                "privacy_level": "L0",
            }
        )
    )
    code, out, err = run_cli("upload", folder)
    submission = Submission.objects.exclude(id=answer["id"]).get()
    assert (code, out, submission.status) == (EXIT_REJECTED, "", "rejected")
    assert (
        err == f"Error: Submission #{submission.id} was rejected: {submission.rejection_reason}\n"
    )
    assert submission.rejection_reason == (
        "Model file 'scores.onnx' failed validation: its predicted probabilities "
        "are not a distribution over the federation's classes."
    )


@pytest.mark.worker
def test_a_dp_sgd_local_network_is_trained_declared_validated_and_charged_once_and_an_under_claim_is_refused(
    login_as, run_cli, live_server, celery_worker, federation_with_data, silo_csv, tmp_path
):
    from market.budgets.ledger import epsilon_decimal
    from market.budgets.models import BudgetEntry
    from market.submissions.models import Submission
    from workers.privacy.declarations import party_side_bound

    login_as("sam-silo", "silo-password")
    pulled = tmp_path / "pulled"
    assert run_cli("pull", "adult-income", "--output", pulled)[0] == 0
    code, out, err = run_cli(
        "train",
        "adult-income",
        "--data",
        silo_csv,
        "--pulled",
        pulled,
        "--local",
        "--student",
        "mlp",
        "--student-param",
        "hidden_sizes=[16]",
        "--student-param",
        "epochs=2",
        "--student-param",
        "batch_size=50",
        "--privacy-level",
        "L2",
        "--target-epsilon",
        "3",
        "--max-grad-norm",
        "1.5",
        "--json",
    )
    assert code == 0, err
    trained = json.loads(out)
    declaration = trained["privacy_parameters"]
    assert (
        declaration["mechanism"],
        declaration["accountant"],
        declaration["batch_size"],
        declaration["epochs"],
        declaration["max_grad_norm"],
    ) == ("dp_sgd", "rdp", 50, 2, 1.5)
    assert trained["model_family"] == "mlp" and trained["n_local_examples"] == 400
    assert 2.9 < trained["declared_epsilon"] <= 3.0
    assert (
        trained["declared_epsilon"]
        == party_side_bound(declaration, n_local_examples=400)[0].epsilon
    )
    recomputed = party_side_bound(declaration, n_local_examples=400)[0]
    metadata_file = pulled / "local-model" / "metadata.json"
    written = json.loads(metadata_file.read_text())
    metadata_file.write_text(json.dumps({**written, "declared_epsilon": 2.5}))
    code, out, err = run_cli("upload", pulled / "local-model")
    assert (code, out) == (EXIT_REFUSED, "")
    assert err == (
        f"Error: You declared ε = 2.5, but these parameters spend ε = {epsilon_decimal(recomputed.epsilon).normalize():f} (example-level, "
        f"{recomputed.n_queries} DP-SGD steps at sample rate {recomputed.sample_rate:.4g}, the market's RDP accountant, "
        "δ = 1e-05, rounded up to the millionth); declare at least that.\n"
    )
    assert (Submission.objects.count(), BudgetEntry.objects.count()) == (0, 0)  # nothing charged

    metadata_file.write_text(json.dumps(written))
    code, out, err = run_cli("upload", pulled / "local-model", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["status"] == "valid"
    submission = Submission.objects.get(id=answer["id"])
    assert (submission.model_family, submission.privacy_level, submission.declared_epsilon) == (
        "mlp",
        "L2",
        trained["declared_epsilon"],
    )
    assert submission.validated_by.split(":")[1] == str(celery_worker.pid)
    assert submission.privacy_report == trained["privacy_report"]
    [charge] = BudgetEntry.objects.filter(spender_kind="submission", spender_id=submission.id)
    assert (charge.kind, charge.epsilon, BudgetEntry.objects.count()) == (
        "charge",
        epsilon_decimal(recomputed.epsilon),
        1,
    )  # exactly the accountant's ε, once: validation charged nothing more


@pytest.fixture
def buyer_user(db):
    from market.accounts.services import organisation_create, user_create

    return user_create(
        username="bo-buyer",
        password="buyer-password",
        organisation=organisation_create(name="Fabrikam Insurance", is_silo=False, is_buyer=True),
    )


def silo_uploads(login_as, run_cli, frames, tmp_path) -> list[int]:
    """Each (username, password, rows) silo joins, pulls, trains and uploads with the toolkit; submission ids."""
    from tests.conftest import csv_bytes

    ids = []
    for username, password, rows in frames:
        login_as(username, password)
        assert run_cli("join", "adult-income")[0] == 0
        pulled = tmp_path / username
        assert run_cli("pull", "adult-income", "--output", pulled)[0] == 0
        (tmp_path / f"{username}.csv").write_bytes(csv_bytes(rows))
        code, _, err = run_cli(
            "train",
            "adult-income",
            "--data",
            tmp_path / f"{username}.csv",
            "--pulled",
            pulled,
            *SMALL_FORESTS,
            "--privacy-level",
            "L0",  # the federation defaults to L1; these students feed an L0 job
        )
        assert code == 0, err
        code, out, err = run_cli("upload", pulled / "students", "--json")
        assert code == 0, err
        ids.append(json.loads(out)["id"])
    return ids


@pytest.mark.worker
def test_a_job_over_toolkit_uploads_is_bought_downloaded_and_called_with_the_toolkit(
    login_as,
    run_cli,
    live_server,
    celery_worker,
    federation_with_data,
    other_silo_user,
    buyer_user,
    adult_frame,
    tmp_path,
):
    from market.commerce.models import Purchase
    from market.jobs.models import GlobalModelFile
    from workers.features import encode_features
    from workers.modelio.native import predict_probabilities
    from workers.silo.client import OnefoldClient

    submissions = silo_uploads(
        login_as,
        run_cli,
        [
            ("sam-silo", "silo-password", adult_frame.iloc[2000:2400]),
            ("bea-bank", "bank-password", adult_frame.iloc[2400:3000]),
        ],
        tmp_path,
    )
    from market.submissions.models import Submission

    for submission in Submission.objects.filter(
        id__in=submissions
    ):  # the toolkit's own model, validated
        files = list(submission.model_files.all())
        assert [f.original_name for f in files] == [
            "student-1.onnx",
            "student-2.onnx",
            "own-model.onnx",
        ]
        assert (files[-1].info["role"], submission.status) == ("own", "valid")
        assert (submission.partitions, submission.teachers) == (2, 5)
        assert 0.6 < submission.own_model_validation_score <= 1
    operator = OnefoldClient(live_server.url)
    operator.token = operator.obtain_token(username="olivia-operator", password="operator-password")
    job = operator.job_create(
        "adult-income",
        kind="fedkt",
        privacy_level="L0",
        submissions=submissions,
        seed=1,
        parameters={
            "partitions": 2,
            "vote": "consistent_hard",  # one forest, downloaded as ONNX below (auto may choose a bundle)
            "query": 500,
            "final_model": {"family": "random_forest", "n_estimators": 10},
        },
    )
    job = operator.job_wait(job.id, timeout_seconds=scaled_timeout(600))
    global_model = operator.global_model(job.global_model)
    assert sorted(job.submissions) == sorted(submissions)
    login_as("olivia-operator", "operator-password")
    code, out, _ = run_cli("job", job.id)
    assert code == 0
    assert out.startswith(f"Job #{job.id} (fedkt, L0): succeeded; stage ")
    listing = operator.listing_create(
        global_model=global_model.id,
        name="Adult income FedKT",
        price_cents=1500,
        description="",
        licence_text="Evaluation only.",
    )
    # This test is about delivery; two silos of 400 and 600 rows may not beat the majority-class guess by the
    # publish gate's 5 points, so the operator gives its reason (ignored when the model passes the gate).
    operator.listing_publish(
        listing.id, override_reason="Delivery test on a two-silo toy federation."
    )
    operator.wallet_top_up(buyer_user.organisation_id, amount_cents=5000, reference="invoice-1")

    login_as("bo-buyer", "buyer-password")
    code, out, _ = run_cli("catalog", "--json")
    assert code == 0
    assert [(item["id"], item["global_model"]) for item in json.loads(out)["listings"]] == [
        (listing.id, global_model.id)
    ]
    code, out, _ = run_cli("card", listing.id, "--json")
    assert (code, json.loads(out)["name"]) == (0, "Adult income FedKT")
    code, out, _ = run_cli("card", listing.id)
    warnings = json.loads(run_cli("card", listing.id, "--json")[1])["card"]["quality"]["warnings"]
    warning_lines = (
        "Warning: read before buying\n" + "".join(f"- {warning}\n" for warning in warnings)
        if warnings
        else ""
    )
    assert out.startswith(
        f"#{listing.id} Adult income FedKT [published] — 15.00 credits\n{warning_lines}Federation: adult-income "
        f"(<=50K, >50K); global model #{global_model.id}, random_forest, FedKT, L0\n"
    )
    first = run_cli("buy", listing.id, "--idempotency-key", "order-77", "--json")
    again = run_cli("buy", listing.id, "--idempotency-key", "order-77", "--json")
    assert first[0] == again[0] == 0
    assert json.loads(first[1])["id"] == json.loads(again[1])["id"]
    assert Purchase.objects.count() == 1
    code, out, err = run_cli(
        "download", global_model.id, "--format", "onnx", "--output", tmp_path / "model.onnx"
    )
    assert code == 0, err
    downloaded = (tmp_path / "model.onnx").read_bytes()
    assert (
        hashlib.sha256(downloaded).hexdigest()
        == GlobalModelFile.objects.get(global_model_id=global_model.id, format="onnx").sha256
    )
    rows = adult_frame.iloc[:5].drop(columns=["income"])
    rows.to_csv(tmp_path / "rows.csv", index=False)
    code, out, err = run_cli("predict", global_model.id, "--data", tmp_path / "rows.csv", "--json")
    assert code == 0, err
    answer = json.loads(out)
    spec = json.loads((tmp_path / "sam-silo" / "feature-spec.json").read_text())
    assert (
        global_model.data["feature_view"] == "ordinal"
    )  # a random forest: codes, not one-hot columns
    local = predict_probabilities(
        downloaded, "onnx", encode_features(rows, spec, view="ordinal"), n_classes=2
    )
    assert np.allclose(answer["probabilities"], local, atol=1e-5)
    assert answer["class_labels"] == ["<=50K", ">50K"]
