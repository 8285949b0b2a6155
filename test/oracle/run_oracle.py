"""Runs every test/oracle/test_*.py: each module's functions named test_*.

Prints "oracle: N passed, N failed" and exits non-zero on failure.
"""
import importlib.util
import pathlib
import sys
import traceback

here = pathlib.Path(__file__).parent
sys.path.insert(0, str(here))
passed = failed = 0
only = sys.argv[1] if len(sys.argv) > 1 else None
for path in sorted(here.glob("test_*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name in sorted(dir(mod)):
        if not name.startswith("test_") or (only and only not in name):
            continue
        try:
            getattr(mod, name)()
            passed += 1
        except Exception:
            failed += 1
            print(f"FAIL {path.stem}.{name}")
            traceback.print_exc()
print(f"oracle: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
