#!/usr/bin/env bash
# Makes sure the Redis Cluster of SECKILL_TEST_REDIS_CLUSTER_ADDRS (default
# 127.0.0.1:7001 to :7006) is up: where it is not, it starts one from the
# machine's redis-server with three masters and three replicas, its files
# under .run/cluster/<port>/, and waits until every node says cluster_state:ok.
# Run it again at will: it starts only the nodes that are down and creates
# the cluster only once. The nodes are set up as production should be for
# seckill (docs/deployment.md): appendonly yes, appendfsync always,
# maxmemory-policy noeviction, cluster-require-full-coverage no (the other
# shards sell on while one fails over); cluster-node-timeout is short (2 s)
# so that a replica takes over from a dead master within seconds.
#
# Usage: scripts/cluster.sh           start (or check) the cluster
#        scripts/cluster.sh stop      shut its nodes down (data kept)
#        scripts/cluster.sh reset     shut them down and delete their data
#        scripts/cluster.sh status    print each node's role and state
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.run/cluster"
addrs=${SECKILL_TEST_REDIS_CLUSTER_ADDRS:-127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005,127.0.0.1:7006}
node_timeout=${SECKILL_CLUSTER_NODE_TIMEOUT:-2000}

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

IFS=, read -r -a nodes <<<"$addrs"
[[ ${#nodes[@]} == 6 ]] || die "SECKILL_TEST_REDIS_CLUSTER_ADDRS must list 6 host:port (3 masters, 3 replicas), not ${#nodes[@]}"
for n in "${nodes[@]}"; do
	[[ $n =~ ^(127\.[0-9.]+|localhost):([0-9]+)$ ]] || die "$n: only a cluster on this machine (127.x.x.x:port) is started here"
done

host() { echo "${1%:*}"; }
port() { echo "${1##*:}"; }
cli() { local n=$1; shift; redis-cli -h "$(host "$n")" -p "$(port "$n")" "$@"; }
up() { cli "$1" ping 2>/dev/null | grep -q PONG; }
info_field() { cli "$1" cluster info 2>/dev/null | tr -d '\r' | awk -F: -v k="$2" '$1 == k {print $2}'; }

start_node() {
	local n=$1 p d
	p=$(port "$n"); d="$dir/$p"
	mkdir -p "$d"
	log "starting redis-server on $n ($d)"
	redis-server --daemonize yes --bind "$(host "$n")" --port "$p" --dir "$d" \
		--pidfile "$d/redis.pid" --logfile "$d/redis.log" \
		--cluster-enabled yes --cluster-config-file nodes.conf \
		--cluster-node-timeout "$node_timeout" --cluster-require-full-coverage no \
		--appendonly yes --appendfsync always --maxmemory-policy noeviction \
		--save '' >/dev/null
}

# stop_all shuts every node down; its arguments go to SHUTDOWN (nosave
# force: even a node that cannot write its files).
stop_all() {
	for n in "${nodes[@]}"; do
		if up "$n"; then
			log "stopping $n"
			cli "$n" shutdown "$@" >/dev/null 2>&1 || true
		fi
	done
	for n in "${nodes[@]}"; do
		for _ in $(seq 1 50); do up "$n" || break; sleep 0.1; done
	done
}

status() {
	for n in "${nodes[@]}"; do
		if up "$n"; then
			printf '%s %s %s\n' "$n" "$(cli "$n" role | head -n1)" "$(info_field "$n" cluster_state)"
		else
			printf '%s down\n' "$n"
		fi
	done
}

case ${1:-start} in
stop) stop_all; exit 0 ;;
reset) stop_all; rm -rf "$dir"; log "removed $dir"; exit 0 ;;
status) status; exit 0 ;;
start) ;;
*) die "usage: $0 [start|stop|reset|status]" ;;
esac

command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
	die "redis-server and redis-cli are needed (Debian: apt-get install redis-server)"

# A node whose directory is gone (the checkout that started it was
# removed) cannot write its append-only file, and with appendfsync always it
# exits at its next write: start the whole cluster anew here instead.
for n in "${nodes[@]}"; do
	if up "$n"; then
		d=$(cli "$n" config get dir 2>/dev/null | sed -n 2p)
		if [[ -z $d || ! -d $d ]]; then
			log "$n keeps its files in ${d:-?}, which is gone: starting the cluster anew under $dir"
			stop_all nosave force
			rm -rf "$dir"
			break
		fi
	fi
done
for n in "${nodes[@]}"; do
	up "$n" || start_node "$n"
done
for n in "${nodes[@]}"; do
	for _ in $(seq 1 50); do up "$n" && break; sleep 0.1; done
	up "$n" || die "redis-server did not come up on $n (see $dir/$(port "$n")/redis.log)"
done

# A new cluster: every node alone, no slot assigned.
fresh=1
for n in "${nodes[@]}"; do
	if [[ $(info_field "$n" cluster_known_nodes) != 1 || $(info_field "$n" cluster_slots_assigned) != 0 ]]; then
		fresh=0
	fi
done
if [[ $fresh == 1 ]]; then
	log "creating the cluster: 3 masters, 3 replicas"
	redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
		die "redis-cli --cluster create failed (see $dir/create.log)"
fi

# Ready when every node agrees: all slots served, all six nodes known.
for _ in $(seq 1 150); do
	ok=1
	for n in "${nodes[@]}"; do
		if [[ $(info_field "$n" cluster_state) != ok || $(info_field "$n" cluster_known_nodes) != 6 ]]; then
			ok=0
			break
		fi
	done
	[[ $ok == 1 ]] && break
	sleep 0.2
done
[[ $ok == 1 ]] || { status >&2; die "the cluster is not ok after 30 s; 'scripts/cluster.sh reset' starts it anew"; }
log "Redis Cluster ready at $addrs"
