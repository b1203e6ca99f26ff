import pytest
import torch

from workers.zoo import SpecError, build_module, n_features_of

PAPER_CNN = {
    "architecture": "cnn",
    "image_shape": [1, 28, 28],
    "conv_channels": [6, 16],
    "kernel_size": 5,
    "hidden_sizes": [120, 84],
    "n_classes": 10,
}


def test_build_module_builds_the_papers_cnn_reading_flat_features():
    module = build_module(PAPER_CNN)
    assert n_features_of(PAPER_CNN) == 784
    assert module(torch.zeros(3, 784)).shape == (3, 10)


def test_build_module_builds_an_mlp():
    module = build_module(
        {"architecture": "mlp", "n_features": 14, "hidden_sizes": [8], "n_classes": 2}
    )
    assert module(torch.zeros(5, 14)).shape == (5, 2)


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"architecture": "resnet", "n_classes": 2, "hidden_sizes": [4]}, "Unknown architecture"),
        (
            {"architecture": "mlp", "n_features": 0, "hidden_sizes": [4], "n_classes": 2},
            "'n_features'",
        ),
        (
            {"architecture": "mlp", "n_features": 4, "hidden_sizes": [], "n_classes": 2},
            "'hidden_sizes'",
        ),
        (
            {
                "architecture": "mlp",
                "n_features": 1_000_000,
                "hidden_sizes": [4096],
                "n_classes": 2,
            },
            "parameters",
        ),
        ({**PAPER_CNN, "image_shape": [1, 8, 8]}, "below one pixel"),
        ("mlp", "JSON object"),
    ],
)
def test_build_module_refuses_bad_specs_with_a_reason(spec, message):
    with pytest.raises(SpecError, match=message):
        build_module(spec)
