#!/usr/bin/env bash
# Makes sure the PostgreSQL and Redis that seckill is configured for are
# reachable. Where one is not and its URL points at this machine, it starts a
# private one from the machine's binaries under .run/ (installing Debian's
# postgresql / redis-server first when they are missing and we are root).
# Then it creates the configured database when it does not exist.
#
# Usage: scripts/services.sh            (uses SECKILL_DATABASE_URL, SECKILL_REDIS_URL)
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
	if ! tcp_open "$host" "$port"; then
		local data="$run/postgres" as=()
		# initdb and postgres refuse to run as root.
		if [[ $(id -u) == 0 ]]; then as=(runuser -u postgres --); mkdir -p "$run"; chown postgres "$run"; fi
		if [[ ! -f $data/PG_VERSION ]]; then
			log "initialising a private PostgreSQL in $data"
			"${as[@]}" "$bindir/initdb" -D "$data" -U "$user" --auth=trust -E UTF8 >/dev/null
		fi
		log "starting PostgreSQL on 127.0.0.1:$port"
		"${as[@]}" "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w \
			-o "-c listen_addresses=127.0.0.1 -p $port -k /tmp -c max_connections=300 -c fsync=on" start >/dev/null
	fi
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
	log "PostgreSQL ready at $host:$port"
}

ensure_redis() {
	local host port
	host=$(url_part "$redis_url" host); port=$(url_part "$redis_url" port); port=${port:-6379}
	if ! tcp_open "$host" "$port"; then
		is_local "$host" || die "Redis at $host:$port is not reachable"
		command -v redis-server >/dev/null || { apt_install redis-server; sleep 1; }
	fi
	if ! tcp_open "$host" "$port"; then
		mkdir -p "$run/redis"
		log "starting a private Redis on 127.0.0.1:$port (append-only file in $run/redis)"
		redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --dir "$run/redis" \
			--appendonly yes --appendfsync always --logfile "$run/redis/redis.log" >/dev/null
	fi
	for _ in $(seq 1 50); do tcp_open "$host" "$port" && break; sleep 0.2; done
	tcp_open "$host" "$port" || die "Redis did not come up on $host:$port"
	log "Redis ready at $host:$port"
}

ensure_postgres
# A cluster or Sentinel is started elsewhere (scripts/cluster.sh for a local
# cluster); a single node is ours to start.
if [[ -z ${SECKILL_REDIS_CLUSTER_ADDRS:-}${SECKILL_REDIS_SENTINEL_ADDRS:-} ]]; then
	ensure_redis
fi
