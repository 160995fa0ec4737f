#!/usr/bin/env bash
# Builds .device/ (git-ignored): what a GPU machine without Java needs to run Glimmer's GPU tests,
# bench and server from this working tree.
#
#   scripts/device-kit.sh        then, on the GPU machine, from the repository root: .device/run.sh help
#
# .device/ holds
#   runtime.tar.xz   a jlinked Java runtime (the modules the jars need, found with jdeps, plus
#                    jdk.incubator.vector and jdk.unsupported), unpacked by run.sh on first use
#   lib/             the server jar and its runtime dependencies (engine, metal-kernels, Helidon, ...)
#   test-lib/        the engine's test classes (without the oracle models: run.sh takes those from
#                    the working tree), their test dependencies, the JUnit launcher and RunTests
#   run.sh           the commands to run there (a copy of scripts/device/run.sh)
# It must stay small (the device tool carries at most 64 MiB): about 33 MiB.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIT="$ROOT/.device"
LIMIT_MIB=40

die() {
    echo "device-kit: $*" >&2
    exit 1
}

if [ -z "${JAVA_HOME:-}" ]; then
    for candidate in /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/*25*; do
        [ -x "$candidate/bin/jlink" ] && JAVA_HOME="$candidate" && break
    done
fi
[ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/jlink" ] || die "no JDK 25 with jlink found: set JAVA_HOME"
export JAVA_HOME
command -v mvn >/dev/null || die "Maven (mvn) is needed"
command -v xz >/dev/null || die "xz is needed"

cd "$ROOT"
echo "device-kit: building the jars and the test classes (mvn package -DskipTests)..." >&2
rm -rf "$KIT"
mkdir -p "$KIT/lib" "$KIT/test-lib"
# package compiles the test classes too; then the engine's test-scope jars (JUnit, Jackson) in one folder.
# Maven runs online: it fetches what this machine's repository lacks (the BOMs, the dependency plugin)
# and reads the rest from ~/.m2 as before.
mvn -B -q -DskipTests package >"$KIT/build.log" 2>&1 || { tail -n 30 "$KIT/build.log"; die "the build failed"; }
mvn -B -q -pl engine -am -DskipTests package dependency:copy-dependencies -DincludeScope=test \
    -DoutputDirectory="$KIT/test-lib" >>"$KIT/build.log" 2>&1 || { tail -n 30 "$KIT/build.log"; die "the build failed"; }
cp server/target/glimmer-server.jar server/target/lib/*.jar "$KIT/lib/"
# The test folder keeps only what lib/ lacks (JUnit, its helpers); the project's own jars come from lib/,
# and the JMH benchmarks' jars are left out (the benchmarks do not run there).
for jar in "$KIT"/test-lib/*.jar; do
    name="$(basename "$jar")"
    if [ -e "$KIT/lib/$name" ] || [[ "$name" == glimmer-* || "$name" == jmh-* || "$name" == jopt-simple-* \
        || "$name" == commons-math3-* ]]; then
        rm "$jar"
    fi
done
platform="$(ls "$KIT"/test-lib/junit-platform-engine-*.jar | sed 's/.*junit-platform-engine-\(.*\)\.jar/\1/')"
mvn -B -q dependency:copy -Dartifact="org.junit.platform:junit-platform-launcher:$platform" \
    -DoutputDirectory="$KIT/test-lib" >>"$KIT/build.log" 2>&1 || die "cannot get junit-platform-launcher $platform"

# The engine's test classes and small resources; the oracle models (20 MB) are read from the working tree.
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
cp -r engine/target/test-classes "$staging/engine-tests"
rm -rf "$staging/engine-tests/oracle"
"$JAVA_HOME/bin/jar" --create --file "$KIT/test-lib/glimmer-engine-tests.jar" -C "$staging/engine-tests" .
"$JAVA_HOME/bin/javac" -d "$staging/runner" -cp "$KIT/test-lib/*" scripts/device/RunTests.java
"$JAVA_HOME/bin/jar" --create --file "$KIT/test-lib/glimmer-run-tests.jar" -C "$staging/runner" .

echo "device-kit: finding the modules (jdeps) and linking the runtime (jlink)..." >&2
modules="$("$JAVA_HOME/bin/jdeps" --multi-release 25 --ignore-missing-deps --print-module-deps \
    "$KIT"/lib/*.jar "$KIT"/test-lib/*.jar 2>/dev/null | tail -n 1)"
modules="$(echo "$modules,jdk.incubator.vector,jdk.unsupported" | tr , "\n" | sort -u | paste -sd, -)"
echo "device-kit: modules $modules" >&2
"$JAVA_HOME/bin/jlink" --add-modules "$modules" --strip-debug --no-man-pages --no-header-files \
    --output "$staging/runtime"
# Unpacked by run.sh; xz over the uncompressed image is smaller than jlink's own compression.
tar -C "$staging" -cf - runtime | xz -9 -T0 >"$KIT/runtime.tar.xz"

cp scripts/device/run.sh "$KIT/run.sh"
chmod +x "$KIT/run.sh"
rm "$KIT/build.log"

size_mib=$(( $(du -sk "$KIT" | cut -f1) / 1024 ))
echo "device-kit: $KIT is $size_mib MiB ($(du -sh "$KIT/runtime.tar.xz" | cut -f1) runtime," \
    "$(du -sh "$KIT/lib" | cut -f1) jars, $(du -sh "$KIT/test-lib" | cut -f1) tests)" >&2
[ "$size_mib" -le "$LIMIT_MIB" ] || die "$KIT is over $LIMIT_MIB MiB"
echo "device-kit: done; on the GPU machine, from the repository root: .device/run.sh all" >&2
