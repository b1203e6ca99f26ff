"""What the client returns: frozen dataclasses of the market's answers, read once from the JSON.

Each class names the fields the toolkit and its users work with; ``data`` keeps the whole answer as the
market sent it (every other field, and what ``--json`` prints). Only the standard library is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

Result = TypeVar("Result")


def _read(cls: type[Result], payload: dict, **converted: Any) -> Result:
    """``cls`` from the payload's fields of the same names (absent ones None), ``converted`` ones as given."""
    names = [
        item.name for item in fields(cls) if item.name != "data" and item.name not in converted
    ]
    return cls(**{name: payload.get(name) for name in names}, **converted, data=payload)


@dataclass(frozen=True)
class Organisation:
    id: int
    name: str
    is_silo: bool
    is_buyer: bool
    data: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: dict) -> Organisation:
        return _read(cls, payload)


@dataclass(frozen=True)
class Profile:
    """``GET me/``: the account and its organisation (None for an operator without one)."""

    username: str
    is_operator: bool
    organisation: Organisation | None
    data: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: dict) -> Profile:
        organisation = payload.get("organisation")
        return _read(
            cls,
            payload,
            organisation=Organisation.from_json(organisation) if organisation else None,
        )


@dataclass(frozen=True)
class Federation:
    slug: str
    name: str
    class_labels: list[str]
    label_column: str
    allowed_privacy_levels: list[str]
    is_member: bool
    data: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: dict) -> Federation:
        return _read(cls, payload)


@dataclass(frozen=True)
class Submission:
    """An upload: ``status`` is pending, validating, valid or rejected (with ``rejection_reason``)."""

    id: int
    federation: str
    status: str
    rejection_reason: str
    model_family: str
    privacy_level: str
    declared_epsilon: float | None
    data: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: dict) -> Submission:
        return _read(cls, payload)


@dataclass(frozen=True)
class Job:
    """A job: ``progress`` is ``{"stage", "percent", ...}``; ``global_model`` its model's id once it succeeded."""

    id: int
    federation: str
    kind: str
    privacy_level: str
    status: str
    failure_reason: str
    submissions: list[int]
    progress: dict
    global_model: int | None
    data: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: dict) -> Job:
        return _read(
            cls,
            payload,
            progress=payload.get("progress") or {},
            submissions=list(payload.get("submissions") or []),
        )


@dataclass(frozen=True)
class Augmentation:
    """A federated augmentation: ``status`` collecting, queued, training, published, failed or cancelled; ``epsilon`` the
    DP generator's example-level ε (None without DP); ``seeds`` the seed counts and leakage the viewer may see
    (a silo: its own only)."""

    id: int
    federation: str
    name: str
    n_features: int
    status: str
    status_reason: str
    private: bool
    generator: str | None  # "mlp_gan" or "ctgan" (None from a market before generators had kinds)
    epsilon: float | None
    generator_spec: dict | None
    seeds: list[dict]
    data: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: dict) -> Augmentation:
        return _read(cls, payload, seeds=list(payload.get("seeds") or []))


@dataclass(frozen=True)
class GlobalModel:
    id: int
    federation: str
    data: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: dict) -> GlobalModel:
        return _read(cls, payload)


@dataclass(frozen=True)
class Listing:
    """A catalog entry; ``card`` (the model card) is filled in by ``listing(id)``, not in catalog pages;
    ``quality_flags`` (the web's warning badges) in catalog pages only."""

    id: int
    name: str
    description: str
    licence_text: str
    price_cents: int
    status: str
    federation: str
    global_model: int
    model_family: str
    privacy_level: str
    accuracy: float | None
    balanced_accuracy: float | None
    macro_f1: float | None
    roc_auc: float | None
    card: dict | None
    quality_flags: list[str] | None  # the catalog's warning badges, as the web's catalog shows them
    data: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: dict) -> Listing:
        return _read(cls, payload)


@dataclass(frozen=True)
class ListingPage:
    """One page of the catalog: ``count`` listings in all, ``results`` on this page."""

    count: int
    results: list[Listing]
    next: str | None
    previous: str | None
    data: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: dict | list) -> ListingPage:
        if isinstance(payload, list):  # an unpaginated answer
            payload = {"count": len(payload), "results": payload, "next": None, "previous": None}
        return _read(
            cls, payload, results=[Listing.from_json(item) for item in payload.get("results", [])]
        )


@dataclass(frozen=True)
class Purchase:
    id: int
    listing: int
    listing_name: str
    global_model: int
    price_cents: int
    data: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: dict) -> Purchase:
        return _read(cls, payload)


@dataclass(frozen=True)
class DownloadLink:
    """A signed, short-lived link to a global model's file."""

    url: str
    expires_at: str | None
    data: dict = field(repr=False, compare=False)
    #: The name the market gave the file once downloaded (its ``Content-Disposition``), else None.
    filename: str | None = None

    @classmethod
    def from_json(cls, payload: dict) -> DownloadLink:
        return _read(cls, payload)


@dataclass(frozen=True)
class Prediction:
    """``classes`` (class indices, one per row), ``probabilities`` (one row of K per row), ``class_labels``."""

    classes: list[int]
    probabilities: list[list[float]]
    class_labels: list[str]
    data: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, payload: dict) -> Prediction:
        return _read(
            cls,
            payload,
            class_labels=payload.get("class_labels") or [],
            classes=payload.get("classes") or [],
            probabilities=payload.get("probabilities") or [],
        )


__all__ = [
    "DownloadLink",
    "Federation",
    "GlobalModel",
    "Job",
    "Listing",
    "ListingPage",
    "Organisation",
    "Prediction",
    "Profile",
    "Purchase",
    "Submission",
]
