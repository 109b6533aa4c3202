#!/usr/bin/env bash
# A Java program outside the tree (tests/consumers/java/Consumer.java) compiled against the *installed*
# kvc jar, found in the install's Maven repository layout by the POM's coordinates, and run with each
# way Native.java finds the native libraries:
#   1. -Djava.library.path=<prefix>/lib: the installed libkvcjni.so, whose RUNPATH ($ORIGIN) finds
#      libkvc.so.0 beside it (no LD_LIBRARY_PATH anywhere in this script);
#   2. the jar alone: the libraries extracted from inside it to a private temp dir, removed again;
#   3. the jar with both libraries next to it (extraction made impossible, so this is what loaded);
#   4. libkvcjni.so found but libkvc.so.0 nowhere: the error must name libkvc.so.0.
# Also checks the jar's manifest (version, Automatic-Module-Name) against the POM.
# Usage: java.sh INSTALL_PREFIX
set -euo pipefail
PREFIX=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
unset LD_LIBRARY_PATH JAVA_TOOL_OPTIONS
say() { echo "[consumer java] $*"; }
die() { say "FAILED: $*"; exit 1; }

POM=$(ls "$PREFIX"/share/maven-repo/dev/kvc/kvc/*/kvc-*.pom 2>/dev/null | head -1)
[ -n "$POM" ] || die "no POM under $PREFIX/share/maven-repo/dev/kvc/kvc"
read -r GROUP ARTIFACT VERSION LICENSE < <(python3 - "$POM" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {"m": "http://maven.apache.org/POM/4.0.0"}
r = ET.parse(sys.argv[1]).getroot()
print(r.find("m:groupId", ns).text, r.find("m:artifactId", ns).text, r.find("m:version", ns).text,
      r.find("m:licenses/m:license/m:name", ns).text)
PY
)
JAR="$PREFIX/share/maven-repo/${GROUP//.//}/$ARTIFACT/$VERSION/$ARTIFACT-$VERSION.jar"
say "POM $GROUP:$ARTIFACT:$VERSION ($LICENSE) -> $JAR"
[ -f "$JAR" ] || die "the POM's coordinates name no jar"
cmp -s "$JAR" "$PREFIX/share/java/kvc.jar" || die "share/java/kvc.jar differs from the Maven repository's jar"
[ "$LICENSE" = Apache-2.0 ] || die "POM license $LICENSE"
unzip -p "$JAR" META-INF/MANIFEST.MF | tr -d '\r' > "$WORK/MANIFEST.MF"
grep -qx "Automatic-Module-Name: dev.kvc" "$WORK/MANIFEST.MF" || die "no Automatic-Module-Name"
grep -qx "Implementation-Version: $VERSION" "$WORK/MANIFEST.MF" || die "manifest version is not the POM's $VERSION"
readelf -d "$PREFIX/lib/libkvcjni.so" | grep -q 'RUNPATH.*\[\$ORIGIN\]' || die "installed libkvcjni.so's RUNPATH is not \$ORIGIN"

mkdir -p "$WORK/classes"
javac -Xlint:all -Werror -d "$WORK/classes" -cp "$JAR" "$HERE/java/Consumer.java"
run() { java -Xcheck:jni "$@" -cp "$JAR:$WORK/classes" Consumer; }

say "1. -Djava.library.path=$PREFIX/lib"
run -Djava.library.path="$PREFIX/lib" | tee "$WORK/out1"; grep -q "kvc-consumer ok" "$WORK/out1"

say "2. the jar alone (libraries extracted from it)"
mkdir -p "$WORK/tmp"
run -Djava.library.path=/nonexistent -Djava.io.tmpdir="$WORK/tmp" | tee "$WORK/out2"; grep -q "kvc-consumer ok" "$WORK/out2"
[ -z "$(ls -A "$WORK/tmp")" ] || die "extracted files left behind: $(ls -A "$WORK/tmp")"

say "3. the libraries next to the jar"
mkdir -p "$WORK/app" "$WORK/ro"
cp "$JAR" "$WORK/app/kvc.jar"
cp "$PREFIX/lib/libkvcjni.so" "$WORK/app/"
cp "$PREFIX/lib/libkvc.so.0" "$WORK/app/"
chmod a-w "$WORK/ro"   # an unwritable temp dir: extraction would fail
java -Djava.library.path=/nonexistent -Djava.io.tmpdir="$WORK/ro/none" -cp "$WORK/app/kvc.jar:$WORK/classes" Consumer \
  | tee "$WORK/out3"; grep -q "kvc-consumer ok" "$WORK/out3"

say "4. libkvcjni.so without libkvc.so.0: the error names libkvc.so.0"
if ldconfig -p 2>/dev/null | grep -q 'libkvc\.so\.0'; then
  say "4 skipped: libkvc.so.0 is in this machine's ldconfig cache"
else
  mkdir -p "$WORK/onlyjni"
  cp "$PREFIX/lib/libkvcjni.so" "$WORK/onlyjni/"
  if run -Djava.library.path="$WORK/onlyjni" >"$WORK/out4" 2>&1; then die "ran without libkvc.so.0"; fi
  grep -q "libkvcjni.so was found on java.library.path ($WORK/onlyjni) but its dependency libkvc.so.0 was not found" "$WORK/out4" \
    || { cat "$WORK/out4"; die "the error does not name libkvc.so.0"; }
fi
say "all cases passed"
