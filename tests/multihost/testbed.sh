#!/usr/bin/env bash
# testbed.sh: several "hosts" on one Linux machine, for Manta's multi-host tests.
#
# Each host is a network namespace with its own IPv4 address from 198.51.100.0/24
# (a documentation range) on eth0, plugged through a veth pair into a bridge that
# lives in a namespace of its own (the "switch"): nothing is added to the machine's
# own network namespace, and nothing can bind to its real interfaces. Each host also
# has its own mount and pid namespaces (unshare --mount --pid --fork), with private
# tmpfs on /tmp and /dev/shm, so no host sees another's session directories, object
# store or processes. A host's processes all die with its pid namespace's init.
#
# Usage (as root):
#   testbed.sh check                      what is missing to run a test bed, if anything
#   testbed.sh up N [--owner PID] [--mtu BYTES] [--keep DIR]...
#                                         makes hosts h0..h(N-1) (h0 = 198.51.100.10,
#                                         h1 = .11, ...); prints "testbed <id>" then
#                                         "host <i> <ip> <init pid>" per host. With
#                                         --owner, everything is torn down when PID exits
#                                         (a detached watchdog), even after SIGKILL.
#                                         Every host sees the machine's files but its own
#                                         /tmp: a --keep DIR under /tmp (the checkout and
#                                         build the hosts run, say) stays visible in them.
#   testbed.sh exec ID HOST [--] CMD...   runs CMD inside host HOST (0..N-1), stdin,
#                                         stdout and stderr passed through; exit code
#                                         is CMD's
#   testbed.sh kill ID HOST               SIGKILLs every process of the host (its pid
#                                         namespace); its address stays, unanswered
#   testbed.sh restart ID HOST            a killed host comes back empty (same address)
#   testbed.sh partition ID HOST [PEER...]  drops every packet between HOST and the
#                                         others (or only PEER hosts), both ways,
#                                         silently (no RST, no ICMP): an nftables table
#                                         in the host's namespace
#   testbed.sh heal ID HOST               removes HOST's partition rules
#   testbed.sh shape ID HOST RATE         limits HOST's link to RATE (tc tbf, e.g.
#                                         100mbit) in both directions; "off" removes it
#   testbed.sh capture ID FILE            writes every packet crossing the bridge to
#                                         FILE (tcpdump; stops on SIGINT)
#   testbed.sh down ID                    tears the test bed down (idempotent)
#   testbed.sh gc                         tears down test beds whose owner has exited
#
# State lives in /run/manta-testbed/<id>/. Names: namespaces mtb-<id>-sw and
# mtb-<id>-h<i>, switch-side veths mtb<id>h<i>.
set -euo pipefail

STATE_ROOT=${MANTA_TESTBED_STATE:-/run/manta-testbed}
SUBNET_PREFIX=198.51.100
FIRST_HOST_OCTET=10

die() { echo "testbed: $*" >&2; exit 1; }

check() {
  local missing=()
  [ "$(id -u)" -eq 0 ] || missing+=("root (uid 0; this runs as uid $(id -u)): network, mount and pid namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN")
  for tool in ip nft unshare nsenter tc; do
    command -v "$tool" >/dev/null 2>&1 ||
      missing+=("the '$tool' command (scripts/install-deps --test installs iproute2, nftables and util-linux)")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    # Privileges can be missing even for root (a container without CAP_SYS_ADMIN).
    local probe="mtb-probe-$$"
    if ! ip netns add "$probe" 2>/dev/null; then
      missing+=("permission to create network namespaces ('ip netns add' failed: no CAP_SYS_ADMIN/CAP_NET_ADMIN?)")
    else
      if ! ip netns exec "$probe" unshare --mount --pid --fork --propagation private true 2>/dev/null; then
        missing+=("permission to create mount and pid namespaces ('unshare --mount --pid' failed)")
      fi
      ip netns del "$probe" 2>/dev/null || true
    fi
  fi
  if [ ${#missing[@]} -ne 0 ]; then
    echo "testbed: cannot make a multi-host test bed here; missing:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    return 1
  fi
}

state_dir() { echo "$STATE_ROOT/$1"; }
host_ns() { echo "mtb-$1-h$2"; }
switch_ns() { echo "mtb-$1-sw"; }
host_ip() { echo "$SUBNET_PREFIX.$((FIRST_HOST_OCTET + $2))"; }

require_bed() {
  [[ "$1" =~ ^[0-9a-f]{6}$ ]] || die "bad test bed id '$1'"
  [ -d "$(state_dir "$1")" ] || die "no test bed $1"
}

require_host() {
  [[ "$2" =~ ^[0-9]+$ ]] || die "bad host '$2'"
  [ -f "$(state_dir "$1")/h$2.unshare" ] || die "test bed $1 has no host $2"
}

# The pid of the host's pid-namespace init (a child of the recorded unshare).
# True while `pid` runs (a zombie, waiting for its parent to reap it, does not).
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

init_pid() {
  local unshare_pid
  unshare_pid=$(cat "$(state_dir "$1")/h$2.unshare")
  local children
  children=$(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null || true)
  children=${children%% *}
  [ -n "$children" ] || return 1
  echo "$children"
}

# Starts the host's init: private /tmp (but for the kept folders under it) and
# /dev/shm, then it reaps orphans forever.
start_host_init() {
  local id=$1 i=$2 dir ns
  dir=$(state_dir "$id")
  ns=$(host_ns "$id" "$i")
  # Kept folders under /tmp are bound aside, /tmp is replaced, and they are bound back.
  local keep_before="" keep_after="" k=0 d
  while read -r d; do
    [ -n "$d" ] || continue
    case "$d" in
      /tmp/*)
        local stage="$dir/keep-h$i-$k"
        mkdir -p "$stage"
        keep_before+="mount --bind '$d' '$stage' && "
        keep_after+="mkdir -p '$d' && mount --bind '$stage' '$d' && umount '$stage' && "
        k=$((k + 1))
        ;;
    esac
  done <"$dir/keep"
  # pid 1 of the host: bash reaps every child it inherits (waitpid(-1) on SIGCHLD).
  local init="$keep_before mount -t tmpfs -o mode=1777 testbed-tmp /tmp && $keep_after
              mount -t tmpfs -o mode=1777 testbed-shm /dev/shm &&
              touch /tmp/.testbed-ready && while :; do sleep 3600 & wait \$!; done"
  setsid ip netns exec "$ns" unshare --mount --pid --fork --kill-child --mount-proc --propagation private \
    -- /bin/bash -c "$init" </dev/null >/dev/null 2>&1 &
  echo $! >"$dir/h$i.unshare"
  local deadline=$((SECONDS + 10)) pid
  while [ $SECONDS -lt $deadline ]; do
    if pid=$(init_pid "$id" "$i") && nsenter --target "$pid" --mount -- test -e /tmp/.testbed-ready 2>/dev/null; then
      echo "$pid"
      return 0
    fi
    sleep 0.02
  done
  die "host $i of test bed $id did not start within 10 s"
}

up() {
  local n=$1; shift
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 100 ] || die "up: give a number of hosts (1-100)"
  local owner="" mtu=9000 keep=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --owner) owner=$2; shift 2 ;;
      --mtu) mtu=$2; shift 2 ;;
      --keep) keep+=("$(cd "$2" && pwd -P)") || die "up: --keep $2 is not a folder"; shift 2 ;;
      *) die "up: unknown option $1" ;;
    esac
  done
  check
  mkdir -p "$STATE_ROOT"
  chmod 0700 "$STATE_ROOT"
  local id
  id=$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n')
  local dir
  dir=$(state_dir "$id")
  mkdir -p "$dir"
  echo "$n" >"$dir/hosts"
  printf '%s\n' "${keep[@]}" >"$dir/keep"
  if [ -n "$owner" ]; then
    echo "$owner" >"$dir/owner"
    setsid "$0" watch "$id" "$owner" </dev/null >/dev/null 2>&1 &
    echo $! >"$dir/watchdog"
  fi
  # A failure half-way leaves nothing behind.
  trap 'down "$id" >/dev/null 2>&1 || true' ERR
  local sw
  sw=$(switch_ns "$id")
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 mtu "$mtu"
  ip -n "$sw" link set br0 up
  echo "testbed $id"
  for ((i = 0; i < n; i++)); do
    local ns veth
    ns=$(host_ns "$id" "$i")
    veth="mtb${id}h$i"
    ip netns add "$ns"
    # Both ends are made inside their namespaces: the machine's own sees neither.
    ip -n "$sw" link add "$veth" mtu "$mtu" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "$veth" master br0
    ip -n "$sw" link set "$veth" up
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 mtu "$mtu"
    ip -n "$ns" addr add "$(host_ip "$id" "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    local pid
    pid=$(start_host_init "$id" "$i")
    echo "host $i $(host_ip "$id" "$i") $pid"
  done
  trap - ERR
}

exec_in() {
  local id=$1 i=$2; shift 2
  require_bed "$id"
  require_host "$id" "$i"
  [ "${1:-}" = "--" ] && shift
  [ $# -gt 0 ] || die "exec: no command"
  local pid
  pid=$(init_pid "$id" "$i") || die "host $i of test bed $id is not running (killed?)"
  exec nsenter --target "$pid" --net --mount --pid --wd="$PWD" -- "$@"
}

kill_host() {
  local id=$1 i=$2
  require_bed "$id"
  require_host "$id" "$i"
  local unshare_pid init
  unshare_pid=$(cat "$(state_dir "$id")/h$i.unshare")
  init=$(init_pid "$id" "$i" || true)
  # The init is pid 1 of the host's pid namespace: when it dies, the kernel kills
  # every other process in the namespace.
  [ -n "$init" ] && kill -KILL "$init" 2>/dev/null || true
  kill -KILL "$unshare_pid" 2>/dev/null || true
  local deadline=$((SECONDS + 10))
  while [ $SECONDS -lt $deadline ]; do
    if ! alive "$unshare_pid" && { [ -z "$init" ] || ! alive "$init"; }; then return 0; fi
    sleep 0.02
  done
  die "host $i of test bed $id did not die within 10 s"
}

restart_host() {
  local id=$1 i=$2
  require_bed "$id"
  require_host "$id" "$i"
  kill_host "$id" "$i"
  local pid
  pid=$(start_host_init "$id" "$i")
  echo "host $i $(host_ip "$id" "$i") $pid"
}

partition() {
  local id=$1 i=$2; shift 2
  require_bed "$id"
  require_host "$id" "$i"
  local ns
  ns=$(host_ns "$id" "$i")
  local match="" peers=()
  for p in "$@"; do
    require_host "$id" "$p"
    peers+=("$(host_ip "$id" "$p")")
  done
  heal "$id" "$i"
  local rules
  if [ ${#peers[@]} -eq 0 ]; then
    rules="table inet testbed {
      chain in { type filter hook input priority -10; policy accept; iifname \"eth0\" drop; }
      chain out { type filter hook output priority -10; policy accept; oifname \"eth0\" drop; }
    }"
  else
    match=$(IFS=,; echo "${peers[*]}")
    rules="table inet testbed {
      chain in { type filter hook input priority -10; policy accept; ip saddr { $match } drop; }
      chain out { type filter hook output priority -10; policy accept; ip daddr { $match } drop; }
    }"
  fi
  echo "$rules" | ip netns exec "$ns" nft -f -
}

heal() {
  local id=$1 i=$2
  require_bed "$id"
  require_host "$id" "$i"
  ip netns exec "$(host_ns "$id" "$i")" nft delete table inet testbed 2>/dev/null || true
}

# Every packet crossing the bridge, written to FILE (pcap) until tcpdump is
# interrupted (SIGINT: it writes what it holds first).
capture() {
  local id=$1 file=$2
  require_bed "$id"
  command -v tcpdump >/dev/null || die "capture needs tcpdump (scripts/install-deps --test installs it)"
  exec ip netns exec "$(switch_ns "$id")" tcpdump -Z root -i br0 -U -s 0 -B 131072 -w "$file"
}

shape() {
  local id=$1 i=$2 rate=$3
  require_bed "$id"
  require_host "$id" "$i"
  local ns sw veth
  ns=$(host_ns "$id" "$i")
  sw=$(switch_ns "$id")
  veth="mtb${id}h$i"
  tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
  tc -n "$sw" qdisc del dev "$veth" root 2>/dev/null || true
  [ "$rate" = off ] && return 0
  # Out of the host at eth0, into it at the switch's end of its cable.
  tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
  tc -n "$sw" qdisc add dev "$veth" root tbf rate "$rate" burst 256kb latency 50ms
}

down() {
  local id=$1
  [[ "$id" =~ ^[0-9a-f]{6}$ ]] || die "bad test bed id '$id'"
  local dir
  dir=$(state_dir "$id")
  local n=0
  [ -f "$dir/hosts" ] && n=$(cat "$dir/hosts")
  for ((i = 0; i < n; i++)); do
    [ -f "$dir/h$i.unshare" ] && kill_host "$id" "$i" 2>/dev/null || true
  done
  # Namespaces also by name, in case the state is partial.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^mtb-$id-" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  if [ -f "$dir/watchdog" ]; then
    local w
    w=$(cat "$dir/watchdog")
    [ "$w" != "$$" ] && kill "$w" 2>/dev/null || true
  fi
  rm -rf "$dir"
}

watch() {
  local id=$1 owner=$2
  while alive "$owner"; do sleep 0.5; done
  [ -d "$(state_dir "$id")" ] && down "$id"
}

gc() {
  [ -d "$STATE_ROOT" ] || return 0
  for dir in "$STATE_ROOT"/*; do
    [ -d "$dir" ] || continue
    local id owner
    id=$(basename "$dir")
    owner=$(cat "$dir/owner" 2>/dev/null || echo "")
    if [ -z "$owner" ] || ! alive "$owner"; then down "$id"; fi
  done
}

cmd=${1:-}
[ -n "$cmd" ] || die "usage: testbed.sh check|up|exec|kill|restart|partition|heal|shape|down|gc ..."
shift
case "$cmd" in
  check) check ;;
  up) up "$@" ;;
  exec) [ $# -ge 2 ] || die "usage: exec ID HOST -- CMD..."; exec_in "$@" ;;
  kill) [ $# -eq 2 ] || die "usage: kill ID HOST"; kill_host "$@" ;;
  restart) [ $# -eq 2 ] || die "usage: restart ID HOST"; restart_host "$@" ;;
  partition) [ $# -ge 2 ] || die "usage: partition ID HOST [PEER...]"; partition "$@" ;;
  heal) [ $# -eq 2 ] || die "usage: heal ID HOST"; heal "$@" ;;
  shape) [ $# -eq 3 ] || die "usage: shape ID HOST RATE|off"; shape "$@" ;;
  capture) [ $# -eq 2 ] || die "usage: capture ID FILE"; capture "$@" ;;
  down) [ $# -eq 1 ] || die "usage: down ID"; down "$@" ;;
  watch) watch "$@" ;;
  gc) gc ;;
  *) die "unknown command '$cmd'" ;;
esac
