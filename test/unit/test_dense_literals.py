"""Dense literals (a tensor's bytes in the graph literal, `dlc/dialects/graph_literal.py`):
compiled code and the reference interpreter agree on every data type, folding and
compile-time packing work from the bytes, the ONNX importer makes them, and the bytes
reach shared libraries, the compile cache and LLVM IR text."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from aot_driver import build, driver_source, results, run
from autodiff_util import check_gradients

import dlc
from dlc.aot.signature import c_function
from dlc.dialects.graph import LiteralOp
from dlc.dialects.graph_literal import array_tree, dense_array
from dlc.passes.graph.fold_constants import FoldConstantsPass
from dlc.passes.tensor.schedule_policy import tile_shape
from dlc.program_levels import defined_functions
from dlc.runtime import cache, constant_data
from dlc.runtime.module import CompiledModule
from dlc.semantics.interpreter import run_function
from dlc.target import Target

DTYPES = ["f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64"]
DTYPES += ["u8", "u16", "u32", "u64", "bool"]


def sample(dt: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Values of `dt` over its range: floats with -0.0, ±inf and NaN, integers up to
    their extremes."""
    rng = np.random.default_rng(seed)
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in ("f16", "bf16", "f32", "f64"):
        values = (rng.standard_normal(shape) * 100).reshape(-1)
        values[:4] = [-0.0, np.inf, -np.inf, np.nan]
        wide = values.reshape(shape).astype(np.float32 if dt == "bf16" else f"float{dt[1:]}")
        return wide.astype(ml_dtypes.bfloat16) if dt == "bf16" else wide
    info = np.iinfo(f"{'uint' if dt[0] == 'u' else 'int'}{dt[1:]}")
    values = rng.integers(info.min, info.max, size=shape, dtype=info.dtype, endpoint=True)
    values.reshape(-1)[:2] = [info.min, info.max]
    return values


def dense(value: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(value).tobytes()).decode()


def concat_function(dt: str) -> str:
    """`@f_<dt>`: x concatenated with a dense literal (read in place), and another
    dense literal returned (copied into the result)."""
    x, w, v = f"<2 x 7 x {dt}>", f"<3 x 7 x {dt}>", f"<5 x 7 x {dt}>"
    return f"""
func @f_{dt}: ({x}) -> ({v}, {w}) {{
'entry(%x: {x}):
    %w = literal dense "{dense(sample(dt, (3, 7), 1))}": {w}
    %r = literal dense "{dense(sample(dt, (3, 7), 2))}": {w}
    %c = concatenate %x: {x}, %w: {w} along 0
    %t = literal (%c: {v}, %r: {w}): ({v}, {w})
    return %t: ({v}, {w})
}}
"""


PROGRAM = 'module "dense"\nstage raw\n' + "".join(concat_function(dt) for dt in DTYPES)


@pytest.fixture(scope="module")
def compiled() -> CompiledModule:
    return dlc.compile(PROGRAM)


def same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal values in equal places (NaN where NaN is; bf16 compared as f32)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == ml_dtypes.bfloat16:
        got, want = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", DTYPES)
def test_compiled_and_interpreted_dense_constants(compiled: CompiledModule, dt: str) -> None:
    x = sample(dt, (2, 7), 0)
    want = (np.concatenate([x, sample(dt, (3, 7), 1)]), sample(dt, (3, 7), 2))
    module = dlc.parse(PROGRAM)
    for outputs in (compiled[f"f_{dt}"](x), run_function(module, f"f_{dt}", [x])):
        for got, expected in zip(outputs, want, strict=True):
            same(np.asarray(got), expected)


def test_dense_literal_holds_bytes_not_elements() -> None:
    value = sample("f32", (64, 3), 5)
    tree = array_tree(value, "f32")
    assert tree[0] == "dense" and tree[1] == value.tobytes()
    assert dense_array(tree[1], "f32", (64, 3)).base is not None  # a view of the bytes
    assert array_tree(value[:4, :4], "f32")[0] == "tensor"  # 12 elements: a `<…>` tree
    assert array_tree(np.full((64, 3), -0.0, np.float32), "f32") == ("float", -0.0)


def test_folding_over_dense_constants() -> None:
    a, b = sample("f32", (8, 9), 3), sample("f32", (8, 9), 4)
    program = f"""module "fold"
stage raw
func @f: () -> <8 x 9 x f32> {{
'entry():
    %a = literal dense "{dense(a)}": <8 x 9 x f32>
    %b = literal dense "{dense(b)}": <8 x 9 x f32>
    %y = multiply %a: <8 x 9 x f32>, %b: <8 x 9 x f32>
    return %y: <8 x 9 x f32>
}}
"""
    folded = dlc.parse(program)
    FoldConstantsPass().apply(None, folded)  # type: ignore[arg-type]
    (literal,) = [op for op in folded.walk() if isinstance(op, LiteralOp)]
    assert literal.value.data[0] == "dense"
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(dense_array(literal.value.data[1], "f32", (8, 9)), a * b)


def dot_program(w: np.ndarray, rows: int, dt: str) -> str:
    """`@mm(x) = x @ w`, x of `rows` rows, w a dense literal."""
    k, n = w.shape
    x, wt, y = f"<{rows} x {k} x {dt}>", f"<{k} x {n} x {dt}>", f"<{rows} x {n} x {dt}>"
    return f"""module "mm"
stage raw
func @mm: ({x}) -> {y} {{
'entry(%x: {x}):
    %w = literal dense "{dense(w)}": {wt}
    %y = dot %x: {x}, %w: {wt}
    return %y: {y}
}}
"""


def test_constant_matrix_packed_from_dense_bytes() -> None:
    """A constant B of a matrix product is packed into panels at compile time, a NumPy
    reshuffle of the dense literal's bytes."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((128, 80)).astype(np.float32)
    program = dot_program(w, 16, "f32")
    mod = dlc.compile(program)
    nr, _ = tile_shape(Target.host(), 80, "f32")  # 16 with AVX2, 32 with AVX-512, 64 Zen 4
    panels = f"{-(-80 // nr)}x128x{nr}xf32"
    assert f"tensor<{panels}> : memref<{panels}>" in mod.ir("loop")  # the panels
    x = rng.standard_normal((16, 128)).astype(np.float32)
    np.testing.assert_allclose(mod.mm(x), x @ w, rtol=1e-5, atol=1e-4)


def test_onnx_importer_makes_dense_literals() -> None:
    """Initializers become dense literals straight from their arrays, as do the
    constants the importer computes (Gemm's transposed B); the bias of 5 stays a
    `<…>` literal."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(9)
    w, bias, x = (rng.standard_normal(s).astype(np.float32) for s in ((5, 6), (5,), (3, 6)))
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")]
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 6])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])],
            inits,
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    module = dlc.onnx.load(model.SerializeToString())
    kinds = {op.value.data[0] for op in module.walk() if isinstance(op, LiteralOp)}
    assert f'literal dense "{dense(w.T)}": <6 x 5 x f32>' in dlc.print_module(module)
    assert kinds == {"dense", "tensor"}
    np.testing.assert_allclose(dlc.compile_onnx(model)["g"](x), x @ w.T + bias, rtol=1e-5)


WEIGHTS = """module "w"
stage raw
func @affine: (<4 x 64 x f32>) -> <4 x 64 x f32> {{
'entry(%x: <4 x 64 x f32>):
    %w = literal dense "{w}": <64 x 64 x f32>
    %b = literal dense "{b}": <1 x 64 x f32>
    %y = dot %x: <4 x 64 x f32>, %w: <64 x 64 x f32>
    %z = add %y: <4 x 64 x f32>, %b: <1 x 64 x f32>
    return %z: <4 x 64 x f32>
}}
"""


def weights_program(seed: int) -> tuple[str, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    return WEIGHTS.format(w=dense(w), b=dense(b)), w, b


X = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)


def test_compile_cache_keys_and_stores_dense_data(cache_dir: Path, lowerings: list[int]) -> None:
    """The bytes are part of the key (other weights: another entry) and of the cached
    object code (a disk hit computes with them)."""
    program, w, b = weights_program(0)
    other, w2, b2 = weights_program(1)
    dlc.compile(program)
    cache.clear_memory()
    again = dlc.compile(program)
    assert len(lowerings) == 1
    np.testing.assert_allclose(again.affine(X), X @ w + b, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(dlc.compile(other).affine(X), X @ w2 + b2, rtol=1e-5, atol=1e-4)
    assert len(lowerings) == 2


def test_data_as_llvm_ir_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where `.incbin` cannot be used (foreign or non-ELF targets, `-t llvm`), the data
    is one `c"…"` byte string per constant, and computes the same."""
    monkeypatch.setenv("DLC_CACHE", "0")
    monkeypatch.setattr(constant_data, "included_data_possible", lambda _triple: False)
    program, w, b = weights_program(2)
    mod = dlc.compile(program)
    np.testing.assert_allclose(mod.affine(X), X @ w + b, rtol=1e-5, atol=1e-4)
    text = mod.ir("llvm")
    assert 'constant [16384 x i8] c"' in text and ".incbin" not in text  # the 64 x 64 weight


def test_data_without_a_temporary_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    """No data file can be written: the data goes as text, the compile succeeds."""

    def refused(*_args: object, **_kwargs: object) -> None:
        raise PermissionError("no temporary directory")

    monkeypatch.setenv("DLC_CACHE", "0")
    monkeypatch.setattr(constant_data.tempfile, "TemporaryDirectory", refused)
    program, w, b = weights_program(5)
    np.testing.assert_allclose(dlc.compile(program).affine(X), X @ w + b, rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on this machine")
def test_shared_library_carries_dense_weights(tmp_path: Path) -> None:
    """An exported library holds the weights itself (`.incbin` into its object): a C
    program computes with them after the compile's data files are gone."""
    program, w, b = weights_program(3)
    dlc.compile(program).export(tmp_path / "libw.so", prefix="w")
    assert w.tobytes() in (tmp_path / "libw.so").read_bytes()
    funcs = [c_function(f, "w") for f in defined_functions(dlc.parse(program)).values()]
    (tmp_path / "driver.c").write_text(driver_source(funcs, "w.h"))  # type: ignore[arg-type]
    link = [f"-L{tmp_path}", "-lw", f"-Wl,-rpath,{tmp_path}"]
    driver = build("cc", tmp_path / "driver.c", tmp_path / "driver", link)
    (printed,) = results(run(driver, "affine", [X]))
    np.testing.assert_allclose(printed, (X @ w + b).ravel(), rtol=1e-5, atol=1e-4)


def test_gradient_through_a_dense_weight() -> None:
    """The adjoint of x @ W with W dense: W^T applied to the seed, interpreted (against
    central differences) and compiled alike."""
    w = np.random.default_rng(4).standard_normal((3, 20))
    adjoint = (
        "[adjoint @mm seedable]\nfunc @df: (<2 x 3 x f64>, <2 x 20 x f64>) -> (<2 x 3 x f64>)\n"
    )
    text = dot_program(w, 2, "f64") + adjoint
    x = np.random.default_rng(5).standard_normal((2, 3))
    seed = np.random.default_rng(6).standard_normal((2, 20))
    module = check_gradients(text, "mm", "df", [x], seed=seed)
    (interpreted,) = run_function(module, "df", [x, seed])
    (compiled,) = dlc.compile(text).df(x, seed)
    np.testing.assert_allclose(interpreted, seed @ w.T, rtol=1e-12)
    np.testing.assert_allclose(compiled, seed @ w.T, rtol=1e-12)


def test_foreign_objects_carry_dense_weights(tmp_path: Path) -> None:
    """Objects for other architectures get the data as LLVM IR text: the bytes are
    in the object all the same."""
    program, w, _ = weights_program(7)
    mod = dlc.compile(program)
    for target in ("aarch64-linux-gnu", "wasm32-unknown-unknown"):
        mod.export(tmp_path / f"{target}.o", target=target)
        assert w.tobytes() in (tmp_path / f"{target}.o").read_bytes()
