"""ONNX TfIdfVectorizer on integer tokens and ImageDecoder, compiled by dlc and
interpreted, against onnx's reference implementation."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from onnx_models import check_reference, typed_model

import dlc
import dlc.onnx
from dlc.onnx import OnnxImportError

# 1-grams 2, 3, 5, 4, 2 (2 twice: the second counts), 2-grams (5, 6), (7, 8), (6, 7),
# (5, 6) again, 3-gram (2, 3, 5)
POOL = [2, 3, 5, 4, 2, 5, 6, 7, 8, 6, 7, 5, 6, 2, 3, 5]
COUNTS = [0, 5, 13]
INDEXES = [0, 1, 2, 3, 4, 5, 6, 5, 7, 2]  # outputs 2 and 5 collect two n-grams each


@pytest.mark.parametrize(
    ("mode", "low", "high", "skip", "weights"),
    [
        ("TF", 1, 3, 0, None),
        ("TF", 2, 2, 3, None),
        ("IDF", 1, 2, 1, [0.5, -1.0, 2.0, 1.0, 3.0, 1.5, -2.0, 0.25]),
        ("TFIDF", 1, 3, 2, [0.5, -1.0, 2.0, 1.0, 3.0, 1.5, -2.0, 0.25]),
    ],
)
def test_tfidf_counts_ngrams_as_the_reference(mode, low, high, skip, weights):
    x = np.random.default_rng(0).integers(2, 9, (3, 11)).astype(np.int32)
    x[0, :5] = [2, 3, 5, 6, 7]
    attrs = dict(
        mode=mode, min_gram_length=low, max_gram_length=high, max_skip_count=skip,
        ngram_counts=COUNTS, ngram_indexes=INDEXES, pool_int64s=POOL,
    )  # fmt: skip
    if weights:
        attrs["weights"] = weights
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    check_reference(typed_model([node], {"x": ((3, 11), TensorProto.INT32)}), x)
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    check_reference(typed_model([node], {"x": ((11,), TensorProto.INT64)}), x[0].astype(np.int64))


def test_tfidf_without_weights():
    """IDF without weights is 1 where an n-gram occurs, TFIDF the counts (onnx's
    reference fails on a missing `weights`: compared with its TF counts)."""
    x = np.random.default_rng(2).integers(2, 9, (2, 9)).astype(np.int64)
    attrs = dict(min_gram_length=1, max_gram_length=3, max_skip_count=1, ngram_counts=COUNTS,
                 ngram_indexes=INDEXES, pool_int64s=POOL)  # fmt: skip
    outputs = {}
    for mode in ("TF", "IDF", "TFIDF"):
        node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode=mode, **attrs)
        outputs[mode] = dlc.compile_onnx(typed_model([node], {"x": ((2, 9), TensorProto.INT64)})).g(
            x
        )
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF", **attrs)
    (tf,) = ReferenceEvaluator(node).run(None, {"x": x})
    assert tf.max() > 1
    np.testing.assert_array_equal(outputs["TF"], tf)
    np.testing.assert_array_equal(outputs["TFIDF"], tf)
    np.testing.assert_array_equal(outputs["IDF"], (tf > 0).astype(np.float32))


TFIDF_BASE = dict(mode="TF", min_gram_length=1, max_gram_length=1, ngram_counts=[0],
                  ngram_indexes=[0, 1], pool_int64s=[4, 5])  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "x_type", "message"),
    [
        ({"pool_int64s": None, "pool_strings": ["a"]}, TensorProto.INT32,
         "only pool_int64s (integer tokens) is supported"),
        ({"ngram_counts": None}, TensorProto.INT32,
         "ngram_counts, min_gram_length ≤ max_gram_length are required"),
        ({}, TensorProto.FLOAT, "the input must be i32 or i64 tokens of rank ≤ 2"),
        ({"ngram_indexes": [0]}, TensorProto.INT64, "ngram_indexes needs 2 non-negative entries"),
        ({"mode": "IDF", "weights": [1.0]}, TensorProto.INT64, "weights needs 2 entries"),
    ],
)  # fmt: skip
def test_tfidf_refusals(changes, x_type, message):
    attrs = {k: v for k, v in {**TFIDF_BASE, **changes}.items() if v is not None}
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    with pytest.raises(OnnxImportError) as err:
        dlc.onnx.load(typed_model([node], {"x": ((3,), x_type)}))
    assert err.value.problems == [f"node #0 (TfIdfVectorizer): {message}"]


def _png(pixels: np.ndarray) -> np.ndarray:
    image = pytest.importorskip("PIL.Image")
    out = io.BytesIO()
    image.fromarray(pixels).save(out, format="PNG")
    return np.frombuffer(out.getvalue(), np.uint8)


@pytest.mark.parametrize("pixel_format", ["RGB", "BGR", "Grayscale"])
def test_image_decoder_decodes_a_constant_image_at_import(pixel_format):
    pixels = np.random.default_rng(1).integers(0, 256, (5, 7, 3)).astype(np.uint8)
    node = helper.make_node("ImageDecoder", ["data"], ["y"], pixel_format=pixel_format)
    model = typed_model([node], {}, {"data": _png(pixels)}, opset=20)
    (expected,) = ReferenceEvaluator(model).run(None, {})
    got = dlc.compile_onnx(model).g()
    assert got.dtype == np.uint8 and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_image_decoder_of_a_run_time_image_is_refused():
    node = helper.make_node("ImageDecoder", ["data"], ["y"])
    with pytest.raises(OnnxImportError) as err:
        dlc.onnx.load(typed_model([node], {"data": ((100,), TensorProto.UINT8)}, opset=20))
    assert err.value.problems == [
        "node #0 (ImageDecoder): the decoded image's shape depends on the encoded bytes, "
        "a run-time input (dlc compiles static shapes)"
    ]


def test_image_decoder_refuses_constant_images_it_cannot_decode(monkeypatch):
    """Too many pixels to decode at import; no Pillow to decode with."""
    node = helper.make_node("ImageDecoder", ["data"], ["y"])
    large = typed_model([node], {}, {"data": _png(np.zeros((200, 200, 3), np.uint8))}, opset=20)
    with pytest.raises(OnnxImportError) as err:
        dlc.onnx.load(large)
    assert err.value.problems == [
        "node #0 (ImageDecoder): decoding at import: folded output exceeds 65536 elements"
    ]
    small = typed_model([node], {}, {"data": _png(np.zeros((2, 2, 3), np.uint8))}, opset=20)
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    with pytest.raises(OnnxImportError) as err:
        dlc.onnx.load(small)
    assert err.value.problems == [
        "node #0 (ImageDecoder): decoding a constant image needs Pillow (pip install pillow)"
    ]
