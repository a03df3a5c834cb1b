"""A fork server for the lit suite's Python tools: each RUN line's `dlc-opt` (or `filecheck`)
is a process forked from one that has already imported the tool, not a new interpreter.

Starting `dlc-opt` costs about 0.9 CPU-s of imports (xDSL, NumPy, the dialects) and the
average RUN line about 0.2 s of work, so a shard of the suite spent most of its time
importing. With `DLC_LIT_FORKSERVER=1` (test/unit/test_lit.py sets it) lit.cfg.py starts one
server per tool and runs each RUN line's tool through this file's client:

    python -S -E forkserver.py SOCKET ARGS...

The client sends its arguments, working directory, environment and standard streams (the
file descriptors themselves, SCM_RIGHTS) to the server, which forks a child that takes them
over (dup2, chdir, os.environ, sys.argv, sys.stdin/stdout/stderr made anew) and calls the
tool's console-script function as the installed script does, `sys.exit(main())`; Python's
own shutdown then flushes the streams, runs atexit handlers and picks the exit code. The
child is forked from a server that has imported the tool (and what every run of it
imports anyway, lit.cfg.py's list) and run none of it, so every RUN line starts from the
state a new `dlc-opt` reaches on its way. The child's wait status (exit code or signal)
goes back to the client, which ends the same way. The server stops when its standard
input (a pipe from lit) closes. `make lit` runs the installed tools themselves.
"""

import io
import json
import os
import selectors
import signal
import socket
import struct
import sys

_HEADER = struct.Struct("!I")  # the request's length; the status is the same format


def _recv_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("fork server: the connection closed early")
        data += chunk
    return data


def client(path: str, argv: list[str]) -> None:
    """Run the served tool with `argv` as this process would, and end as it ended."""
    request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
    payload = json.dumps(request).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        socket.send_fds(conn, [_HEADER.pack(len(payload))], [0, 1, 2])
        conn.sendall(payload)
        (status,) = _HEADER.unpack(_recv_exactly(conn, _HEADER.size))
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


def _take_over(conn: socket.socket) -> tuple[list[str], list[int]]:
    """In the child: the request's fds on 0-2, its directory and environment; its argv."""
    header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
    header += _recv_exactly(conn, _HEADER.size - len(header))
    (size,) = _HEADER.unpack(header)
    request = json.loads(_recv_exactly(conn, size))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    return request["argv"], fds


def _new_stdio() -> None:
    """sys.stdin, stdout and stderr made anew for the fds now on 0-2, as Python's start-up
    makes them (the server's were made for its own fds: their buffering, whether they
    are seekable and a tty, would be the server's)."""
    for fd, attr in enumerate(("stdin", "stdout", "stderr")):
        old = getattr(sys, attr)
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        raw.name = f"<{attr}>"
        buffer = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        line_buffering = raw.isatty() or fd == 2
        stream = io.TextIOWrapper(buffer, old.encoding, old.errors, "\n", line_buffering)
        stream.mode = "r" if fd == 0 else "w"
        setattr(sys, attr, stream)
        setattr(sys, f"__{attr}__", stream)


def _serve_one(conn: socket.socket, listener: socket.socket, tool: str) -> list[str]:
    """In a child of the server: fork the tool's process for `conn`'s request, wait for
    it and send its wait status back. Returns (only in that process) its argv."""
    listener.close()
    argv, fds = _take_over(conn)
    pid = os.fork()
    if pid == 0:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        conn.close()
        _new_stdio()
        return [tool, *argv]
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    conn.sendall(_HEADER.pack(status))
    os._exit(0)


def _reap(block: bool = False) -> None:
    """Collect the request handlers that have ended (`block`: all of them)."""
    try:
        while os.waitpid(-1, 0 if block else os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:  # none left
        pass


def serve(path: str, tool: str) -> list[str]:
    """Accept requests on `path` until standard input closes; returns only in a forked
    child, with the argv its tool is to run with."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(0, selectors.EVENT_READ)
    print("ready", flush=True)
    while True:
        ready = [key.fileobj for key, _ in selector.select()]
        if 0 in ready and not os.read(0, 4096):
            listener.close()
            _reap(block=True)
            sys.exit(0)
        if listener not in ready:
            continue
        conn, _ = listener.accept()
        if os.fork() == 0:
            selector.close()
            return _serve_one(conn, listener, tool)
        conn.close()
        _reap()


if __name__ == "__main__" and sys.argv[1] != "--serve":
    client(sys.argv[1], sys.argv[2:])
elif __name__ == "__main__":
    # --serve SOCKET TOOL MODULE:FUNCTION [MODULE[:FUNCTION]...]: the tool's module is
    # imported once, here, and so are the modules every run of it imports later (the
    # parser's, for instance); a FUNCTION after one is called without arguments.
    _path, _tool = sys.argv[2:4]
    sys.path[0] = os.path.dirname(_tool)  # where the installed script's own sys.path starts
    for _entry in sys.argv[5:]:
        _module, _, _function = _entry.partition(":")
        _loaded = __import__(_module, fromlist=["_"])
        if _function:
            getattr(_loaded, _function)()
    _module, _function = sys.argv[4].split(":")
    _main = getattr(__import__(_module, fromlist=[_function]), _function)
    sys.argv = serve(_path, _tool)
    sys.exit(_main())
