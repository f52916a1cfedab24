#!/usr/bin/env bash
# Makes sure the Redis Cluster of SECKILL_TEST_REDIS_CLUSTER_ADDRS (default
# 127.0.0.1:7001 to :7006) is up: where it is not, it starts one from the
# machine's redis-server with three masters and three replicas, its files
# under .run/cluster/<port>/, and waits until every node says cluster_state:ok.
# Run it again at will: it starts only the nodes that are down and creates
# the cluster only once. The nodes are set up as production should be for
# seckill (docs/operations.md): appendonly yes, appendfsync always,
# maxmemory-policy noeviction, cluster-require-full-coverage no (the other
# shards sell on while one fails over); cluster-node-timeout is short (2 s)
# so that a replica takes over from a dead master within seconds.
#
# The nodes keep running when the script ends. "stop" and "reset" touch only
# the nodes this checkout started (a pid file under .run/cluster/ naming a
# redis-server that runs in that folder): another checkout's cluster on the
# same ports is reused by "start" but never stopped from here.
#
# "run" is for make test: it starts the cluster where needed, runs the
# command, and then stops the nodes again if it started them, unless another
# "run" (another checkout's make test) is using them at that moment: each
# run holds a shared lock on the ports while its command runs.
#
# Usage: scripts/cluster.sh           start (or check) the cluster
#        scripts/cluster.sh run CMD...  start it where needed, run CMD, stop what it started
#        scripts/cluster.sh stop      shut this checkout's nodes down (data kept)
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
		--save '' >/dev/null 9>&- # the daemon must not hold run's lock
}

# stop_all shuts every node on the configured ports down, whoever started
# it; its arguments go to SHUTDOWN (nosave force: even a node that cannot
# write its files). Only for nodes whose folder is gone (see start).
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

# running_in PID DIR succeeds when PID is a redis-server working in DIR
# (redis-server changes to its --dir), so a stale pid file that another
# process's pid now matches is passed over.
running_in() {
	local pid=$1 d=$2 cwd
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	ps -p "$pid" -o comm= 2>/dev/null | grep -q redis || return 1
	if [[ -d /proc/$pid ]]; then
		cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || return 1
		[[ $cwd == "$d" ]] || return 1
	fi
}

# ours prints "pid port" for each node of this checkout that runs, whatever
# its port (a second cluster on other ports has its folders here too).
ours() {
	local f d pid
	for f in "$dir"/*/redis.pid; do
		[[ -f $f ]] || continue
		d=$(dirname "$f")
		pid=$(<"$f")
		if running_in "$pid" "$d"; then echo "$pid $(basename "$d")"; fi
	done
}

# stop_ours stops this checkout's nodes (SIGTERM: a clean shutdown that
# keeps the data) and says which; the configured nodes that still answer
# are another checkout's, and it says so too.
stop_ours() {
	local pid p pids=() ports=()
	while read -r pid p; do
		pids+=("$pid")
		ports+=("$p")
		kill -TERM "$pid" 2>/dev/null || true
	done < <(ours)
	for pid in "${pids[@]}"; do
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && log "redis-server $pid did not stop within 10 s"
	done
	if [[ ${#ports[@]} -gt 0 ]]; then
		log "stopped this checkout's Redis Cluster nodes on ports ${ports[*]} (data kept in $dir)"
	else
		log "no Redis Cluster node of this checkout is running"
	fi
	foreign || true
}

# foreign says which configured nodes answer but are another checkout's:
# they are left running.
foreign() {
	local d others=() where=()
	for n in "${nodes[@]}"; do
		if up "$n"; then
			d=$(cli "$n" config get dir 2>/dev/null | sed -n 2p)
			others+=("$n")
			where+=("${d%/*}")
		fi
	done
	[[ ${#others[@]} -gt 0 ]] || return 1
	log "${others[*]} are another checkout's (files in $(printf '%s\n' "${where[@]}" | sort -u | paste -sd' ')): left running; make stop there stops them"
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

# all_up succeeds when every configured node answers.
all_up() {
	for n in "${nodes[@]}"; do up "$n" || return 1; done
}

start() {
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
}

# run_with_cluster CMD... is "run": see the header.
run_with_cluster() {
	[[ $# -gt 0 ]] || die "usage: $0 run CMD..."
	lock="${TMPDIR:-/tmp}/seckill-cluster-$(port "${nodes[0]}").lock"
	# Shared while the command runs; another run's stop waits for it.
	if command -v flock >/dev/null && { exec 9<>"$lock"; } 2>/dev/null; then
		flock -s 9
	else
		lock=
	fi
	started=0
	all_up || started=1
	trap stop_started EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	start
	local rc=0
	"$@" 9>&- || rc=$?
	return "$rc"
}

# stop_started stops the nodes that run started, unless another run holds
# the lock (it is using them now: they are left to it).
stop_started() {
	if [[ $started != 1 ]]; then
		log "the cluster was running before: left running"
	elif [[ -n $lock ]] && ! flock -xn 9; then
		log "left running: another make test is using the cluster (make stop stops it)"
	else
		stop_ours
	fi
}

case ${1:-start} in
stop) stop_ours ;;
reset) stop_ours; rm -rf "$dir"; log "removed $dir" ;;
status) status ;;
start)
	start
	if [[ -n $(ours) ]]; then
		log "it keeps running when make ends: make stop (scripts/cluster.sh stop) stops it"
	else
		foreign || true
	fi
	;;
run) shift; [[ ${1:-} != -- ]] || shift; run_with_cluster "$@" ;;
*) die "usage: $0 [start|run CMD...|stop|reset|status]" ;;
esac
