"""dlc's runtime: JIT-compiles llvm-level modules, caches object code and calls native
functions with NumPy arrays. It imports only `dlc.dialects` and `dlc.diagnostics`;
`dlc.pipeline` decides what to compile, the runtime only loads and calls it.
"""
