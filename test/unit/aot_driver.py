"""A C driver for the tests of ahead-of-time libraries, and the tools to build and run it.

`driver_source(functions, header)` writes a C program that calls exported functions
the way a user would: `./driver NAME [SIZE ...] in0.bin in1.bin ...` takes the sizes of
the symbolic dimensions, if any, reads each input from a raw file (scalars too: they
are passed by value), calls `<prefix>_NAME`, and prints each
result element with `%.17g`, one per line, after a `result K` line; a failed call
prints `status CODE: MESSAGE` and exits with 3.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

from dlc.aot.signature import C_TYPES, CFunction

QEMU_ROOT = "/usr/aarch64-linux-gnu"


def _count(f: CFunction, dims: tuple[int | str, ...]) -> str:
    """The C expression of an element count: `size_n * 8` (the driver's size variables)."""
    return " * ".join(f"size_{f.c_size(d)}" if isinstance(d, str) else str(d) for d in dims) or "1"


def _call(f: CFunction, first_arg: int) -> list[str]:
    lines = [f'  if (strcmp(argv[1], "{f.name}") == 0) {{']
    names = []
    for k, size in enumerate(f.sizes):  # the sizes come first on the command line
        lines.append(f"    int64_t size_{size.name} = strtoll(argv[{first_arg + k}], NULL, 10);")
        names.append(f"size_{size.name}")
    first_arg += len(f.sizes)
    for i, arg in enumerate(f.params):
        ctype, count = C_TYPES[arg.ttype.dt], _count(f, arg.ttype.dims)
        lines.append(
            f"    {ctype} *in{i} = load(argv[{first_arg + i}], {count} * sizeof({ctype}));"
        )
        names.append(f"*in{i}" if arg.by_value else f"in{i}")
    for i, arg in enumerate(f.results):
        ctype, count = C_TYPES[arg.ttype.dt], _count(f, arg.ttype.dims)
        lines.append(f"    {ctype} *out{i} = calloc({count} + 1, sizeof({ctype}));")
        names.append(f"out{i}")
    prefix = f.c_name[: -len(f.name) - 1]
    lines += [
        f"    int32_t status = {f.c_name}({', '.join(names)});",
        "    if (status != 0) {",
        f'      printf("status %d: %s\\n", (int)status, {prefix}_status_message(status));',
        "      return 3;",
        "    }",
    ]
    for i, arg in enumerate(f.results):
        lines += [
            f'    printf("result {i}\\n");',
            f"    for (int64_t k = 0; k < {_count(f, arg.ttype.dims)}; k++)",
            f'      printf("%.17g\\n", (double)out{i}[k]);',
        ]
    return [*lines, "    return 0;", "  }"]


def driver_source(functions: list[CFunction], header: str) -> str:
    """The driver's C text for `functions` of the library whose header is `header`."""
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <string.h>",
        f'#include "{header}"',
        "static void *load(const char *path, size_t bytes) {",
        '  FILE *f = fopen(path, "rb");',
        "  void *data = calloc(bytes + 1, 1);",
        "  if (f == NULL || fread(data, 1, bytes, f) != bytes) { perror(path); exit(2); }",
        "  fclose(f);",
        "  return data;",
        "}",
        "int main(int argc, char **argv) {",
        "  if (argc < 2) return 2;",
    ]
    for f in functions:
        lines += _call(f, 2)
    return "\n".join([*lines, "  return 2;", "}", ""])


def build(cc: str, source: Path, out: Path, link: list[str]) -> Path:
    """Compile and link the driver (rpath: the library's directory)."""
    command = [cc, "-std=c11", "-Wall", "-Werror", "-o", str(out), str(source), *link]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return out


def run(
    driver: Path,
    name: str,
    inputs: list[np.ndarray],
    qemu: bool = False,
    sizes: tuple[int, ...] = (),
) -> str:
    """Run the driver on `inputs` (written next to it) and `sizes` (of the symbolic
    dimensions); its standard output."""
    paths = []
    for i, value in enumerate(inputs):
        path = driver.parent / f"{name}.in{i}.bin"
        np.ascontiguousarray(value).tofile(path)
        paths.append(str(path))
    command = [str(driver), name, *map(str, sizes), *paths]
    if qemu:
        command = ["qemu-aarch64", "-L", QEMU_ROOT, *command]
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, env=env, timeout=120
    )
    assert done.returncode in (0, 3), done.stderr
    return done.stdout


def results(text: str) -> list[np.ndarray]:
    """The result arrays (flat, float64) a driver printed."""
    out: list[list[float]] = []
    for line in text.splitlines():
        if line.startswith("result "):
            out.append([])
        else:
            out[-1].append(float(line))
    return [np.array(values) for values in out]


def aarch64_tools() -> str | None:
    """Why the aarch64 tests cannot run here, or None when they can."""
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross)"
    if not Path(QEMU_ROOT, "lib").is_dir():
        return f"no aarch64 C library in {QEMU_ROOT} (apt-get install libc6-dev-arm64-cross)"
    return None
