#!/usr/bin/env bash
# Glimmer's CPU backend side by side with llama.cpp's llama-bench on the same model file and cores,
# the method of docs/BENCHMARKS.md: the two programs alternate, the page cache is warmed (the file read
# once) before each, decode (tg16) and prompt (pp64) are measured separately, and each program's own
# median of --reps repetitions is printed per round, one line a measurement, for the medians over rounds.
#
#   scripts/bench-cpu.sh MODEL.gguf LLAMA_BENCH [ROUNDS] [THREADS]
#
# Extra JVM flags for Glimmer go in GLIMMER_JAVA_OPTS (e.g. -Dglimmer.cpu.kernels=java).
set -euo pipefail
model="${1:?model file}"; llama="${2:?path to llama-bench}"; rounds="${3:-2}"; threads="${4:-2}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
warm() { cat "$model" > /dev/null; }
glimmer() { # pp tg
    JAVA_TOOL_OPTIONS="${GLIMMER_JAVA_OPTS:-}" "$root/glimmer" bench --model "$model" --pp "$1" --tg "$2" \
        --threads "$threads" --reps 3 2>/dev/null | tail -n 1
}
llama() { # pp tg
    "$llama" -m "$model" -t "$threads" -p "$1" -n "$2" -r 3 -o csv 2>/dev/null | tail -n 1 | awk -F, '{print $(NF-1)}' | tr -d '"'
}
for round in $(seq 1 "$rounds"); do
    for test in "0 16 decode" "64 0 prompt"; do
        set -- $test
        warm; echo "round $round $3 glimmer $(glimmer "$1" "$2")"
        warm; echo "round $round $3 llama.cpp avg_ts=$(llama "$1" "$2")"
    done
done
