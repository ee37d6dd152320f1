#!/usr/bin/env bash
# The orc command line on a Lorenz63 series: export, train, forecast, evaluate.
# Run from an empty folder with the virtual environment active (or .venv/bin on PATH).
set -euo pipefail
orc data lorenz63 --out l63.csv --tn 120 --transient 1000        # 11000 rows: t,x,y,z
orc data lorenz63 --out l63_test.csv --tn 200 --transient 12000  # later on the same orbit
# dt comes from the t column; it, --lyapunov and the column names go into esn.orc
orc train l63.csv --res-dim 500 --val-fraction 0.1 --lyapunov 0.906 --out esn.orc
orc forecast esn.orc --steps 1000 --out forecast.csv --plot forecast.png
orc evaluate esn.orc l63_test.csv --horizon 1500 --windows 5 --plot evaluate.png
orc train l63.csv --model nvar --out nvar.orc  # NG-RC: k=2, stride, order and noise auto
