from workers.algorithms import kind_choices
from workers.algorithms.registry import ALGORITHMS


def test_the_registry_offers_every_registered_kind_with_its_label_fedkt_first():
    assert kind_choices() == [
        ("fedkt", "FedKT"),
        ("ensemble", "Ensemble of local models"),
        ("distill", "Ensemble distilled into one model"),
        ("cpfl", "Cohort-parallel distillation"),
    ]


def test_federated_distillation_is_not_a_job_kind():
    assert "fd" not in ALGORITHMS
