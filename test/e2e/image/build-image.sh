#!/usr/bin/env bash
# Build (or reuse) the nodegraph e2e "Kubernetes node" rootfs image.
#
# A Debian bookworm rootfs (debootstrap --variant=minbase) with systemd as
# init, dbus and containerd, plus a STAND-IN kubelet unit. The rootfs is packed
# into a zstd-compressed tar archive in a cache directory outside the checkout:
#
#   ${NODEGRAPH_E2E_CACHE:-/var/cache/nodegraph-e2e}/node-bookworm-<hash>.tar.zst
#
# <hash> is the first 16 hex digits of the sha256 of THIS script, so editing
# the script produces a new archive while reruns reuse the cached one.
#
# Output: progress on stderr; the archive's absolute path as the LAST line of
# stdout. Exit status non-zero on failure.
#
# Safe to interrupt and idempotent: everything is built under a private temp
# dir inside the cache dir and only renamed into place when complete; a lock
# serialises concurrent builds; stale temp dirs (and any mounts debootstrap left
# in them) are cleaned up on exit and by the next run.
#
# Environment:
#   NODEGRAPH_E2E_CACHE   cache dir (default /var/cache/nodegraph-e2e)
#   NODEGRAPH_E2E_MIRROR  Debian mirror (default: first URIs: line of
#                         /etc/apt/sources.list.d/debian.sources, else
#                         http://deb.debian.org/debian)
#   NODEGRAPH_E2E_ZSTD_LEVEL  zstd level (default 12)
#   NODEGRAPH_E2E_KEEP_ARCHIVES  how many archives to keep in the cache (default 3)
#
# Must run as root (debootstrap, device nodes, file ownership).

set -euo pipefail

log() { printf '[build-image] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"

SCRIPT_PATH="$(readlink -f "${BASH_SOURCE[0]}")"
SCRIPT_HASH="$(sha256sum "$SCRIPT_PATH" | cut -c1-16)"
CACHE_DIR="${NODEGRAPH_E2E_CACHE:-/var/cache/nodegraph-e2e}"
SUITE=bookworm
ZSTD_LEVEL="${NODEGRAPH_E2E_ZSTD_LEVEL:-12}"

mkdir -p "$CACHE_DIR"
CACHE_DIR="$(readlink -f "$CACHE_DIR")"
ARCHIVE="$CACHE_DIR/node-$SUITE-$SCRIPT_HASH.tar.zst"

# Fast path: already built. (touch = "recently used", for pruning below)
if [ -s "$ARCHIVE" ]; then
  touch "$ARCHIVE" 2>/dev/null || true
  log "cached: $ARCHIVE"
  printf '%s\n' "$ARCHIVE"
  exit 0
fi

# ---------------------------------------------------------------- host tools
need_pkgs=()
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
command -v zstd >/dev/null || need_pkgs+=(zstd)
command -v runc >/dev/null || need_pkgs+=(runc) # not used here, but smoke.sh needs it
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  log "installing host packages: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # apt-get update only if the lists look empty (first use on a fresh machine)
  if ! apt-cache show debootstrap >/dev/null 2>&1; then
    apt-get update >&2
  fi
  apt-get install -y --no-install-recommends "${need_pkgs[@]}" >&2
fi

if [ -z "${NODEGRAPH_E2E_MIRROR:-}" ]; then
  NODEGRAPH_E2E_MIRROR="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' \
    /etc/apt/sources.list.d/debian.sources 2>/dev/null | grep -v security | head -n1 || true)"
  : "${NODEGRAPH_E2E_MIRROR:=http://deb.debian.org/debian}"
fi

# --------------------------------------------------------- lock + cleanup
# Unmount everything at or below $1 (deepest first). debootstrap mounts /proc,
# /sys and /dev/pts inside the target; an interrupted run can leave them.
umount_below() {
  local dir="$1" m
  # field 5 of mountinfo is the mount point (octal-escaped; our paths have no spaces)
  awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo |
    sort -r | while read -r m; do
      umount -l "$m" 2>/dev/null || true
    done
}

remove_build_dir() {
  local dir="$1"
  [ -d "$dir" ] || return 0
  umount_below "$dir"
  # --one-file-system: never descend into a mount we failed to remove
  rm -rf --one-file-system "$dir"
}

exec 9>"$CACHE_DIR/.build.lock"
if ! flock -n 9; then
  log "another build holds $CACHE_DIR/.build.lock; waiting"
  flock 9
fi
# Another process may have finished the same build while we waited.
if [ -s "$ARCHIVE" ]; then
  log "cached (built concurrently): $ARCHIVE"
  printf '%s\n' "$ARCHIVE"
  exit 0
fi
# We hold the lock, so any leftover .build.* dir is from an interrupted run.
for stale in "$CACHE_DIR"/.build.*; do
  [ -d "$stale" ] || continue
  log "removing stale build dir $stale"
  remove_build_dir "$stale"
done
rm -f "$CACHE_DIR"/.node-*.tar.zst.tmp

BUILD_DIR="$(mktemp -d "$CACHE_DIR/.build.XXXXXX")"
ROOTFS="$BUILD_DIR/rootfs"
TMP_ARCHIVE="$CACHE_DIR/.$(basename "$ARCHIVE").tmp"
CHILD_PGID=""

# Run a long command in its own session/process group and wait for it. bash
# runs traps only between foreground commands, so a plain foreground
# debootstrap would delay a SIGTERM's cleanup until debootstrap finishes;
# `wait` is interrupted by the trap at once, and cleanup kills the group.
run_group() {
  setsid "$@" &
  CHILD_PGID=$!
  local rc=0
  wait "$CHILD_PGID" || rc=$?
  CHILD_PGID=""
  return "$rc"
}

kill_child_group() {
  [ -n "$CHILD_PGID" ] || return 0
  kill -TERM -- "-$CHILD_PGID" 2>/dev/null || return 0
  local i
  for i in $(seq 50); do
    kill -0 -- "-$CHILD_PGID" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL -- "-$CHILD_PGID" 2>/dev/null || true
  sleep 0.2
}

cleanup() {
  local rc=$?
  trap - INT TERM
  kill_child_group
  remove_build_dir "$BUILD_DIR"
  rm -f "$TMP_ARCHIVE"
  [ "$rc" = 0 ] || log "build failed or interrupted (exit $rc); cleaned up $BUILD_DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

START=$(date +%s)

# --------------------------------------------------------------- debootstrap
# minbase = Essential + apt only. Added packages:
#   systemd, systemd-sysv  init (/sbin/init -> systemd)
#   dbus                   systemctl talks to PID 1 over its private socket, but
#                          a real node has dbus and some units expect it
#   containerd             pulls in runc; ctr is part of the package
#   openssl                the stand-in kubelet makes its client certificate with it
# Not added: udev (no devices to manage in a container), ca-certificates,
# iproute2, containernetworking-plugins (CNI binaries are provided via the
# /opt/cni bind mount in the real tool).
log "debootstrap $SUITE from $NODEGRAPH_E2E_MIRROR into $ROOTFS"
run_group debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,dbus,containerd,openssl \
  "$SUITE" "$ROOTFS" "$NODEGRAPH_E2E_MIRROR" >&2
log "debootstrap done after $(( $(date +%s) - START ))s"
# debootstrap unmounts its own /proc,/sys on success; be sure.
umount_below "$ROOTFS"

# ------------------------------------------------------------- configuration
log "configuring rootfs"

echo "nodegraph-node" >"$ROOTFS/etc/hostname"
# Empty machine-id: systemd generates a fresh one per container boot
# (each node must have a unique id); /etc stays writable so it can persist it.
: >"$ROOTFS/etc/machine-id"
rm -f "$ROOTFS/var/lib/dbus/machine-id"

# Stand-in kubelet. Kubernetes' kubelet is NOT packaged in Debian, so the
# image carries a stand-in with the same unit name, config path and ordering.
# It reads its config, does what a real kubelet's TLS bootstrap leaves on disk
# (a client certificate under /var/lib/kubelet/pki and a kubeconfig naming it),
# and then stays active; it talks to no API server.
cat >"$ROOTFS/usr/local/bin/kubelet" <<'EOF'
#!/bin/sh
# STAND-IN kubelet for nodegraph's e2e tests (the real kubelet is not packaged
# in Debian). Reads its config like the real one and then stays active.
set -eu
CONFIG=/var/lib/kubelet/config.yaml
KUBECONFIG=
BOOTSTRAP=
NODE=$(hostname)
while [ $# -gt 0 ]; do
  case "$1" in
    --config) CONFIG="$2"; shift 2 ;;
    --config=*) CONFIG="${1#--config=}"; shift ;;
    --kubeconfig=*) KUBECONFIG="${1#--kubeconfig=}"; shift ;;
    --bootstrap-kubeconfig=*) BOOTSTRAP="${1#--bootstrap-kubeconfig=}"; shift ;;
    --hostname-override=*) NODE="${1#--hostname-override=}"; shift ;;
    *) shift ;;
  esac
done
if [ ! -r "$CONFIG" ]; then
  echo "kubelet (stand-in): config file $CONFIG is missing" >&2
  exit 1
fi
echo "kubelet (stand-in): loaded $CONFIG ($(wc -c <"$CONFIG") bytes)"
# TLS bootstrap as a real kubelet leaves it: with a bootstrap kubeconfig and no
# client certificate in its --cert-dir (default /var/lib/kubelet/pki), it
# writes kubelet-client-<time>.pem (certificate and key), points
# kubelet-client-current.pem at it, and writes the kubeconfig that names it.
# Here the certificate is self-signed instead of signed by the cluster.
PKI=/var/lib/kubelet/pki
if [ -n "$BOOTSTRAP" ] && [ ! -e "$PKI/kubelet-client-current.pem" ]; then
  if [ ! -r "$BOOTSTRAP" ]; then
    echo "kubelet (stand-in): bootstrap kubeconfig $BOOTSTRAP is missing" >&2
    exit 1
  fi
  mkdir -p "$PKI"
  PEM="$PKI/kubelet-client-$(date -u +%Y-%m-%d-%H-%M-%S).pem"
  umask 077
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -noenc -days 365 \
    -subj "/O=system:nodes/CN=system:node:$NODE" -keyout "$PEM.key" -out "$PEM.crt" 2>/dev/null
  cat "$PEM.crt" "$PEM.key" >"$PEM.tmp"
  rm -f "$PEM.crt" "$PEM.key"
  mv "$PEM.tmp" "$PEM"
  ln -sfn "$PEM" "$PKI/kubelet-client-current.pem"
  if [ -n "$KUBECONFIG" ] && [ ! -e "$KUBECONFIG" ]; then
    SERVER=$(sed -n 's/^[[:space:]]*server:[[:space:]]*//p' "$BOOTSTRAP" | head -n 1)
    CA=$(sed -n 's/^[[:space:]]*certificate-authority:[[:space:]]*//p' "$BOOTSTRAP" | head -n 1)
    cat >"$KUBECONFIG.tmp" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: default-cluster
  cluster:
    server: $SERVER
    certificate-authority: $CA
contexts:
- name: default-context
  context:
    cluster: default-cluster
    user: default-auth
current-context: default-context
users:
- name: default-auth
  user:
    client-certificate: $PKI/kubelet-client-current.pem
    client-key: $PKI/kubelet-client-current.pem
KUBECONFIG
    mv "$KUBECONFIG.tmp" "$KUBECONFIG"
    PEM="$PEM and $KUBECONFIG"
  fi
  echo "kubelet (stand-in): bootstrapped: wrote $PEM (CN=system:node:$NODE)"
fi
exec sleep infinity
EOF
chmod 0755 "$ROOTFS/usr/local/bin/kubelet"

cat >"$ROOTFS/etc/systemd/system/kubelet.service" <<'EOF'
# STAND-IN kubelet unit for nodegraph's e2e tests.
# Kubernetes' kubelet is not packaged in Debian; /usr/local/bin/kubelet is a
# shell script that requires /var/lib/kubelet/config.yaml, writes a client
# certificate on its first bootstrap, and then sleeps.
# Unit name, config path and ordering match a real kubelet install.
#
# Deliberately NOT enabled: nodegraph writes the config first and then runs
# `systemctl enable --now kubelet` (via `runc exec`). Enabled in the image, it
# would start at boot before the config exists, fail, and leave the system
# "degraded".
[Unit]
Description=kubelet (nodegraph e2e stand-in)
# Ordering only (no Wants=/Requires=): the tool starts containerd and kubelet
# itself, and a containerd restart must not restart kubelet.
After=containerd.service

[Service]
ExecStart=/usr/local/bin/kubelet --config=/var/lib/kubelet/config.yaml
# A real kubelet unit uses Restart=always; the stand-in uses no so that a
# missing config shows up as a plain "failed" unit instead of a restart loop.
Restart=no

[Install]
WantedBy=multi-user.target
EOF

# containerd: the Debian package enables containerd.service (a
# multi-user.target.wants symlink). Disable it: the tool enables and starts it
# once it has put /etc/containerd/certs.d etc. in place, so a first boot is
# faster and reaches "running" independent of containerd.
rm -f "$ROOTFS/etc/systemd/system/multi-user.target.wants/containerd.service"

# Masks. Booting this image under runc with test/e2e/fixtures/known-good-config.json
# and NO masks at all reaches "running" with 0 failed units (systemd 252 skips
# getty@tty1, console-getty, kmod-static-nodes, systemd-remount-fs,
# sys-kernel-config, ... by their Condition*= checks in a container), so nothing
# has to be masked for the boot to work. See test/e2e/README.md.
# Masked anyway, for determinism: the apt timers would run `apt-get update` /
# unattended upgrades in a node that has no route to a mirror (a failed
# apt-daily.service would turn the system "degraded" in the middle of a test).
MASK_UNITS=(
  apt-daily.timer
  apt-daily-upgrade.timer
)
for u in "${MASK_UNITS[@]}"; do
  ln -sf /dev/null "$ROOTFS/etc/systemd/system/$u"
done

# containerd config: the Debian package ships none (built-in defaults). Point the
# CRI registry config at the hosts dir that the runc config bind-mounts
# (/etc/containerd/certs.d); without config_path containerd ignores that dir.
# Everything else stays at containerd's defaults.
mkdir -p "$ROOTFS/etc/containerd"
cat >"$ROOTFS/etc/containerd/config.toml" <<'EOF2'
# nodegraph e2e node image
version = 2

[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
EOF2

# Journald: keep logs in memory only (the rootfs is throwaway; less I/O).
mkdir -p "$ROOTFS/etc/systemd/journald.conf.d"
cat >"$ROOTFS/etc/systemd/journald.conf.d/nodegraph.conf" <<'EOF'
[Journal]
Storage=volatile
RuntimeMaxUse=32M
EOF

# Mount points for the bind mounts in the runc config. runc would create them,
# but an image that already has them is easier to reason about. (/run/containerd
# and /sys/fs/bpf live on the /run tmpfs and on sysfs at run time.)
mkdir -p "$ROOTFS/var/lib/kubelet" "$ROOTFS/opt/cni" "$ROOTFS/etc/containerd/certs.d"

# Keep future package installs small, too.
cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/01-nodegraph-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF

# ------------------------------------------------------------------- trimming
log "trimming rootfs"
chroot "$ROOTFS" apt-get clean >&2 || true
rm -rf "$ROOTFS"/var/lib/apt/lists/* \
  "$ROOTFS"/var/cache/apt/*.bin \
  "$ROOTFS"/var/cache/debconf/*-old \
  "$ROOTFS"/var/lib/dpkg/*-old \
  "$ROOTFS"/usr/share/doc/* \
  "$ROOTFS"/usr/share/man/* \
  "$ROOTFS"/usr/share/info/* \
  "$ROOTFS"/usr/share/lintian/* \
  "$ROOTFS"/var/log/* \
  "$ROOTFS"/tmp/* "$ROOTFS"/var/tmp/*
find "$ROOTFS/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
mkdir -p "$ROOTFS/var/log/apt" "$ROOTFS/var/log/journal"

# --------------------------------------------------------------------- pack
log "packing $(du -sh --apparent-size "$ROOTFS" | cut -f1) rootfs with zstd -$ZSTD_LEVEL"
tar --numeric-owner --xattrs --xattrs-include='security.capability' \
  --sort=name -C "$ROOTFS" -cf - . |
  zstd -q -T0 "-$ZSTD_LEVEL" -o "$TMP_ARCHIVE"
sync "$TMP_ARCHIVE" 2>/dev/null || sync
mv -f "$TMP_ARCHIVE" "$ARCHIVE"

# Prune: keep the KEEP most recently built/used archives (other checkouts or
# branches may still use an older script hash).
KEEP="${NODEGRAPH_E2E_KEEP_ARCHIVES:-3}"
ls -1t "$CACHE_DIR"/node-*.tar.zst 2>/dev/null | tail -n +"$((KEEP + 1))" |
  while read -r old; do
    [ "$old" = "$ARCHIVE" ] && continue
    log "pruning old archive $old"
    rm -f "$old"
  done

log "built $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1)) in $(( $(date +%s) - START ))s"
printf '%s\n' "$ARCHIVE"
