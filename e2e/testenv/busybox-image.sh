#!/usr/bin/env bash
# Builds the local test image hoist-e2e/busybox:latest by `docker import` of a
# rootfs holding one static busybox (no registry is reachable here). Needs no
# root-installed package; the static busybox comes from, in this order:
#   1. $HOIST_BUSYBOX, the path of a static busybox binary;
#   2. a static `busybox` on PATH (Debian's busybox-static);
#   3. `apt-get download busybox-static` unpacked with `dpkg-deb -x` into a
#      temporary directory (works without root on Debian and Ubuntu; without
#      package lists it first runs `apt-get update` into that directory).
# HOIST_BUSYBOX_SOURCE=download skips 2 (to test 3 on a machine that has it).
set -euo pipefail
IMAGE="${1:-hoist-e2e/busybox:latest}"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# is_static reports whether $1 is a statically linked executable.
is_static() {
  [ -x "$1" ] || return 1
  if command -v ldd >/dev/null 2>&1; then
    (LANG=C ldd "$1" 2>&1 || true) | grep -q "not a dynamic"
  else
    # No ldd (e.g. a minimal image): a static binary has no ELF interpreter.
    ! (LANG=C od -An -c -N 4096 "$1" | tr -d ' \n' | grep -q 'ld-linux')
  fi
}

# download fetches Debian's busybox-static as the current user and unpacks it
# under $work/deb; it prints the binary's path. Without usable package lists
# (e.g. a fresh container) it fetches them into $work first, still as the
# current user.
download() {
  command -v apt-get >/dev/null 2>&1 || return 1
  command -v dpkg-deb >/dev/null 2>&1 || return 1
  if ! (cd "$work" && apt-get download -q busybox-static >&2); then
    mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial"
    local o=(-q -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache"
      -o "Dir::Cache::archives=$work/apt/cache/archives" -o Debug::NoLocking=1)
    apt-get "${o[@]}" update >&2 || return 1
    (cd "$work" && apt-get "${o[@]}" download busybox-static >&2) || return 1
  fi
  dpkg-deb -x "$work"/busybox-static_*.deb "$work/deb" || return 1
  echo "$work/deb/bin/busybox"
}

BB=""
how=""
if [ -n "${HOIST_BUSYBOX:-}" ]; then
  BB="$HOIST_BUSYBOX" how="HOIST_BUSYBOX"
  if ! is_static "$BB"; then
    echo "HOIST_BUSYBOX=$BB is not a statically linked executable" >&2
    exit 1
  fi
elif [ "${HOIST_BUSYBOX_SOURCE:-}" != download ] && bb=$(command -v busybox) && is_static "$bb"; then
  BB="$bb" how="PATH"
elif bb=$(download) && is_static "$bb"; then
  BB="$bb" how="apt-get download busybox-static"
else
  cat >&2 <<'EOF'
cannot make the test image: it needs a statically linked busybox, and found none.
  - busybox on PATH is missing or not static, and
  - `apt-get download busybox-static` + `dpkg-deb -x` did not work (no apt-get or
    dpkg-deb, no package lists, or the Debian mirror is unreachable).
Any one of these fixes it:
  - point HOIST_BUSYBOX at a static busybox binary (e.g. one of the prebuilt
    binaries busybox.net publishes, or one copied from another machine);
  - install the package: apt-get install busybox-static (Debian/Ubuntu),
    apk add busybox-static (Alpine), dnf install busybox (Fedora; static);
  - with a registry at hand: docker pull busybox && docker tag busybox hoist-e2e/busybox:latest
EOF
  exit 1
fi

root="$work/rootfs"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,tmp,etc,root,proc,sys,dev,workflow}
cp "$BB" "$root/bin/busybox"
chmod 0755 "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
  [ "$applet" = busybox ] && continue
  ln -sf /bin/busybox "$root/bin/$applet"
done
chmod 1777 "$root/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
tar -C "$root" -c . | docker import \
  --change 'CMD ["/bin/sh"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  - "$IMAGE" >/dev/null
echo "built $IMAGE (busybox from $how)"
