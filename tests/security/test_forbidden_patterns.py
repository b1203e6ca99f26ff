import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "forbidden_patterns", ROOT / ".ci" / "forbidden_patterns.py"
)
forbidden_patterns = importlib.util.module_from_spec(spec)
spec.loader.exec_module(forbidden_patterns)


def messages(source: str) -> list[tuple[int, str]]:
    return [
        (finding.line, finding.message)
        for finding in forbidden_patterns.findings_in_source(source, "x.py")
    ]


@pytest.mark.parametrize(
    "source",
    [
        "import pickle\npickle.loads(data)",
        "import pickle\npickle.load(stream)",
        "import pickle as p\np.loads(data)",
        "from pickle import loads\nloads(data)",
        "from pickle import load as read\nread(stream)",
        "import joblib\njoblib.load('m.joblib')",
        "import torch\ntorch.load('m.pt')",
        "import torch\ntorch.load('m.pt', weights_only=False)",
        "import numpy as np\nnp.load('a.npy', allow_pickle=True)",
        "import numpy\nnumpy.load('a.npy', allow_pickle=True)",
        "import yaml\nyaml.load(text)",
        "import yaml\nyaml.load(text, Loader=yaml.Loader)",
        "import yaml\nyaml.unsafe_load(text)",
        "eval('1 + 1')",
        "exec(code)",
        "from django.views.decorators.csrf import csrf_exempt",
        "import django.views.decorators.csrf as c\nview = c.csrf_exempt(view)",
    ],
)
def test_each_forbidden_pattern_is_found(source):
    found = messages(source)
    assert len(found) >= 1
    assert found[0][0] == len(source.splitlines()) or "csrf" in found[0][1]


@pytest.mark.parametrize(
    "source",
    [
        "import pickletools\npickletools.genops(data)",
        "import pickle\npickle.dumps(value)",
        "import torch\ntorch.load('m.pt', weights_only=True)",
        "import numpy as np\nnp.load('a.npz', allow_pickle=False)\nnp.load('b.npz')",
        "import yaml\nyaml.load(text, Loader=yaml.SafeLoader)\nyaml.safe_load(text)",
        "model.eval()\nnetwork.eval()",
        "# pickle.loads(data) in a comment\ntext = 'eval(x)'",
        "import pickle\npickle.loads(data)  # forbidden-ok: reviewed, the bytes are our own",
    ],
)
def test_safe_uses_and_reviewed_exceptions_pass(source):
    assert messages(source) == []


def test_findings_name_the_file_and_line():
    [finding] = forbidden_patterns.findings_in_source(
        "x = 1\nimport joblib\njoblib.load(p)\n", "workers/m.py"
    )
    assert (
        str(finding)
        == "workers/m.py:3: joblib.load unpickles; use a safe format (ONNX, XGBoost JSON, safetensors)"
    )


def test_the_command_fails_on_a_planted_pattern_and_passes_on_the_source(tmp_path):
    script = ROOT / ".ci" / "forbidden_patterns.py"
    assert (
        subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True).returncode == 0
    )
    (tmp_path / "bad.py").write_text("import torch\nstate = torch.load(path)\n")
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 1
    assert (
        "bad.py:2: torch.load without weights_only=True unpickles arbitrary objects"
        in result.stdout
    )
