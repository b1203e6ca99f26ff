"""Identify a model file's format from its bytes, refusing every format that can run code.

Nothing here deserialises anything: pickles are recognised by their opcodes (parsed by
``pickletools``, which reads opcodes without executing them), compressed streams and archives
by their magic bytes and, for ZIP, by the names in the central directory.
"""

from __future__ import annotations

import io
import pickletools
import struct
import zipfile

from workers.modelio.base import EXPORT_ADVICE, ModelFormat, refuse

PICKLE_MESSAGE = (
    "This file is a Python pickle{how}; pickles can run code when loaded, so Onefold refuses them. "
    + EXPORT_ADVICE
)
COMPRESSED_MAGICS = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"]\x00\x00": "lzma",
    b"\x04\x22\x4d\x18": "lz4",
    b"\x28\xb5\x2f\xfd": "zstandard",
}
ZLIB_HEADERS = (b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda")
UBJSON_KEY_LENGTH_MARKERS = b"iUIlL$#}"


def identify_format(data: bytes) -> ModelFormat:
    """The format of an uploaded model file.

    Raises
    ------
    RefusedModelError
        For pickle, joblib, cloudpickle, torch's pickle-based checkpoints, TorchScript, numpy
        files, skops, other archives, compressed streams and anything unrecognised.
    """
    if not data:
        raise refuse("The model file is empty.")
    if data[:1] == b"\x80" and len(data) > 1 and data[1] <= 5:
        raise refuse(PICKLE_MESSAGE.format(how=f" (protocol {data[1]})"))
    _refuse_archives_and_compressed_streams(data)
    if data.startswith(b"\x93NUMPY"):
        raise refuse(
            "This file is a numpy array (.npy); Onefold does not load numpy files, which may hold "
            "pickled objects. " + EXPORT_ADVICE
        )
    if _looks_like_safetensors(data):
        return ModelFormat.SAFETENSORS
    if data[:1] == b"{":
        is_ubjson = data[1:2] != b"" and data[1] in UBJSON_KEY_LENGTH_MARKERS
        return ModelFormat.XGBOOST_UBJSON if is_ubjson else ModelFormat.XGBOOST_JSON
    if data.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] == b"{":
        return ModelFormat.XGBOOST_JSON
    if _parses_as_pickle(data):
        raise refuse(PICKLE_MESSAGE.format(how=" (text protocol)"))
    if _looks_like_onnx(data):
        return ModelFormat.ONNX
    raise refuse("Onefold does not recognise this file's format. " + EXPORT_ADVICE)


def _refuse_archives_and_compressed_streams(data: bytes) -> None:
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        raise refuse(_zip_message(data))
    for magic, name in COMPRESSED_MAGICS.items():
        if data.startswith(magic):
            raise refuse(
                f"This file is {name}-compressed (joblib writes pickles this way); Onefold does not "
                "unpack compressed uploads and refuses pickles, which can run code when loaded. "
                + EXPORT_ADVICE
            )
    if data[:2] in ZLIB_HEADERS:
        raise refuse(
            "This file is zlib-compressed (joblib writes pickles this way); Onefold does not unpack "
            "compressed uploads and refuses pickles, which can run code when loaded. "
            + EXPORT_ADVICE
        )


def _zip_message(data: bytes) -> str:
    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except (zipfile.BadZipFile, ValueError, OSError):
        names = []
    if any(
        name.endswith("constants.pkl") or "/code/" in name or name.startswith("code/")
        for name in names
    ):
        return (
            "This file is a TorchScript archive, which contains code and pickles, so Onefold refuses it. "
            "Save the state dict with safetensors or export to ONNX (see the silo guide)."
        )
    if any(name.endswith("data.pkl") for name in names):
        return (
            "This file is a PyTorch checkpoint saved with torch.save (a pickle inside a ZIP); pickles can run "
            "code when loaded, so Onefold refuses them. Save the state dict with safetensors instead "
            "(see the silo guide)."
        )
    if any(name.endswith(".npy") for name in names):
        return (
            "This file is a numpy archive (.npz); Onefold does not load numpy files, which may hold pickled "
            "objects. " + EXPORT_ADVICE
        )
    if "schema.json" in names:
        return "This file is a skops archive; Onefold does not accept skops files. " + EXPORT_ADVICE
    return "This file is a ZIP archive; Onefold accepts single model files only. " + EXPORT_ADVICE


def _looks_like_safetensors(data: bytes) -> bool:
    if len(data) < 10:
        return False
    (header_length,) = struct.unpack("<Q", data[:8])
    return 2 <= header_length <= len(data) - 8 and data[8:9] == b"{"


def _parses_as_pickle(data: bytes) -> bool:
    """Whether the bytes are a complete pickle opcode stream (read, never executed)."""
    try:
        for opcode, _argument, _position in pickletools.genops(io.BytesIO(data[:1_000_000])):
            if opcode.name == "STOP":
                return True
    except Exception:  # noqa: BLE001 - any parse failure means "not a pickle"
        return False
    return False


def _looks_like_onnx(data: bytes) -> bool:
    from google.protobuf.message import DecodeError
    from onnx import ModelProto

    try:
        model = ModelProto.FromString(data)
    except (DecodeError, ValueError, RuntimeError):
        return False
    return model.ir_version > 0 and model.HasField("graph") and len(model.graph.node) > 0
