# For the next GPU session (prepared 2026-11-30, run from the repository root):
#   bash benchmarks/runs/2026-11-30-h200-suite/scripts/next.sh
# The eighth run's failures after their fixes (failed.txt), test_shard.py
# after the conftest change, the tests that run did not reach, then where a
# short forecast's call spends its time. Copy ../shared/spec/seed_jit_compat.py
# to .devcarry/ and carry it to check the users' contract too.
set -u
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
S=benchmarks/runs/2026-11-30-h200-suite/scripts
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
python3 -m pip install --no-build-isolation --no-deps -q . > $OUT/install.log 2>&1 || { tail -30 $OUT/install.log; exit 1; }
echo "install $(el) s"
if [ -f .devcarry/seed_jit_compat.py ]; then
  (cd /tmp && timeout 90 python3 $OLDPWD/.devcarry/seed_jit_compat.py) > $OUT/seed.log 2>&1; echo "seed: $(tail -1 $OUT/seed.log)"
fi
(cd /tmp && timeout 120 python3 $OLDPWD/$S/percall_profile.py 2000 float64) > $OUT/percall64.txt 2>&1; head -5 $OUT/percall64.txt
(cd /tmp && timeout 120 python3 $OLDPWD/$S/percall_profile.py 2000 float32) > $OUT/percall32.txt 2>&1; head -5 $OUT/percall32.txt
echo "profiles $(el) s"
T="$(tr -d ' ' < $S/failed.txt) tests/test_shard.py tests/test_cesn_bounded.py tests/test_data.py tests/test_cli.py tests/test_fuzz.py tests/test_contract.py tests/test_classifier_ppv.py tests/test_cesn_euler.py tests/test_datasets.py"
timeout $(( 560 - $(el) )) python3 -m pytest -n 15 --dist load -v -p no:cacheprovider --timeout 200 -rfE --tb=short $T > $OUT/tests.log 2>&1; echo "pytest rc=$? ($(el) s)"
grep -E "^(FAILED|ERROR)|passed|failed" $OUT/tests.log | tail -30
