"""dlc's runtime: the NumPy reference interpreter (`reference`), the JIT and compiled modules.

Kept import-light; import the submodules you need (`from dlc.runtime.reference import run_function`).
"""
