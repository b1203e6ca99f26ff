"""Adding a model format: the checklist (docs/architecture.md, "Adding a model format").

A format is recognised from its bytes, checked statically, loaded only inside the sandbox, and named in every place
below. Files marked ``names_every_format`` name each upload format (``ModelFormat.<NAME>``) today, so a new format
that one of them misses fails tests/docs/test_architecture_examples.py; the others are checked to exist.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    path: str
    what: str
    names_every_format: bool = False


MODEL_FORMAT_CHECKLIST = (
    Step(
        "workers/modelio/base.py",
        "a ModelFormat member (what silos upload), the same in ArtifactFormat, and its FILE_EXTENSIONS entry",
        names_every_format=True,
    ),
    Step(
        "workers/modelio/identify.py",
        "identify_format recognises it from the bytes (never the file name) and refuses look-alikes",
        names_every_format=True,
    ),
    Step(
        "workers/modelio/validate.py",
        "inspect_model's static checks (size caps of ModelLimits, classes, features) before any native library "
        "reads it; the format's own checks in a module beside it (onnx_checks.py, safetensors_checks.py, ...)",
    ),
    Step(
        "workers/modelio/native.py",
        "predict_probabilities's loader, which runs inside the sandbox only (workers/modelio/sandbox.py), and "
        "onnx_conversion, the portable copy a buyer downloads",
        names_every_format=True,
    ),
    Step(
        "workers/modelio/families.py",
        "the model families it can carry (the one vocabulary of families)",
    ),
    Step(
        "workers/modelio/artifact.py",
        "the one exporter's table: which family exports to it (native, portable, upload formats)",
    ),
    Step("market/commerce/packages.py", "what a buyer's download of it holds"),
    Step("market/submissions/apis.py", "the upload API's help: the formats it accepts"),
    Step("docs/silo-guide.md", "how a silo exports a model in it"),
    Step(
        "tests/workers/modelio/test_identify.py",
        "a real file of the format identified, and a malformed one refused with a sentence "
        "(test_validate.py: inspected; test_sandbox.py: predicted in the sandbox)",
    ),
)
