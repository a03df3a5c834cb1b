"""The C entry points of an ahead-of-time library, as LLVM IR linked into its module.

For each exported `f`: `P_f_with_arena` sets up a call context on its stack (stack
limit, arena, threads) and returns the status word, `P_f` does the same with a
`malloc`ed arena, and `P_status_message` renders a status; for the functions of a
module with symbolic dimensions the entries take the sizes first and check them, and
`P_f_arena_bytes(sizes)` gives the arena a call needs (`c_symbolic.py`); everything
else becomes internal. Details: docs/design/abi.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlc.aot import c_symbolic
from dlc.aot.arena_formula import ArenaFormula
from dlc.aot.signature import LLVM_SCALARS, CArg, CFunction
from dlc.dialects import abi

STACK_RESERVE = 256 << 10
"""Stack kept free below the limit (the JIT runtime's `STACK_RESERVE`)."""

ARENA_ALIGN = 64
ARENA_FAILED = "trap\tout of memory allocating the arena of a call"
"""The message of the status a `P_f` returns when `malloc` of its arena fails."""


@dataclass(frozen=True)
class ShimOptions:
    """What the entry points depend on besides the functions."""

    prefix: str
    messages: tuple[str, ...]  # abi.MESSAGES of the module, then ARENA_FAILED
    arena_bytes: int  # the arena one call needs (`arena_size` adds the alignment slack)
    openmp: bool  # the code calls GOMP_parallel: ask the OpenMP runtime for threads
    pthreads: bool  # the target has glibc's pthread_getattr_np (Linux)
    pointer_bits: int  # 64, or 32 (wasm32)
    formulas: tuple[tuple[str, ArenaFormula], ...] = ()  # per function with sizes

    def formula(self, name: str) -> ArenaFormula:
        """The arena formula of the function `name` (one with symbolic dimensions)."""
        return dict(self.formulas)[name]

    @property
    def arena_size(self) -> int:
        """Bytes a caller-provided arena needs (`P_ARENA_BYTES` in the header)."""
        return self.arena_bytes + ARENA_ALIGN if self.arena_bytes else 0


def _string(name: str, text: str) -> str:
    """A private NUL-terminated LLVM string constant."""
    data = text.encode("utf-8") + b"\0"
    body = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in data)
    return f'{name} = private unnamed_addr constant [{len(data)} x i8] c"{body}", align 1'


def _param(arg: CArg, index: int) -> str:
    kind = LLVM_SCALARS[arg.ttype.dt] if arg.by_value else "ptr"
    return f"{kind} %a{index}"


def _pass_arguments(f: CFunction) -> tuple[list[str], list[str]]:
    """Instructions storing by-value scalars in stack slots, and the pointers to pass."""
    lines: list[str] = []
    pointers: list[str] = []
    for i, arg in enumerate(f.args):
        if not arg.by_value:
            pointers.append(f"ptr %a{i}")
            continue
        kind = LLVM_SCALARS[arg.ttype.dt].split()[0]
        value = f"%a{i}"
        if kind == "i1":
            lines.append(f"  %z{i} = zext i1 %a{i} to i8")
            kind, value = "i8", f"%z{i}"
        lines.append(f"  %s{i} = alloca {kind}, align 8")
        lines.append(f"  store {kind} {value}, ptr %s{i}, align 8")
        pointers.append(f"ptr %s{i}")
    return lines, pointers


def _store_word(index: int, value: str) -> list[str]:
    return [
        f"  %w{index} = getelementptr inbounds i64, ptr %ctx, i64 {index}",
        f"  store i64 {value}, ptr %w{index}, align 8",
    ]


def _make_context(opts: ShimOptions) -> list[str]:
    """Instructions that fill `%ctx` for a call with the arena `[%arena, +%arena_bytes)`."""
    size_t = f"i{opts.pointer_bits}"
    threads = "call i32 @omp_get_max_threads()" if opts.openmp else "add i32 1, 0"
    widen = "zext" if size_t != "i64" else "bitcast"
    return [
        f"  %ctx = alloca [{abi.CTX_WORDS} x i64], align 16",
        f"  call void @llvm.memset.p0.i64(ptr align 16 %ctx, i8 0, i64 {8 * abi.CTX_WORDS}, i1 false)",
        "  %limit = call i64 @__dlc_stack_limit()",
        "  %flag = ptrtoint ptr @__dlc_no_interrupt to i64",
        "  %start = ptrtoint ptr %arena to i64",
        f"  %bytes = {widen} {size_t} %arena_bytes to i64",
        f"  %up = add i64 %start, {ARENA_ALIGN - 1}",
        f"  %base = and i64 %up, {-ARENA_ALIGN}",
        "  %end0 = add i64 %start, %bytes",
        "  %fits = icmp ugt i64 %end0, %base",
        "  %end = select i1 %fits, i64 %end0, i64 %base",
        f"  %threads32 = {threads}",
        "  %threads = sext i32 %threads32 to i64",
        *_store_word(abi.CTX_STACK_LIMIT, "%limit"),
        *_store_word(abi.CTX_INTERRUPT, "%flag"),
        *_store_word(abi.CTX_ARENA_TOP, "%base"),
        *_store_word(abi.CTX_ARENA_END, "%end"),
        *_store_word(abi.CTX_ARENA_BASE, "%base"),
        *_store_word(abi.CTX_THREADS, "%threads"),
    ]


def _code(opts: ShimOptions, message: str) -> int:
    return opts.messages.index(message) + 1


def _size_checks(f: CFunction, opts: ShimOptions, index: int) -> list[str]:
    """The sizes of `f` stored in `%sizes` and checked (`c_symbolic`); none without."""
    if not f.sized_call:
        return []
    returns = [
        [
            f"  store i64 %n{k}, ptr @__dlc_fault, align 8",
            f"  ret i32 {_code(opts, c_symbolic.negative_message(f, k))}",
        ]
        for k in range(len(f.sizes))
    ]
    return [
        *c_symbolic.store_sizes(f),
        *c_symbolic.negatives(f, returns, "sized"),
        f"  %need = call i64 @__dlc_need_{index}(ptr %sizes)",
        "  %big = icmp slt i64 %need, 0",
        "  br i1 %big, label %too_large, label %run",
        "too_large:",
        f"  ret i32 {_code(opts, c_symbolic.too_large_message(f))}",
        "run:",
    ]


def _with_arena(f: CFunction, opts: ShimOptions, index: int) -> list[str]:
    """`P_f_with_arena`: check the sizes, make the context, call `f`, keep a failure's
    fault value."""
    size_t = f"i{opts.pointer_bits}"
    params = ", ".join(
        ["ptr %arena", f"{size_t} %arena_bytes", *c_symbolic.size_params(f)]
        + [_param(a, i) for i, a in enumerate(f.args)]
    )
    stores, pointers = _pass_arguments(f)
    if f.sized_call:
        pointers.insert(len(f.params), "ptr %sizes")
    return [
        f"define i32 @{f.c_name}_with_arena({params}) {{",
        "entry:",
        *_size_checks(f, opts, index),
        *_make_context(opts),
        *stores,
        f'  call void @"{abi.function_symbol(f.name)}"({", ".join(["ptr %ctx", *pointers])})',
        "  %status = load i64, ptr %ctx, align 8",
        "  %failed = icmp ne i64 %status, 0",
        "  br i1 %failed, label %fail, label %done",
        "fail:",
        f"  %wf = getelementptr inbounds i64, ptr %ctx, i64 {abi.CTX_FAULT}",
        "  %fault = load i64, ptr %wf, align 8",
        "  store i64 %fault, ptr @__dlc_fault, align 8",
        "  br label %done",
        "done:",
        "  %code = trunc i64 %status to i32",
        "  ret i32 %code",
        "}",
    ]


def _arena_bytes(f: CFunction, opts: ShimOptions, index: int) -> list[str]:
    """`size_t P_f_arena_bytes(sizes...)`: the arena bytes of a call at those sizes
    (0 for a negative size or a byte count that overflows: the call says which)."""
    size_t = f"i{opts.pointer_bits}"
    result = "%need" if size_t == "i64" else "%narrow"
    return [
        f"define {size_t} @{f.c_name}_arena_bytes({', '.join(c_symbolic.size_params(f))}) {{",
        "entry:",
        *c_symbolic.store_sizes(f),
        *c_symbolic.negatives(f, [[f"  ret {size_t} 0"]] * len(f.sizes), "sized"),
        f"  %need = call i64 @__dlc_need_{index}(ptr %sizes)",
        "  %bad = icmp slt i64 %need, 0",
        "  br i1 %bad, label %invalid, label %valid",
        "invalid:",
        f"  ret {size_t} 0",
        "valid:",
        *([] if size_t == "i64" else [f"  %narrow = trunc i64 %need to {size_t}"]),
        f"  ret {size_t} {result}",
        "}",
    ]


def _with_malloc(f: CFunction, opts: ShimOptions, failed_code: int) -> list[str]:
    size_t = f"i{opts.pointer_bits}"
    params = ", ".join([*c_symbolic.size_params(f)] + [_param(a, i) for i, a in enumerate(f.args)])
    size = "%need" if f.sized_call else str(opts.arena_size)
    forward = ", ".join(
        ["ptr %mem", f"{size_t} {size}", *c_symbolic.size_params(f)]
        + [_param(a, i) for i, a in enumerate(f.args)]
    )
    forward = forward.replace("i1 zeroext", "i1")
    call = f"  %code = call i32 @{f.c_name}_with_arena({forward})"
    if f.sized_call:
        return _sized_malloc(f, size_t, params, call, failed_code)
    if not opts.arena_size:
        return [
            f"define i32 @{f.c_name}({params}) {{",
            "entry:",
            call.replace("ptr %mem", "ptr null"),
            "  ret i32 %code",
            "}",
        ]
    return [
        f"define i32 @{f.c_name}({params}) {{",
        "entry:",
        f"  %mem = call ptr @malloc({size_t} {opts.arena_size})",
        "  %none = icmp eq ptr %mem, null",
        "  br i1 %none, label %failed, label %run",
        "failed:",
        f"  ret i32 {failed_code}",
        "run:",
        call,
        "  call void @free(ptr %mem)",
        "  ret i32 %code",
        "}",
    ]


def _sized_malloc(f: CFunction, size_t: str, params: str, call: str, failed: int) -> list[str]:
    """`P_f` of a function with sizes: an arena of `P_f_arena_bytes` bytes (none when
    that is 0: the call then reports the sizes, or needs no arena)."""
    sizes = ", ".join(c_symbolic.size_params(f))
    return [
        f"define i32 @{f.c_name}({params}) {{",
        "entry:",
        f"  %need = call {size_t} @{f.c_name}_arena_bytes({sizes})",
        f"  %none = icmp eq {size_t} %need, 0",
        "  br i1 %none, label %bare, label %allocate",
        "bare:",
        call.replace("ptr %mem", "ptr null").replace("%code", "%bare_code"),
        "  ret i32 %bare_code",
        "allocate:",
        f"  %mem = call ptr @malloc({size_t} %need)",
        "  %null = icmp eq ptr %mem, null",
        "  br i1 %null, label %failed, label %run",
        "failed:",
        f"  ret i32 {failed}",
        "run:",
        call,
        "  call void @free(ptr %mem)",
        "  ret i32 %code",
        "}",
    ]


def _status_message(opts: ShimOptions) -> list[str]:
    """`P_status_message(code)`: a switch over the codes (module docstring)."""
    size_t = f"i{opts.pointer_bits}"
    strings = [_string("@__dlc_msg_0", "ok"), _string("@__dlc_msg_unknown", "unknown status code")]
    cases = ["i32 0, label %m0"]
    blocks = ["m0:", "  ret ptr @__dlc_msg_0"]
    longest = 0
    for code, message in enumerate(opts.messages, start=1):
        kind, _, text = message.partition("\t")
        cases.append(f"i32 {code}, label %m{code}")
        blocks.append(f"m{code}:")
        if kind != "bounds-value":
            strings.append(_string(f"@__dlc_msg_{code}", text))
            blocks.append(f"  ret ptr @__dlc_msg_{code}")
            continue
        before, _, after = text.rpartition("\t")  # the value goes at the last tab
        strings += [_string(f"@__dlc_msg_{code}_a", before), _string(f"@__dlc_msg_{code}_b", after)]
        longest = max(longest, len(text.encode("utf-8")) + 24)
        blocks += [
            f"  %v{code} = load i64, ptr @__dlc_fault, align 8",
            f"  %n{code} = call i32 (ptr, {size_t}, ptr, ...) @snprintf(ptr @__dlc_text, "
            f"{size_t} {longest}, ptr @__dlc_format, ptr @__dlc_msg_{code}_a, i64 %v{code}, "
            f"ptr @__dlc_msg_{code}_b)",
            "  ret ptr @__dlc_text",
        ]
    if longest:
        strings.append(_string("@__dlc_format", "%s%lld%s"))
        strings.append(
            f"@__dlc_text = internal thread_local global [{longest} x i8] zeroinitializer, align 1"
        )
        strings.append(f"declare i32 @snprintf(ptr, {size_t}, ptr, ...)")
    return [
        *strings,
        f"define ptr @{opts.prefix}_status_message(i32 %code) {{",
        "entry:",
        f"  switch i32 %code, label %unknown [{' '.join(cases)}]",
        "unknown:",
        "  ret ptr @__dlc_msg_unknown",
        *blocks,
        "}",
    ]


def _stack_limit(opts: ShimOptions) -> list[str]:
    """`__dlc_stack_limit()`: the calling thread's stack end plus `STACK_RESERVE`,
    found once per thread; 0 (no stack guard) where it cannot be found."""
    if not opts.pthreads:
        return ["define internal i64 @__dlc_stack_limit() {", "entry:", "  ret i64 0", "}"]
    return [
        "@__dlc_limit = internal thread_local global i64 -1, align 8",
        "declare i64 @pthread_self()",
        "declare i32 @pthread_getattr_np(i64, ptr)",
        "declare i32 @pthread_attr_getstack(ptr, ptr, ptr)",
        "declare i32 @pthread_attr_destroy(ptr)",
        "define internal i64 @__dlc_stack_limit() {",
        "entry:",
        "  %known = load i64, ptr @__dlc_limit, align 8",
        "  %have = icmp ne i64 %known, -1",
        "  br i1 %have, label %done, label %find",
        "done:",
        "  ret i64 %known",
        "find:",
        "  %attr = alloca [128 x i8], align 16",  # pthread_attr_t: 56 bytes on x86-64, 64 on AArch64
        "  %low = alloca ptr, align 8",
        "  %size = alloca i64, align 8",
        "  store ptr null, ptr %low, align 8",
        "  %self = call i64 @pthread_self()",
        "  %rc = call i32 @pthread_getattr_np(i64 %self, ptr %attr)",
        "  %got = icmp eq i32 %rc, 0",
        "  br i1 %got, label %read, label %keep",
        "read:",
        "  %rc2 = call i32 @pthread_attr_getstack(ptr %attr, ptr %low, ptr %size)",
        "  %rc3 = call i32 @pthread_attr_destroy(ptr %attr)",
        "  %lowp = load ptr, ptr %low, align 8",
        "  %lowi = ptrtoint ptr %lowp to i64",
        "  %ok2 = icmp eq i32 %rc2, 0",
        "  %nonnull = icmp ne i64 %lowi, 0",
        "  %ok = and i1 %ok2, %nonnull",
        f"  %limit = add i64 %lowi, {STACK_RESERVE}",
        "  %found = select i1 %ok, i64 %limit, i64 0",
        "  br label %keep",
        "keep:",
        "  %value = phi i64 [ 0, %find ], [ %found, %read ]",
        "  store i64 %value, ptr @__dlc_limit, align 8",
        "  ret i64 %value",
        "}",
    ]


def entry_points(functions: list[CFunction], opts: ShimOptions, triple: str, layout: str) -> str:
    """The LLVM IR text of the entry points of `functions` and the shared helpers."""
    size_t = f"i{opts.pointer_bits}"
    failed_code = opts.messages.index(ARENA_FAILED) + 1
    lines = [
        f'target triple = "{triple}"',
        f'target datalayout = "{layout}"',
        "@__dlc_no_interrupt = internal global i32 0, align 4",
        "@__dlc_fault = internal thread_local global i64 0, align 8",
        "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
        f"declare ptr @malloc({size_t})",
        "declare void @free(ptr)",
        *(["declare i32 @omp_get_max_threads()"] if opts.openmp else []),
        *_stack_limit(opts),
        *_status_message(opts),
        *c_symbolic.INTRINSICS,
    ]
    for index, f in enumerate(functions):
        n_args = len(f.args) + (1 if f.sized_call else 0)
        lines.append(f'declare void @"{abi.function_symbol(f.name)}"(ptr{", ptr" * n_args})')
        if f.sized_call:
            formula = opts.formula(f.name)
            lines += c_symbolic.need_function(f, formula, index, opts.pointer_bits)
            lines += _arena_bytes(f, opts, index)
        lines += _with_arena(f, opts, index)
        lines += _with_malloc(f, opts, failed_code)
    return "\n".join(lines) + "\n"


def exported_names(functions: list[CFunction], prefix: str) -> set[str]:
    """The symbols of the entry points (the only definitions a library exports)."""
    names = {f"{prefix}_status_message"}
    for f in functions:
        names |= {f.c_name, f"{f.c_name}_with_arena"}
        if f.sized_call:
            names.add(f"{f.c_name}_arena_bytes")
    return names
