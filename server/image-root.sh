#!/usr/bin/env bash
# The files the container image adds under its application (server/pom.xml, profile "image"; docs/SCALE_OUT.md).
# Jib builds the image FROM scratch, without a Docker daemon or a registry; this tree is everything else it needs:
#
#   opt/glimmer/jre        a Java runtime made by jlink from the JDK that runs Maven, with the modules Glimmer uses
#   lib/, lib64/           the C libraries that runtime (and Glimmer's native CPU kernel) loads, copied from this
#                          machine (Debian's glibc), at the paths the dynamic loader looks in
#   etc/passwd, etc/group  the non-root user the image runs as: glimmer, uid and gid 65532
#   tmp/                   writable scratch space (the native kernel is unpacked there, caches live there)
#   models/                where the model file is mounted at run time
#   proc/                  where a container runtime mounts /proc (the runtime finds its libraries through it)
#
# Usage: image-root.sh JAVA_HOME OUTPUT_DIR [EXTRA_NATIVE_LIBRARY...]
set -euo pipefail

JDK="$1"
ROOT="$2"
shift 2

# What jdeps reports for the server's class path, plus the logging, management and naming modules that libraries load
# by reflection, and the incubating Vector API.
MODULES=java.base,java.desktop,java.logging,java.management,java.naming,java.net.http,java.sql,jdk.crypto.ec,\
jdk.incubator.vector,jdk.management,jdk.unsupported

rm -rf "$ROOT"
mkdir -p "$ROOT/opt/glimmer" "$ROOT/etc" "$ROOT/tmp" "$ROOT/models" "$ROOT/home/glimmer" "$ROOT/proc"
"$JDK/bin/jlink" --add-modules "$MODULES" --strip-debug --no-header-files --no-man-pages \
    --output "$ROOT/opt/glimmer/jre"

# Every shared library the runtime's programs and libraries (and the extra ones given) link against, by the path
# the dynamic loader resolved here; the loader itself too. cp -L stores the file under the name it is linked by.
# Left out: what only the runtime's windowing, sound and splash-screen libraries load (X11, ALSA); a server never
# loads those (java.desktop is there for java.beans, which Jackson and SnakeYAML use).
mapfile -t objects < <(find "$ROOT/opt/glimmer/jre" -type f \( -name '*.so' -o -path '*/bin/*' \) \
    ! -name 'libawt_xawt.so' ! -name 'libjawt.so' ! -name 'libjsound.so' ! -name 'libsplashscreen.so'; printf '%s\n' "$@")
mapfile -t libraries < <(for o in "${objects[@]}"; do ldd "$o" 2>/dev/null || true; done \
    | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' | sort -u)
copied=0
for lib in "${libraries[@]}"; do
    case "$lib" in
        "$ROOT"/*) continue ;; # the runtime's own libraries
    esac
    mkdir -p "$ROOT$(dirname "$lib")"
    cp -L "$lib" "$ROOT$lib"
    copied=$((copied + 1))
done
[ -e "$ROOT/lib64/ld-linux-x86-64.so.2" ] || { echo "image-root: no dynamic loader found by ldd" >&2; exit 1; }

echo 'root:x:0:0:root:/root:/sbin/nologin' > "$ROOT/etc/passwd"
echo 'glimmer:x:65532:65532:glimmer:/home/glimmer:/sbin/nologin' >> "$ROOT/etc/passwd"
echo 'root:x:0:' > "$ROOT/etc/group"
echo 'glimmer:x:65532:' >> "$ROOT/etc/group"
echo "image-root: $ROOT: $(du -sh "$ROOT" | cut -f1) (runtime $(du -sh "$ROOT/opt/glimmer/jre" | cut -f1)," \
    "$copied system libraries)"
