#!/usr/bin/env bash
# Builds the optional native CPU kernel (src/main/c) into the engine's classes, where NativeKernels
# finds it. Without a C compiler, or on a machine other than Linux x86-64 or aarch64, it builds nothing
# and says so: the CPU backend then runs its Java kernels, which compute the same results.
#
#   build-native.sh OUTPUT_DIR      (Maven runs it in the compile phase)
set -uo pipefail
out="${1:?output directory}"
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/src/main/c"
# Every variant for the machine's architecture goes into the one library (each function compiled for its
# own instruction sets; glimmer_cpu_variants says at run time which this processor runs).
case "$(uname -s)/$(uname -m)" in
    Linux/x86_64) src=("$dir/cpu_variants.c" "$dir/q4_0_activations.c" "$dir/q4_0_avx512.c" "$dir/q4_0_avx2.c"
                           "$dir/kquant_x86.c") ;;
    Linux/aarch64) src=("$dir/cpu_variants.c" "$dir/q4_0_activations.c" "$dir/q4_0_neon.c") ;;
    *) echo "build-native: not Linux x86-64 or aarch64; the CPU backend will use its Java kernels"
       exit 0 ;;
esac
target="$out/native/linux-$(uname -m)/libglimmer-cpu.so"
cc=""
for candidate in "${CC:-}" cc gcc clang clang-19; do
    if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1; then cc="$candidate"; break; fi
done
if [ -z "$cc" ]; then
    echo "build-native: no C compiler found (cc, gcc, clang); the CPU backend will use its Java kernels"
    exit 0
fi
mkdir -p "$(dirname "$target")"
if ! "$cc" -O3 -std=c11 -shared -fPIC -Wall -Werror -o "$target.tmp" "${src[@]}"; then
    rm -f "$target.tmp"
    echo "build-native: $cc could not build ${src[*]}; the CPU backend will use its Java kernels"
    exit 0
fi
mv "$target.tmp" "$target"
echo "build-native: built $target with $cc"
