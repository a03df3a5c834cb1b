"""llvm-level module -> optimized LLVM IR -> host machine code (llvmlite MCJIT).

The target is the host CPU with all its features (AVX-512 here), so the O2+ pipeline
(with loop and SLP vectorization) emits full-width vector code. Each `JITModule` owns
its target machine and MCJIT engine; keep it alive while its function pointers are used.
Loading object code (`JITModule.from_object`: the compile cache, the signal handler)
goes through `llvm_c` and never imports `llvmlite.binding`; compiling does.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dlc import llvm_c
from dlc.target import Target

if TYPE_CHECKING:
    import llvmlite.binding as llvm_binding
    from llvmlite import ir
    from xdsl.dialects.builtin import ModuleOp

    from dlc.runtime.constant_data import BoundData, DataFiles

Buffer = bytes | memoryview  # constant data: a global's bytes, or a slice of a cache file
_INIT_LOCK = threading.Lock()
_BIND_LOCK = threading.Lock()
_initialized: set[str] = set()


NATIVE_COMPILES = [0]
"""LLVM compiles of this process (`JITModule`s made from IR, not from object code):
tests count them to show that one compile serves every size of a symbolic dimension."""


def _initialize(all_targets: bool = False) -> None:
    """Native target + asm printer, once per process (llvmlite 0.50 initializes the
    core); with `all_targets` every target LLVM was built with (cross compilation)."""
    with _INIT_LOCK:
        if "native" not in _initialized or (all_targets and "all" not in _initialized):
            llvm_c.initialize(all_targets)  # native: also the asm parser (`.incbin` of data)
            _initialized.update(["native", "all"] if all_targets else ["native"])


def target_triple(target: Target | None) -> str:
    """The LLVM triple code for `target` is made for (this process's by default)."""
    return (target.triple if target is not None else "") or llvm_c.process_triple()


def machine_settings(
    opt_level: int, target: Target | None = None, *, pic: bool = False
) -> llvm_c.Settings:
    """The target machine for `target` (the host by default), its targets initialized.
    On AVX-512 targets LLVM's vectorizers are told to use the full width
    (`-prefer-256-bit`: some CPU models prefer 256-bit vectors by default), the width
    the schedule policy plans register tiles for. `pic`: position-independent code in
    the default code model, for objects a linker puts in a shared library (ahead-of-time
    compilation); else MCJIT's own code model."""
    target = target or Target.host()
    _initialize(all_targets=bool(target.triple))
    features = target.features
    if target.vector_bytes == 64:
        features = ",".join(f for f in (features, "-prefer-256-bit") if f)
    reloc, code_model = ("pic", "default") if pic else ("default", "jitdefault")
    return target_triple(target), target.cpu, features, opt_level, reloc, code_model


def target_machine(
    opt_level: int, target: Target | None = None, *, pic: bool = False
) -> llvm_binding.TargetMachine:
    """A fresh llvmlite target machine of `machine_settings` (one per engine: MCJIT
    takes ownership)."""
    import llvmlite.binding as llvm_binding

    triple, cpu, features, opt, reloc, code_model = machine_settings(opt_level, target, pic=pic)
    return llvm_binding.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=opt, reloc=reloc, codemodel=code_model
    )


def _check_level(opt_level: int) -> None:
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level}")


LLVM_PIPELINE_LEVEL = {0: 0, 1: 1, 2: 2, 3: 2}
"""LLVM's pass pipeline for each `opt_level`. Level 3 is level 2 plus the graph
superoptimizer: dlc's nests arrive scheduled (tiles, unrolled register tiles, loop
orders), and LLVM's O3 pipeline made them slower, never faster (measured:
docs/performance.md, "Measurements behind the defaults")."""


def optimize(
    module: llvm_binding.ModuleRef, tm: llvm_binding.TargetMachine, opt_level: int
) -> None:
    """Run LLVM's O-level pipeline of `opt_level` (`LLVM_PIPELINE_LEVEL`);
    vectorizers on from O2."""
    import llvmlite.binding as llvm_binding

    level = LLVM_PIPELINE_LEVEL[opt_level]
    if level == 0:
        return
    pto = llvm_binding.create_pipeline_tuning_options(speed_level=level)
    vectorize = level >= 2
    pto.loop_vectorization = vectorize
    pto.slp_vectorization = vectorize
    pto.loop_unrolling = vectorize
    pass_builder = llvm_binding.create_pass_builder(tm, pto)
    pass_manager = pass_builder.getModulePassManager()
    pass_manager.run(module, pass_builder)


def llvmlite_module(
    llvm_level: ModuleOp, tm: llvm_binding.TargetMachine, files: DataFiles | BoundData | None = None
) -> ir.Module:
    """An llvm-level xDSL module as an llvmlite IR module for `tm` (triple and layout),
    its constant data included from `files` or spelled as bytes (`constant_data`;
    print it with `constant_data.module_text`)."""
    from xdsl.dialects import llvm  # only when compiling

    from dlc.runtime.constant_data import converted

    ir_module = converted(llvm_level, tm.triple, files)
    for op in llvm_level.body.block.ops:  # xDSL's converter drops function attributes
        if isinstance(op, llvm.FuncOp) and op.no_inline is not None:
            ir_module.get_global(op.sym_name.data).attributes.add("noinline")
    ir_module.triple = tm.triple
    ir_module.data_layout = str(tm.target_data)
    return ir_module


def ir_text(
    llvm_level: ModuleOp, tm: llvm_binding.TargetMachine, files: DataFiles | BoundData | None = None
) -> str:
    """LLVM IR text of an llvm-level module for `tm`, constant data included from `files`
    (`constant_data`): printed by `llvm_text`, or, for a module with an op it does not
    print, through xDSL's converter (`llvmlite_module`)."""
    from dlc.runtime import llvm_text
    from dlc.runtime.constant_data import module_ir, module_text

    try:
        return module_ir(llvm_level, tm.triple, str(tm.target_data), files)
    except llvm_text.Unsupported:
        return module_text(llvmlite_module(llvm_level, tm, files))


def _parsed(
    llvm_level: ModuleOp, tm: llvm_binding.TargetMachine, files: DataFiles | BoundData | None = None
) -> llvm_binding.ModuleRef:
    """Print an llvm-level xDSL module (`ir_text`) and parse it into an LLVM module for `tm`."""
    import llvmlite.binding as llvm_binding

    module = llvm_binding.parse_assembly(ir_text(llvm_level, tm, files))
    module.verify()
    return module


def _compiled(
    llvm_level: ModuleOp,
    opt_level: int,
    target: Target | None = None,
    files: DataFiles | BoundData | None = None,
) -> tuple[llvm_binding.ModuleRef, llvm_binding.TargetMachine]:
    _check_level(opt_level)
    tm = target_machine(opt_level, target)
    module = _parsed(llvm_level, tm, files)
    optimize(module, tm, opt_level)
    return module, tm


def buffer_address(data: Buffer) -> int:
    """The address of the first byte of `data` (read-only buffers too; no copy)."""
    import numpy as np

    return int(np.frombuffer(data, np.uint8).ctypes.data)


def finalized(
    engine: llvm_binding.ExecutionEngine | llvm_c.Engine, data: Mapping[str, Buffer]
) -> None:
    """Finalize `engine` (link and load its code) with its constant data's symbols bound
    to `data`. LLVM resolves external symbols through one table per process, and every
    module names its data alike (`__dlc_const_<n>`): binding and resolving happen under
    one lock, so each engine resolves its own data."""
    with _BIND_LOCK:
        for name, segment in data.items():
            llvm_c.add_symbol(name, buffer_address(segment))
        engine.finalize_object()


def build_object(text: str, opt_level: int, target: Target | None = None) -> bytes:
    """Object code of LLVM IR `text` (one part of a module, `jit_parts.py`), optimized
    at `opt_level` for `target`, in an LLVM context of its own."""
    import llvmlite.binding as llvm_binding

    _check_level(opt_level)
    tm = target_machine(opt_level, target)
    module = llvm_binding.parse_assembly(text, context=llvm_binding.create_context())
    module.verify()
    optimize(module, tm, opt_level)
    return tm.emit_object(module)


def llvm_ir(llvm_level: ModuleOp, opt_level: int = 2, target: Target | None = None) -> str:
    """The optimized LLVM IR text of an llvm-level module."""
    module, _ = _compiled(llvm_level, opt_level, target)
    return str(module)


def assembly(llvm_level: ModuleOp, opt_level: int = 2, target: Target | None = None) -> str:
    """Assembly of an llvm-level module for `target` (the host by default)."""
    module, tm = _compiled(llvm_level, opt_level, target)
    return tm.emit_assembly(module)


class JITModule:
    """An llvm-level module compiled into this process by MCJIT.

    Holds the engine, the module, the target machine and the constant data the code
    reads (`data`): function addresses stay valid for the lifetime of this object.
    """

    object_code: bytes | None = None  # the relocatable object MCJIT made (compile cache)
    data: Mapping[str, Buffer]  # the constant data, by symbol, outside the object code
    optimized_ir: str | None = None
    var_storage: dict[str, Any]  # the buffers behind module variables (runtime.native)
    has_constructors = False  # static constructors the object code alone would not run

    def __init__(
        self,
        llvm_level: ModuleOp | None,
        opt_level: int = 2,
        *,
        object_code: bytes | None = None,
        target: Target | None = None,
        data: Mapping[str, Buffer] | None = None,
    ) -> None:
        """JIT `llvm_level` for `target` (the host by default: the code must run
        here), or (llvm_level None) load `object_code` a previous `JITModule` produced
        for the same target and the constant data it was compiled with (`from_object`)."""
        if llvm_level is None:
            self._load_object(object_code or b"", opt_level, target, dict(data or {}))
            return
        from dlc.runtime.constant_data import BoundData

        _check_level(opt_level)
        self._compile(llvm_level, opt_level, target, BoundData())

    def _compile(
        self, llvm_level: ModuleOp, opt_level: int, target: Target | None, bound: BoundData
    ) -> None:
        import llvmlite.binding as llvm_binding

        from dlc.runtime.jit_parts import compile_in_parts, pack_objects

        NATIVE_COMPILES[0] += 1
        objects = compile_in_parts(llvm_level, opt_level, target, bound)
        if objects is not None:  # a large module, built on several threads
            self._load_object(pack_objects(objects), opt_level, target, bound.segments)
            return
        module, tm = _compiled(llvm_level, opt_level, target, bound)
        self.opt_level = opt_level
        self.data = bound.segments
        text = str(module)
        self.has_constructors = "@llvm.global_ctors" in text
        # IR whose data is bound in this process is not kept: it declares the data only
        # (`ProgramLevels` makes self-contained IR when asked)
        self.optimized_ir = None if self.data else text
        self.target_machine = tm
        self._module = module
        self._engine = llvm_binding.create_mcjit_compiler(module, tm)
        emitted: list[bytes] = []  # the engine's object code, kept by its object cache
        self._engine.set_object_cache(lambda _module, data: emitted.append(bytes(data)))
        finalized(self._engine, self.data)
        self._engine.run_static_constructors()
        self.object_code = emitted[0] if len(emitted) == 1 else None

    @classmethod
    def from_object(
        cls,
        object_code: bytes,
        opt_level: int = 2,
        target: Target | None = None,
        data: Mapping[str, Buffer] | None = None,
    ) -> JITModule:
        """A fresh engine running `object_code`: own copies of every global but the
        constant data `data` (`BoundData.segments` of its compile), read where it is."""
        return cls(None, opt_level, object_code=object_code, target=target, data=data)

    def _load_object(
        self,
        object_code: bytes,
        opt_level: int,
        target: Target | None,
        data: Mapping[str, Buffer],
    ) -> None:
        from dlc.runtime.jit_parts import unpack_objects

        _check_level(opt_level)
        parts = unpack_objects(object_code)  # ValueError: a malformed bundle
        settings = machine_settings(opt_level, target)
        lib = llvm_c.library()
        self._engine = (
            llvm_c.Engine(lib, parts, settings) if lib else _llvmlite_engine(parts, settings)
        )
        self.opt_level = opt_level
        self.optimized_ir = None
        self.object_code = object_code
        self.data = data
        finalized(self._engine, data)

    def cacheable(self) -> bool:
        """The object code alone reproduces the module (no static constructors to run)."""
        return self.object_code is not None and not self.has_constructors

    def global_address(self, name: str) -> int | None:
        """Native address of global variable `name`, or None."""
        return self._engine.get_global_value_address(name) or None

    def address_or_none(self, name: str) -> int | None:
        """Native address of function `name`, or None when it is not defined."""
        return self._engine.get_function_address(name) or None

    def address(self, name: str) -> int:
        """Native address of function `name` (KeyError when it is not defined)."""
        address = self._engine.get_function_address(name)
        if not address:
            raise KeyError(name)
        return address


def _llvmlite_engine(parts: list[bytes], settings: llvm_c.Settings) -> llvm_binding.ExecutionEngine:
    """An llvmlite MCJIT engine running the object files `parts` (when `llvm_c` cannot
    call llvmlite's library itself)."""
    import llvmlite.binding as llvm_binding

    triple, cpu, features, opt, reloc, code_model = settings
    tm = llvm_binding.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=opt, reloc=reloc, codemodel=code_model
    )
    module = llvm_binding.parse_assembly("")
    module.triple = llvm_c.process_triple()
    module.data_layout = str(tm.target_data)
    engine = llvm_binding.create_mcjit_compiler(module, tm)
    for part in parts:
        engine.add_object_file(llvm_binding.ObjectFileRef.from_data(part))
    return engine
