#!/usr/bin/env bash
# The whole test suite, on both LibTorch routes (what CI runs):
#
#   tools/test.sh [--route debian|pypi|all] [CTEST_ARGS...]      (default: all)
#
# For each route: install + build (tools/setup.sh --route R), then ctest in that route's build
# folder (build/ for debian, build-torch2/ for pypi). Python fixtures make the tiny checkpoints,
# bundles and references first. Every route runs even when an earlier one failed; the exit status
# is 0 only if all passed. CTEST_ARGS go to every ctest run (e.g. -R Prompt). After each route's
# ctest run, a table of its ten slowest tests (the run's output is kept in <build folder>/ctest-output.log).
set -euo pipefail
cd "$(dirname "$0")/.."

# slowest_tests LOG ROUTE: the ten slowest tests of a ctest output, from its result lines
#   "12/721 Test #17: python.torch_versions ......   Passed   12.34 sec" (or "***Failed", "***Skipped"...).
slowest_tests() {
  echo "ten slowest tests (route $2):"
  sed -n -E 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: ([^ ]+) \.*[ *]*(.*[^ ]) +([0-9]+\.[0-9]+) sec.*$/\3\t\2\t\1/p' "$1" |
    sort -t $'\t' -k1,1 -g -r | awk -F '\t' 'NR <= 10 { split($2, w, /[ :]/); printf "  %9.2f s  %-9s %s\n", $1, w[1], $3 }'
  # (awk reads every line and prints ten: `head` would close the pipe early, and sort's SIGPIPE
  # under pipefail ended this script with status 141)
}

route=all
args=()
while (($#)); do
  case "$1" in
    --route) route=${2:-}; shift 2 || { echo "test.sh: --route needs a value" >&2; exit 2; } ;;
    --route=*) route=${1#--route=}; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$route" in
  debian) routes=(debian) ;;
  pypi) routes=(pypi) ;;
  all) routes=(debian pypi) ;;
  *) echo "test.sh: --route must be debian, pypi or all, got '$route'" >&2; exit 2 ;;
esac

declare -A build_dir=([debian]=build [pypi]=build-torch2)
summary=()
status=0
for r in "${routes[@]}"; do
  start=$SECONDS
  rc=0
  # Both routes: the pypi route's venv downloads while the debian route builds and tests.
  prefetch=()
  [ "$r" = debian ] && [ "$route" = all ] && prefetch=(--prefetch-pypi)
  bash tools/setup.sh --route "$r" ${prefetch[@]+"${prefetch[@]}"} || rc=$?
  built=$((SECONDS - start))
  if [ "$rc" -eq 0 ]; then
    log="${build_dir[$r]}/ctest-output.log"
    # pipefail (set above): the pipeline's status is ctest's.
    ctest --test-dir "${build_dir[$r]}" --output-on-failure -j "$(nproc)" ${args[@]+"${args[@]}"} 2>&1 | tee "$log" || rc=$?
    slowest_tests "$log" "$r"
  fi
  summary+=("route $r: $([ "$rc" -eq 0 ] && echo passed || echo FAILED) (set-up + build $((built / 60)) min $((built % 60)) s, tests $(((SECONDS - start - built) / 60)) min $(((SECONDS - start - built) % 60)) s)")
  [ "$rc" -eq 0 ] || status=1
done
printf '%s\n' "${summary[@]}"
exit "$status"
