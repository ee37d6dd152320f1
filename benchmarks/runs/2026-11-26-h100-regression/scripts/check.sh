set -u
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi -L; python3 -c "import jax; print(jax.__version__, jax.devices())"
t0=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -q . > $OUT/install.log 2>&1 || { tail -30 $OUT/install.log; exit 1; }
echo "install $(( $(date +%s) - t0 )) s"
cd /tmp && python3 -c "import orc, sys; print(orc.__file__); orc.show_config()" | tee $OUT/config.txt; cd - >/dev/null
for d in float64 float32; do (cd /tmp && timeout 120 python3 $OLDPWD/benchmarks/runs/2026-11-26-h100-regression/scripts/forecast.py $d) | tee $OUT/forecast_$d.json; done
echo "timing done $(( $(date +%s) - t0 )) s"
timeout ${TEST_S:-240} python3 -m pytest -n 14 --dist load -q -rf -p no:cacheprovider --durations=10 \
  tests/test_compiled.py tests/test_cluster_forecast.py tests/test_io.py tests/test_io_safety.py \
  tests/test_online.py tests/test_classifier_lags.py tests/test_errors_as_data.py tests/test_orc_signatures.py \
  tests/test_user_subclasses.py tests/test_nvar.py tests/test_errors.py tests/test_seed_spec.py tests/test_models.py \
  tests/test_native_variants.py > $OUT/tests.log 2>&1; echo "pytest rc=$?"
tail -45 $OUT/tests.log
echo "all $(( $(date +%s) - t0 )) s"
