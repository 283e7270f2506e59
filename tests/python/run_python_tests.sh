#!/bin/sh
# run_python_tests.sh <python or ""> <python/tests dir>: the package's CPU unittest suite; exit 77
# (CTest SKIP_RETURN_CODE) when there is no Python 3 interpreter.
py="$1"
dir="$2"
if [ -z "$py" ]; then
  py=$(command -v python3 2>/dev/null)
fi
if [ -z "$py" ] || ! "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' 2>/dev/null; then
  echo "python.cpu: no python3 >= 3.9 found: skipped"
  exit 77
fi
exec "$py" -m unittest discover -s "$dir" -p 'test_*.py' -v
