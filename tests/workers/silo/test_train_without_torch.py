"""`[train]` trains the tree families without torch or Opacus; a family that needs them names the `[neural]` extra.

The toolkit runs in a subprocess whose import system refuses torch and opacus, as on a silo that installed
`onefold-toolkit[train]` alone: the default students, teachers and own model, and an XGBoost student, train and
write their files; an MLP student stops with the sentence that names `[neural]`.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import scaled_timeout
from workers.learners.registry import make_learner
from workers.silo.defaults import (
    DEFAULT_OWN_MODEL,
    DEFAULT_STUDENT,
    DEFAULT_TEACHER,
    learner_described,
)

ROOT = Path(__file__).resolve().parents[3]

WITHOUT_TORCH = textwrap.dedent(
    """
    import importlib.abc, sys

    class RefuseNeural(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "opacus"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, RefuseNeural())
    from workers.silo.cli import main

    code = main(sys.argv[1:])
    loaded = sorted({name.split(".")[0] for name in sys.modules} & {"torch", "opacus"})
    print(json.dumps({"neural_modules_loaded": loaded}), file=sys.stderr)
    sys.exit(code)
    """
).replace("import importlib.abc, sys", "import importlib.abc, json, sys")


def run_without_torch(*arguments, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, *map(str, arguments)],
        cwd=cwd,
        env={
            "PYTHONPATH": str(ROOT),
            "PATH": "/usr/bin:/bin",
            "ONEFOLD_CONFIG": str(cwd / "c.json"),
        },
        capture_output=True,
        text=True,
        timeout=scaled_timeout(600),
    )


def test_the_tree_families_train_without_torch_and_the_metadata_says_what_train_help_says(
    pulled, silo_csv
):
    trained = run_without_torch(
        "train", "adult-income", "--data", silo_csv, "--json", cwd=pulled.parent
    )
    assert trained.returncode == 0, trained.stderr
    assert '{"neural_modules_loaded": []}' in trained.stderr
    metadata = json.loads((pulled / "students" / "metadata.json").read_text())
    assert metadata["model_family"] == "random_forest"
    assert (pulled / "students" / "student-1.onnx").is_file()
    assert (pulled / "students" / "own-model.onnx").is_file()
    helped = run_without_torch("train", "--help", cwd=pulled.parent)
    help_text = " ".join(helped.stdout.split())  # argparse wraps lines
    # `train --help` names the learners the metadata records as trained
    assert metadata["teacher"] == DEFAULT_TEACHER and metadata["student"] == DEFAULT_STUDENT
    assert metadata["own_model"]["learner"] == DEFAULT_OWN_MODEL
    for learner in (DEFAULT_TEACHER, DEFAULT_STUDENT, DEFAULT_OWN_MODEL):
        assert f"default: {learner_described(learner)}" in help_text
    assert "random_forest and xgboost: 100 trees" in help_text
    assert make_learner({"family": "random_forest"}).n_estimators == 100
    assert make_learner({"family": "xgboost"}).n_estimators == 100

    xgboost = run_without_torch(
        "train", "adult-income", "--data", silo_csv, "--student", "xgboost",
        "--student-param", "n_estimators=10", "--no-own-model", "--output", "xgb",
        cwd=pulled.parent,
    )  # fmt: skip
    assert xgboost.returncode == 0, xgboost.stderr
    assert json.loads((pulled.parent / "xgb" / "metadata.json").read_text())["model_family"] == (
        "xgboost"
    )
    assert '{"neural_modules_loaded": []}' in xgboost.stderr


def test_a_neural_family_without_torch_names_the_neural_extra(pulled, silo_csv):
    refused = run_without_torch(
        "train", "adult-income", "--data", silo_csv, "--student", "mlp", cwd=pulled.parent
    )
    assert refused.returncode == 1
    assert "onefold-toolkit[neural]" in refused.stderr and "torch" in refused.stderr
