"""Every `train` command the silo guide and the toolkit page show, run as written (offline, on a pulled folder and
150 rows of Adult): each trains the students and the silo's own model."""

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import csv_bytes

DOCS = Path(__file__).resolve().parents[3] / "docs"


def documented_train_commands(page: str) -> list[list[str]]:
    """The `python -m workers.silo train ...` lines of ``page``'s sh blocks, continuation lines joined, comments
    dropped, split as a shell would."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", (DOCS / page).read_text(), re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("python -m workers.silo train "):
                commands.append(shlex.split(line, comments=True))
    return commands


def test_the_docs_show_train_commands():
    assert len(documented_train_commands("silo-guide.md")) == 1
    assert len(documented_train_commands("toolkit.md")) == 2


@pytest.mark.parametrize(
    "command",
    documented_train_commands("silo-guide.md") + documented_train_commands("toolkit.md"),
    ids=lambda command: " ".join(command[3:]),
)
def test_a_documented_train_command_trains_the_students_and_the_own_model(
    run_cli, pulled, adult_frame, monkeypatch, command
):
    monkeypatch.chdir(pulled.parent)  # where `pull adult-income` wrote ./onefold-adult-income
    data = command[command.index("--data") + 1]
    Path(data).write_bytes(csv_bytes(adult_frame.iloc[1000:1150]))
    assert command[:3] == ["python", "-m", "workers.silo"]
    code, out, err = run_cli(*command[3:], "--json")
    assert code == 0, err
    result = json.loads(out)
    assert (
        result["files"][-1] == "own-model.onnx" and result["own_model"]["file"] == "own-model.onnx"
    )
    assert (result["partitions"], result["teachers"]) == (2, 5)
    assert all((Path(result["output"]) / name).is_file() for name in result["files"])
