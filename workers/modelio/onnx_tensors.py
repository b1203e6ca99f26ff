"""Reading an ONNX graph's tensors and node attributes, refusing damaged ones: shared by the graph checks
(:mod:`workers.modelio.onnx_checks`) and the tree-ensemble checks (:mod:`workers.modelio.onnx_trees`)."""

from __future__ import annotations

import numpy as np

from workers.modelio.base import refuse

FLOAT_TYPES = {1, 11}  # TensorProto.FLOAT, TensorProto.DOUBLE


def tensor_values(tensor) -> np.ndarray:
    """A float tensor's values, refused unless its data length matches its shape (checked first)."""
    from onnx import numpy_helper

    if tensor.data_type not in FLOAT_TYPES:
        raise refuse(f"The ONNX tensor {tensor.name!r} must hold float32 or float64 values.")
    n_elements = 1
    for dim in tensor.dims:
        if dim < 0:
            raise refuse(
                f"The ONNX tensor {tensor.name!r} has a negative dimension; the file is damaged."
            )
        n_elements *= dim
    item_size = 4 if tensor.data_type == 1 else 8
    stored = (
        len(tensor.raw_data) // item_size
        if tensor.raw_data
        else len(tensor.float_data) + len(tensor.double_data)
    )
    if stored != n_elements:
        raise refuse(
            f"The ONNX tensor {tensor.name!r} holds {stored} values but its shape needs {n_elements}; "
            "the file is damaged."
        )
    return numpy_helper.to_array(tensor)


def attributes_of(node) -> dict:
    """The node's attributes as Python lists and numpy arrays (tensor attributes decoded)."""
    from onnx import helper

    values = {}
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        if attribute.name.endswith("_as_tensor"):
            values[attribute.name.removesuffix("_as_tensor")] = tensor_values(value).ravel()
        else:
            values[attribute.name] = value
    return values
