"""External tensor data of an ONNX model, read only from a directory the caller names.

A tensor may keep its bytes in a file next to the model (`data_location = EXTERNAL`,
`location` relative to the model's directory). The location comes from the model, so
from whoever wrote it: read naively it names any file the process can read
(`../../etc/passwd`, `/proc/self/environ`, a symlink planted in the directory). The
rules here:

- a model read from a path reads its external data from the model's own directory; a
  model given as bytes or as a `ModelProto` has no directory, so it reads external
  data only when the caller names one (`external_data_dir=`), and is refused otherwise;
- a location is a relative path of plain names (no `..`, no absolute path, no drive);
  every component below the directory must be a real directory or file, not a symlink
  (checked with `lstat`, and the resolved path must stay inside the resolved directory);
- offset and length must lie within the file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

from onnx import AttributeProto, GraphProto, ModelProto, TensorProto

from dlc.diagnostics import DiagnosticError, Location


def _graph_tensors(graph: GraphProto) -> Iterator[TensorProto]:
    """Every tensor of `graph` and its subgraphs (iterative)."""
    graphs = [graph]
    while graphs:
        g = graphs.pop()
        yield from g.initializer
        for sparse in g.sparse_initializer:
            yield sparse.values
            yield sparse.indices
        for node in g.node:
            for attr in node.attribute:
                if attr.type == AttributeProto.TENSOR:
                    yield attr.t
                elif attr.type == AttributeProto.TENSORS:
                    yield from attr.tensors
                elif attr.type == AttributeProto.SPARSE_TENSOR:
                    yield attr.sparse_tensor.values
                    yield attr.sparse_tensor.indices
                elif attr.type == AttributeProto.GRAPH:
                    graphs.append(attr.g)
                elif attr.type == AttributeProto.GRAPHS:
                    graphs.extend(attr.graphs)


def model_tensors(model: ModelProto) -> Iterator[TensorProto]:
    """Every tensor of the model: its graph's and its local functions' (with subgraphs)."""
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        holder = GraphProto(node=function.node)
        yield from _graph_tensors(holder)


def _external(tensor: TensorProto) -> dict[str, str]:
    return {entry.key: entry.value for entry in tensor.external_data}


def _refuse(filename: str, tensor: TensorProto, why: str) -> DiagnosticError:
    return DiagnosticError(f"tensor '{tensor.name}': external data {why}", Location(filename, 0, 0))


def _safe_path(base: str, location: str, filename: str, tensor: TensorProto) -> str:
    """The real path of `location` under `base`, or a refusal."""
    parts = location.replace("\\", "/").split("/")
    if not location or os.path.isabs(location) or any(p in ("", ".", "..") for p in parts):
        raise _refuse(filename, tensor, f"location '{location}' is not a plain relative path")
    path = base
    for part in parts:
        path = os.path.join(path, part)
        try:
            mode = os.lstat(path).st_mode
        except OSError as e:
            raise _refuse(filename, tensor, f"'{location}': {e.strerror or e}") from None
        if stat.S_ISLNK(mode):
            raise _refuse(filename, tensor, f"location '{location}' goes through a symlink")
    if not stat.S_ISREG(mode):
        raise _refuse(filename, tensor, f"location '{location}' is not a regular file")
    real = os.path.realpath(path)
    if os.path.commonpath([real, base]) != base:
        raise _refuse(filename, tensor, f"location '{location}' is outside the data directory")
    return real


def _read(path: str, info: dict[str, str], filename: str, tensor: TensorProto) -> bytes:
    try:
        offset = int(info.get("offset", "0"))
        length = int(info["length"]) if "length" in info else None
    except ValueError:
        raise _refuse(filename, tensor, "offset or length is not an integer") from None
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if length is None:
            length = size - offset
        if offset < 0 or length < 0 or offset + length > size:
            raise _refuse(
                filename,
                tensor,
                f"range [{offset}, {offset + length}) is outside the {size}-byte file",
            )
        f.seek(offset)
        return f.read(length)


def load_external_data(model: ModelProto, base_dir: str | None, filename: str) -> ModelProto:
    """`model` with the bytes of every external tensor read in (a copy when there are any;
    the caller's proto is never changed). `base_dir` None refuses external data."""
    tensors = [t for t in model_tensors(model) if t.data_location == TensorProto.EXTERNAL]
    if not tensors:
        return model
    if base_dir is None:
        raise _refuse(
            filename,
            tensors[0],
            "is refused: a model given as bytes or a ModelProto reads external data only "
            "from a directory named by external_data_dir=",
        )
    base = os.path.realpath(base_dir)
    copy = ModelProto()
    copy.CopyFrom(model)
    for tensor in model_tensors(copy):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        info = _external(tensor)
        path = _safe_path(base, info.get("location", ""), filename, tensor)
        tensor.raw_data = _read(path, info, filename, tensor)
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]
    return copy
