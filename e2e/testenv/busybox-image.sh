#!/usr/bin/env bash
# Builds the local test image hoist-e2e/busybox:latest by `docker import` of a
# rootfs made from Debian's busybox-static (no registry is reachable here).
set -euo pipefail
IMAGE="${1:-hoist-e2e/busybox:latest}"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  exit 0
fi
BB=$(command -v busybox || true)
if [ -z "$BB" ] || ! (LANG=C ldd "$BB" 2>&1 || true) | grep -q "not a dynamic"; then
  echo "busybox-static is not installed (apt-get install busybox-static)" >&2
  exit 1
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
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
echo "built $IMAGE"
