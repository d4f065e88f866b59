#!/usr/bin/env bash
# Fuzzes every parser that takes outside bytes with libFuzzer under ASan + UBSan:
#
#   tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, every target)
#
# Targets (tests/fuzz/fuzz_targets.h): manifest, question_line, image_header, npy,
# tokenizer_model, tokenizer_json, era_config, safetensors, openai_request. Builds build-asan/ through
# tools/sanitize.sh --build-only, then runs each target for the given time, starting from the
# committed seeds (tests/fuzz/corpus/<target>/) plus what earlier runs here learned (build-asan/fuzz/corpus/).
# A crash, a sanitizer report, an uncaught exception other than era::Error, an input taking
# over 10 s or an allocation over 1 GiB is a finding: its input is written to
# build-asan/fuzz/findings/<target>/, the script prints a table and exits 1. Keep a fixed
# finding as a regression test by copying its input into tests/fuzz/corpus/<target>/ (ctest's
# fuzz.replay.<target> runs that folder in every build).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -ge 1 ] || { echo "fuzz.sh: SECONDS_PER_TARGET must be a positive integer, got '$seconds'" >&2; exit 2; }
shift || true
all=(manifest question_line image_header npy tokenizer_model tokenizer_json era_config safetensors openai_request)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (known: ${all[*]})" >&2; exit 2; }
done

bash tools/sanitize.sh --build-only "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
work=build-asan/fuzz
status=0
rows=()
for t in "${targets[@]}"; do
  rm -rf "$work/findings/$t"  # each run reports its own findings
  mkdir -p "$work/corpus/$t" "$work/findings/$t" "$work/scratch"
  log="$work/$t.log"
  dict=()
  [ -f "tests/fuzz/dict/$t.dict" ] && dict=(-dict="tests/fuzz/dict/$t.dict")
  rc=0
  TMPDIR="$work/scratch" "build-asan/tests/fuzz/fuzz_$t" "$work/corpus/$t" "tests/fuzz/corpus/$t" \
    ${dict[@]+"${dict[@]}"} -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -malloc_limit_mb=1024 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/findings/$t/" > "$log" 2>&1 || rc=$?
  runs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | grep -o '[0-9]*' || echo "?")
  found=$(find "$work/findings/$t" -type f | wc -l)
  rows+=("$(printf '%-16s %8s s %12s runs %8s edges %5s findings' "$t" "$seconds" "$runs" "$cov" "$found")")
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
    echo "fuzz.sh: $t: finding (exit $rc); log: $log; inputs: $work/findings/$t/" >&2
    grep -m3 -E "ERROR|SUMMARY|terminate|uncaught" "$log" >&2 || true
  fi
done
echo "target              time        executions    coverage   findings   ($(nproc) cores, $(date -u +%F))"
printf '%s\n' "${rows[@]}"
exit "$status"
