"""Warm sandbox session child: ``python -m workers.modelio.session_child EXCHANGE_DIR``; started only by
:class:`workers.modelio.session_pool.SessionPool`.

Like the one-shot child (:mod:`workers.modelio.child`) it lowers its resource limits before numpy or any native
library is imported, runs with a stripped environment in an empty home folder, and identifies (pickles are
refused) and structurally checks its one model, ``model.bin``, before a native library loads it. It then loads the
model once and answers requests until its standard input closes: each request is one line naming a features file
in the exchange folder (float32 ``.npy``); the answer is one JSON line ``{"error": ..., "cpu_seconds": ...}`` after
the probabilities were written to ``probabilities.npy`` (float64), so that the parent knows how much of the CPU
limit, which counts over the session's life, is left. The first line it writes says whether the model loaded.
"""

import json
import resource
import sys
from pathlib import Path

from workers.modelio.child import apply_resource_limits


def cpu_seconds() -> float:
    """CPU time this process has used (user and system), the quantity ``RLIMIT_CPU`` caps."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(exchange: Path) -> None:
    import numpy as np

    request = json.loads((exchange / "request.json").read_text())
    predictor, error = _loaded(exchange, request)
    _answer({"error": error})
    if predictor is None:
        return
    for line in sys.stdin:
        features = np.load(exchange / Path(line.strip()).name, allow_pickle=False)
        try:
            probabilities = predictor(np.ascontiguousarray(features, dtype=np.float32))
            np.save(exchange / "probabilities.npy", probabilities, allow_pickle=False)
            error = None
        except Exception as failure:  # noqa: BLE001 - a failing model answers with its error, as in child.py
            error = _sentence(failure)
        _answer({"error": error})


def _loaded(exchange: Path, request: dict):
    """The model's predictor, or ``None`` and the sentence saying why it is refused."""
    from workers.modelio.base import ModelLimits
    from workers.modelio.identify import identify_format
    from workers.modelio.native import probability_predictor
    from workers.modelio.validate import inspect_model

    data = (exchange / "model.bin").read_bytes()
    try:
        model_format = identify_format(
            data
        )  # always: pickles are refused even when checks are skipped
        if not request["skip_structural_checks"]:
            inspect_model(
                data,
                n_features=request["n_features"],
                n_classes=request["n_classes"],
                limits=ModelLimits(**request["model_limits"]),
            )
        return probability_predictor(data, model_format, n_classes=request["n_classes"]), None
    except Exception as failure:  # noqa: BLE001 - any native failure rejects the model, not the child
        return None, _sentence(failure)


def _sentence(failure: Exception) -> str:
    from workers.modelio.base import RefusedModelError
    from workers.modelio.child import describe_failure

    if isinstance(failure, RefusedModelError):
        return str(failure)
    return describe_failure(failure)


def _answer(message: dict) -> None:
    sys.stdout.write(json.dumps({**message, "cpu_seconds": cpu_seconds()}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    exchange_folder = Path(sys.argv[1])
    apply_resource_limits(
        json.loads((exchange_folder / "request.json").read_text())["sandbox_limits"]
    )
    main(exchange_folder)
