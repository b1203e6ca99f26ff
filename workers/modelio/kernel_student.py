"""The files of a kernel-distilled student (Guha et al., *One-Shot Federated Learning*, eq. 3): its arrays
(``kernel_npz``) and an ONNX graph.

The ``kernel_npz`` file holds ``support_vectors``, ``dual_coef``, ``gamma`` and ``temperature``: probabilities are
``softmax(exp(−gamma ‖x − support‖²) @ dual_coef / temperature)``.

The ONNX graph reads a float32 ``features`` matrix ``(n, d)`` and outputs ``logits`` ``(n, C)`` =
``Σ_j α'_j exp(−γ ‖x − x'_j‖²) / τ``; the market's ONNX runner applies the softmax, which gives
:meth:`KernelDistilledClassifier.predict_proba`. Only operators of the market's allow-list are
used (MatMul, Mul, Add, Sub, Clip, Exp, ReduceSum), no classifier node, so the model is read as a
network that outputs logits. Squared distances are expanded as ‖x‖² − 2 x·x' + ‖x'‖² (float32).
"""

from __future__ import annotations

import io

import numpy as np

from workers.modelio.export import FEATURES_INPUT_NAME


def kernel_student_npz(student) -> bytes:
    """``kernel_npz`` bytes of a fitted :class:`~workers.algorithms.kernel_distillation.KernelDistilledClassifier`."""
    buffer = io.BytesIO()
    np.savez(
        buffer,
        support_vectors=student.support_vectors_,
        dual_coef=student.dual_coef_,
        gamma=np.float64(student.gamma_),
        temperature=np.float64(student.temperature_),
    )
    return buffer.getvalue()


def kernel_student_onnx(student, n_features: int | None = None) -> bytes:
    """ONNX bytes of a fitted :class:`~workers.algorithms.kernel_distillation.KernelDistilledClassifier`."""
    from onnx import TensorProto, helper, numpy_helper

    support = np.asarray(student.support_vectors_, dtype=np.float32)
    n_features = support.shape[1] if n_features is None else n_features
    constants = {
        "support_t": support.T.copy(),
        "support_sq": np.einsum("ij,ij->i", support, support).astype(np.float32)[None, :],
        "minus_two": np.array(-2.0, dtype=np.float32),
        "minus_gamma": np.array(-student.gamma_, dtype=np.float32),
        "zero": np.array(0.0, dtype=np.float32),
        "axis_one": np.array([1], dtype=np.int64),
        "coefficients": (student.dual_coef_ / student.temperature_).astype(np.float32),
    }
    nodes = [
        helper.make_node("Mul", [FEATURES_INPUT_NAME, FEATURES_INPUT_NAME], ["squares"]),
        helper.make_node("ReduceSum", ["squares", "axis_one"], ["row_sq"], keepdims=1),
        helper.make_node("MatMul", [FEATURES_INPUT_NAME, "support_t"], ["cross"]),
        helper.make_node("Mul", ["cross", "minus_two"], ["cross2"]),
        helper.make_node("Add", ["cross2", "row_sq"], ["partial"]),
        helper.make_node("Add", ["partial", "support_sq"], ["distance_sq"]),
        helper.make_node("Clip", ["distance_sq", "zero"], ["distance_sq_clipped"]),
        helper.make_node("Mul", ["distance_sq_clipped", "minus_gamma"], ["exponent"]),
        helper.make_node("Exp", ["exponent"], ["kernel"]),
        helper.make_node("MatMul", ["kernel", "coefficients"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "kernel_distilled_student",
        [helper.make_tensor_value_info(FEATURES_INPUT_NAME, TensorProto.FLOAT, [None, n_features])],
        [
            helper.make_tensor_value_info(
                "logits", TensorProto.FLOAT, [None, student.dual_coef_.shape[1]]
            )
        ],
        initializer=[numpy_helper.from_array(value, name) for name, value in constants.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onefold", ir_version=8
    )  # IR 8 = opset 17; onnxruntime refuses newer IR than it knows
    return model.SerializeToString()
