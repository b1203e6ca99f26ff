"""The silo guide's Python example, run as written on downloaded public data, gives an accepted upload."""

import re
from pathlib import Path

from tests.conftest import csv_bytes
from tests.market.submissions.helpers import submit

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "silo-guide.md"


def test_the_silo_guides_example_produces_a_model_the_market_accepts(
    silo_api, federation_with_data, adult_frame, tmp_path, monkeypatch
):
    (tmp_path / "spec.json").write_bytes(
        silo_api.get("/api/federations/adult-income/public-dataset/feature-spec.json").content
    )
    (tmp_path / "my-data.csv").write_bytes(csv_bytes(adult_frame.iloc[2500:3000]))
    example = re.search(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(example, str(GUIDE), "exec"), {})
    response = submit(
        silo_api, {"student.json": (tmp_path / "student.json").read_bytes()}, model_family="xgboost"
    )
    assert response.status_code == 202, response.json()
