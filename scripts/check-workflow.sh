#!/usr/bin/env bash
# The workflow checks CI runs (called by scripts/test.sh; usable alone after scripts/setup.sh):
#   1. `snakemake --lint` is clean;
#   2. a dry run plans the whole default study (every run, as if nothing were trained yet);
#   3. a bad config fails before any job runs, naming the key;
#   4. config/test.yaml runs the whole DAG end to end (data, training, tables, benchmarks,
#      figures, report) into .test/, and a second invocation has nothing left to do.
set -euo pipefail
cd "$(dirname "$0")/.."
snakemake=(.venv/bin/snakemake)
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
fail() { echo "check-workflow: $*" >&2; exit 1; }

echo "== snakemake --lint"
"${snakemake[@]}" --lint

echo "== dry run of the default study (as from scratch)"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"${snakemake[@]}" -n --quiet rules --config out_dir="$scratch/results" \
    figures_dir="$scratch/figures" > "$scratch/dry.log"
runs=$(.venv/bin/python -c "
import yaml
from experiments.study import check_config, plan
config = check_config(yaml.safe_load(open('config/config.yaml')), 'workflow/schemas/config.schema.yaml')
print(len(plan(config).runs))")
grep -Eq "^train +$runs$" "$scratch/dry.log" ||
    { cat "$scratch/dry.log"; fail "the dry run does not plan $runs training runs"; }

echo "== a bad config fails before any job"
if "${snakemake[@]}" -n --config seeds=0 > "$scratch/bad.log" 2>&1; then
    fail "seeds=0 was accepted"
fi
grep -q "config: seeds: 0 is less than the minimum of 1" "$scratch/bad.log" ||
    { cat "$scratch/bad.log"; fail "the error does not name the key"; }

echo "== config/test.yaml end to end"
rm -rf .test
started=$(date +%s)
"${snakemake[@]}" --cores 2 --configfile config/test.yaml --show-failed-logs
"${snakemake[@]}" --configfile config/test.yaml --report .test/report.html
echo "test config: $(($(date +%s) - started)) s"
for name in $(.venv/bin/python -c "from analysis.figures import names; print(*names())"); do
    [ -s ".test/paper_figures/$name.png" ] && [ -s ".test/paper_figures/$name.pdf" ] ||
        fail "figure $name missing"
done
[ -s .test/report.html ] || fail "no report"
"${snakemake[@]}" -n --configfile config/test.yaml > "$scratch/again.log" 2>&1
grep -q "Nothing to be done" "$scratch/again.log" ||
    { cat "$scratch/again.log"; fail "a second run would recompute something"; }
# A deleted (stale) record is trained again, and only it.
record=$(find .test/results/records -name '*.json' | sort | head -n 1)
mv "$record" "$scratch/deleted.json"
"${snakemake[@]}" -n --configfile config/test.yaml > "$scratch/deleted.log" 2>&1
mv "$scratch/deleted.json" "$record"
grep -Eq "^train +1$" "$scratch/deleted.log" && grep -q "$record" "$scratch/deleted.log" ||
    { cat "$scratch/deleted.log"; fail "a deleted record would not be trained again"; }
echo "check-workflow: ok"
