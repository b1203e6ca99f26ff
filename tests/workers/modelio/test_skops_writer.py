"""The skops writer: it imports skops without walking every scikit-learn module, and its files load with a buyer's
own skops and predict what the fitted model predicts."""

import json
import subprocess
import sys
import textwrap

import numpy as np

from workers.modelio.sandbox import PROJECT_ROOT

WRITE_IN_A_FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier
    from workers.modelio.skops_writer import skops_file
    features = np.random.default_rng(0).normal(size=(80, 3)).astype(np.float32)
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(features, features[:, 0] > 0)
    open(sys.argv[1], "wb").write(skops_file(model))
    np.save(sys.argv[2], model.predict_proba(features))
    import sklearn.utils
    print(json.dumps({
        "torch": "torch" in sys.modules,
        "gaussian_process": "sklearn.gaussian_process" in sys.modules,
        "all_estimators": sklearn.utils.all_estimators.__module__,
    }))
    """
)
LOAD_AS_A_BUYER = textwrap.dedent(
    """
    import sys
    import numpy as np
    import skops.io
    model = skops.io.load(sys.argv[1], trusted=skops.io.get_untrusted_types(file=sys.argv[1]))
    features = np.random.default_rng(0).normal(size=(80, 3)).astype(np.float32)
    np.save(sys.argv[2], model.predict_proba(features))
    """
)


def run_python(source: str, *arguments) -> str:
    return subprocess.run(
        [sys.executable, "-c", source, *map(str, arguments)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_writing_a_skops_file_imports_neither_torch_nor_every_scikit_learn_module(tmp_path):
    model_path, written, loaded = tmp_path / "model.skops", tmp_path / "a.npy", tmp_path / "b.npy"
    imported = json.loads(run_python(WRITE_IN_A_FRESH_PROCESS, model_path, written))
    assert imported == {
        "torch": False,
        "gaussian_process": False,
        "all_estimators": "sklearn.utils.discovery",  # put back after skops.io was imported
    }
    run_python(LOAD_AS_A_BUYER, model_path, loaded)
    assert np.array_equal(np.load(written), np.load(loaded))
