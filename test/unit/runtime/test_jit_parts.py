"""Large modules are compiled in parts on several cores (dlc/runtime/jit_parts.py):
the outlined runs of a split function go to modules of their own, built by worker
processes and this one as each is free, one engine loads all the objects, and the
compile cache keeps them together."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.lowering.loop_to_llvm import lower_loop_to_llvm
from dlc.runtime import cache, jit_parts, jit_worker
from dlc.runtime.module import CompiledModule

# Softmaxes and a product with a parallel loop: several runs of nests, an OpenMP
# worker that must travel with its run.
PROGRAM = """module "p"
stage raw

func @f: (<64 x 96 x f32>, <96 x 128 x f32>) -> <64 x 128 x f32> {
'entry(%a: <64 x 96 x f32>, %b: <96 x 128 x f32>):
    %m0 = reduce %a: <64 x 96 x f32> by max init -inf: f32 along 0, 1
    %s0 = subtract %a: <64 x 96 x f32>, %m0: f32
    %e0 = exp %s0: <64 x 96 x f32>
    %z0 = reduce %e0: <64 x 96 x f32> by add init 0.0: f32 along 0, 1
    %x0 = divide %e0: <64 x 96 x f32>, %z0: f32
    %p = dot %x0: <64 x 96 x f32>, %b: <96 x 128 x f32>
    %m1 = reduce %p: <64 x 128 x f32> by max init -inf: f32 along 0, 1
    %s1 = subtract %p: <64 x 128 x f32>, %m1: f32
    %e1 = exp %s1: <64 x 128 x f32>
    %z1 = reduce %e1: <64 x 128 x f32> by add init 0.0: f32 along 0, 1
    %x1 = divide %e1: <64 x 128 x f32>, %z1: f32
    return %x1: <64 x 128 x f32>
}
"""

RNG = np.random.default_rng(5)
A = RNG.standard_normal((64, 96)).astype(np.float32)
B = RNG.standard_normal((96, 128)).astype(np.float32)


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every function split, one run per nest, any module built in parts."""
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_OPS", 0)
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_CHUNK", 1)
    monkeypatch.setattr(jit_parts, "MIN_OPS", 0)
    monkeypatch.setattr(jit_parts, "_threads", lambda: 2)


def built_in_parts(mod: CompiledModule) -> bool:
    return (mod._jit.object_code or b"").startswith(jit_parts.MAGIC)  # noqa: SLF001


def test_parts_give_the_same_results(split: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLC_CACHE", "0")
    for opt_level in (1, 2):
        parts = dlc.compile(PROGRAM, opt_level=opt_level, num_threads=2)
        assert built_in_parts(parts)
        monkeypatch.setattr(jit_parts, "MIN_OPS", 10**9)
        whole = dlc.compile(PROGRAM, opt_level=opt_level, num_threads=2)
        monkeypatch.setattr(jit_parts, "MIN_OPS", 0)
        assert not built_in_parts(whole)
        np.testing.assert_array_equal(parts.f(A, B), whole.f(A, B))
        assert "GOMP_parallel" in parts.ir("llvm") or "omp" not in parts.ir("llvm")


def test_the_cache_keeps_the_parts_together(
    split: None, cache_dir: Path, lowerings: list[int]
) -> None:
    first = dlc.compile(PROGRAM)
    assert built_in_parts(first)
    cache.clear_memory()
    again = dlc.compile(PROGRAM)  # from disk: the bundle of objects
    assert len(lowerings) == 1
    np.testing.assert_array_equal(again.f(A, B), first.f(A, B))


def test_small_modules_compile_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLC_CACHE", "0")
    assert not built_in_parts(dlc.compile(PROGRAM))


def test_object_bundles_round_trip() -> None:
    objects = [b"\x7fELF one", b"\x7fELF second", b""]
    bundle = jit_parts.pack_objects(objects)
    assert jit_parts.unpack_objects(bundle) == objects
    assert jit_parts.unpack_objects(b"\x7fELF alone") == [b"\x7fELF alone"]
    assert jit_parts.pack_objects([b"\x7fELF alone"]) == b"\x7fELF alone"
    for cut in (bundle[:-3], bundle[:10], bundle[:20]):
        with pytest.raises(ValueError, match="malformed object bundle"):
            jit_parts.unpack_objects(cut)


def test_parts_build_here_when_no_worker_can(split: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """No interpreter to start, or a worker that fails: this process builds the part."""
    monkeypatch.setenv("DLC_CACHE", "0")
    executable = jit_worker.sys.executable
    monkeypatch.setattr(jit_worker.sys, "executable", "")
    alone = dlc.compile(PROGRAM)
    assert built_in_parts(alone)
    monkeypatch.setattr(jit_worker.sys, "executable", executable)
    real = jit_worker.build

    def failing(worker: object, text: str) -> bytes | None:
        return real(worker, "this is not LLVM IR")  # type: ignore[arg-type]

    monkeypatch.setattr(jit_worker, "build", failing)
    helped = dlc.compile(PROGRAM)
    assert built_in_parts(helped)
    np.testing.assert_array_equal(helped.f(A, B), alone.f(A, B))
    assert helped._jit.object_code == alone._jit.object_code  # noqa: SLF001


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (b"\x13" + bytes(7) + b"this is not LLVM IR", b"dlc.runtime.jit_worker: RuntimeError"),
        (b"\x09" + bytes(7) + b"short", b"ValueError: 5 bytes of input for a part of 9"),
        (b"\x09" + bytes(3), b"ValueError: input ends inside a part's size (4 bytes)"),
    ],
)
def test_the_worker_reports_bad_input(given: bytes, said: bytes) -> None:
    """Text LLVM rejects, or fewer bytes than a part's size: a message, exit 1."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "dlc.runtime.jit_worker"],
        input=b'{"opt_level": 2, "target": null}\n' + given,
        capture_output=True,
        check=False,
        cwd=Path(jit_parts.__file__).resolve().parents[2],
    )
    assert run.returncode == 1 and run.stdout == b""
    assert said in run.stderr


def test_a_worker_builds_parts_one_after_the_other() -> None:
    worker = jit_worker.start_worker(2, None)
    assert worker is not None
    texts = [f"define i64 @n{k}() {{\n  ret i64 {k}\n}}\n" for k in range(3)]
    objects = [jit_worker.build(worker, text) for text in texts]
    assert all(o is not None and o.startswith(b"\x7fELF") for o in objects)
    assert len(set(objects)) == 3
    assert jit_worker.build(worker, "this is not LLVM IR") is None
    assert not jit_worker.finish_worker(worker)  # it failed: exit status 1


def test_the_object_code_does_not_depend_on_the_workers(
    split: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each unit is built alone, by whichever process is free: the same objects with no
    worker, one or three, and with the unit cache on or off; every worker is reaped."""
    started: list[object] = []
    real = jit_worker.start_worker

    def start(opt_level: int, target: object) -> object:
        started.append(real(opt_level, target))  # type: ignore[arg-type]
        return started[-1]

    monkeypatch.setattr(jit_worker, "start_worker", start)
    monkeypatch.setenv("DLC_CACHE", "0")
    codes = []
    for threads in (1, 2, 4):
        monkeypatch.setattr(jit_parts, "_threads", lambda n=threads: n)
        codes.append(dlc.compile(PROGRAM)._jit.object_code)  # noqa: SLF001
    assert len(started) == 4 and all(w.returncode == 0 for w in started)  # type: ignore[attr-defined]
    assert codes[0] is not None and codes[0].startswith(jit_parts.MAGIC)
    assert codes[1] == codes[0] and codes[2] == codes[0]


def test_the_cache_on_or_off_builds_the_same_objects(
    split: None, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = dlc.compile(PROGRAM)._jit.object_code  # noqa: SLF001
    monkeypatch.setenv("DLC_CACHE", "0")
    assert dlc.compile(PROGRAM)._jit.object_code == cached  # noqa: SLF001


# A second function whose runs are not f's: a program that misses the module cache
# while f's units are the same text.
OTHER = """
func @g: (<64 x 96 x f32>) -> <64 x 96 x f32> {
'entry(%a: <64 x 96 x f32>):
    %m = reduce %a: <64 x 96 x f32> by max init -inf: f32 along 0, 1
    %s = subtract %a: <64 x 96 x f32>, %m: f32
    %e = exp %s: <64 x 96 x f32>
    return %e: <64 x 96 x f32>
}
"""


def test_units_built_once_serve_another_program(
    split: None, cache_dir: Path, lowerings: list[int]
) -> None:
    """With the cache on, each run is a unit of its own, stored under its LLVM IR text:
    a program that shares runs with a compiled one reuses their object code."""
    from dlc.runtime import unit_cache

    before = dict(unit_cache.COUNTS)
    first = dlc.compile(PROGRAM)
    built = unit_cache.COUNTS["built"] - before["built"]
    assert built >= 3 and unit_cache.COUNTS["reused"] == before["reused"]
    second = dlc.compile(PROGRAM + OTHER)  # another program: the module cache misses
    assert len(lowerings) == 2
    assert unit_cache.COUNTS["reused"] - before["reused"] == built  # every unit of f
    assert unit_cache.COUNTS["built"] - before["built"] > built  # g's own
    np.testing.assert_array_equal(second.f(A, B), first.f(A, B))
    x = A.copy()
    np.testing.assert_allclose(second.g(x), np.exp(x - x.max()), rtol=1e-6)


def test_a_tampered_unit_is_not_loaded(cache_dir: Path) -> None:
    from dlc.runtime import unit_cache

    key = unit_cache.key("define void @u() {\n  ret void\n}\n", ("x86_64", "znver3", "", 2))
    unit_cache.store(key, b"\x7fELF unit object")
    assert unit_cache.lookup(key) == b"\x7fELF unit object"
    [stored] = cache_dir.glob(f"**/{key}.o")
    stored.write_bytes(b"\x7fELF other object")
    assert unit_cache.lookup(key) is None


def test_the_worker_ignores_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `dlc` package planted in the working directory is never imported by a worker."""
    planted = tmp_path / "dlc"
    planted.mkdir()
    (planted / "__init__.py").write_text("raise SystemExit('planted dlc imported')\n")
    monkeypatch.chdir(tmp_path)
    ir = "define i64 @seven() {\n  ret i64 7\n}\n"
    worker = jit_worker.start_worker(2, None)
    assert worker is not None
    code = jit_worker.build(worker, ir)
    assert jit_worker.finish_worker(worker)
    assert code is not None and code.startswith(b"\x7fELF")


def test_opt_level_3_runs_llvms_o2_pipeline() -> None:
    """opt_level 3 is level 2 plus the graph superoptimizer: LLVM's pass pipeline is its
    O2 for both (its O3 pipeline made a scheduled max pool 2.5x slower), so a program
    the superoptimizer leaves alone optimizes to the same LLVM IR, with the same
    results."""
    text = """module "p"
stage raw
func @p: (<1 x 8 x 12 x 12 x f32>) -> <1 x 8 x 12 x 12 x f32> {
'entry(%x: <1 x 8 x 12 x 12 x f32>):
    %p = reduceWindow %x: <1 x 8 x 12 x 12 x f32> by max init -inf: f32 dims 1, 1, 3, 3 strides 1, 1, 1, 1 padding half
    return %p: <1 x 8 x 12 x 12 x f32>
}
"""
    two, three = (dlc.compile(text, opt_level=n, num_threads=1) for n in (2, 3))
    assert three.pass_statistics().get("superoptimize", {}).get("substitutions applied", 0) == 0
    assert two.ir("llvm") == three.ir("llvm")
    x = np.random.default_rng(4).standard_normal((1, 8, 12, 12)).astype(np.float32)
    np.testing.assert_array_equal(two.p(x), three.p(x))


def test_units_are_named_by_their_content() -> None:
    """Alike units print alike in any module: their own symbols take names from their
    text's hash, and the parts that call them follow."""
    from dlc.runtime.unit_cache import named_by_content

    def unit(name: str, helper: str, value: int) -> str:
        return (
            f"@{helper}.data = internal constant i64 {value}\n"
            f"define void @{name}(ptr %p) noinline\n{{\n  call void @{helper}(ptr %p)\n  ret void\n}}\n"
            f"define internal void @{helper}(ptr %p)\n{{\n"
            f"  %v = load i64, ptr @{helper}.data\n  store i64 %v, ptr %p\n  ret void\n}}\n"
        )

    def caller(*names: str) -> str:
        declared = "".join(f"declare void @{n}(ptr)\n" for n in names)
        calls = "".join(f"  call void @{n}(ptr %p)\n" for n in names)
        return f"{declared}define void @main(ptr %p)\n{{\n{calls}  ret void\n}}\n"

    first = named_by_content(
        [caller("f.kernel0", "f.kernel1"), unit("f.kernel0", "w0", 1), unit("f.kernel1", "w1", 2)]
    )
    other = named_by_content([caller("g.kernel3"), unit("g.kernel3", "worker", 2)])
    assert other[1] == first[2]  # the same unit, other names: the same text
    assert first[1] != first[2] and "f.kernel" not in "".join(first)
    assert "@w0" not in first[1] and "@dlc.unit." in first[0]
    alike = named_by_content([caller("f.a", "f.b"), unit("f.a", "x", 5), unit("f.b", "y", 5)])
    assert alike[1] == alike[2]
    assert alike[0].count("declare void @dlc.unit.") == 1  # one declaration of the one name

    def calling(name: str, callee: str) -> str:
        return f"declare void @{callee}(ptr)\ndefine void @{name}(ptr %p) noinline\n{{\n  call void @{callee}(ptr %p)\n  ret void\n}}\n"

    chain = named_by_content([caller("a"), calling("a", "c"), unit("c", "d", 1)])
    assert "@c(" not in chain[1] and chain[1].count("@dlc.unit.") == 3  # a's own, c's twice
    circle = [caller("a"), calling("a", "c"), calling("c", "a")]
    assert named_by_content(circle) == circle  # units calling each other: names kept


def test_units_are_named_as_they_print() -> None:
    """`Namer` names a unit as soon as the units it calls are named (here: `a` waits
    for `c`), with the text `named_by_content` gives it; a unit that does not define its
    function first keeps its names, and so do the units that call it."""
    from dlc.runtime.unit_cache import Namer, named_by_content

    a = "declare void @c(ptr)\ndefine void @a(ptr %p) noinline\n{\n  call void @c(ptr %p)\n  ret void\n}\n"
    c = "define void @c(ptr %p) noinline\n{\n  ret void\n}\n"
    namer = Namer(["@a", "@c"])
    assert namer.add(0, a) == []
    named = namer.add(1, c)
    assert [k for k, _ in named] == [1, 0] and namer.finish() == []
    assert dict(named) == dict(enumerate(named_by_content(["", a, c])[1:]))
    odd = Namer(["@a", "@c"])
    assert odd.add(1, a) == [] and odd.add(0, c) == []  # each defines the other's name
    assert odd.finish() == [(0, c), (1, a)] and odd.done == {}


def test_workers_stopped_with_units_left_are_reaped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A part with static constructors compiles the module whole: the workers are
    stopped whatever they are doing, their threads end and the processes are reaped."""
    monkeypatch.setenv("DLC_CACHE", "0")
    workers = [jit_worker.start_worker(2, None) for _ in range(2)]
    assert all(workers)
    shared = jit_parts._Shared(workers, 2, None)  # type: ignore[arg-type]  # noqa: SLF001
    shared.add([(k, f"define i64 @n{k}() {{\n  ret i64 {k}\n}}\n") for k in range(6)])
    threads = list(shared.threads)
    shared.close(stop=True)
    assert len(threads) == 2 and not any(t.is_alive() for t in threads)
    assert all(w.returncode is not None for w in workers)  # type: ignore[union-attr]


def test_workers_started_ahead_are_handed_out_then_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A module large enough to be split starts its workers as its loop level is
    lowered; `start_worker` hands them out (for the same opt level and target only)
    and `stop_ahead` reaps those no compile took."""
    monkeypatch.setattr(jit_parts, "_threads", lambda: 2)
    jit_parts.start_ahead(jit_parts.AHEAD_OPS - 1, 2, None)
    assert not jit_worker._AHEAD  # noqa: SLF001 -- too small: none started
    jit_parts.start_ahead(jit_parts.AHEAD_OPS, 2, None)
    jit_parts.start_ahead(jit_parts.AHEAD_OPS, 1, None)
    ahead = [w for _, _, w in jit_worker._AHEAD]  # noqa: SLF001
    assert len(ahead) == 2
    worker = jit_worker.start_worker(2, None)
    assert worker is ahead[0]
    obj = jit_worker.build(worker, "define i64 @n() {\n  ret i64 7\n}\n")
    assert obj is not None and obj.startswith(b"\x7fELF")
    assert jit_worker.finish_worker(worker)
    jit_worker.stop_ahead()
    assert not jit_worker._AHEAD and ahead[1].returncode is not None  # noqa: SLF001


def test_a_split_compile_takes_its_workers_ahead(
    split: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dlc.compile` starts the workers of a large module before its llvm level and
    leaves none behind; the results are those of a compile without them."""
    monkeypatch.setenv("DLC_CACHE", "0")
    started: list[object] = []
    original = jit_worker.start_ahead

    def start_ahead(opt_level: int, target: object, count: int) -> None:
        original(opt_level, target, count)  # type: ignore[arg-type]
        started.extend(w for _, _, w in jit_worker._AHEAD)  # noqa: SLF001

    monkeypatch.setattr(jit_worker, "start_ahead", start_ahead)
    monkeypatch.setattr(jit_parts, "AHEAD_OPS", 0)
    ahead = dlc.compile(PROGRAM, num_threads=2)
    assert built_in_parts(ahead) and len(started) == 1
    assert not jit_worker._AHEAD and started[0].returncode == 0  # type: ignore[attr-defined]  # noqa: SLF001
    monkeypatch.setattr(jit_parts, "AHEAD_OPS", 10**9)
    later = dlc.compile(PROGRAM, num_threads=2)
    assert built_in_parts(later) and len(started) == 1
    np.testing.assert_array_equal(ahead.f(A, B), later.f(A, B))
