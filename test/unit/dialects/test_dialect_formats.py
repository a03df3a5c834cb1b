"""The custom assembly formats of the `tensor` and `loop` dialects round-trip.

For the tensor and loop levels of every program under examples/ and benchmarks/ (the
modules `CompiledModule.ir_module` gives), of dlc-opt pipelines, and of the lit inputs
written at those levels: printing, parsing the text back with dlc's context and printing
again gives a structurally equal module and the same text, in the custom form and in
the generic form (`--print-op-generic`). Together the inputs use every op of both
dialects.
"""

from __future__ import annotations

import re
from functools import cache
from io import StringIO
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

import dlc
from dlc.api import compile_graph_module
from dlc.cli.dlc_opt import main as dlc_opt_main
from dlc.dialects.loop import Loop
from dlc.dialects.tensor import Tensor
from dlc.pipeline import Options, context
from dlc.program_levels import lower

ROOT = Path(__file__).resolve().parents[3]
LEVELS = ("tensor", "loop")
SLOW = {"softmax_chain200.dl"}  # 24 s to lower; the ops of softmax_chain20, ten times over
PROGRAMS = sorted(
    p for d in ("examples", "benchmarks") for p in (ROOT / d).glob("*.dl") if p.name not in SLOW
)
LIT_INPUTS = sorted(
    p
    for p in (ROOT / "test" / "lit").rglob("*.mlir")
    if not re.search(r"//\s*RUN:.*--verify-diagnostics", p.read_text())
)

# The ops no example lowers to: value keys, bitCast, stacks, float modulo, trap.
MORE_OPS = """module "formats"
stage raw

func @bits: (f32, f32, <4 x f32>, i64) -> (i32, f32, f32) {
'entry(%a: f32, %b: f32, %t: <4 x f32>, %i: i64):
    %r = modulo %a: f32, %b: f32
    %c = bitCast %a: f32 to i32
    %e = extract %i: i64 from %t: <4 x f32>
    %p = allocateStack f32 count 2
    %q = literal (%c: i32, %r: f32, %e: f32): (i32, f32, f32)
    return %q: (i32, f32, f32)
}

func @stop: (f32) -> f32 {
'entry(%x: f32):
    %z = lessThan %x: f32, 0: f32
    conditional %z: bool then 'bad() else 'good(%x: f32)
'bad():
    trap
    return 0: f32
'good(%y: f32):
    return %y: f32
}
"""


def print_ir(module: ModuleOp, *, generic: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue()


def parse_ir(text: str, name: str) -> ModuleOp:
    module = Parser(context(), text, name).parse_module()
    module.verify()
    return module


def assert_round_trip(module: ModuleOp, name: str) -> None:
    """print -> parse -> print is a fixpoint and parse(print(M)) equals M, in the custom
    and in the generic form; the generic text parses to the module the custom text
    prints."""
    custom = print_ir(module)
    for generic in (False, True):
        text = print_ir(module, generic=generic)
        again = parse_ir(text, name)
        assert again.is_structurally_equivalent(module), f"{name}: parse(print(M)) != M"
        assert print_ir(again, generic=generic) == text, f"{name}: printing is no fixpoint"
        assert print_ir(again) == custom


@cache
def lowered(source: str, name: str) -> dict[str, ModuleOp]:
    """The tensor and loop levels of a graph program as the default pipeline leaves them
    (what `CompiledModule.ir_module` returns, without the native code)."""
    snapshots: dict[str, ModuleOp] = {}
    lower(dlc.parse(source, name), Options(), snapshots)
    return {level: snapshots[level] for level in LEVELS}


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.name for p in PROGRAMS])
@pytest.mark.parametrize("level", LEVELS)
def test_programs_round_trip(path: Path, level: str) -> None:
    assert_round_trip(lowered(path.read_text(), path.name)[level], f"{path.name}:{level}")


@pytest.mark.parametrize("level", LEVELS)
def test_more_ops_round_trip(level: str) -> None:
    assert_round_trip(lowered(MORE_OPS, "formats.dl")[level], f"formats.dl:{level}")


def test_compiled_module_text_parses_back() -> None:
    """`mod.ir(level)`, the text users read, is the custom form and parses back."""
    mod = compile_graph_module(dlc.parse((ROOT / "examples" / "mlp.dl").read_text()))
    for level in LEVELS:
        text = mod.ir(level)
        assert f"{level}.func @mlp(" in text
        module = parse_ir(text, f"mlp.dl:{level}")
        assert module.is_structurally_equivalent(mod.ir_module(level))
        assert print_ir(module) == text


@pytest.mark.parametrize(
    "passes",
    [
        "lower-graph-to-tensor",
        "lower-graph-to-tensor,fuse,schedule",
        "lower-graph-to-tensor,lower-tensor-to-loop",
        "lower-graph-to-tensor,fuse,schedule,lower-tensor-to-loop,plan-memory,math-approx",
    ],
)
def test_dlc_opt_output_round_trips(
    passes: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = ROOT / "examples" / "language_tour.dl"
    assert dlc_opt_main([str(source), "-p", passes]) == 0
    text = capsys.readouterr().out
    module = parse_ir(text, "language_tour.mlir")
    assert print_ir(module) + "\n" == text
    assert_round_trip(module, f"language_tour.dl -p {passes}")
    (tmp_path / "again.mlir").write_text(text)
    assert dlc_opt_main([str(tmp_path / "again.mlir")]) == 0
    assert capsys.readouterr().out == text


@pytest.mark.parametrize("path", LIT_INPUTS, ids=[p.name for p in LIT_INPUTS])
def test_lit_inputs_round_trip(path: Path) -> None:
    assert_round_trip(parse_ir(path.read_text(), path.name), path.name)


def test_every_op_is_covered() -> None:
    modules = [lowered(p.read_text(), p.name)[level] for p in PROGRAMS for level in LEVELS]
    modules += [lowered(MORE_OPS, "formats.dl")[level] for level in LEVELS]
    modules += [parse_ir(p.read_text(), p.name) for p in LIT_INPUTS]
    seen = {op.name for module in modules for op in module.walk()}
    ops = {op.name for dialect in (Tensor, Loop) for op in dialect.operations}
    assert ops - seen == set()


def test_custom_syntax_reads_like_code() -> None:
    tensor_text = print_ir(lowered(MORE_OPS, "formats.dl")["tensor"])
    loop_text = print_ir(lowered(MORE_OPS, "formats.dl")["loop"])
    assert '"tensor.' not in tensor_text and '"loop.' not in loop_text
    assert "tensor.func @bits(" in tensor_text and "loop.func @bits(" in loop_text
