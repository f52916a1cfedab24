#!/usr/bin/env bash
# Makes sure the PostgreSQL and Redis that seckill is configured for are
# reachable. Where one is not and its URL points at this machine, it starts a
# private one from the machine's binaries under .run/ (installing Debian's
# postgresql / redis-server first when they are missing and we are root).
# Then it creates the configured database when it does not exist.
#
# What it starts keeps running when make ends, for the next make run or make
# test to reuse; "stop" (make stop) stops it. It stops only what .run/ holds
# pid files for: the machine's own PostgreSQL and Redis are never touched.
#
# Usage: scripts/services.sh            (uses SECKILL_DATABASE_URL, SECKILL_REDIS_URL)
#        scripts/services.sh stop       stop the private PostgreSQL and Redis of .run/ (data kept)
#        scripts/services.sh running    print those of them that run, one a line
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
run="$root/.run"
db_url=${SECKILL_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/seckill?sslmode=disable}
redis_url=${SECKILL_REDIS_URL:-redis://127.0.0.1:6379/0}

log() { printf 'services: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# url_part URL FIELD prints host, port, user or path (database / db number).
url_part() {
	local url=$1 field=$2 rest hostport userinfo
	rest=${url#*://}
	rest=${rest%%\?*}
	hostport=${rest%%/*}
	userinfo=
	if [[ $hostport == *@* ]]; then userinfo=${hostport%@*}; hostport=${hostport##*@}; fi
	case $field in
	host) local h=${hostport%:*}; [[ $hostport == *:* ]] || h=$hostport; echo "${h:-127.0.0.1}" ;;
	port) [[ $hostport == *:* ]] && echo "${hostport##*:}" || echo "" ;;
	user) echo "${userinfo%%:*}" ;;
	path) [[ $rest == */* ]] && echo "${rest#*/}" || echo "" ;;
	esac
}

is_local() { [[ $1 == 127.* || $1 == localhost || $1 == ::1 ]]; }

tcp_open() { timeout 1 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

# alive_pid PIDFILE NAME prints the pid of PIDFILE's first line when a
# process of that name (postgres, redis-server) runs with it.
alive_pid() {
	local pid
	[[ -f $1 ]] || return 1
	pid=$(head -n1 "$1")
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	ps -p "$pid" -o comm= 2>/dev/null | grep -q "$2" || return 1
	echo "$pid"
}

# The private servers: their data folders and pid files.
pg_data="$run/postgres"
pg_pidfile="$pg_data/postmaster.pid"
redis_dir="$run/redis"
redis_pidfile="$redis_dir/redis.pid"

# pg_port prints the port of the private PostgreSQL from its pid file.
pg_port() { sed -n 4p "$pg_pidfile" 2>/dev/null; }

# redis_port PID prints the port a redis-server listens on (its process
# title is "redis-server HOST:PORT").
redis_port() {
	local pid=$1
	ps -p "$pid" -o args= 2>/dev/null | sed -n 's/.*:\([0-9][0-9]*\).*/\1/p'
}

# redis_pid prints the pid of the private Redis of .run/ when it runs: from
# its pid file, or (one started before there was a pid file) the server on
# the configured port when its files are in .run/redis.
redis_pid() {
	alive_pid "$redis_pidfile" redis-server && return 0
	local port pid
	port=$(url_part "$redis_url" port)
	[[ $(redis-cli -p "${port:-6379}" config get dir 2>/dev/null | sed -n 2p) == "$redis_dir" ]] || return 1
	pid=$(redis-cli -p "${port:-6379}" info server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p')
	[[ -n $pid ]] && echo "$pid"
}

# running lists the private servers of .run/ that run.
running() {
	local pid
	if pid=$(alive_pid "$pg_pidfile" postgres); then
		echo "the private PostgreSQL on 127.0.0.1:$(pg_port) (pid $pid, data in $pg_data)"
	fi
	if pid=$(redis_pid); then
		echo "the private Redis on 127.0.0.1:$(redis_port "$pid") (pid $pid, data in $redis_dir)"
	fi
}

# stop stops the private servers of .run/ and says what it stopped.
stop() {
	local pid as=() stopped=0
	if pid=$(alive_pid "$pg_pidfile" postgres); then
		local bindir
		bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
		[[ $(id -u) == 0 ]] && as=(runuser -u postgres --)
		log "stopping the private PostgreSQL on 127.0.0.1:$(pg_port) (pid $pid, data kept in $pg_data)"
		if [[ -x $bindir/pg_ctl ]]; then
			"${as[@]}" "$bindir/pg_ctl" -D "$pg_data" -m fast -w stop >/dev/null
		else
			kill -INT "$pid" # fast shutdown
			for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		fi
		stopped=1
	fi
	if pid=$(redis_pid); then
		log "stopping the private Redis on 127.0.0.1:$(redis_port "$pid") (pid $pid, data kept in $redis_dir)"
		kill -TERM "$pid" # a clean shutdown: the append-only file is flushed
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		stopped=1
	fi
	if [[ $stopped == 0 ]]; then
		log "no private PostgreSQL or Redis of this checkout is running (the machine's own are not ours to stop)"
	fi
}

apt_install() {
	[[ $(id -u) == 0 ]] || die "$* is missing; install it (apt-get install $*) or point the URL at a running server"
	log "installing $* from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq "$@" >/dev/null
}

ensure_postgres() {
	local host port user db bindir
	host=$(url_part "$db_url" host); port=$(url_part "$db_url" port); port=${port:-5432}
	user=$(url_part "$db_url" user); user=${user:-postgres}
	db=$(url_part "$db_url" path)
	if ! tcp_open "$host" "$port"; then
		is_local "$host" || die "PostgreSQL at $host:$port is not reachable"
		bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
		if [[ -z $bindir ]]; then
			apt_install postgresql
			bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
			# Debian's package may have started its own cluster on the port,
			# with password authentication: stop it, ours trusts local users.
			pg_lsclusters -h 2>/dev/null | awk -v p="$port" '$3 == p {print $1, $2}' |
				while read -r ver name; do pg_ctlcluster "$ver" "$name" stop || true; done
		fi
	fi
	local ours=
	if ! tcp_open "$host" "$port"; then
		local data="$pg_data" as=()
		# initdb and postgres refuse to run as root.
		if [[ $(id -u) == 0 ]]; then as=(runuser -u postgres --); mkdir -p "$run"; chown postgres "$run"; fi
		if [[ ! -f $data/PG_VERSION ]]; then
			log "initialising a private PostgreSQL in $data"
			"${as[@]}" "$bindir/initdb" -D "$data" -U "$user" --auth=trust -E UTF8 >/dev/null
		fi
		log "starting a private PostgreSQL on 127.0.0.1:$port (data in $data)"
		"${as[@]}" "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w \
			-o "-c listen_addresses=127.0.0.1 -p $port -k /tmp -c max_connections=300 -c fsync=on" start >/dev/null
	fi
	[[ $(pg_port) == "$port" ]] && alive_pid "$pg_pidfile" postgres >/dev/null && ours=" (the private one in $pg_data: it keeps running when make ends; make stop stops it)"
	for _ in $(seq 1 50); do tcp_open "$host" "$port" && break; sleep 0.2; done
	tcp_open "$host" "$port" || die "PostgreSQL did not come up on $host:$port"
	if [[ -n $db ]] && command -v psql >/dev/null; then
		local exists
		exists=$(psql "postgres://$user@$host:$port/postgres?sslmode=disable" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" 2>/dev/null || true)
		if [[ $exists != 1 ]]; then
			log "creating database $db"
			psql "postgres://$user@$host:$port/postgres?sslmode=disable" -qc "CREATE DATABASE \"$db\"" >/dev/null
		fi
	fi
	log "PostgreSQL ready at $host:$port$ours"
}

ensure_redis() {
	local host port
	host=$(url_part "$redis_url" host); port=$(url_part "$redis_url" port); port=${port:-6379}
	if ! tcp_open "$host" "$port"; then
		is_local "$host" || die "Redis at $host:$port is not reachable"
		command -v redis-server >/dev/null || { apt_install redis-server; sleep 1; }
	fi
	if ! tcp_open "$host" "$port"; then
		mkdir -p "$redis_dir"
		log "starting a private Redis on 127.0.0.1:$port (append-only file in $redis_dir)"
		redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --dir "$redis_dir" \
			--pidfile "$redis_pidfile" --appendonly yes --appendfsync always \
			--logfile "$redis_dir/redis.log" >/dev/null
	fi
	for _ in $(seq 1 50); do tcp_open "$host" "$port" && break; sleep 0.2; done
	tcp_open "$host" "$port" || die "Redis did not come up on $host:$port"
	local ours= pid
	if pid=$(redis_pid) && [[ $(redis_port "$pid") == "$port" ]]; then
		ours=" (the private one in $redis_dir: it keeps running when make ends; make stop stops it)"
	fi
	log "Redis ready at $host:$port$ours"
}

case ${1:-start} in
stop) stop; exit 0 ;;
running) running; exit 0 ;;
start) ;;
*) die "usage: $0 [start|stop|running]" ;;
esac

ensure_postgres
# A cluster or Sentinel is started elsewhere (scripts/cluster.sh for a local
# cluster); a single node is ours to start.
if [[ -z ${SECKILL_REDIS_CLUSTER_ADDRS:-}${SECKILL_REDIS_SENTINEL_ADDRS:-} ]]; then
	ensure_redis
fi
