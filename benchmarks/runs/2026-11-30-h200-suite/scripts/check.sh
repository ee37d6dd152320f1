# The GPU check of 2026-11-30 (one H200): install, the users' contract, the
# cluster forecast's timing, then the suite in priority order (GPU paths first)
# for what is left of one call. Run from the repository root:
#   bash benchmarks/runs/2026-11-30-h200-suite/scripts/check.sh
set -u
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
S=benchmarks/runs/2026-11-30-h200-suite/scripts
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi -L
python3 -m pip install --no-build-isolation --no-deps -q . > $OUT/install.log 2>&1 || { tail -30 $OUT/install.log; exit 1; }
echo "install $(el) s"
(cd /tmp && python3 -c "import orc; orc.show_config()") > $OUT/config.txt 2>&1; sed -n 1,12p $OUT/config.txt
(cd /tmp && timeout 90 python3 $OLDPWD/.devcarry/seed_jit_compat.py) > $OUT/seed.log 2>&1; echo "seed: $(tail -1 $OUT/seed.log) ($(el) s)"
# the forecast timing is the seventh run's script (the run used a copy that
# also took an optional res_dim, 2000 by default: the same program as run)
F=benchmarks/runs/2026-11-26-h100-regression/scripts/forecast.py
for d in float64 float32; do (cd /tmp && timeout 90 python3 $OLDPWD/$F $d) > $OUT/forecast_$d.json 2>&1; done
grep -h -E '"(dtype|native|same_bits_twice|maxdiff_first100|us_step_default|us_step_xla|us_call_forecast10)"' $OUT/forecast_*.json | tr -d '\n'; echo
echo "timing done $(el) s"
FIRST="cluster_forecast compiled models precision device_solve float32 errors_as_data fused fused_forcing leak_rates byo_matrices fast_paths populations shard tune tune_refine tune_tasks construct contract fit_front ridge_results fit_check nan_entry_points errors online nvar nvar_select hybrid classifier_lags classifier_ppv classifier_repr regression predict divergence divergence_scale traced_options input_gaps orc04_fidelity_models orc04_fidelity_components orc04_construction io io_safety io_hardening load_invariants persistent plasticity es2n nlat cesn_time_const cesn_bounded cesn_euler component_facts topologies sklearn user_subclasses seed_spec metrics numerics orc_utils_parity native_variants cli cli_trust cli_safety progress example_ks science_panel fuzz datasets visualization orc_signatures architecture benchmarks_harness data"
F=""; for f in $FIRST; do F="$F tests/test_$f.py"; done
left=$(( 575 - $(el) ))
echo "pytest for at most $left s"
timeout $left python3 -m pytest -n 15 --dist load -v -p no:cacheprovider -p no:randomly --timeout 150 -rfE --durations=30 $F > $OUT/tests.log 2>&1; echo "pytest rc=$? ($(el) s)"
grep -c " PASSED" $OUT/tests.log; grep -E "^(FAILED|ERROR)|Timeout|passed|failed" $OUT/tests.log | tail -40
