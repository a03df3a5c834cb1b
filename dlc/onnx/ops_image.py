"""ONNX ImageDecoder: its output's shape is the encoded image's (height, width), which
dlc's static shapes must know at import time. A constant image (an initializer) is
decoded at import by onnx's reference implementation (Pillow, as the reference
decodes it: the same pixels); an image that is a run-time input is refused."""

from __future__ import annotations

from dlc.onnx import fold
from dlc.onnx.emitter import ImportProblem
from dlc.onnx.node import Converter, Node, Result


def image_decoder(node: Node) -> list[Result]:
    node.attr("pixel_format")
    if node.constants[0] is None:
        raise ImportProblem(
            "the decoded image's shape depends on the encoded bytes, a run-time input "
            "(dlc compiles static shapes)"
        )
    try:
        import PIL.Image  # noqa: F401, PLC0415  (onnx's reference decodes with Pillow)
    except ImportError:
        raise ImportProblem("decoding a constant image needs Pillow (pip install pillow)") from None
    try:
        return [fold.fold(node.proto, node.constants, node.opset)[0]]
    except ValueError as err:
        raise ImportProblem(f"decoding at import: {err}") from None


CONVERTERS: dict[str, Converter] = {"ImageDecoder": image_decoder}
