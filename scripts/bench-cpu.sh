#!/usr/bin/env bash
# Glimmer's CPU backend side by side with llama.cpp's llama-bench on the same model file and cores,
# the method of docs/BENCHMARKS.md: the two programs alternate, the page cache is warmed (the file read
# once) before each, decode (tg16) and prompt (pp64) are measured separately, and each program's own
# median of 3 repetitions is printed per round, one line a measurement; the last lines are the medians
# over the rounds and Glimmer's ratio to llama.cpp.
#
#   scripts/bench-cpu.sh MODEL.gguf LLAMA_BENCH [ROUNDS] [THREADS]
#
# With LLAMA_BENCH_AVX2 set (a llama-bench built with AVX-512 off: scripts/build-llama-cpu-avx2.sh), every
# round also measures both programs restricted to AVX2, as on a machine without AVX-512: Glimmer's
# native kernel's AVX2 variant (GLIMMER_CPU_KERNELS=avx2) and Java kernels on 256-bit vectors
# (-XX:UseAVX=2), against that build. Extra JVM flags for Glimmer go in GLIMMER_JAVA_OPTS (e.g.
# -Dglimmer.cpu.kernels=java).
set -euo pipefail
model="${1:?model file}"; llama="${2:?path to llama-bench}"; rounds="${3:-2}"; threads="${4:-2}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
results="$(mktemp)"; trap 'rm -f "$results"' EXIT
warm() { cat "$model" > /dev/null; }
glimmer() { # mode pp tg: prints the pp or tg tok/s of bench's last line
    local opts="${GLIMMER_JAVA_OPTS:-}" kernels="${GLIMMER_CPU_KERNELS:-auto}"
    if [ "$1" = avx2 ]; then opts="$opts -XX:UseAVX=2"; kernels=avx2; fi
    local out
    out="$(GLIMMER_CPU_KERNELS="$kernels" JAVA_TOOL_OPTIONS="$opts" "$root/glimmer" bench --model "$model" \
        --pp "$2" --tg "$3" --threads "$threads" --reps 3 2>/dev/null)"
    echo "$out" | grep -m1 -o 'threads: [^;]*' >&2 || true
    local last; last="$(echo "$out" | tail -n 1)"
    if [ "$2" -gt 0 ]; then echo "$last" | sed -n 's/.*pp_tok_s=\([0-9.]*\).*/\1/p'
    else echo "$last" | sed -n 's/.*tg_tok_s=\([0-9.]*\).*/\1/p'; fi
}
llama() { # binary pp tg: prints avg_ts
    "$1" -m "$model" -t "$threads" -p "$2" -n "$3" -r 3 -o csv 2>/dev/null | tail -n 1 | awk -F, '{print $(NF-1)}' | tr -d '"'
}
modes=(native); [ -n "${LLAMA_BENCH_AVX2:-}" ] && modes+=(avx2)
for round in $(seq 1 "$rounds"); do
    for mode in "${modes[@]}"; do
        binary="$llama"; [ "$mode" = avx2 ] && binary="$LLAMA_BENCH_AVX2"
        for test in "0 16 decode" "64 0 prompt"; do
            set -- $test
            warm; g="$(glimmer "$mode" "$1" "$2")"; echo "round $round $mode $3 glimmer $g" | tee -a "$results"
            warm; l="$(llama "$binary" "$1" "$2")"; echo "round $round $mode $3 llama.cpp $l" | tee -a "$results"
        done
    done
done
echo "medians over $rounds rounds (tok/s):"
for mode in "${modes[@]}"; do
    for test in decode prompt; do
        median() { awk -v m="$mode" -v t="$test" -v p="$1" '$3==m && $4==t && $5==p {print $6}' "$results" | sort -g \
            | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
        g="$(median glimmer)"; l="$(median llama.cpp)"
        echo "$mode $test: glimmer $g llama.cpp $l ratio $(awk -v g="$g" -v l="$l" 'BEGIN {if (l > 0) printf "%.2f", g / l; else print "nan"}')x"
    done
done
