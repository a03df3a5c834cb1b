"""dlc's semantics: the NumPy reference interpreter of the graph level.

The interpreter is the oracle of what a program means. Passes fold constants with it,
lowerings follow its conventions (window padding, fold orders), and every compiled
result is tested against it. It imports only `dlc.dialects` and `dlc.diagnostics`, so
passes and lowerings can use it without reaching up into the runtime.

    from dlc.semantics.interpreter import Interpreter, run_function

- `interpreter.py`: functions, blocks, calls (an explicit frame stack), globals;
- `handlers.py`: one handler per graph op; `memory.py`: the memory ops;
- `ops.py`: element-wise semantics; `tensor.py`: reductions, windows, convolution;
- `values.py`: the value model (tensors, tuples, structs, enums, pointers).
"""
