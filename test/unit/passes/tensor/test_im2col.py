"""Convolutions unfolded as im2col + a matrix product (the `unfold-convolutions` pass,
dlc/passes/tensor/unfold_convolutions.py): short rows (7, 14), strides 2, padding, right dilation, a 7 x 7 stem,
batch 2, constant and splat kernels and a 1 x 1 parameter kernel, more output
channels than pixels (the pixels as the product's rows), as ONNX Conv nodes. Each is compared with the exact float64 convolution within the bound of its
length-K float sum, and (without fma) bit for bit with the convolution's own nest
(the same sum in the same order); 1, 2 and 3 threads and bounds checks."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx_models import conv, make, node, randn

import dlc
from dlc.passes.tensor import unfold_convolutions, unfold_rule
from dlc.target import check_runnable

# (batch, in channels, out channels, size, kernel, stride, pad, dilation)
CASES = [
    (1, 8, 12, 7, 3, 1, 1, 1),  # ResNet's late 3x3: rows of 7
    (1, 16, 24, 7, 1, 1, 0, 1),  # a 1x1 over rows of 7
    (2, 6, 5, 14, 3, 1, 1, 2),  # batch 2, rows of 14, dilated (d=2, pad 1: 12 x 12)
    (1, 5, 6, 20, 3, 2, 1, 1),  # stride 2, a row tail
    (1, 3, 8, 23, 7, 2, 3, 1),  # the 7x7 stride-2 stem, odd size
    (1, 16, 8, 14, 1, 2, 0, 1),  # a strided 1x1 (ResNet's downsampling shortcut)
    # fewer pixels than output channels: the pixels are the product's rows
    (1, 32, 64, 6, 3, 1, 1, 1),  # 36 pixels, 64 channels, 288 products per output
    (1, 12, 48, 12, 3, 2, 1, 1),  # stride 2 onto 6 x 6
    (2, 256, 40, 6, 1, 1, 0, 1),  # batch 2, a 1x1 over the image itself (no cols nest)
    # rows of two vectors or more with AVX2 (short with AVX-512: unfolded on any host)
    (1, 6, 8, 28, 3, 1, 1, 1),  # rows of 28: the AVX2 tile would hold 2 channels
    (1, 64, 64, 20, 1, 1, 0, 1),  # a deep 1x1 over the image (POINTWISE_DEPTH)
]


def _model(
    case: tuple[int, ...], fill: bool = False, kernel_input: bool = False
) -> onnx.ModelProto:
    n, ci, co, size, k, s, p, d = case
    w = np.full((co, ci, k, k), 0.125, np.float32) if fill else randn(co, ci, k, k, seed=1)
    attrs = {"pads": [p] * 4, "strides": [s, s], "dilations": [d, d]}
    inputs: dict = {"x": (n, ci, size, size)}
    if kernel_input:
        inputs["w"] = w.shape
    out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    nodes = [node("Conv", ["x", "w"], ["y"], **attrs)]
    return make(nodes, inputs, {"y": (n, co, out, out)}, {} if kernel_input else {"w": w})


def _exact(case: tuple[int, ...], x: np.ndarray, w: np.ndarray) -> np.ndarray:
    *_, s, p, d = case
    return conv(x, w, [s, s], [(p, p)] * 2, [d, d])


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_im2col_convolution(case: tuple[int, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    n, ci, co, size, k = case[:5]
    x = randn(n, ci, size, size, seed=2)
    w = randn(co, ci, k, k, seed=1)
    model = _model(case)
    threads = 1 + sum(case) % 3
    compiled = dlc.compile_onnx(model, fma=False, num_threads=threads, bounds_check=True)
    assert f"reduce [{ci * k * k}]" in compiled.ir("tensor")  # one flattened K axis
    got = compiled.g(x)
    want = _exact(case, x, w)
    scale = _exact(case, np.abs(x), np.abs(w))
    assert np.all(np.abs(got - want) <= ci * k * k * np.finfo(np.float32).eps * scale + 1e-30)
    monkeypatch.setattr(unfold_convolutions, "unfolds", lambda *args: False)
    nest = dlc.compile_onnx(model, fma=False, num_threads=threads)
    assert "reduce [" + f"{ci}, {k}, {k}]" in nest.ir("tensor")
    np.testing.assert_array_equal(got, nest.g(x))


def test_im2col_splat_and_parameter_kernels() -> None:
    """A splat kernel (no kernel data at all) and a 1x1 kernel given as an input (read
    in place) take im2col; a 3x3 kernel given as an input keeps the convolution nest."""
    x = randn(1, 16, 7, 7, seed=3)
    fill = dlc.compile_onnx(_model(CASES[1], fill=True))
    np.testing.assert_allclose(
        fill.g(x), 0.125 * x.sum(axis=1, keepdims=True).repeat(24, 1), rtol=1e-5
    )
    w = randn(24, 16, 1, 1, seed=4)
    param = dlc.compile_onnx(_model(CASES[1], kernel_input=True))
    assert "reduce [16]" in param.ir("tensor")
    np.testing.assert_allclose(param.g(x, w), _exact(CASES[1], x, w), rtol=1e-4, atol=1e-5)
    w3 = randn(12, 8, 3, 3, seed=5)
    x3 = randn(1, 8, 7, 7, seed=6)
    nest = dlc.compile_onnx(_model(CASES[0], kernel_input=True))
    assert "reduce [8, 3, 3]" in nest.ir("tensor")
    np.testing.assert_allclose(nest.g(x3, w3), _exact(CASES[0], x3, w3), rtol=1e-4, atol=1e-5)


def test_opt_level_0_and_older_targets() -> None:
    """opt_level=0 keeps the convolution's nest (the pass does not run) with the same
    bits as the unfolded product; for haswell (AVX2) the rows of 7 are unfolded and
    the results match; a strided float64 convolution likewise, except with fewer than
    `STRIDED_DIRECT_CHANNELS` input channels (the tiled nest, the same bits)."""
    case = (1, 8, 12, 7, 3, 1, 1, 1)
    x = randn(1, 8, 7, 7, seed=7)
    model = _model(case)
    plain = dlc.compile_onnx(model, opt_level=0)
    assert "reduce [8, 3, 3]" in plain.ir("tensor")
    unfolded = dlc.compile_onnx(model, fma=False)
    np.testing.assert_array_equal(plain.g(x), unfolded.g(x))
    old = dlc.compile_onnx(model, target_cpu="haswell", num_threads=2)
    assert "reduce [72]" in old.ir("tensor")
    np.testing.assert_allclose(old.g(x), plain.g(x), rtol=1e-5, atol=1e-6)
    text = """module "m"
stage raw
func @f: (<1 x 16 x 40 x 40 x f64>) -> <1 x 3 x 20 x 20 x f64> {
'entry(%x: <1 x 16 x 40 x 40 x f64>):
    %k = literal 0.25: <3 x 16 x 3 x 3 x f64>
    %y = convolve %x: <1 x 16 x 40 x 40 x f64> kernel %k: <3 x 16 x 3 x 3 x f64> strides 2, 2 padding (1, 1), (1, 1)
    return %y: <1 x 3 x 20 x 20 x f64>
}
"""
    x64 = np.random.default_rng(8).standard_normal((1, 16, 40, 40))
    nest = dlc.compile(text, opt_level=0, bounds_check=True)
    product = dlc.compile(text, fma=False, num_threads=3)
    assert "reduce [144]" in product.ir("tensor")
    np.testing.assert_array_equal(nest.f(x64), product.f(x64))
    # with fewer input channels the rows of stride 2 keep the tiled nest (`vload2`)
    text = text.replace("<3 x 16 x", "<16 x 2 x").replace("3 x 20", "16 x 20")
    text = text.replace("16 x 40", "2 x 40")
    few = dlc.compile(text, fma=False, num_threads=3)
    assert "reduce [2, 3, 3]" in few.ir("tensor") and "vectorize" in few.ir("tensor")
    plain = dlc.compile(text, opt_level=0)
    np.testing.assert_array_equal(few.f(x64[:, :2]), plain.f(x64[:, :2]))


def test_pixel_rows() -> None:
    """With fewer pixels than output channels the product's rows are the pixels and its
    columns the channels, over the kernel transposed at compile time (batch 1: a
    matrix product; batch 2 keeps the batch axis); a 1 x 1 convolution of stride 1
    reads the image itself as its columns; a splat kernel too. The results are the
    convolution nest's bits (no fma), on haswell too."""
    pixels = dlc.compile_onnx(_model(CASES[6]), fma=False)
    text = pixels.ir("tensor")
    assert "-> !graph.tensor<36x64xf32>" in text and "tensor<288x64xf32>" in text
    batch = dlc.compile_onnx(_model(CASES[8]), fma=False, target_cpu="haswell")
    assert "-> !graph.tensor<2x36x40xf32>" in batch.ir("tensor")
    assert "tensor.bitcast %0 : !graph.tensor<2x256x6x6xf32>" in batch.ir("tensor")
    x = randn(2, 256, 6, 6, seed=9)
    np.testing.assert_array_equal(batch.g(x), dlc.compile_onnx(_model(CASES[8]), opt_level=0).g(x))
    fill = dlc.compile_onnx(_model(CASES[6], fill=True), fma=False)
    assert "-> !graph.tensor<36x64xf32>" in fill.ir("tensor")
    x = randn(1, 32, 6, 6, seed=10)
    plain = dlc.compile_onnx(_model(CASES[6], fill=True), opt_level=0)
    np.testing.assert_array_equal(fill.g(x), plain.g(x))


def test_shallow_pixel_rows() -> None:
    """Fewer pixels than output channels but few products per output (16 < 256): the
    channels stay the rows, so the chain after the convolution is the product's
    epilogue, where the pixels fill the target's vectors well (36 in vectors of 8 on
    haswell: 0.9 of the lanes); 36 pixels in vectors of 16 (0.75) keep pixel rows."""
    case = (2, 16, 40, 6, 1, 1, 0, 1)
    shallow = dlc.compile_onnx(_model(case), fma=False, target_cpu="haswell")
    assert "-> !graph.tensor<2x40x36xf32>" in shallow.ir("tensor")
    x = randn(2, 16, 6, 6, seed=9)
    np.testing.assert_array_equal(shallow.g(x), dlc.compile_onnx(_model(case), opt_level=0).g(x))
    assert unfold_rule.column_use(36, 8) == 0.9 and unfold_rule.column_use(36, 16) == 0.75
    assert unfold_rule.column_use(196, 16) == 196 / 208
    assert unfold_rule.column_use(49, 16) == 49 / 64


def test_channel_rows_epilogue() -> None:
    """Channel rows (more pixels than output channels): the image is the product's
    bytes (a bitcast); the bias and relu after a 3 x 3 run over the product's domain
    as its epilogue, and with a residual add of a second such image (a 1 x 1's) the
    whole chain does, one compute whose result alone goes back to the image's shape;
    for x86-64 and haswell (znver4: test_schedule_unfold.py), the nests' bits (no fma)."""
    w1, w2 = randn(32, 16, 3, 3, seed=11), randn(32, 16, 1, 1, seed=12)
    b1, b2 = randn(32, seed=13), randn(32, seed=14)
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 4, strides=[2, 2]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["x", "w2", "b2"], ["c2"], strides=[2, 2]),
        node("Add", ["r1", "c2"], ["s"]),
        node("Relu", ["s"], ["y"]),
    ]
    inits = {"w1": w1, "b1": b1, "w2": w2, "b2": b2}
    single = make(nodes[:2], {"x": (1, 16, 14, 14)}, {"r1": (1, 32, 7, 7)}, inits)
    residual = make(nodes, {"x": (1, 16, 14, 14)}, {"y": (1, 32, 7, 7)}, inits)
    x = randn(1, 16, 14, 14, seed=15)
    for target in ("x86-64", "haswell"):
        check_runnable(target)
        for model, epilogue in ((single, True), (residual, False)):
            plain = dlc.compile_onnx(model, opt_level=0).g(x)
            compiled = dlc.compile_onnx(model, fma=False, target_cpu=target, bounds_check=True)
            text = compiled.ir("tensor")
            assert ("epilogue 1" in text) == epilogue  # the 1 x 1's product is not tiled
            assert text.count("to !graph.tensor<1x32x7x7xf32>") == 1  # only the result
            np.testing.assert_array_equal(compiled.g(x), plain)


def test_silu_epilogue_before_padding() -> None:
    """A SiLU after a convolution of channel rows (its input read twice: x * sigmoid(x))
    runs over the product's domain as its epilogue, and the padding of the depthwise
    convolution after it is a copy of its own (no exp inside its range checks); for
    x86-64 and haswell, the nests' bits (no fma)."""
    w1, b1, w2 = randn(32, 16, 3, 3, seed=21), randn(32, seed=22), randn(32, 1, 3, 3, seed=23)
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c"], pads=[1] * 4, strides=[2, 2]),
        node("Sigmoid", ["c"], ["s"]),
        node("Mul", ["c", "s"], ["m"]),
        node("Conv", ["m", "w2"], ["y"], pads=[1] * 4, group=32),
    ]
    model = make(
        nodes, {"x": (1, 16, 14, 14)}, {"y": (1, 32, 7, 7)}, {"w1": w1, "b1": b1, "w2": w2}
    )
    x = randn(1, 16, 14, 14, seed=24)
    plain = dlc.compile_onnx(model, opt_level=0).g(x)
    for target in ("x86-64", "haswell"):
        check_runnable(target)
        compiled = dlc.compile_onnx(model, fma=False, target_cpu=target, bounds_check=True)
        text = compiled.ir("tensor")
        computes = text.split("= tensor.compute(")
        (at,) = [n for n, c in enumerate(computes) if "reduce [144]" in c]
        (pad,) = [c for c in computes if "-> !graph.tensor<1x32x9x9xf32>" in c]
        assert "epilogue 1" in computes[at] and "math.exp" in computes[at + 1]
        assert "math.exp" not in pad
        np.testing.assert_array_equal(compiled.g(x), plain)


@pytest.mark.parametrize(
    ("pool", "order"),
    [
        (node("GlobalAveragePool", ["r"], ["y"]), "r0, r1, d0, d1"),
        (node("AveragePool", ["r"], ["y"], kernel_shape=[6, 6]), "r0, r1, r2, r3, d0, d1, d2, d3"),
    ],
    ids=["global", "window"],
)
def test_pooled_pixel_rows(pool: onnx.NodeProto, order: str) -> None:
    """An average pool of pixel rows over the whole image (256 products per output:
    pixel rows on every target) reads the product across, the channels contiguous,
    and the bias of 1 x C x 1 x 1 at the channel: its sum runs its reduction loops
    outside the channel loop (axes of 1 after the channels, the pooled H and W or
    the bias's, do not count as the last axis), so the inner loop walks memory; on
    haswell too, the nests' bits (no fma), with bounds checks."""
    w, b = randn(40, 256, 1, 1, seed=16), randn(40, seed=17)
    nodes = [node("Conv", ["x", "w", "b"], ["c"]), node("Relu", ["c"], ["r"]), pool]
    model = make(nodes, {"x": (1, 256, 6, 6)}, {"y": (1, 40, 1, 1)}, {"w": w, "b": b})
    x = randn(1, 256, 6, 6, seed=18)
    plain = dlc.compile_onnx(model, opt_level=0).g(x)
    for target in ("host", "haswell"):
        check_runnable(target)
        compiled = dlc.compile_onnx(model, fma=False, target_cpu=target, bounds_check=True)
        text = compiled.ir("tensor")
        assert "-> !graph.tensor<36x40xf32>" in text
        assert f"interchange [{order}]" in text
        np.testing.assert_array_equal(compiled.g(x), plain)
