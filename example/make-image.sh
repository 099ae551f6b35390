#!/bin/sh
# Rebuilds os-image.tar.gz, the stand-in OS image Nodefile.example.ts unpacks.
# Deterministic: the same script makes the same bytes.
set -eu
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/usr/bin" "$work/etc"
cat > "$work/usr/bin/stand-in-service" <<'SH'
#!/bin/sh
# A stand-in for containerd or kubelet: it reads its configuration, says so,
# and stays up until it is stopped, keeping its pid.
name=$1
config=$2
if ! test -r "$config"; then
  echo "$name: cannot read $config" >&2
  exit 1
fi
echo "$name: started with $(wc -c < "$config") bytes of configuration"
exec sleep 2147483647
SH
chmod 755 "$work/usr/bin/stand-in-service"
echo 'NAME="nodegraph example image"' > "$work/etc/os-release"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work" -cf - usr etc | gzip -n -9 > os-image.tar.gz
