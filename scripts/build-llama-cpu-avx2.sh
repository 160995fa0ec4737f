#!/usr/bin/env bash
# Builds llama.cpp's llama-bench for the CPU with AVX-512 (and AVX-VNNI) off: what llama.cpp runs on a
# processor with AVX2 only, to hold Glimmer's AVX2 kernels against on a machine that has more
# (scripts/bench-cpu.sh with LLAMA_BENCH_AVX2). The options are ggml's own (-DGGML_NATIVE=OFF and the
# instruction sets named one by one, as its CMakeLists.txt offers); the rest as the reference build's.
#
#   scripts/build-llama-cpu-avx2.sh LLAMA_CPP_TARBALL DIR      (the binary lands in DIR/build/bin)
set -euo pipefail
tarball="${1:?llama.cpp source tarball}"; dir="${2:?target folder}"
mkdir -p "$dir" && tar -xJf "$tarball" -C "$dir" --strip-components=1
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake "${gen[@]}" -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
cmake --build "$dir/build" -j"$(nproc)" --target llama-bench
ls -la "$dir/build/bin/llama-bench"
