#!/bin/bash
# package_deb.sh BUILD_DIR SOURCE_DIR: builds the .deb with `cpack -G DEB`, checks that every
# dependency it declares is a Debian package (installed here, so resolvable on Debian 12),
# unpacks it into a temporary root with `dpkg -x`, checks the layout (headers, static and
# shared library with its SONAME, pkg-config files, man pages, both programs, the systemd unit
# and its /etc config), runs the
# programs, and builds the README's C program against the unpacked tree with
# `pkg-config --cflags --libs ratelimit`.
set -u
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
for tool in cpack dpkg-deb dpkg-shlibdeps pkg-config readelf man systemd-analyze; do
  command -v "$tool" >/dev/null || { echo "FAIL package_deb needs $tool (Debian: apt-get install cmake dpkg-dev pkgconf binutils man-db systemd)"; exit 1; }
done

if ! (cd "$build" && cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1); then
  echo "FAIL cpack -G DEB:"; tail -20 "$tmp/cpack.log"; exit 1
fi
deb=$(ls "$tmp"/pkg/*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "FAIL cpack wrote no .deb"; tail -20 "$tmp/cpack.log"; exit 1; }
ok "cpack -G DEB built $(basename "$deb")"

# Depends: every package named must exist in Debian; the machine running this is Debian 12
# with the build dependencies, so each must be installed here, at a version that satisfies it.
depends=$(dpkg-deb -f "$deb" Depends)
[ -n "$depends" ] || bad "the package declares no Depends (dpkg-shlibdeps did not run?)"
IFS=',' read -ra alts <<<"$depends"
for a in "${alts[@]}"; do
  a=$(echo "$a" | sed 's/^ *//; s/ *$//')
  name=${a%% *} ver=$(echo "$a" | sed -n 's/.*(\(.*\)).*/\1/p')
  have=$(dpkg-query -W -f '${Version}' "$name" 2>/dev/null) || { bad "depends on $name, not installed"; continue; }
  if [ -n "$ver" ] && ! dpkg --compare-versions "$have" "${ver%% *}" "${ver#* }"; then
    bad "depends on $a, have $have"
  fi
done
ok "Depends: $depends"

root=$tmp/root
dpkg -x "$deb" "$root" || { echo "FAIL dpkg -x"; exit 1; }
so=$(cd "$root/usr" && ls lib/libratelimit.so.*.*.* lib/*/libratelimit.so.*.*.* 2>/dev/null | head -1)
libdir=$root/usr/$(dirname "${so:-lib/x}")
for f in include/ratelimit/ratelimit.h include/ratelimit/store.h include/ratelimit/topk.h include/ratelimit/adaptive.h bin/ratelimit sbin/ratelimitd \
         share/man/man1/ratelimit.1 share/man/man8/ratelimitd.8 \
         lib/systemd/system/ratelimitd.service; do
  [ -e "$root/usr/$f" ] || bad "missing /usr/$f"
done
# The unit's config under /etc, an administrator's file (kept across upgrades), valid as shipped.
[ -f "$root/etc/ratelimit/ratelimitd.yaml" ] || bad "missing /etc/ratelimit/ratelimitd.yaml"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles 2>/dev/null | grep -qx /etc/ratelimit/ratelimitd.yaml ||
  bad "/etc/ratelimit/ratelimitd.yaml is not a conffile"
# The library is registered with the loader on install (the README says the .deb needs no ldconfig).
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./postinst 2>/dev/null | grep -qx '[[:space:]]*ldconfig' ||
  bad "the package's postinst does not run ldconfig"
for f in libratelimit.a libratelimit.so pkgconfig/ratelimit.pc; do
  [ -e "$libdir/$f" ] || bad "missing $libdir/$f"
done
if [ -e "$src/src/redis/CMakeLists.txt" ] && pkg-config --exists hiredis; then
  for f in "$libdir/libratelimit_redis.a" "$libdir/pkgconfig/ratelimit-redis.pc" "$root/usr/include/ratelimit/redis.h"; do
    [ -e "$f" ] || bad "missing $f"
  done
fi
[ -n "$so" ] && soname=$(readelf -d "$root/usr/$so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
if [ -n "$so" ] && [ -n "${soname:-}" ] && [ -e "$libdir/$soname" ]; then
  ok "shared library $(basename "$so"), SONAME $soname"
else
  bad "no versioned shared library with a SONAME (found '${so:-}', SONAME '${soname:-}')"
fi
if readelf --dyn-syms -W "$root/usr/$so" | awk '$5 == "GLOBAL" && $7 != "UND" { print $8 }' | grep -v '^rlt_[a-z0-9]' | grep -q .; then
  bad "the shared library exports more than the rlt_ API"
fi
for m in man1/ratelimit.1 man8/ratelimitd.8; do
  out=$(MANWIDTH=80 man --warnings -l "$root/usr/share/man/$m" 2>&1 >/dev/null)
  [ -z "$out" ] || bad "man $m warns: $out"
done

# The programs run from the unpacked tree.
"$root/usr/bin/ratelimit" --version >/dev/null || bad "ratelimit --version"
"$root/usr/bin/ratelimit" headers --policy gcra:100/1m,burst=20 --at 0 | grep -q 'q=100;w=60' ||
  bad "ratelimit headers"
"$root/usr/sbin/ratelimitd" --check-config >"$tmp/check.out" 2>&1 || bad "ratelimitd --check-config: $(cat "$tmp/check.out")"
"$root/usr/sbin/ratelimitd" --check-config --config "$root/etc/ratelimit/ratelimitd.yaml" >"$tmp/check.out" 2>&1 ||
  bad "ratelimitd --check-config on the shipped /etc/ratelimit/ratelimitd.yaml: $(cat "$tmp/check.out")"
ok "the installed ratelimit and ratelimitd run"

# A program built against the installed library with pkg-config (shared, then static).
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs ratelimit) || bad "pkg-config ratelimit"
case "$flags" in *"$root"*) ;; *) bad "pkg-config points outside the unpacked tree: $flags" ;; esac
LD_LIBRARY_PATH=$libdir bash "$src/tests/packaging/readme_example.sh" "$tmp/shared" "$src/README.md" \
  cc $flags || fail=1
if ! LD_LIBRARY_PATH=$libdir ldd "$tmp/shared/hello" 2>/dev/null | grep -q "$libdir/libratelimit.so"; then
  bad "the pkg-config build does not use the installed shared library"
fi
bash "$src/tests/packaging/readme_example.sh" "$tmp/static" "$src/README.md" \
  cc $(pkg-config --cflags ratelimit) "$libdir/libratelimit.a" $(pkg-config --static --libs-only-other ratelimit) || fail=1
if [ -e "$libdir/pkgconfig/ratelimit-redis.pc" ]; then
  printf '#include <ratelimit/redis.h>\nint main(void) { return 0; }\n' >"$tmp/r.c"
  cc -o "$tmp/r" "$tmp/r.c" $(pkg-config --cflags --libs ratelimit-redis) 2>"$tmp/r.err" ||
    bad "a program does not build with pkg-config ratelimit-redis: $(head -3 "$tmp/r.err")"
fi

# The systemd unit names the package's paths (/usr/sbin/ratelimitd, /etc/ratelimit/...) and is
# well-formed: verified on this machine with those paths pointing into the unpacked tree (man
# pages are not looked up: ours are not installed here).
unit=$root/usr/lib/systemd/system/ratelimitd.service
grep -q '^ExecStart=/usr/sbin/ratelimitd --config /etc/ratelimit/ratelimitd.yaml ' "$unit" ||
  bad "the unit's ExecStart is not the package's: $(grep ^ExecStart= "$unit")"
mkdir -p "$tmp/unit"
sed "s|/usr/sbin/ratelimitd|$root/usr/sbin/ratelimitd|; s|/etc/ratelimit/|$root/etc/ratelimit/|" \
  "$unit" >"$tmp/unit/ratelimitd.service"
if systemd-analyze verify --man=no "$tmp/unit/ratelimitd.service" >"$tmp/sd.out" 2>&1; then
  ok "systemd-analyze verify ratelimitd.service"
else
  bad "systemd-analyze verify ratelimitd.service: $(cat "$tmp/sd.out")"
fi
[ "$fail" = 0 ] && echo "package_deb: all checks passed"
exit "$fail"
