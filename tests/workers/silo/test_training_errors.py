"""`train` refuses data a silo got wrong with a sentence that says what to fix, and exit code 3 (data)."""

import json

import pytest

from tests.conftest import csv_bytes
from tests.fixtures.silo import SMALL_FORESTS
from workers.silo.errors import EXIT_DATA


def train(run_cli, pulled, data, *extra):
    """``(exit code, stdout, stderr)`` of ``train``, stderr without its progress lines ("Reading ...", each ending
    in "...", tested in test_training_guard_rails.py): what is left is the refusal alone."""
    code, out, err = run_cli(
        "train",
        "adult-income",
        "--data",
        data,
        "--pulled",
        pulled,
        "--output",
        pulled / "out",
        *SMALL_FORESTS,
        *extra,
    )
    refusal = [line for line in err.splitlines(keepends=True) if not line.endswith("...\n")]
    return code, out, "".join(refusal)


def test_train_refuses_a_table_without_the_specifications_columns(
    run_cli, pulled, tmp_path, adult_frame
):
    path = tmp_path / "renamed.csv"
    path.write_bytes(
        csv_bytes(adult_frame.iloc[2500:3000].rename(columns={"age": "Age", "gender": "sex"}))
    )
    code, out, err = train(run_cli, pulled, path)
    assert code == EXIT_DATA
    assert out == ""
    assert err.startswith(
        "Error: The table lacks the column(s) age, gender that the federation's feature "
        "specification names; it expects age, workclass,"
    )
    assert not (pulled / "out").exists()


def test_train_refuses_a_table_without_the_label_column(run_cli, pulled, tmp_path, adult_frame):
    path = tmp_path / "unlabelled.csv"
    path.write_bytes(csv_bytes(adult_frame.iloc[2500:3000].drop(columns=["income"])))
    code, _, err = train(run_cli, pulled, path)
    assert code == EXIT_DATA
    assert err == (
        "Error: The table has no 'income' column, the federation's label column; name the column holding "
        "your labels 'income' (or pass --label-column).\n"
    )


def test_train_names_the_classes_the_federation_does_not_have(
    run_cli, pulled, tmp_path, adult_frame
):
    rows = adult_frame.iloc[2500:3000].copy()
    rows.loc[rows.index[:3], "income"] = "unknown"
    rows.loc[rows.index[3], "income"] = "50K-100K"
    path = tmp_path / "odd-labels.csv"
    path.write_bytes(csv_bytes(rows))
    code, _, err = train(run_cli, pulled, path)
    assert code == EXIT_DATA
    assert err == (
        "Error: The label column holds '50K-100K', 'unknown', which the federation's class labels "
        "(<=50K, >50K) do not include.\n"
    )


def test_train_refuses_too_few_rows_for_s_times_t_teachers(run_cli, pulled, tmp_path, adult_frame):
    path = tmp_path / "small.csv"
    path.write_bytes(
        csv_bytes(adult_frame.iloc[2500:2560])
    )  # 48 training rows after a 20 % hold-out
    code, _, err = train(run_cli, pulled, path, "--partitions", "2", "--teachers", "5")
    assert code == EXIT_DATA
    assert err == (
        "Error: 48 training rows are too few for s = 2 partitions × t = 5 teachers: each partition splits "
        "the rows into 5 disjoint teacher subsets of at least 10 rows, so at least 50 are needed. Lower "
        "--teachers to 4 (the most your rows allow), or leave --teachers out and `train` chooses t for your "
        "rows.\n"
    )
    assert not (pulled / "out").exists()


def test_train_refuses_a_silo_with_too_few_rows_for_one_teacher_and_says_which_option_helps(
    run_cli, pulled, tmp_path, adult_frame
):
    path = tmp_path / "tiny.csv"
    path.write_bytes(
        csv_bytes(adult_frame.iloc[2500:2506])
    )  # 4 training rows after a 20 % hold-out
    code, _, err = train(run_cli, pulled, path)
    assert code == EXIT_DATA
    assert err == (
        "Error: 4 training rows are too few. A silo needs at least 5 training rows to take part; add labelled "
        "rows, or hold fewer out with a lower --validation-fraction.\n"
    )
    assert not (pulled / "out").exists()
    code, out, err = train(run_cli, pulled, path, "--validation-fraction", "0.1", "--json")
    assert code == 0, err
    assert (json.loads(out)["n_local_examples"], json.loads(out)["teachers"]) == (5, 1)


def test_train_refuses_text_in_a_numeric_column(run_cli, pulled, tmp_path, adult_frame):
    rows = adult_frame.iloc[2500:3000].copy()
    rows["age"] = rows["age"].astype(str)
    rows.loc[rows.index[0], "age"] = "thirty"
    path = tmp_path / "text-age.csv"
    path.write_bytes(csv_bytes(rows))
    code, _, err = train(run_cli, pulled, path)
    assert code == EXIT_DATA
    assert err == "Error: Column 'age' must be numeric but holds text values.\n"


def test_train_needs_a_pull_first(run_cli, tmp_path, silo_csv):
    code, _, err = run_cli(
        "train", "adult-income", "--data", silo_csv, "--pulled", tmp_path / "nowhere"
    )
    assert code == EXIT_DATA
    assert "run `python -m workers.silo pull adult-income` first." in err


def test_train_at_l2_needs_exactly_one_noise_parameter(run_cli, pulled, silo_csv):
    code, _, err = train(run_cli, pulled, silo_csv, "--privacy-level", "L2")
    assert code == EXIT_DATA
    assert (
        err
        == "Error: At L2 give exactly one noise parameter: --gamma (Laplace) or --sigma (Gaussian).\n"
    )


def test_train_refuses_a_hyperparameter_the_learner_does_not_take_before_reading_any_data(
    run_cli, pulled, silo_csv
):
    code, _, err = train(run_cli, pulled, silo_csv, "--teacher-param", "n_estimators=5")
    assert code == EXIT_DATA
    assert err.startswith(
        "Error: The decision_tree learner does not take the hyperparameters ['max_depth', "
        "'n_estimators']"
    )


def test_train_refuses_a_privacy_level_the_federation_does_not_allow(run_cli, pulled, silo_csv):
    federation = (pulled / "federation.json").read_text().replace('"L0", "L1", "L2"', '"L1"')
    (pulled / "federation.json").write_text(federation)
    code, _, err = train(run_cli, pulled, silo_csv, "--privacy-level", "L0")
    assert code == EXIT_DATA
    assert err == "Error: 'adult-income' allows privacy levels L1, not L0.\n"


@pytest.mark.parametrize(
    "command",
    [
        "login",
        "federations",
        "pull",
        "train",
        "upload",
        "catalog",
        "card",
        "buy",
        "download",
        "predict",
        "join",
        "whoami",
        "submission",
        "job",
    ],
)
def test_every_command_has_help(run_cli, command):
    with pytest.raises(SystemExit) as exit_info:
        run_cli(command, "--help")
    assert exit_info.value.code == 0


def with_default_level(pulled, level: str):
    federation = json.loads((pulled / "federation.json").read_text())
    (pulled / "federation.json").write_text(
        json.dumps({**federation, "default_privacy_level": level})
    )


def test_train_declares_the_federations_default_level_as_the_upload_page_preselects_it(
    run_cli, pulled, silo_csv
):
    with_default_level(pulled, "L1")
    code, out, err = train(run_cli, pulled, silo_csv, "--json")
    assert code == 0, err
    assert json.loads(out)["privacy_level"] == "L1"


def test_a_federation_defaulting_to_l2_asks_the_silo_for_its_noise(run_cli, pulled, silo_csv):
    with_default_level(pulled, "L2")
    code, _, err = train(run_cli, pulled, silo_csv)
    assert code == EXIT_DATA
    assert err.startswith(
        "Error: 'adult-income' defaults to L2: give its noise (--gamma or --sigma;"
    )
