# The second call: the first call's failures again, with their tracebacks.
set -u
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -m pip install --no-build-isolation --no-deps -q . > $OUT/install.log 2>&1 || { tail -30 $OUT/install.log; exit 1; }
timeout 140 python3 -m pytest -n 15 --dist load -q -p no:cacheprovider --timeout 120 --tb=short -rfE $(tr -d ' ' < benchmarks/runs/2026-11-30-h200-suite/scripts/failed.txt) > $OUT/rerun.log 2>&1; echo "pytest rc=$?"
grep -E "^(FAILED|ERROR)|passed|failed" $OUT/rerun.log | tail -35
