// The node's lifecycle helper: a small POSIX shell script installed on the
// host with the runtime. Stop and destroy steps are recorded in nodegraph's
// state as commands (so they run even after the Nodefile changed); the ones
// that need a decision — "stop unless already stopped", "remove unless
// something is still mounted" — are subcommands of this script.

import type { RuncOptions } from './runc.ts';

/** Where the helper is installed (a node path; put it through the host's root prefix). */
export const HELPER_PATH = '/usr/local/libexec/nodegraph/node-helper';

export const HELPER_SCRIPT = String.raw`#!/bin/sh
# nodegraph node helper — installed by nodegraph; replaced on the next apply.
#
#   stop-container RUNC STATE-ROOT|- ID TIMEOUT-SECONDS [UNIT]
#       Stop (SIGRTMIN+3, then SIGKILL after the timeout) and delete a runc
#       container, by its id alone: its bundle folder may be gone. With UNIT,
#       on a host running systemd, the unit that supervises it is stopped
#       first (a missing unit is fine). A stopped or missing container is fine.
#   service RUNC STATE-ROOT|- ID SYSTEMCTL-ARGS...
#       systemctl inside the container when it is running; nothing otherwise.
#   unmount-below DIR
#       Unmount everything mounted at or below DIR, deepest first.
#   remove [--made LEDGER] PATH
#       Remove PATH; refuse (exit 1) when something is mounted at or below it.
#       With --made, only when LEDGER lists PATH as a folder nodegraph made.
#   remove-unless-mounted [--made LEDGER] PATH
#       Remove PATH; keep it (exit 0, with a note) when something is mounted below.
#   prune [--made LEDGER] DIR...
#       Remove each DIR that is empty (folders nodegraph made on the way); keep the rest.
#   unit-remove UNIT-FILE UNIT-NAME
#       Disable and stop a host systemd unit, remove its file, reload systemd.
#   kernel-modules MODULE...
#       Print "MODULE loaded|built-in|missing" for each, from /proc/modules and /sys/module.
set -eu

die() { echo "node-helper: $*" >&2; exit 1; }

runc_() {
  if [ "$STATE_ROOT" = - ]; then "$RUNC" "$@"; else "$RUNC" --root "$STATE_ROOT" "$@"; fi
}

container_status() {
  runc_ state "$1" 2>/dev/null | sed -n 's/^[[:space:]]*"status":[[:space:]]*"\([a-z]*\)".*/\1/p' | head -n 1
}

container_bundle() {
  runc_ state "$1" 2>/dev/null | sed -n 's/^[[:space:]]*"bundle":[[:space:]]*"\(.*\)",*$/\1/p' | head -n 1
}

# Mount points at or below $1, deepest first (mountinfo field 5, octal escapes decoded).
mounts_below() {
  awk -v d="$1" '
    function unescape(s,   out, i, c) {
      out = ""
      for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "\\" && substr(s, i + 1, 3) ~ /^[0-7][0-7][0-7]$/) {
          out = out sprintf("%c", (substr(s, i + 1, 1) * 64) + (substr(s, i + 2, 1) * 8) + substr(s, i + 3, 1))
          i += 3
        } else out = out c
      }
      return out
    }
    { p = unescape($5); if (p == d || index(p, d "/") == 1) print length(p) " " p }
  ' /proc/self/mountinfo 2>/dev/null | sort -rn | cut -d' ' -f2-
}

# True when the ledger $1 (src/node/folders.ts) lists $2 as a folder nodegraph made.
made_by_nodegraph() {
  [ -f "$1" ] && grep -Fxq "made $2" "$1"
}

# True (and $ledger set) when the arguments begin with "--made LEDGER".
made_option() {
  ledger=
  [ $# -ge 2 ] && [ "$1" = --made ] && ledger=$2
}

canonical() {
  case "$1" in /*) ;; *) die "not an absolute path: $1" ;; esac
  [ "$1" != / ] || die "refusing to work on /"
  printf '%s\n' "$1" | sed 's:/*$::'
}

[ $# -gt 0 ] || die "usage: node-helper COMMAND ARGS... (see the comment at the top)"
cmd=$1
shift
case "$cmd" in
  stop-container)
    [ $# -eq 4 ] || [ $# -eq 5 ] || die "usage: stop-container RUNC STATE-ROOT|- ID TIMEOUT-SECONDS [UNIT]"
    RUNC=$1 STATE_ROOT=$2 id=$3 timeout=$4 unit=
    [ $# -eq 4 ] || unit=$5
    # The supervisor first: a unit left running would start the container again.
    if [ -n "$unit" ] && [ -d /run/systemd/system ]; then systemctl stop "$unit" 2>/dev/null || true; fi
    status=$(container_status "$id" || true)
    if [ -z "$status" ]; then echo "container $id does not exist"; exit 0; fi
    case "$status" in
      running|paused|created|creating)
        # Without its rootfs, systemd in it has nothing to halt with: no use waiting for it.
        bundle=$(container_bundle "$id" || true)
        if [ -z "$bundle" ] || [ ! -d "$bundle/rootfs" ]; then
          echo "container $id: its rootfs is gone ($bundle); killing it"
          timeout=0
        else
          runc_ kill "$id" 37 2>/dev/null || true
        fi
        waited=0
        while [ "$waited" -lt "$timeout" ]; do
          status=$(container_status "$id" || true)
          case "$status" in stopped|"") break ;; esac
          sleep 1
          waited=$((waited + 1))
        done
        case "$status" in stopped|"") ;; *) runc_ kill --all "$id" KILL 2>/dev/null || true; sleep 1 ;; esac
        ;;
    esac
    runc_ delete --force "$id" 2>/dev/null || [ -z "$(container_status "$id" || true)" ] || die "could not delete container $id"
    echo "container $id stopped and deleted"
    ;;
  service)
    [ $# -ge 4 ] || die "usage: service RUNC STATE-ROOT|- ID SYSTEMCTL-ARGS..."
    RUNC=$1 STATE_ROOT=$2 id=$3
    shift 3
    status=$(container_status "$id" || true)
    if [ "$status" != running ]; then echo "container $id is not running; nothing to do"; exit 0; fi
    runc_ exec "$id" systemctl "$@"
    ;;
  unmount-below)
    [ $# -eq 1 ] || die "usage: unmount-below DIR"
    dir=$(canonical "$1")
    mounts_below "$dir" | while IFS= read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" || echo "node-helper: could not unmount $m" >&2
    done
    ;;
  remove|remove-unless-mounted)
    if made_option "$@"; then shift 2; fi
    [ $# -eq 1 ] || die "usage: $cmd [--made LEDGER] PATH"
    target=$(canonical "$1")
    [ -e "$target" ] || [ -L "$target" ] || exit 0
    if [ -n "$ledger" ] && ! made_by_nodegraph "$ledger" "$target"; then
      echo "keeping $target: it was there before nodegraph"
      exit 0
    fi
    left=$(mounts_below "$target")
    if [ -n "$left" ]; then
      if [ "$cmd" = remove ]; then die "not removing $target: mounted below it: $(echo $left)"; fi
      echo "keeping $target: still mounted below it: $(echo $left)"
      exit 0
    fi
    rm -rf --one-file-system "$target"
    ;;
  prune)
    if made_option "$@"; then shift 2; fi
    for dir in "$@"; do
      dir=$(canonical "$dir")
      if [ -n "$ledger" ] && ! made_by_nodegraph "$ledger" "$dir"; then continue; fi
      if [ -d "$dir" ] && [ ! -L "$dir" ]; then rmdir "$dir" 2>/dev/null || true; fi
    done
    ;;
  unit-remove)
    [ $# -eq 2 ] || die "usage: unit-remove UNIT-FILE UNIT-NAME"
    if [ -d /run/systemd/system ]; then systemctl disable --now "$2" 2>/dev/null || true; fi
    rm -f "$1"
    if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
    ;;
  kernel-modules)
    for module in "$@"; do
      name=$(printf '%s' "$module" | tr - _)
      if [ -r /proc/modules ] && grep -q "^$name " /proc/modules; then echo "$module loaded"
      elif [ -d "/sys/module/$name" ]; then echo "$module built-in"
      else echo "$module missing"
      fi
    done
    ;;
  *)
    die "unknown command: $cmd (stop-container, service, unmount-below, remove, remove-unless-mounted, prune, unit-remove, kernel-modules)"
    ;;
esac
`;

/** Argv builders for recipes: the helper at its host path, and its arguments. */
export interface Helper {
  readonly path: string;
  /** Stops and deletes a container by id (its unit first, when it has one); its bundle folder may be gone. */
  stopContainer(runc: RuncOptions, id: string, timeoutSeconds: number, unit?: string): string[];
  service(runc: RuncOptions, id: string, ...systemctl: string[]): string[];
  unmountBelow(dir: string): string[];
  /** With `made`, a ledger (folders.ts): only a folder it lists as made by nodegraph is removed. */
  remove(target: string, made?: string): string[];
  removeUnlessMounted(target: string, made?: string): string[];
  prune(...dirs: string[]): string[];
  /** The empty ones among `dirs` that the ledger lists as made by nodegraph. */
  pruneMade(ledger: string, ...dirs: string[]): string[];
  unitRemove(unitFile: string, unitName: string): string[];
  kernelModules(...modules: string[]): string[];
}

const madeOption = (ledger: string | undefined): string[] => (ledger === undefined ? [] : ['--made', ledger]);

export function helperAt(hostPath: string): Helper {
  const root = (runc: RuncOptions): string => runc.stateRoot ?? '-';
  return {
    path: hostPath,
    // The script counts whole seconds (`[ -lt ]` takes integers): 2.5 would skip the wait and kill at once.
    stopContainer: (runc, id, timeout, unit) => [hostPath, 'stop-container', runc.binary, root(runc), id, String(Math.ceil(timeout)), ...(unit === undefined ? [] : [unit])],
    service: (runc, id, ...systemctl) => [hostPath, 'service', runc.binary, root(runc), id, ...systemctl],
    unmountBelow: (dir) => [hostPath, 'unmount-below', dir],
    remove: (target, made) => [hostPath, 'remove', ...madeOption(made), target],
    removeUnlessMounted: (target, made) => [hostPath, 'remove-unless-mounted', ...madeOption(made), target],
    prune: (...dirs) => [hostPath, 'prune', ...dirs],
    pruneMade: (ledger, ...dirs) => [hostPath, 'prune', '--made', ledger, ...dirs],
    unitRemove: (unitFile, unitName) => [hostPath, 'unit-remove', unitFile, unitName],
    kernelModules: (...modules) => [hostPath, 'kernel-modules', ...modules],
  };
}
