"""The silo toolkit's wheel, built by the market from ``workers/pyproject.toml`` and served at ``/toolkit/``."""
