#!/usr/bin/env bash
# manta-entrypoint: runs one Manta node in the foreground (`manta start --block`),
# configured from environment variables, so that one script serves the container
# image (deploy/container/Dockerfile, deploy/kubernetes/) and a test bed alike.
#
#   MANTA_ROLE                head | worker (required)
#   MANTA_NODE_IP             the address other nodes reach this one at (required;
#                             in Kubernetes the pod IP): --node-ip-address
#   MANTA_BIND_ADDRESS        where the daemons listen (default 0.0.0.0): --bind-address
#   MANTA_TOKEN_FILE          the cluster token (default /etc/manta/token/token); the
#                             head uses it instead of making one
#   MANTA_CLUSTER_TOKEN_FILE  where the private copy of the token goes, when one is
#                             needed (see below); exported, so the CLI, probes and
#                             drivers read the same file
#   MANTA_GCS_PORT            head: the GCS port (default 6379): --port
#   MANTA_HEAD_ADDRESS        worker: the head's GCS as host:port, a DNS name is fine
#                             (required): --address
#   MANTA_NUM_CPUS, MANTA_MEMORY_BYTES, MANTA_OBJECT_STORE_BYTES, MANTA_RESOURCES (JSON),
#   MANTA_NODE_NAME           --num-cpus, --memory, --object-store-memory, --resources,
#                             --node-name, each only when set and not empty
#   MANTA_SYSTEM_CONFIG       head: JSON config overrides: --system-config
#   MANTA_TLS_CERT, MANTA_TLS_KEY, MANTA_TLS_CA
#                             all three or none: --tls-cert, --tls-key, --tls-ca (left
#                             in the environment: drivers and the CLI read them too)
#   MANTA_BIN                 the manta executable (default: `manta` in PATH)
#
# Arguments given to this script are appended to the command. Exit 2, with one line
# on stderr, when the variables do not describe a node.
#
# Why a copy of the token: Manta reads a token file only when it is a regular file of
# the user reading it that nobody else may read (src/common/security.h). A Kubernetes
# Secret volume offers none of that: its files are symbolic links to files owned by
# root, readable through the pod's fsGroup. The token is then copied to a private
# file, and that copy is what `manta start` and everything after it read.
set -euo pipefail

die() {
  echo "manta-entrypoint: $*" >&2
  exit 2
}

# A regular file (not a link) of this user that group and others cannot read.
is_private_file() {
  [[ -f $1 && ! -L $1 && -O $1 ]] || return 1
  local mode
  mode=$(stat -c %a "$1")
  (((8#$mode & 8#077) == 0))
}

# Copies the token in $1 to the private file $2 (mode 0600, its folder 0700),
# replacing it atomically.
copy_token() {
  local from=$1 to=$2 dir tmp
  dir=$(dirname "$to")
  (umask 077 && mkdir -p "$dir")
  [[ -d $dir && ! -L $dir && -O $dir ]] || die "$dir (for the copy of the cluster token) is not a folder of this user"
  chmod 700 "$dir"
  tmp=$(mktemp "$dir/.token.XXXXXX")
  if ! cat "$from" >"$tmp"; then
    rm -f "$tmp"
    die "cannot copy the cluster token from $from"
  fi
  mv -f "$tmp" "$to"
}

# Appends FLAG and the value of the variable named VAR when that value is not empty.
add_if_set() {
  local flag=$1 var=$2
  if [[ -n ${!var:-} ]]; then args+=("$flag" "${!var}"); fi
}

manta=${MANTA_BIN:-manta}
command -v "$manta" >/dev/null || die "cannot find the manta executable '$manta' (set MANTA_BIN or PATH)"

role=${MANTA_ROLE:-}
case $role in
  head | worker) ;;
  *) die "MANTA_ROLE must be 'head' or 'worker', not '$role'" ;;
esac
[[ -n ${MANTA_NODE_IP:-} ]] || die "MANTA_NODE_IP is required: the address other nodes reach this one at (the pod IP)"

args=(start --block --node-ip-address "$MANTA_NODE_IP" --bind-address "${MANTA_BIND_ADDRESS:-0.0.0.0}")

if [[ $role == head ]]; then
  args+=(--head --port "${MANTA_GCS_PORT:-6379}")
  add_if_set --system-config MANTA_SYSTEM_CONFIG
else
  [[ -n ${MANTA_HEAD_ADDRESS:-} ]] || die "MANTA_HEAD_ADDRESS is required for a worker: the head's host:port"
  args+=(--address "$MANTA_HEAD_ADDRESS")
  if [[ -n ${MANTA_SYSTEM_CONFIG:-} ]]; then
    echo "manta-entrypoint: MANTA_SYSTEM_CONFIG is ignored on a worker (its raylet takes the head's)" >&2
  fi
fi

token_file=${MANTA_TOKEN_FILE:-/etc/manta/token/token}
[[ -r $token_file ]] || die "cannot read the cluster token file $token_file (MANTA_TOKEN_FILE); make one with:" \
  "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > token"
private_token=${MANTA_CLUSTER_TOKEN_FILE:-}
if [[ -z $private_token ]]; then
  if is_private_file "$token_file"; then
    private_token=$token_file
  else
    private_token=${TMPDIR:-/tmp}/manta-token-$(id -u)/token
  fi
fi
if [[ $private_token != "$token_file" ]]; then copy_token "$token_file" "$private_token"; fi
export MANTA_CLUSTER_TOKEN_FILE=$private_token
args+=(--token-file "$private_token")

add_if_set --num-cpus MANTA_NUM_CPUS
add_if_set --memory MANTA_MEMORY_BYTES
add_if_set --object-store-memory MANTA_OBJECT_STORE_BYTES
add_if_set --resources MANTA_RESOURCES
add_if_set --node-name MANTA_NODE_NAME

tls_given=0
for var in MANTA_TLS_CERT MANTA_TLS_KEY MANTA_TLS_CA; do
  if [[ -n ${!var:-} ]]; then tls_given=$((tls_given + 1)); fi
done
if ((tls_given == 3)); then
  args+=(--tls-cert "$MANTA_TLS_CERT" --tls-key "$MANTA_TLS_KEY" --tls-ca "$MANTA_TLS_CA")
elif ((tls_given > 0)); then
  die "TLS needs all of MANTA_TLS_CERT, MANTA_TLS_KEY and MANTA_TLS_CA; only $tls_given of them is set"
fi

args+=("$@")

# The command holds no secret (the token is a file path), so it is logged whole.
{
  printf 'manta-entrypoint: exec %q' "$manta"
  printf ' %q' "${args[@]}"
  printf '\n'
} >&2
exec "$manta" "${args[@]}"
