#!/usr/bin/env bash
# The orc command line on a Lorenz63 series: export, train, forecast, evaluate.
# Run from an empty folder with the virtual environment active (or .venv/bin on PATH).
set -euo pipefail
orc data lorenz63 --out l63.csv --tn 120 --transient 1000            # 11000 x 3 table
orc train l63.csv --res-dim 500 --val-fraction 0.1 --dt 0.01 --lyapunov 0.906 --out esn.orc
orc forecast esn.orc --steps 1000 --out forecast.csv --plot forecast.png
orc evaluate esn.orc l63.csv --warmup 200 --dt 0.01 --lyapunov 0.906
orc train l63.csv --model nvar --k 2 --order 2 --input-noise 1e-3 --out nvar.orc  # NG-RC
