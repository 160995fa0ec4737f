#!/usr/bin/env bash
# Glimmer on a GPU machine without Java or Maven: built by scripts/device-kit.sh into .device/ (this
# file is its copy there). It expects the repository's working tree around it (.device/ at its root):
# the oracle models are read from engine/src/test/resources/oracle.
#
#   .device/run.sh tests [CLASS...]      the GPU test classes (default: the CUDA ones); a test skipped for
#                                        want of a device counts as a failure
#   .device/run.sh synth [FILE]          writes the full-size random Q4_0 model (default /tmp/glm-full-q4_0.gguf)
#   .device/run.sh bench [FILE] [OPTION...]  ./glimmer bench on it (default --backend cuda --pp 512 --tg 64
#                                        --ctx 4096 --reps 3; OPTIONs replace those)
#   .device/run.sh serve-check [BACKEND] serves the tiny oracle model on BACKEND (default cuda), asks one
#                                        streamed and one non-streamed chat completion with curl, prints the
#                                        answers and compares them with the CPU's (exit 1 when they differ)
#   .device/run.sh glimmer ARG...        any ./glimmer command
#   .device/run.sh all                   tests and synth (side by side), serve-check, bench; each one's
#                                        output in $OUT/<step>.log (the device tool's folder) or .device/logs
set -euo pipefail

KIT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$KIT")"
ORACLE="$ROOT/engine/src/test/resources/oracle"
MODEL=/tmp/glm-full-q4_0.gguf
GPU_TESTS=(dev.glimmer.engine.backend.cuda.CudaKernelTest dev.glimmer.engine.backend.cuda.CudaDecodeTest dev.glimmer.engine.backend.cuda.CudaPromptTest
    dev.glimmer.engine.backend.choice.CudaBackendTest dev.glimmer.engine.backend.choice.CudaTruncateTest
    dev.glimmer.engine.backend.cuda.CudaBatchDecodeTest)

die() {
    echo "run.sh: $*" >&2
    exit 1
}

# The runtime is unpacked next to this script on first use.
if [ ! -x "$KIT/runtime/bin/java" ]; then
    tar -xJf "$KIT/runtime.tar.xz" -C "$KIT"
fi
JAVA=("$KIT/runtime/bin/java" --add-modules jdk.incubator.vector --enable-native-access=ALL-UNNAMED)

glimmer() {
    "${JAVA[@]}" -cp "$KIT/lib/*" dev.glimmer.server.cli.Main "$@"
}

run_tests() {
    [ $# -gt 0 ] || set -- "${GPU_TESTS[@]}"
    [ -d "$ORACLE" ] || die "no $ORACLE: run from the repository's working tree"
    # The oracle models as a folder on the class path: the tests open them as files.
    (cd "$ROOT/engine" && "${JAVA[@]}" -cp "$KIT/test-lib/*:$KIT/lib/*:$ROOT/engine/src/test/resources" RunTests "$@")
}

synth() {
    local file="${1:-$MODEL}"
    if [ -f "$file" ]; then
        echo "run.sh: $file exists; not written again" >&2
        return 0
    fi
    glimmer synth --preset full --wtype q4_0 -o "$file"
}

bench() {
    local file="$MODEL"
    if [ $# -gt 0 ] && [[ "$1" != --* ]]; then
        file="$1"
        shift
    fi
    [ -f "$file" ] || die "no model $file: run '.device/run.sh synth $file' first"
    [ $# -gt 0 ] || set -- --backend cuda --pp 512 --tg 64 --ctx 4096 --reps 3
    glimmer bench --model "$file" "$@"
}

# Starts `serve` on the tiny oracle model in the background; sets SERVER_PID and PORT once it is ready.
start_server() {
    local backend="$1" log="$2"
    glimmer serve --model "$ORACLE/tiny-f32.gguf" --backend "$backend" --port 0 --ctx 1024 >"$log" 2>&1 &
    SERVER_PID=$!
    PORT=""
    local deadline=$((SECONDS + 600))
    while [ $SECONDS -lt $deadline ]; do
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$log" >&2; die "serve --backend $backend exited"; }
        [ -n "$PORT" ] || PORT="$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$log" | head -n 1)"
        if [ -n "$PORT" ]; then
            if curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
                return 0
            fi
            if grep -q "the model failed to load" "$log"; then
                cat "$log" >&2
                stop_server
                die "serve --backend $backend could not load the model"
            fi
        fi
        sleep 1
    done
    cat "$log" >&2
    stop_server
    die "serve --backend $backend was not ready within 600 s"
}

stop_server() {
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
}

CHAT='{"messages": [{"role": "user", "content": "Hello, world! Tell me a story about a fox."}], "temperature": 0, "max_tokens": 32'

# The text pieces of a chat response, streamed or not: each "reasoning_content" and "content" string, one a line.
pieces() {
    grep -o '"\(reasoning_content\|content\)":"\([^"\\]\|\\.\)*"' || true
}

# Asks the server on PORT one streamed and one non-streamed chat; leaves the pieces in $1.stream and $1.whole.
ask() {
    local base="$1"
    curl -fsS -N "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
        -d "$CHAT, \"stream\": true}" | sed -n 's/^data: //p' | pieces >"$base.stream"
    curl -fsS "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
        -d "$CHAT}" | pieces >"$base.whole"
}

serve_check() {
    local backend="${1:-cuda}"
    command -v curl >/dev/null || die "serve-check needs curl"
    local work
    work="$(mktemp -d)"
    start_server "$backend" "$work/serve-$backend.log"
    echo "== serve --backend $backend: $(grep -o 'serving on .*' "$work/serve-$backend.log" | head -n 1)"
    echo "== /v1/models: $(curl -fsS "http://127.0.0.1:$PORT/v1/models")"
    ask "$work/$backend"
    stop_server
    echo "== streamed chat (pieces as sent):"
    cat "$work/$backend.stream"
    echo "== non-streamed chat:"
    cat "$work/$backend.whole"

    start_server cpu "$work/serve-reference-cpu.log"
    ask "$work/cpu"
    stop_server
    local same=0
    if cmp -s "$work/$backend.stream" "$work/cpu.stream" && cmp -s "$work/$backend.whole" "$work/cpu.whole"; then
        same=1
        echo "== the same answers as serve --backend cpu (streamed and not)"
    else
        echo "== DIFFERENT from serve --backend cpu, whose answers are:"
        cat "$work/cpu.stream" "$work/cpu.whole"
    fi
    echo "== the $backend server's log:"
    cat "$work/serve-$backend.log"
    rm -rf "$work"
    [ "$same" = 1 ]
}

# Runs one step of `all` with its output in $LOGS/<name>.log; prints its status.
step() {
    local name="$1"
    shift
    local rc=0
    "$@" >"$LOGS/$name.log" 2>&1 || rc=$?
    echo "run.sh: $name exit $rc (log: $LOGS/$name.log)"
    return 0
}

all() {
    LOGS="${OUT:-$KIT/logs}"
    mkdir -p "$LOGS"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >"$LOGS/gpu.txt" 2>&1
    step synth synth &
    local synth_pid=$!
    step gpu-tests run_tests
    wait "$synth_pid"
    step serve-check serve_check cuda
    step bench bench
    echo "== GPU tests:"
    grep -E '^\[ *[0-9]+ tests (successful|failed|aborted)' "$LOGS/gpu-tests.log" || tail -n 5 "$LOGS/gpu-tests.log"
    grep -E '^(FAILED|ABORTED)' "$LOGS/gpu-tests.log" || true
    # The answers and the comparison, without the server's log.
    sed '/^== the .* server.s log:/,$d' "$LOGS/serve-check.log"
    echo "== bench:"
    grep -v 'copying weights' "$LOGS/bench.log"
}

command="${1:-help}"
[ $# -gt 0 ] && shift
case "$command" in
tests) run_tests "$@" ;;
synth) synth "$@" ;;
bench) bench "$@" ;;
serve-check) serve_check "$@" ;;
glimmer) glimmer "$@" ;;
all) all ;;
*) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
esac
