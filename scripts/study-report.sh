#!/usr/bin/env bash
# Tables, claims, cost and figures of a study from the records landed so far, without training
# anything (snakemake's rule `all` would train the missing runs first). For a long study that
# is still running, e.g. the protocol study:
#   scripts/study-report.sh config/protocol.yaml
# Writes, under the config's out_dir: landed.json, runs.csv, eval_curves.csv, summary.csv,
# claims.csv + claims.md, calibration.csv + calibration.md (each rule's false-positive rate on
# PERMUTATIONS null tables, 1000, and its power on RESAMPLES, 200), calibration_by_claim.md
# (per claim: its parts decided, too weak to decide, without data), cost.md (per study and
# workload), cost_conditions.md, resolution.md (the crossing's step and evaluation's share
# against their goals), trials.md (each tuned baseline's expected best of T/2, T and 2T trials
# against the crossing's step: has its best-of-k curve flattened by T?), peak.md (per echo
# factor against the baseline, where the curve turns, and the distinct views an example's
# repeats give before augmentation); and every figure of
# its studies under its figures_dir. The benchmark tables (benchmarks/*.csv under out_dir,
# else the default study's, under its out_dir: the protocol study runs no benchmarks) go to
# the claims on benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
configs=("$@")
(($#)) || configs=(config/config.yaml)
read -r out figures reference default_out < <("$py" - "${configs[@]}" <<'PY'
import sys
from experiments.study import load_config
config = load_config(*sys.argv[1:])
default = load_config("config/config.yaml")  # the default study's tables back a study without
print(config["out_dir"], config["figures_dir"], config["reference"], default["out_dir"])
PY
)
mkdir -p "$out" "$figures"
"$py" -m experiments.study check --configfile "${configs[@]}" --existing >/dev/null || {
    "$py" -m experiments.study check --configfile "${configs[@]}" --existing >&2
    exit 1
}
"$py" -m experiments.study studies --configfile "${configs[@]}" --existing >"$out/landed.json"
"$py" -m analysis aggregate --study-file "$out/landed.json" --runs-out "$out/runs.csv" \
    --curves-out "$out/eval_curves.csv"
"$py" -m analysis summary --runs "$out/runs.csv" --out "$out/summary.csv"
benchmarks=()  # the benchmark tables the claims on benchmarks read: the study's own, else
for option in --sharing=shared_loading --echo-speedup=echo_speedup; do  # the default study's
    for dir in "$out" "$default_out"; do
        table=$dir/benchmarks/${option#*=}.csv
        [[ -f $table ]] && { benchmarks+=("${option%%=*}" "$table"); break; }
    done
done
"$py" -m analysis claims --runs "$out/runs.csv" --reference "$reference" "${benchmarks[@]}" \
    --configfile "${configs[@]}" --out "$out/claims.csv" >/dev/null
# each claim part's false "reproduced" under its null, and its power, on these records
"$py" -m analysis calibrate --runs "$out/runs.csv" "${benchmarks[@]}" \
    --configfile "${configs[@]}" --permutations "${PERMUTATIONS:-1000}" \
    --resamples "${RESAMPLES:-200}" --out "$out/calibration.csv" >/dev/null
"$py" -m analysis resolution --runs "$out/runs.csv" >"$out/resolution.md"
"$py" -m analysis trials --runs "$out/runs.csv" --configfile "${configs[@]}" >"$out/trials.md"
"$py" -m analysis peak --runs "$out/runs.csv" --configfile "${configs[@]}" >"$out/peak.md"
prior=()  # the default study's measured cost per workload, where none of this one has landed
[[ $out != "$default_out" && -f $default_out/runs.csv ]] && prior=(--prior "$default_out/runs.csv")
for by in part condition; do
    "$py" -m analysis cost --runs "$out/runs.csv" --configfile "${configs[@]}" "${prior[@]}" \
        --by "$by" >"$out/cost$([[ $by == part ]] || echo _conditions).md"
done
mapfile -t names < <("$py" - "$out/landed.json" <<'PY'
import json, sys
from analysis.figures import get, names
studies = json.load(open(sys.argv[1]))
print("\n".join(n for n in names() if get(n).study in studies))
PY
)
for name in "${names[@]}"; do
    [[ -n $name ]] || continue  # no study has landed records yet
    "$py" -m analysis figure "$name" --runs "$out/runs.csv" --curves "$out/eval_curves.csv" \
        --reference "$reference" --out "$figures/$name.png" >/dev/null
done
drawn=0
for name in "${names[@]}"; do [[ -n $name ]] && drawn=$((drawn + 1)); done
echo "wrote $out/{runs,summary,claims,calibration}.csv, $out/{claims,calibration,calibration_by_claim,cost,resolution,trials,peak}.md" \
    "and $drawn figures in $figures"
